#include "structdiff/attention_measure.h"

#include <cmath>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "structdiff/attention.h"
#include "structdiff/device.h"
#include "structdiff/random.h"
#include "structdiff/runtime.h"
#include "structdiff/timing.h"

namespace structdiff {

MachineLimits measure_machine(c10::ScalarType dtype, c10::Device device, const TimingBudget& budget) {
  const auto tensor_options = torch::TensorOptions().dtype(dtype).device(device);
  const int64_t n = device.is_cuda() ? 8192 : 1024;
  const torch::Tensor a = torch::ones({n, n}, tensor_options), b = torch::ones({n, n}, tensor_options);
  torch::Tensor product = torch::mm(a, b);
  const double matmul_ms = median_ms(
      [&] {
        at::mm_out(product, a, b);
        synchronize(device);
      },
      budget.min_reps, budget.min_seconds);
  const int64_t elements = (device.is_cuda() ? int64_t{1} << 28 : int64_t{1} << 25) /
                           static_cast<int64_t>(c10::elementSize(dtype));
  const torch::Tensor source = torch::ones({elements}, tensor_options);
  torch::Tensor target = torch::empty_like(source);
  const double copy_ms = median_ms(
      [&] {
        target.copy_(source);
        synchronize(device);
      },
      budget.min_reps, budget.min_seconds);
  MachineLimits limits;
  limits.matmul_gflops = 2.0 * static_cast<double>(n * n * n) / (matmul_ms * 1e6);
  limits.copy_gbytes_per_second =
      2.0 * static_cast<double>(source.nbytes()) / (copy_ms * 1e6);
  return limits;
}

AttentionMeasurement measure_attention(const AttentionWorkload& w, const MechanismInfo& mechanism,
                                       c10::ScalarType dtype, c10::Device device,
                                       const TimingBudget& budget, uint64_t seed) {
  AttentionConfig config;
  config.mechanism = mechanism.mechanism;
  config.head_dim = w.head_dim;
  Attention attention(config);
  attention->to(device);
  const int64_t tokens = w.patterns.front().num_queries();

  AttentionMeasurement result;
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
  result.ms = median_ms(step, budget.min_reps, budget.min_seconds);
  return result;
}

}  // namespace structdiff
