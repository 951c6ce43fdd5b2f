#include "structdiff/random.h"

#include <torch/torch.h>

namespace structdiff::random {
namespace {

torch::TensorOptions on_cpu(const torch::TensorOptions& options) {
  return options.device(torch::kCPU);
}

}  // namespace

torch::Tensor normal(at::IntArrayRef sizes, const at::Generator& generator,
                     const torch::TensorOptions& options) {
  return torch::randn(sizes, generator, on_cpu(options)).to(options.device());
}

torch::Tensor uniform(at::IntArrayRef sizes, const at::Generator& generator,
                      const torch::TensorOptions& options) {
  return torch::rand(sizes, generator, on_cpu(options)).to(options.device());
}

torch::Tensor gumbel(at::IntArrayRef sizes, const at::Generator& generator,
                     const torch::TensorOptions& options) {
  // U = 0 would give -infinity.
  return uniform(sizes, generator, options).clamp_min(1e-12).log().neg().log().neg();
}

torch::Tensor integers(int64_t low, int64_t high, at::IntArrayRef sizes,
                       const at::Generator& generator, const torch::TensorOptions& options) {
  return torch::randint(low, high, sizes, generator, on_cpu(options)).to(options.device());
}

torch::Tensor bernoulli(at::IntArrayRef sizes, double p, const at::Generator& generator,
                        const torch::TensorOptions& options) {
  const torch::Tensor shape = torch::empty(sizes, on_cpu(options));
  return at::bernoulli(shape, p, generator).to(options.device());
}

torch::Tensor tempered_softmax(const torch::Tensor& logits, double temperature) {
  const torch::Tensor shifted = logits - logits.amax(-1, /*keepdim=*/true);
  // The maximum stays 0 where the temperature rounds to 0 in the logits' precision (0 / 0).
  return torch::softmax(torch::where(shifted == 0, shifted, shifted / temperature), -1);
}

torch::Tensor categorical(const torch::Tensor& probabilities, const at::Generator& generator) {
  return at::multinomial(probabilities.to(torch::kCPU), 1, false, generator)
      .squeeze(1)
      .to(probabilities.device());
}

}  // namespace structdiff::random
