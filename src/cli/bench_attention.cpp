// `structdiff bench attention`: registered attention mechanisms (by default dense-with-pattern,
// gather and the fused sparse kernel), forward + backward, side by side in one process on named
// workloads. Their FLOP and byte counts and their float64 references come from the mechanism
// registry.
#include <cmath>
#include <cstdio>
#include <map>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "cli/command.h"
#include "structdiff/attention_workloads.h"
#include "structdiff/attention_measure.h"
#include "structdiff/mechanism_registry.h"

namespace structdiff::cli {
namespace {

struct BenchOptions {
  std::vector<std::string> workloads = attention_workload_names();
  std::vector<std::string> mechanisms = {"dense", "gather", "sparse"};
  std::string dtype = "float32";
  TimingBudget budget;
  std::string json_path;
};

void run(const BenchOptions& options, const GlobalOptions& global) {
  const torch::ScalarType dtype = options.dtype == "float64" ? torch::kDouble : torch::kFloat;
  nlohmann::json rows = nlohmann::json::array();
  std::printf("structdiff bench attention: %s on %s, %d threads, forward + backward, median of "
              ">= %d runs (more while they fit in %.1f s)\n",
              options.dtype.c_str(), global.device.str().c_str(), global.threads,
              options.budget.min_reps, options.budget.min_seconds);
  std::printf("# %%peak and %%copy: each mechanism's share of a matrix product (GFLOP/s, column "
              "\"matmul\") and a copy (GB/s read + written) timed on this machine just before it: "
              "a shared VM's speed drifts by tens of percent within minutes\n");
  std::printf("# keys: the pattern's, or all for mechanisms that take none. GFLOP/s and GB/s: the "
              "mechanism registry's counts (products; compulsory traffic) over the time. max|err|: "
              "first batch element and head of the first call against the float64 reference.\n");
  std::printf("%-11s %-19s %-7s %10s %9s %6s %8s %8s %6s %9s %10s\n", "workload", "mechanism",
              "keys", "ms", "GFLOP/s", "%peak", "matmul", "GB/s", "%copy", "peak MB", "max|err|");
  for (const auto& name : options.workloads) {
    const AttentionWorkload w = make_attention_workload(name, global.seed);
    int64_t entries = 0;
    for (const auto& p : w.patterns) entries += p.num_entries();
    std::printf("# %s: %s; batch %ld, heads %ld, head_dim %ld, %ld tokens, %ld entries\n",
                w.name.c_str(), w.description.c_str(), static_cast<long>(w.batch),
                static_cast<long>(w.heads), static_cast<long>(w.head_dim),
                static_cast<long>(w.patterns.front().num_queries()), static_cast<long>(entries));
    std::map<std::string, double> ms_by_mechanism;
    for (const auto& mechanism : options.mechanisms) {
      const MachineLimits limits = measure_machine(dtype, global.device, options.budget);
      const AttentionMeasurement m = measure_attention(w, mechanism_info(parse_mechanism(mechanism)),
                                                       dtype, global.device, options.budget, global.seed);
      ms_by_mechanism[mechanism] = m.ms;
      std::printf("%-11s %-19s %-7s %10.2f %9.2f %6.1f %8.1f %8.2f %6.1f %9.1f %10.2e\n",
                  w.name.c_str(), mechanism.c_str(), m.restricted ? "pattern" : "all", m.ms,
                  m.gflops_per_second(), 100.0 * m.gflops_per_second() / limits.matmul_gflops,
                  limits.matmul_gflops, m.gbytes_per_second(),
                  100.0 * m.gbytes_per_second() / limits.copy_gbytes_per_second, m.peak_mb,
                  m.max_abs_error);
      std::fflush(stdout);
      rows.push_back({{"workload", w.name},
                      {"mechanism", mechanism},
                      {"restricted_to_pattern", m.restricted},
                      {"ms", m.ms},
                      {"flops", m.flops},
                      {"bytes", m.bytes},
                      {"gflops", m.gflops_per_second()},
                      {"gbytes_per_s", m.gbytes_per_second()},
                      {"peak_mb", std::isnan(m.peak_mb) ? nlohmann::json(nullptr)
                                                        : nlohmann::json(m.peak_mb)},
                      // Against the mechanism's dense float64 reference (see measure).
                      {"max_abs_error_vs_reference", m.max_abs_error},
                      {"tokens", w.patterns.front().num_queries()},
                      {"entries", entries},
                      {"batch", w.batch},
                      {"heads", w.heads},
                      {"head_dim", w.head_dim},
                      {"dtype", options.dtype},
                      {"device", global.device.str()},
                      {"matmul_peak_gflops", limits.matmul_gflops},
                      {"copy_gbytes_per_s", limits.copy_gbytes_per_second},
                      {"threads", global.threads}});
    }
    if (ms_by_mechanism.count("sparse")) {
      for (const auto& [mechanism, ms] : ms_by_mechanism) {
        if (mechanism == "sparse") continue;
        std::printf("%-11s sparse is %.1fx faster than %s\n", w.name.c_str(),
                    ms / ms_by_mechanism["sparse"], mechanism.c_str());
      }
    }
  }
  if (!options.json_path.empty()) write_json_file(options.json_path, rows);
}

}  // namespace

void register_bench_attention(CLI::App& bench, const GlobalOptions& global, Action& action) {
  auto options = std::make_shared<BenchOptions>();
  CLI::App* cmd = bench.add_subcommand(
      "attention",
      "Attention mechanisms side by side, forward + backward: time, GFLOP/s, GB/s, memory and "
      "error against the float64 reference");
  cmd->add_option("--workload", options->workloads, "Workloads to run")
      ->check(CLI::IsMember(attention_workload_names()))
      ->capture_default_str();
  cmd->add_option("--mechanism", options->mechanisms,
                  "Mechanisms to compare; those that cannot take a pattern attend to every token")
      ->check(CLI::IsMember(mechanism_names()))
      ->capture_default_str();
  cmd->add_option("--dtype", options->dtype, "float32 or float64")
      ->check(CLI::IsMember({"float32", "float64"}))
      ->capture_default_str();
  cmd->add_option("--min-time", options->budget.min_seconds, "Time budget per measurement: more runs while they fit")
      ->check(seconds_budget())
      ->capture_default_str();
  cmd->add_option("--min-reps", options->budget.min_reps, "Minimum timed runs per measurement")
      ->check(positive())
      ->capture_default_str();
  cmd->add_option("--json", options->json_path, "Write one JSON row per workload and mechanism")
      ->check(writable_file());
  cmd->callback([options, &global, &action] { action = [options, &global] { run(*options, global); }; });
}

}  // namespace structdiff::cli
