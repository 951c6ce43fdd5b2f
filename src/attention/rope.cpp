// Rotary position embedding.
#include <stdexcept>

#include <torch/torch.h>

#include "structdiff/rope.h"

namespace structdiff {

torch::Tensor apply_rope(const torch::Tensor& x, const torch::Tensor& positions, double base) {
  if (x.dim() != 4 || x.size(3) % 2 != 0) {
    throw std::invalid_argument(
        "apply_rope: expected (batch, heads, tokens, head_dim) with an even head_dim, got " +
        c10::str(x.sizes()));
  }
  const int64_t tokens = x.size(2);
  const bool shared = positions.dim() == 1 && positions.size(0) == tokens;
  const bool per_element =
      positions.dim() == 2 && positions.size(0) == x.size(0) && positions.size(1) == tokens;
  if (!shared && !per_element) {
    throw std::invalid_argument("apply_rope: positions must be (" + std::to_string(tokens) +
                                ") or (" + std::to_string(x.size(0)) + ", " +
                                std::to_string(tokens) + "), got " + c10::str(positions.sizes()));
  }
  if (!(base > 1.0)) throw std::invalid_argument("apply_rope: base must be > 1");
  const int64_t half = x.size(3) / 2;
  const auto float64 = torch::TensorOptions().dtype(torch::kDouble).device(x.device());
  const torch::Tensor frequencies =
      torch::pow(base, -torch::arange(half, float64) * (2.0 / static_cast<double>(x.size(3))));
  // (tokens, half) or (batch, 1, tokens, half), broadcast over heads.
  torch::Tensor angles = positions.to(float64).unsqueeze(-1) * frequencies;
  if (per_element) angles = angles.unsqueeze(1);
  const torch::Tensor cos = angles.cos().to(x.scalar_type());
  const torch::Tensor sin = angles.sin().to(x.scalar_type());
  const torch::Tensor first = x.narrow(3, 0, half);
  const torch::Tensor second = x.narrow(3, half, half);
  return torch::cat({first * cos - second * sin, second * cos + first * sin}, 3);
}

}  // namespace structdiff
