// `structdiff bench tracformer`: how the multi-scope encoder scales with the sequence length
// (sparse kernel vs the same patterns on dense attention), training throughput per architecture,
// and KV-cached vs re-encoding CAR sampling.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "structdiff/runtime.h"
#include "structdiff/timing.h"
#include "structdiff/tracformer.h"
#include "structdiff/tracformer_bench.h"

namespace structdiff::cli {
namespace {

using namespace tracformer;

struct BenchTracformerOptions {
  std::vector<std::string> parts = {"encoder", "train", "sample"};
  int64_t d_model = 96;
  int64_t heads = 3;
  int64_t layers = 8;
  int64_t n_max = 16;
  std::vector<int64_t> lengths = {256, 512, 1024, 2048, 4096, 8192};
  int64_t dense_max_length = 2048;  // dense attention's T x T scores outgrow memory beyond this
  int64_t batch = 8;
  std::vector<std::string> architectures = {"tracformer", "tracformer-dense-encoder", "bart",
                                            "bert", "ar"};
  int64_t block_size = 256;
  int64_t train_steps = 5;
  int64_t sample_sequences = 4;
  double budget_seconds = 20;
  std::string json_path;
};

Config base_config(const BenchTracformerOptions& o) {
  Config config;
  config.characters = U" abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.,;:!?'-()";
  config.d_model = o.d_model;
  config.heads = o.heads;
  config.layers = o.layers;
  config.n_max = o.n_max;
  config.block_size = o.block_size;
  config.dropout = 0;
  return config;
}

// Forward and backward of the L encoder blocks over prefix patterns, as the model runs them.
void bench_encoder(const BenchTracformerOptions& o, uint64_t seed, nlohmann::json& rows) {
  std::printf("encoder forward + backward, %ld layers, d %ld, %ld heads, N_max %ld, batch 1\n",
              static_cast<long>(o.layers), static_cast<long>(o.d_model), static_cast<long>(o.heads),
              static_cast<long>(o.n_max));
  for (const std::string attention : {"sparse", "dense"}) {
    Config config = base_config(o);
    config.mechanism = parse_mechanism(attention);
    std::vector<double> lengths, times;
    for (int64_t T : o.lengths) {
      if (attention == "dense" && T > o.dense_max_length) continue;
      const double ms = encoder_pass_ms(config, T, seed, o.budget_seconds / static_cast<double>(o.lengths.size()));
      lengths.push_back(static_cast<double>(T));
      times.push_back(ms);
      std::printf("  %-6s T %5ld  %10.1f ms\n", attention.c_str(), static_cast<long>(T), ms);
      rows.push_back({{"part", "encoder"}, {"attention", attention}, {"T", T}, {"ms", ms}});
    }
    if (lengths.size() >= 2) {
      const double slope = log_log_slope(lengths, times);
      std::printf("  %-6s log-log slope %.2f\n", attention.c_str(), slope);
      rows.push_back({{"part", "encoder_slope"}, {"attention", attention}, {"slope", slope}});
    }
  }
}

// Training steps (forward, backward, clipping, AdamW) through the one loop, in tokens per second.
void bench_train(const BenchTracformerOptions& o, uint64_t seed, nlohmann::json& rows) {
  std::printf("training, T %ld, batch %ld, spans (ratio 0.5, mean 16)\n",
              static_cast<long>(o.block_size), static_cast<long>(o.batch));
  for (const std::string& name : o.architectures) {
    Config config = base_config(o);
    config.architecture = parse_architecture(name);
    config.objective = config.architecture == Architecture::bert ? Mode::ac : Mode::car;
    const TrainingStepTiming step = training_step(config, o.batch, o.train_steps, seed);
    const double tokens_per_second = static_cast<double>(o.batch * o.block_size) / step.seconds;
    std::printf("  %-26s %8.1f ms/step  %8.0f tokens/s  %ld parameters\n", name.c_str(),
                1e3 * step.seconds, tokens_per_second, static_cast<long>(step.non_embedding_parameters));
    rows.push_back({{"part", "train"},
                    {"architecture", name},
                    {"ms_per_step", 1e3 * step.seconds},
                    {"tokens_per_second", tokens_per_second},
                    {"non_embedding_parameters", step.non_embedding_parameters}});
  }
}

// Filling the middle half of T-token sequences, with the KV cache and by re-encoding.
void bench_sample(const BenchTracformerOptions& o, uint64_t seed, nlohmann::json& rows) {
  const int64_t T = o.block_size;
  std::printf("CAR sampling, T %ld, middle half hidden, %ld sequences at once\n",
              static_cast<long>(T), static_cast<long>(o.sample_sequences));
  Tracformer model(base_config(o));  // both ways time the same weights
  double cached_ms = 0;
  for (const bool cache : {true, false}) {
    const double ms = infill_ms(model, o.sample_sequences, cache, seed, o.budget_seconds);
    if (cache) cached_ms = ms;
    std::printf("  %-10s %10.1f ms per batch", cache ? "cached" : "re-encode", ms);
    if (!cache) std::printf("  (%.1f x the cached time)", ms / cached_ms);
    std::printf("\n");
    rows.push_back({{"part", "sample"},
                    {"cache", cache},
                    {"T", T},
                    {"hidden", T / 2},
                    {"sequences", o.sample_sequences},
                    {"ms", ms}});
  }
}

void run(const BenchTracformerOptions& o, const GlobalOptions& global) {
  DefaultGeneratorGuard seeded(global.seed);  // the bench's initial weights
  nlohmann::json rows = nlohmann::json::array();
  std::printf("structdiff bench tracformer: %d threads\n", global.threads);
  for (const std::string& part : o.parts) {
    if (part == "encoder") bench_encoder(o, global.seed, rows);
    if (part == "train") bench_train(o, global.seed, rows);
    if (part == "sample") bench_sample(o, global.seed, rows);
  }
  if (!o.json_path.empty()) write_json_file(o.json_path, rows);
}

}  // namespace

void register_bench_tracformer(CLI::App& bench, const GlobalOptions& global, Action& action) {
  auto o = std::make_shared<BenchTracformerOptions>();
  CLI::App* cmd = bench.add_subcommand(
      "tracformer", "Tracformer: encoder scaling, training throughput, cached sampling");
  cmd->add_option("--parts", o->parts, "encoder, train, sample")
      ->check(CLI::IsMember({"encoder", "train", "sample"}))
      ->capture_default_str();
  cmd->add_option("--d-model", o->d_model, "Width")->check(positive())->capture_default_str();
  cmd->add_option("--heads", o->heads, "Heads")->check(positive())->capture_default_str();
  cmd->add_option("--layers", o->layers, "Layers")->check(depth())->capture_default_str();
  cmd->add_option("--n-max", o->n_max, "Keys per encoder row")
      ->check(positive())
      ->capture_default_str();
  cmd->add_option("--lengths", o->lengths, "Encoder sequence lengths")
      ->check(positive())
      ->capture_default_str();
  cmd->add_option("--dense-max-length", o->dense_max_length,
                  "Longest sequence timed on dense attention")
      ->check(positive())
      ->capture_default_str();
  cmd->add_option("--batch", o->batch, "Training batch")->check(positive())->capture_default_str();
  cmd->add_option("--architectures", o->architectures, "Architectures to train")
      ->check(CLI::IsMember(tracformer::architecture_names()))
      ->capture_default_str();
  cmd->add_option("--block-size", o->block_size, "Training and sampling length")
      ->check(positive())
      ->capture_default_str();
  cmd->add_option("--train-steps", o->train_steps, "Timed training steps")
      ->check(work_count(1000000))
      ->capture_default_str();
  cmd->add_option("--sample-sequences", o->sample_sequences, "Sequences sampled together")
      ->check(positive())
      ->capture_default_str();
  cmd->add_option("--budget", o->budget_seconds, "Seconds per timing")
      ->check(positive() & seconds_budget())
      ->capture_default_str();
  cmd->add_option("--json", o->json_path, "Write the rows as JSON")->check(writable_file());
  cmd->callback([o, &global, &action] { action = [o, &global] { run(*o, global); }; });
}

}  // namespace structdiff::cli
