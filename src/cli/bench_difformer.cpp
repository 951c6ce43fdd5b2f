// `structdiff bench difformer`: forward + backward time and peak memory of one DIFFormerConv layer
// against the number of instances N, with the log-log slope that tells linear from quadratic.
#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "structdiff/difformer_bench.h"
#include "structdiff/timing.h"

namespace structdiff::cli {
namespace {

struct BenchDifformerOptions {
  std::vector<std::string> kernels = {"simple", "sigmoid"};
  std::vector<int64_t> nodes;  // empty: the kernel's default sizes
  int64_t dim = 64;
  int min_reps = 3;
  double max_seconds = 0.5;
  std::string json_path;
};

std::vector<int64_t> default_nodes(const std::string& kernel) {
  if (kernel == "simple") return {1000, 3000, 10000, 30000, 100000, 300000, 1000000};
  // Quadratic time; memory stays linear (the kernel works in blocks of query rows).
  return {1000, 3000, 10000, 30000};
}

void run(const BenchDifformerOptions& o, const GlobalOptions& global) {
  nlohmann::json rows = nlohmann::json::array();
  std::printf("structdiff bench difformer: one DIFFormerConv layer (heads 1, no graph), dim %ld, "
              "%d threads, forward + backward, median of >= %d runs and up to %.1f s\n",
              static_cast<long>(o.dim), global.threads, o.min_reps, o.max_seconds);
  std::printf("%-8s %9s %10s %9s %7s\n", "kernel", "nodes", "ms", "peak MB", "slope");
  for (const std::string& kernel : o.kernels) {
    std::vector<double> sizes, times;  // N and ms of each measured size
    std::vector<int64_t> nodes = o.nodes.empty() ? default_nodes(kernel) : o.nodes;
    std::sort(nodes.begin(), nodes.end());
    nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());  // consecutive sizes differ
    const difformer::Diffusivity diffusivity =
        kernel == "simple" ? difformer::Diffusivity::simple : difformer::Diffusivity::sigmoid;
    for (const int64_t n : nodes) {
      nlohmann::json row = {{"kernel", kernel}, {"nodes", n}, {"dim", o.dim},
                            {"threads", global.threads}};
      const difformer::ConvTiming m =
          difformer::conv_timing(diffusivity, n, o.dim, o.min_reps, o.max_seconds, global.seed);
      // Slope from the previous measured size: the local exponent of the cost.
      const std::optional<double> slope =
          sizes.empty() ? std::nullopt
                        : std::optional<double>(log_log_slope({sizes.back(), static_cast<double>(n)},
                                                              {times.back(), m.ms}));
      sizes.push_back(static_cast<double>(n));
      times.push_back(m.ms);
      char slope_text[16] = "-";
      if (slope) std::snprintf(slope_text, sizeof(slope_text), "%.2f", *slope);
      std::printf("%-8s %9ld %10.2f %9.1f %7s\n", kernel.c_str(), static_cast<long>(n), m.ms,
                  m.peak_mb, slope_text);
      std::fflush(stdout);
      row["ms"] = m.ms;
      row["peak_mb"] = m.peak_mb;
      if (slope) row["slope_from_previous"] = *slope;
      rows.push_back(row);
    }
    if (sizes.size() >= 2) {
      std::printf("%-8s log-log slope over %zu sizes (least squares): %.2f\n", kernel.c_str(),
                  sizes.size(), log_log_slope(sizes, times));
    }
  }
  if (!o.json_path.empty()) write_json_file(o.json_path, rows);
}

}  // namespace

void register_bench_difformer(CLI::App& bench, const GlobalOptions& global, Action& action) {
  auto o = std::make_shared<BenchDifformerOptions>();
  CLI::App* cmd = bench.add_subcommand(
      "difformer", "DIFFormerConv forward + backward time and memory against the number of nodes");
  cmd->add_option("--kernel", o->kernels, "Diffusivities: simple (linear) or sigmoid (quadratic)")
      ->check(CLI::IsMember({"simple", "sigmoid"}))
      ->capture_default_str();
  cmd->add_option("--nodes", o->nodes,
                  "Numbers of nodes (default: simple 1e3..1e6, sigmoid 1e3..3e4)")
      ->check(positive());
  cmd->add_option("--dim", o->dim, "Feature dimension")->check(positive())->capture_default_str();
  cmd->add_option("--min-reps", o->min_reps, "Minimum timed runs per size")
      ->check(positive())
      ->capture_default_str();
  cmd->add_option("--max-seconds", o->max_seconds,
                  "Time per size: more runs after --min-reps while they fit in this")
      ->check(seconds_budget())
      ->capture_default_str();
  cmd->add_option("--json", o->json_path, "Write one JSON row per kernel and size")
      ->check(writable_file());
  cmd->callback([o, &global, &action] { action = [o, &global] { run(*o, global); }; });
}

}  // namespace structdiff::cli
