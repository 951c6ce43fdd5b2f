// `structdiff bench attention`: dense-with-pattern, gather and the fused sparse kernel, forward
// + backward, side by side in one process on named workloads.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <stdexcept>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "cli/attention_workloads.h"
#include "cli/command.h"
#include "structdiff/attention.h"
#include "structdiff/runtime.h"

namespace structdiff::cli {
namespace {

struct BenchOptions {
  std::vector<std::string> workloads = attention_workload_names();
  std::vector<std::string> mechanisms = {"dense", "gather", "sparse"};
  std::string dtype = "float32";
  double min_seconds = 1.0;
  int min_reps = 3;
  std::string json_path;
};

struct Measurement {
  double ms = 0, gflops = 0, edges_per_second = 0, peak_mb = 0, max_abs_error = 0;
};


Measurement measure(const AttentionWorkload& w, const std::string& mechanism,
                    torch::ScalarType dtype, const BenchOptions& options, uint64_t seed) {
  const Mechanism kind = parse_mechanism(mechanism);
  AttentionConfig config;
  config.mechanism = kind;
  config.head_dim = w.head_dim;
  Attention attention(config);

  std::vector<PatternBatch> batches;
  int64_t entries = 0;
  for (const auto& pattern : w.patterns) {
    batches.emplace_back(pattern);
    // Build the cached forms outside the timed region: they belong to pattern compilation.
    if (kind == Mechanism::dense) batches.back().dense_mask();
    if (kind == Mechanism::gather) batches.back().padded_indices();
    entries += pattern.num_entries();
  }
  const int64_t tokens = w.patterns.front().num_queries();
  torch::manual_seed(seed);
  auto options_t = torch::TensorOptions().dtype(dtype);
  auto make = [&] {
    return torch::randn({w.batch, w.heads, tokens, w.head_dim}, options_t).requires_grad_(true);
  };
  torch::Tensor q = make(), k = make(), v = make();
  torch::Tensor cotangent = torch::randn({w.batch, w.heads, tokens, w.head_dim}, options_t);

  auto step = [&] {
    for (auto* t : {&q, &k, &v}) t->mutable_grad() = torch::Tensor();
    for (const auto& batch : batches) {
      (attention->forward(q, k, v, &batch) * cotangent).sum().backward();
    }
  };

  Measurement result;
  {
    torch::NoGradGuard no_grad;
    PatternBatch reference_batch(w.patterns.front());
    torch::Tensor reference = dense_attention(q, k, v, Scaling::inverse_sqrt_dim, &reference_batch);
    result.max_abs_error =
        (attention->forward(q, k, v, &reference_batch) - reference).abs().max().item<double>();
  }
  step();  // warm-up
  {
    PeakMemoryTracker tracker;
    step();
    result.peak_mb = static_cast<double>(tracker.peak_bytes()) / (1024.0 * 1024.0);
  }
  result.ms = median_ms(step, options.min_reps, options.min_seconds);
  // Useful work only: per pattern entry, forward Q.K and P.V (4d) and backward dV, dP, dQ, dK (8d).
  const double pairs = static_cast<double>(w.batch * w.heads) * static_cast<double>(entries);
  result.gflops = pairs * 12.0 * static_cast<double>(w.head_dim) / (result.ms * 1e6);
  result.edges_per_second = pairs / (result.ms * 1e-3);
  return result;
}

void run(const BenchOptions& options, const GlobalOptions& global) {
  const torch::ScalarType dtype = options.dtype == "float64" ? torch::kDouble : torch::kFloat;
  nlohmann::json rows = nlohmann::json::array();
  std::printf("structdiff bench attention: %s, %d threads, forward + backward, median of >= %d "
              "runs (more while they fit in %.1f s)\n",
              options.dtype.c_str(), global.threads, options.min_reps, options.min_seconds);
  std::printf("%-11s %-8s %10s %9s %12s %9s %10s\n", "workload", "mech", "ms", "GFLOP/s",
              "edges/s", "peak MB", "max|err|");
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
      const Measurement m = measure(w, mechanism, dtype, options, global.seed);
      ms_by_mechanism[mechanism] = m.ms;
      std::printf("%-11s %-8s %10.2f %9.2f %12.3e %9.1f %10.2e\n", w.name.c_str(),
                  mechanism.c_str(), m.ms, m.gflops, m.edges_per_second, m.peak_mb,
                  m.max_abs_error);
      std::fflush(stdout);
      rows.push_back({{"workload", w.name},
                      {"mechanism", mechanism},
                      {"ms", m.ms},
                      {"gflops", m.gflops},
                      {"edges_per_s", m.edges_per_second},
                      {"peak_mb", m.peak_mb},
                      {"max_abs_error_vs_dense", m.max_abs_error},
                      {"tokens", w.patterns.front().num_queries()},
                      {"entries", entries},
                      {"batch", w.batch},
                      {"heads", w.heads},
                      {"head_dim", w.head_dim},
                      {"dtype", options.dtype},
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
      "attention", "Dense-with-pattern vs gather vs fused sparse attention, forward + backward");
  cmd->add_option("--workload", options->workloads, "Workloads to run")
      ->check(CLI::IsMember(attention_workload_names()))
      ->capture_default_str();
  cmd->add_option("--mechanism", options->mechanisms, "Mechanisms to compare")
      ->check(CLI::IsMember({"dense", "gather", "sparse"}))
      ->capture_default_str();
  cmd->add_option("--dtype", options->dtype, "float32 or float64")
      ->check(CLI::IsMember({"float32", "float64"}))
      ->capture_default_str();
  cmd->add_option("--min-time", options->min_seconds, "Time budget per measurement: more runs while they fit")
      ->check(non_negative())
      ->capture_default_str();
  cmd->add_option("--min-reps", options->min_reps, "Minimum timed runs per measurement")
      ->check(positive())
      ->capture_default_str();
  cmd->add_option("--json", options->json_path, "Write one JSON row per workload and mechanism")
      ->check(writable_file());
  cmd->callback([options, &global, &action] { action = [options, &global] { run(*options, global); }; });
}

}  // namespace structdiff::cli
