// `structdiff pattern`: build a pattern, print its statistics, optionally render it as a PNG.
#include <cstdio>
#include <stdexcept>

#include "cli/command.h"
#include "structdiff/attention_workloads.h"
#include "structdiff/pattern.h"

namespace structdiff::cli {
namespace {

struct PatternOptions {
  std::string workload;
  std::string builder;
  int64_t tokens = 64;
  int64_t layer = 1;
  int64_t layers = 6;
  int64_t n_max = 16;
  std::string direction = "prefix";
  int64_t left = 2, right = 2, keys_per_row = 8;
  std::string png;
};

AttentionPattern build(const PatternOptions& o, uint64_t seed) {
  if (!o.workload.empty()) {
    const AttentionWorkload w = make_attention_workload(o.workload, seed);
    if (o.layer < 1 || o.layer > static_cast<int64_t>(w.patterns.size())) {
      throw std::invalid_argument("--layer must be in [1, " + std::to_string(w.patterns.size()) +
                                  "] for workload " + o.workload);
    }
    return w.patterns[o.layer - 1];
  }
  const auto direction =
      o.direction == "prefix" ? patterns::Direction::prefix : patterns::Direction::suffix;
  if (o.builder == "full") return patterns::full(o.tokens, o.tokens);
  if (o.builder == "causal") return patterns::causal(o.tokens);
  if (o.builder == "window") return patterns::sliding_window(o.tokens, o.left, o.right);
  if (o.builder == "random") return patterns::random_per_row(o.tokens, o.tokens, o.keys_per_row, seed);
  if (o.builder == "tracformer-encoder") {
    return patterns::tracformer_encoder(o.tokens, o.layer, o.n_max, direction);
  }
  return patterns::tracformer_decoder(o.tokens, o.layers, o.layer, direction);
}

void run(const PatternOptions& options, const GlobalOptions& global) {
  const AttentionPattern pattern = build(options, global.seed);
  const PatternStats s = pattern.stats();
  std::printf("rows %ld, cols %ld, entries %ld, degree min/mean/max %ld/%.2f/%ld, density %.4g, "
              "symmetric %s\n",
              static_cast<long>(s.rows), static_cast<long>(s.cols), static_cast<long>(s.entries),
              static_cast<long>(s.min_degree), s.mean_degree, static_cast<long>(s.max_degree),
              s.density, s.symmetric ? "yes" : "no");
  if (!options.png.empty()) {
    pattern.write_png(options.png);
    std::printf("wrote %s\n", options.png.c_str());
  }
}

}  // namespace

void register_pattern(CLI::App& app, const GlobalOptions& global, Action& action) {
  auto o = std::make_shared<PatternOptions>();
  CLI::App* cmd = app.add_subcommand("pattern", "Build an attention pattern, print statistics, "
                                                "render it as a PNG");
  auto* workload = cmd->add_option("--workload", o->workload, "A benchmark workload's pattern")
                       ->check(CLI::IsMember(attention_workload_names()));
  auto* builder =
      cmd->add_option("--builder", o->builder, "A pattern builder")
          ->check(CLI::IsMember({"full", "causal", "window", "random", "tracformer-encoder",
                                 "tracformer-decoder"}));
  workload->excludes(builder);
  cmd->add_option("--tokens", o->tokens, "Sequence length / nodes")
      ->check(positive())
      ->capture_default_str();
  cmd->add_option("--layer", o->layer, "Layer (1-based; Tracformer builders and stacks)")
      ->capture_default_str();
  cmd->add_option("--layers", o->layers, "Number of layers (Tracformer decoder)")
      ->capture_default_str();
  cmd->add_option("--n-max", o->n_max, "Tracformer N_max")->capture_default_str();
  cmd->add_option("--direction", o->direction, "prefix or suffix")
      ->check(CLI::IsMember({"prefix", "suffix"}))
      ->capture_default_str();
  cmd->add_option("--left", o->left, "Sliding window: keys to the left")->capture_default_str();
  cmd->add_option("--right", o->right, "Sliding window: keys to the right")->capture_default_str();
  cmd->add_option("--k", o->keys_per_row, "Random: keys per row")->capture_default_str();
  cmd->add_option("--png", o->png, "Write the mask as a PNG")
      ->check(writable_file())
      ->check(png_name());
  cmd->callback([o, workload, builder, &global, &action] {
    if (workload->count() == 0 && builder->count() == 0) {
      throw CLI::ValidationError("pattern", "give --workload or --builder");
    }
    action = [o, &global] { run(*o, global); };
  });
}

}  // namespace structdiff::cli
