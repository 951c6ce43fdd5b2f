// Rotary position embedding. On the CPU (float32, float64) one fused pass with its own backward
// (attention/rope_kernel.cpp); elsewhere the same rotation composed of tensor operations.
#include <cmath>
#include <stdexcept>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "attention/rope_kernel.h"
#include "structdiff/rope.h"

namespace structdiff {
namespace {

// cos and sin of position * base^(-2i / head_dim) for every entry of `positions` (flattened) and
// every i < half, computed in float64 and stored as T: (entries, half) each, row-major. Plain
// vectors: a decoding step rotates one position, where every tensor operation would cost more
// than the arithmetic.
template <typename T>
struct AngleTable {
  int64_t entries = 0;
  std::vector<T> cos, sin;
};

template <typename T>
AngleTable<T> angle_table(const torch::Tensor& positions, int64_t half, double base) {
  const torch::Tensor flat =
      positions.scalar_type() == torch::kLong && positions.is_cpu()
          ? positions.contiguous()
          : positions.to(torch::kCPU, torch::kDouble).contiguous();
  std::vector<double> frequencies(half);
  for (int64_t i = 0; i < half; ++i) {
    // As the composed path below computes it, so both give the same angles to the last bit.
    frequencies[i] = std::pow(base, -(static_cast<double>(i) * (2.0 / static_cast<double>(2 * half))));
  }
  AngleTable<T> table;
  table.entries = flat.numel();
  table.cos.resize(table.entries * half);
  table.sin.resize(table.entries * half);
  for (int64_t e = 0; e < table.entries; ++e) {
    const double position = flat.scalar_type() == torch::kLong
                                ? static_cast<double>(flat.data_ptr<int64_t>()[e])
                                : flat.data_ptr<double>()[e];
    for (int64_t i = 0; i < half; ++i) {
      const double angle = position * frequencies[i];
      table.cos[e * half + i] = static_cast<T>(std::cos(angle));
      table.sin[e * half + i] = static_cast<T>(std::sin(angle));
    }
  }
  return table;
}

template <typename T>
torch::Tensor rotate(const torch::Tensor& x, const T* cos, const T* sin, bool per_element,
                     bool inverse) {
  const torch::Tensor source = x.stride(3) == 1 ? x : x.contiguous();
  torch::Tensor out = torch::empty(x.sizes(), x.options());
  kernels::RopeProblem problem;
  problem.batch = x.size(0);
  problem.heads = x.size(1);
  problem.tokens = x.size(2);
  problem.half = x.size(3) / 2;
  for (int d = 0; d < 3; ++d) problem.stride[d] = source.stride(d);
  problem.per_element = per_element;
  problem.inverse = inverse;
  kernels::rope_rotate(problem, source.data_ptr<T>(), cos, sin, out.data_ptr<T>());
  return out;
}

// The rotation is orthogonal: its backward pass is the rotation by the opposite angles.
template <typename T>
class RopeRotation : public torch::autograd::Function<RopeRotation<T>> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* context, const torch::Tensor& x,
                               const torch::Tensor& cos, const torch::Tensor& sin,
                               bool per_element) {
    context->save_for_backward({cos, sin});
    context->saved_data["per_element"] = per_element;
    return rotate<T>(x, cos.data_ptr<T>(), sin.data_ptr<T>(), per_element, false);
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* context,
                                               torch::autograd::tensor_list grad_outputs) {
    const auto saved = context->get_saved_variables();
    return {rotate<T>(grad_outputs[0], saved[0].data_ptr<T>(), saved[1].data_ptr<T>(),
                      context->saved_data["per_element"].toBool(), true),
            torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

template <typename T>
torch::Tensor fused_rope(const torch::Tensor& x, const torch::Tensor& positions, double base,
                         bool per_element) {
  const int64_t half = x.size(3) / 2;
  AngleTable<T> table = angle_table<T>(positions, half, base);
  if (!torch::GradMode::is_enabled() || !x.requires_grad()) {
    return rotate<T>(x, table.cos.data(), table.sin.data(), per_element, false);
  }
  const auto as_tensor = [&](std::vector<T>& values) {
    return torch::from_blob(values.data(), {table.entries, half},
                            torch::TensorOptions().dtype(c10::CppTypeToScalarType<T>::value))
        .clone();
  };
  return RopeRotation<T>::apply(x, as_tensor(table.cos), as_tensor(table.sin), per_element);
}

}  // namespace

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
  if (x.is_cpu() && x.scalar_type() == torch::kDouble) {
    return fused_rope<double>(x, positions, base, per_element);
  }
  if (x.is_cpu() && x.scalar_type() == torch::kFloat) {
    return fused_rope<float>(x, positions, base, per_element);
  }
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
