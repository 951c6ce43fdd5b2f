#include "structdiff/sinusoidal.h"

#include <algorithm>
#include <cmath>

#include <torch/torch.h>

namespace structdiff {

torch::Tensor sinusoidal_embedding(const torch::Tensor& positions, int64_t dim,
                                   FrequencySpacing spacing) {
  const int64_t half = dim / 2;
  const auto options = torch::TensorOptions().dtype(torch::kFloat).device(positions.device());
  const torch::Tensor index = torch::arange(half, options);
  const double log_base = std::log(10000.0);
  // Each spacing keeps the float32 operation order its models were trained with: the orders
  // differ in the last bit for most sizes, and shipped models' samples depend on those bits.
  const torch::Tensor exponents =
      spacing == FrequencySpacing::transformer
          ? -log_base * index / static_cast<double>(std::max<int64_t>(half, 1))
          : index * (-log_base / static_cast<double>(std::max<int64_t>(half - 1, 1)));
  const torch::Tensor frequencies = torch::exp(exponents);
  const torch::Tensor angles = positions.to(torch::kFloat).unsqueeze(1) * frequencies.unsqueeze(0);
  torch::Tensor code = torch::cat({torch::sin(angles), torch::cos(angles)}, 1);
  if (dim % 2 == 1) code = torch::nn::functional::pad(code, torch::nn::functional::PadFuncOptions({0, 1}));
  return code;
}

}  // namespace structdiff
