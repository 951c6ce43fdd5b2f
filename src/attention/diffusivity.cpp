// DIFFormer diffusivities (Wu et al., 2023): the simple kernel 1 + q~.k~ in linear time and the
// sigmoid kernel sigmoid(q.k) in quadratic time, both row-normalised.
#include <limits>
#include <vector>

#include <torch/torch.h>

#include "structdiff/attention.h"

namespace structdiff {
namespace {

// x divided by its L2 norm over `dims`; the floor keeps all-zero vectors at zero.
torch::Tensor l2_normalised(const torch::Tensor& x, at::IntArrayRef dims) {
  constexpr double kMinNorm = 1e-12;
  return x / at::linalg_vector_norm(x, 2, dims, /*keepdim=*/true).clamp_min(kMinNorm);
}

}  // namespace

torch::Tensor diffusivity_simple(const torch::Tensor& q, const torch::Tensor& k,
                                 const torch::Tensor& v, DiffusivityNorm norm) {
  check_qkv(q, k, v);
  // per_node: each q_i, k_j alone; global: all nodes of one (batch, head) together.
  const std::vector<int64_t> norm_dims =
      norm == DiffusivityNorm::per_node ? std::vector<int64_t>{-1} : std::vector<int64_t>{-2, -1};
  const torch::Tensor q_normalised = l2_normalised(q, norm_dims);
  const torch::Tensor k_normalised = l2_normalised(k, norm_dims);
  // sum_j (1 + q~_i.k~_j) v_j = sum_j v_j + q~_i (sum_j k~_j v_j^T), and likewise for the weights.
  const torch::Tensor numerator =
      v.sum(-2, /*keepdim=*/true) + q_normalised.matmul(k_normalised.transpose(-2, -1).matmul(v));
  const torch::Tensor denominator =
      static_cast<double>(k.size(-2)) + q_normalised.matmul(k_normalised.sum(-2).unsqueeze(-1));
  return numerator / denominator;
}

torch::Tensor diffusivity_sigmoid(const torch::Tensor& q, const torch::Tensor& k,
                                  const torch::Tensor& v, const PatternBatch* pattern) {
  check_qkv(q, k, v);
  // sigmoid(s_ij) / sum_j sigmoid(s_ij) is a softmax over log sigmoid(s_ij); in log space a row
  // stays correct even when all its sigmoids underflow (s_ij below about -100 in float32).
  torch::Tensor log_weights = torch::log_sigmoid(q.matmul(k.transpose(-2, -1)));
  if (pattern != nullptr) {
    pattern->check_compatible(q, k);
    const torch::Tensor allowed = pattern->dense_mask().to(q.device()).unsqueeze(1);  // over heads
    log_weights =
        log_weights.masked_fill(allowed.logical_not(), -std::numeric_limits<double>::infinity());
  }
  // The row maximum cancels in the normalisation; rows without keys have -inf there, use 0.
  torch::Tensor row_max = log_weights.amax({-1}, /*keepdim=*/true).detach();
  row_max = row_max.masked_fill(torch::isinf(row_max), 0.0);
  const torch::Tensor weights = torch::exp(log_weights - row_max);
  // A row with a key sums to at least exp(0) = 1; an empty row sums to 0 and must give 0, not NaN.
  torch::Tensor row_sum = weights.sum(-1, /*keepdim=*/true);
  row_sum = row_sum.masked_fill(row_sum == 0, 1.0);
  return weights.matmul(v) / row_sum;
}

}  // namespace structdiff
