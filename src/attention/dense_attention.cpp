#include <cmath>
#include <stdexcept>
#include <string>

#include "structdiff/attention.h"

namespace structdiff {

double scale_factor(Scaling scaling, int64_t head_dim) {
  return scaling == Scaling::inverse_sqrt_dim ? 1.0 / std::sqrt(static_cast<double>(head_dim))
                                              : 1.0;
}

namespace {
std::string shape_of(const torch::Tensor& t) {
  std::string text = "(";
  for (int64_t i = 0; i < t.dim(); ++i) text += (i ? ", " : "") + std::to_string(t.size(i));
  return text + ")";
}
}  // namespace

void check_qkv(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  const char* names[] = {"Q", "K", "V"};
  const torch::Tensor* inputs[] = {&q, &k, &v};
  for (int i = 0; i < 3; ++i) {
    const torch::Tensor& t = *inputs[i];
    if (!t.defined()) throw std::invalid_argument(std::string(names[i]) + " is undefined");
    if (t.dim() != 4) {
      throw std::invalid_argument(std::string(names[i]) +
                                  " must be (batch, heads, tokens, head_dim), got shape " +
                                  shape_of(t));
    }
    if (t.scalar_type() != torch::kFloat && t.scalar_type() != torch::kDouble) {
      throw std::invalid_argument(std::string(names[i]) + " must be float32 or float64, got " +
                                  std::string(c10::toString(t.scalar_type())));
    }
  }
  if (k.scalar_type() != q.scalar_type() || v.scalar_type() != q.scalar_type()) {
    throw std::invalid_argument("Q, K and V must share one dtype");
  }
  if (k.device() != q.device() || v.device() != q.device()) {
    throw std::invalid_argument("Q, K and V must be on one device");
  }
  if (k.size(0) != q.size(0) || v.size(0) != q.size(0) || k.size(1) != q.size(1) ||
      v.size(1) != q.size(1)) {
    throw std::invalid_argument("Q " + shape_of(q) + ", K " + shape_of(k) + " and V " +
                                shape_of(v) + " must agree in batch and heads");
  }
  if (k.size(3) != q.size(3)) {
    throw std::invalid_argument("Q " + shape_of(q) + " and K " + shape_of(k) +
                                " must have the same head_dim");
  }
  if (v.size(2) != k.size(2)) {
    throw std::invalid_argument("K " + shape_of(k) + " and V " + shape_of(v) +
                                " must have the same number of keys");
  }
}

torch::Tensor dense_attention(const torch::Tensor& q, const torch::Tensor& k,
                              const torch::Tensor& v, Scaling scaling,
                              const PatternBatch* pattern) {
  check_qkv(q, k, v);
  torch::Tensor scores = torch::matmul(q, k.transpose(-2, -1)) * scale_factor(scaling, q.size(3));
  if (pattern == nullptr) return torch::matmul(torch::softmax(scores, -1), v);
  pattern->check_compatible(q, k);
  torch::Tensor mask = pattern->dense_mask(q.device()).unsqueeze(1);  // (P, 1, Nq, Nk)
  // Rows without keys would be softmax(-inf...) = NaN: let them see every key, then zero them.
  torch::Tensor row_has_keys = mask.any(-1, /*keepdim=*/true);
  torch::Tensor weights = torch::softmax(scores.masked_fill(~(mask | ~row_has_keys),
                                                            -std::numeric_limits<double>::infinity()),
                                         -1) *
                          row_has_keys.to(q.scalar_type());
  return torch::matmul(weights, v);
}

}  // namespace structdiff
