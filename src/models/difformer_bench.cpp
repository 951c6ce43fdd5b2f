#include "structdiff/difformer_bench.h"

#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "structdiff/random.h"
#include "structdiff/runtime.h"
#include "structdiff/timing.h"

namespace structdiff::difformer {

ConvTiming conv_timing(Diffusivity diffusivity, int64_t nodes, int64_t dim, int min_runs,
                       double budget_seconds, uint64_t seed) {
  DefaultGeneratorGuard seeded(seed);  // the bench's initial weights
  ConvOptions options;
  options.dim = dim;
  options.diffusivity = diffusivity;
  DIFFormerConv conv(options);
  torch::Tensor z =
      random::normal({nodes, dim}, at::make_generator<at::CPUGeneratorImpl>(seed), torch::kFloat)
          .requires_grad_(true);
  std::vector<torch::Tensor> leaves = conv->parameters();
  leaves.push_back(z);
  auto step = [&] {
    for (torch::Tensor& leaf : leaves) leaf.mutable_grad() = torch::Tensor();
    conv->forward(z).sum().backward();
  };
  ConvTiming timing;
  step();  // warm-up
  {
    PeakMemoryTracker tracker;
    step();
    timing.peak_mb = static_cast<double>(tracker.peak_bytes()) / (1024.0 * 1024.0);
  }
  timing.ms = median_ms(step, min_runs, budget_seconds);
  return timing;
}

}  // namespace structdiff::difformer
