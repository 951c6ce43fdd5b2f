// `structdiff bench attention`: registered attention mechanisms (by default dense-with-pattern,
// gather and the fused sparse kernel), forward + backward, side by side in one process on named
// workloads. Their FLOP and byte counts and their float64 references come from the mechanism
// registry.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <stdexcept>

#include <ATen/CPUGeneratorImpl.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "cli/attention_workloads.h"
#include "cli/command.h"
#include "structdiff/attention.h"
#include "structdiff/device.h"
#include "structdiff/mechanism_registry.h"
#include "structdiff/random.h"
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
  bool restricted = false;  // ran on the workload's patterns rather than every token
  double ms = 0, flops = 0, bytes = 0, peak_mb = 0, max_abs_error = 0;
  double gflops_per_second() const { return flops / (ms * 1e6); }
  double gbytes_per_second() const { return bytes / (ms * 1e6); }
};

// What the machine itself reaches on `device`, measured right before each mechanism: a square
// matrix product (GFLOP/s) and a large copy (GB/s, bytes read plus written).
struct MachineLimits {
  double matmul_gflops = 0, copy_gbytes_per_second = 0;
};

MachineLimits measure_machine(torch::ScalarType dtype, torch::Device device,
                              const BenchOptions& options) {
  const auto tensor_options = torch::TensorOptions().dtype(dtype).device(device);
  const int64_t n = device.is_cuda() ? 8192 : 1024;
  const torch::Tensor a = torch::ones({n, n}, tensor_options), b = torch::ones({n, n}, tensor_options);
  torch::Tensor product = torch::mm(a, b);
  const double matmul_ms = median_ms(
      [&] {
        at::mm_out(product, a, b);
        synchronize(device);
      },
      options.min_reps, options.min_seconds);
  const int64_t elements = (device.is_cuda() ? int64_t{1} << 28 : int64_t{1} << 25) /
                           static_cast<int64_t>(c10::elementSize(dtype));
  const torch::Tensor source = torch::ones({elements}, tensor_options);
  torch::Tensor target = torch::empty_like(source);
  const double copy_ms = median_ms(
      [&] {
        target.copy_(source);
        synchronize(device);
      },
      options.min_reps, options.min_seconds);
  MachineLimits limits;
  limits.matmul_gflops = 2.0 * static_cast<double>(n * n * n) / (matmul_ms * 1e6);
  limits.copy_gbytes_per_second =
      2.0 * static_cast<double>(source.nbytes()) / (copy_ms * 1e6);
  return limits;
}

Measurement measure(const AttentionWorkload& w, const MechanismInfo& mechanism,
                    torch::ScalarType dtype, torch::Device device, const BenchOptions& options,
                    uint64_t seed) {
  AttentionConfig config;
  config.mechanism = mechanism.mechanism;
  config.head_dim = w.head_dim;
  Attention attention(config);
  attention->to(device);
  const int64_t tokens = w.patterns.front().num_queries();

  Measurement result;
  // Mechanisms that cannot take a pattern attend to every token, once per pattern as the others.
  result.restricted = mechanism.pattern_use != PatternUse::none;
  std::vector<PatternBatch> batches;
  AttentionSize size;
  size.batch = w.batch;
  size.heads = w.heads;
  size.queries = size.keys = tokens;
  size.head_dim = w.head_dim;
  size.features = attention->config().num_features;
  size.element_bytes = static_cast<int64_t>(c10::elementSize(dtype));
  for (const auto& pattern : w.patterns) {
    batches.emplace_back(pattern);
    if (result.restricted) {
      // Build the cached forms outside the timed region: they belong to pattern compilation.
      batches.back().dense_mask(device);
      batches.back().padded_indices(device);
      batches.back().key_offsets(device);
      size.pattern_entries = w.batch * pattern.num_entries();
    }
    const AttentionCost cost = mechanism.cost(size);
    result.flops += cost.flops();
    result.bytes += cost.bytes();
  }
  const auto pattern_of = [&](const PatternBatch& batch) {
    return result.restricted ? &batch : nullptr;
  };

  const at::Generator inputs = at::make_generator<at::CPUGeneratorImpl>(seed);
  auto options_t = torch::TensorOptions().dtype(dtype).device(device);
  auto make = [&] {
    return random::normal({w.batch, w.heads, tokens, w.head_dim}, inputs, options_t)
        .requires_grad_(true);
  };
  torch::Tensor q = make(), k = make(), v = make();
  torch::Tensor cotangent = random::normal({w.batch, w.heads, tokens, w.head_dim}, inputs, options_t);

  auto step = [&] {
    for (auto* t : {&q, &k, &v}) t->mutable_grad() = torch::Tensor();
    for (const auto& batch : batches) {
      (attention->forward(q, k, v, pattern_of(batch)) * cotangent).sum().backward();
    }
    synchronize(device);
  };

  {
    // The float64 reference forms N x N matrices, too large for every element of the biggest
    // workloads: the first call's first batch element and head are checked.
    torch::NoGradGuard no_grad;
    const PatternBatch* pattern = pattern_of(batches.front());
    const auto first = [](const torch::Tensor& t) { return t.narrow(0, 0, 1).narrow(1, 0, 1); };
    const torch::Tensor out = first(attention->forward(q, k, v, pattern));
    const torch::Tensor reference =
        mechanism.reference(first(q), first(k), first(v), attention->arguments(pattern));
    result.max_abs_error = (out.to(torch::kDouble) - reference).abs().max().item<double>();
  }
  step();  // warm-up
  if (device.is_cpu()) {  // the tracker sees CPU allocations only
    PeakMemoryTracker tracker;
    step();
    result.peak_mb = static_cast<double>(tracker.peak_bytes()) / (1024.0 * 1024.0);
  } else {
    result.peak_mb = std::nan("");
  }
  result.ms = median_ms(step, options.min_reps, options.min_seconds);
  return result;
}

void run(const BenchOptions& options, const GlobalOptions& global) {
  const torch::ScalarType dtype = options.dtype == "float64" ? torch::kDouble : torch::kFloat;
  nlohmann::json rows = nlohmann::json::array();
  std::printf("structdiff bench attention: %s on %s, %d threads, forward + backward, median of "
              ">= %d runs (more while they fit in %.1f s)\n",
              options.dtype.c_str(), global.device.str().c_str(), global.threads,
              options.min_reps, options.min_seconds);
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
      const MachineLimits limits = measure_machine(dtype, global.device, options);
      const Measurement m = measure(w, mechanism_info(parse_mechanism(mechanism)), dtype,
                                    global.device, options, global.seed);
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
  cmd->add_option("--min-time", options->min_seconds, "Time budget per measurement: more runs while they fit")
      ->check(seconds_budget())
      ->capture_default_str();
  cmd->add_option("--min-reps", options->min_reps, "Minimum timed runs per measurement")
      ->check(positive())
      ->capture_default_str();
  cmd->add_option("--json", options->json_path, "Write one JSON row per workload and mechanism")
      ->check(writable_file());
  cmd->callback([options, &global, &action] { action = [options, &global] { run(*options, global); }; });
}

}  // namespace structdiff::cli
