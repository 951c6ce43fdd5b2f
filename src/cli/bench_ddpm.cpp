// `structdiff bench ddpm`: training steps/s and peak memory of the DDPM U-Net against batch size
// for each attention mechanism (the Performer report's Figure 1), in one run.
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "structdiff/ddpm_bench.h"

namespace structdiff::cli {
namespace {

struct Variant {
  std::string attention;
  int64_t features;  // FAVOR+ only; 0: d ln d
  std::string label() const {
    if (attention.rfind("favor", 0) != 0) return attention;
    return attention + (features == 0 ? " m=default" : " m=" + std::to_string(features));
  }
};

struct BenchDdpmOptions {
  std::vector<int64_t> batches = {8, 16, 32, 64, 128, 256};
  std::vector<std::string> attentions;  // empty: every variant of the report
  unet::UNetConfig unet;
  int min_reps = 1;
  double max_seconds = 3.0;
  double memory_limit_gb = 16.0;
  std::string json_path;
};

std::vector<Variant> variants(const BenchDdpmOptions& o) {
  const std::vector<Variant> all = {{"dense", 0},      {"favor-softmax", 1}, {"favor-softmax", 0},
                                    {"favor-relu", 1}, {"favor-relu", 0},    {"linear", 0}};
  if (o.attentions.empty()) return all;
  std::vector<Variant> chosen;
  for (const Variant& v : all) {
    for (const std::string& name : o.attentions) {
      if (v.attention == name) chosen.push_back(v);
    }
  }
  return chosen;
}

void run(const BenchDdpmOptions& o, const GlobalOptions& global) {
  o.unet.validate();
  std::string levels;
  for (int64_t side : o.unet.attention_resolutions) levels += (levels.empty() ? "" : ",") + std::to_string(side);
  std::printf("structdiff bench ddpm: one step of the training loop (forward, backward, AdamW, EMA) of a %ldx%ld U-Net, "
              "base %ld channels, %ld res blocks per level, attention at %s + bottleneck (%s), "
              "%ld heads x %ld, %d threads; after a warm-up step (the memory peak), median of >= %d steps within %.1f s\n",
              static_cast<long>(o.unet.image_size), static_cast<long>(o.unet.image_size),
              static_cast<long>(o.unet.base_channels), static_cast<long>(o.unet.res_blocks),
              levels.c_str(), mechanism_name(o.unet.bottleneck_attention).c_str(),
              static_cast<long>(o.unet.heads), static_cast<long>(o.unet.head_dim), global.threads,
              o.min_reps, o.max_seconds);
  std::printf("%-19s %6s %10s %9s %10s\n", "attention", "batch", "ms/step", "steps/s", "peak MB");
  nlohmann::json rows = nlohmann::json::array();
  for (const Variant& variant : variants(o)) {
    unet::UNetConfig config = o.unet;
    config.attention = unet::parse_attention(variant.attention);
    config.favor_features = variant.features;
    double previous_mb = 0;
    int64_t previous_batch = 0;
    for (const int64_t batch : o.batches) {
      nlohmann::json row = {{"attention", variant.attention},
                            {"label", variant.label()},
                            {"favor_features", variant.features},
                            {"batch", batch},
                            {"threads", global.threads},
                            {"unet", config}};
      // Memory grows linearly in the batch, so the last measurement predicts the next one.
      const double projected_gb =
          previous_batch > 0 ? previous_mb / 1024.0 * static_cast<double>(batch) / static_cast<double>(previous_batch) : 0;
      if (projected_gb > o.memory_limit_gb) {
        std::printf("%-19s %6ld skipped (projected %.1f GB > %.1f GB)\n", variant.label().c_str(),
                    static_cast<long>(batch), projected_gb, o.memory_limit_gb);
        row["skipped"] = "memory";
        row["projected_gb"] = projected_gb;
        rows.push_back(row);
        continue;
      }
      const ddpm::StepTiming m =
          ddpm::training_step_timing(config, batch, o.min_reps, o.max_seconds, global.seed);
      previous_mb = m.peak_mb;
      previous_batch = batch;
      std::printf("%-19s %6ld %10.1f %9.2f %10.1f\n", variant.label().c_str(), static_cast<long>(batch),
                  m.ms, 1000.0 / m.ms, m.peak_mb);
      std::fflush(stdout);
      row["ms_per_step"] = m.ms;
      row["steps_per_second"] = 1000.0 / m.ms;
      row["images_per_second"] = 1000.0 * static_cast<double>(batch) / m.ms;
      row["peak_mb"] = m.peak_mb;
      rows.push_back(row);
    }
  }
  if (!o.json_path.empty()) write_json_file(o.json_path, rows);
}

}  // namespace

void register_bench_ddpm(CLI::App& bench, const GlobalOptions& global, Action& action) {
  auto o = std::make_shared<BenchDdpmOptions>();
  CLI::App* cmd = bench.add_subcommand(
      "ddpm", "DDPM U-Net training steps/s and peak memory against batch size, per attention type");
  cmd->add_option("--batch", o->batches, "Batch sizes")->check(positive())->capture_default_str();
  cmd->add_option("--attention", o->attentions,
                  "Mechanisms (default: dense, FAVOR+ softmax and ReLU with m = 1 and d ln d, linear)")
      ->check(CLI::IsMember(unet::attention_names()));
  cmd->add_option("--base-channels", o->unet.base_channels, "U-Net base channels")->capture_default_str();
  cmd->add_option("--res-blocks", o->unet.res_blocks, "ResNet blocks per level")->check(depth())->capture_default_str();
  cmd->add_option("--attention-resolutions", o->unet.attention_resolutions,
                  "Side lengths with attention besides the bottleneck (default: every level)")
      ->capture_default_str();
  cmd->add_option("--min-reps", o->min_reps, "Minimum timed steps per point")
      ->check(positive())
      ->capture_default_str();
  cmd->add_option("--max-seconds", o->max_seconds, "More steps after --min-reps while they fit in this")
      ->check(seconds_budget())
      ->capture_default_str();
  cmd->add_option("--memory-limit-gb", o->memory_limit_gb,
                  "Skip a batch whose projected peak (from the previous batch) exceeds this")
      ->check(positive())
      ->capture_default_str();
  cmd->add_option("--json", o->json_path, "Write one JSON row per attention type and batch")
      ->check(writable_file());
  cmd->callback([o, &global, &action] { action = [o, &global] { run(*o, global); }; });
}

}  // namespace structdiff::cli
