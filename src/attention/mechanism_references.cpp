#include "attention/mechanism_references.h"

#include <cmath>
#include <limits>
#include <vector>

#include <torch/torch.h>

namespace structdiff::references {
namespace {

torch::Tensor as_float64(const torch::Tensor& t) { return t.to(torch::kDouble); }

// (patterns or 1, 1 for the heads, queries, keys) bool: the pairs a query may attend to.
torch::Tensor allowed_pairs(const torch::Tensor& q, const torch::Tensor& k,
                            const PatternBatch* pattern) {
  if (pattern == nullptr) {
    return torch::ones({1, 1, q.size(2), k.size(2)}, q.options().dtype(torch::kBool));
  }
  pattern->check_compatible(q, k);
  return pattern->dense_mask(q.device()).unsqueeze(1);
}

// out_i = sum_j w_ij v_j / sum_j w_ij; a row without weight (no allowed key) gives zeros.
torch::Tensor weighted_average(const torch::Tensor& weights, const torch::Tensor& v) {
  const torch::Tensor row_sum = weights.sum(-1, /*keepdim=*/true);
  return weights.matmul(v) / torch::where(row_sum > 0, row_sum, torch::ones_like(row_sum));
}

// w_ij = phi(q_i).phi(k_j), written out as the N x N matrix the linear-time forms avoid.
torch::Tensor feature_weights(const torch::Tensor& query_features,
                              const torch::Tensor& key_features) {
  return query_features.matmul(key_features.transpose(-2, -1));
}

// FAVOR+'s features for the softmax kernel, as favor_attention defines them:
// phi(x)_r = (exp(w_r.x' - |x'|^2 / 2 - c) + eps) / sqrt(m) with x' = x / d^(1/4). The constant c
// (a query's largest w_r.x', or the largest over all keys of one batch element and head) keeps
// exp finite; it cancels only when eps = 0, so it is part of the function.
torch::Tensor favor_softmax_features(const torch::Tensor& x, const torch::Tensor& projection,
                                     bool is_query, double eps) {
  const torch::Tensor scaled = x / std::pow(static_cast<double>(x.size(-1)), 0.25);
  const torch::Tensor projected = scaled.matmul(projection.transpose(0, 1));
  const torch::Tensor largest =
      is_query ? projected.amax({-1}, /*keepdim=*/true) : projected.amax({-2, -1}, true);
  const torch::Tensor half_squared_norm = scaled.square().sum(-1, /*keepdim=*/true) / 2;
  return (torch::exp(projected - half_squared_norm - largest) + eps) /
         std::sqrt(static_cast<double>(projection.size(0)));
}

}  // namespace

torch::Tensor masked_softmax(const torch::Tensor& q_in, const torch::Tensor& k_in,
                             const torch::Tensor& v_in, const MechanismArguments& arguments) {
  const torch::Tensor q = as_float64(q_in), k = as_float64(k_in), v = as_float64(v_in);
  const torch::Tensor scores =
      q.matmul(k.transpose(-2, -1)) * scale_factor(arguments.scaling, q.size(-1));
  const torch::Tensor allowed = allowed_pairs(q, k, arguments.pattern);
  // The largest allowed score of each row cancels in the average; subtracting it keeps exp finite.
  torch::Tensor largest =
      scores.masked_fill(~allowed, -std::numeric_limits<double>::infinity()).amax(-1, true);
  largest.masked_fill_(torch::isinf(largest), 0.0);
  return weighted_average(torch::exp(scores - largest).masked_fill(~allowed, 0.0), v);
}

torch::Tensor linear(const torch::Tensor& q_in, const torch::Tensor& k_in,
                     const torch::Tensor& v_in, const MechanismArguments& arguments) {
  const torch::Tensor q = as_float64(q_in), k = as_float64(k_in), v = as_float64(v_in);
  const double eps = arguments.eps.value_or(kLinearAttentionEps);
  const torch::Tensor weights = feature_weights(torch::elu(q) + 1, torch::elu(k) + 1);
  return weights.matmul(v) / (weights.sum(-1, /*keepdim=*/true) + eps);
}

torch::Tensor favor_softmax(const torch::Tensor& q_in, const torch::Tensor& k_in,
                            const torch::Tensor& v_in, const MechanismArguments& arguments) {
  const torch::Tensor q = as_float64(q_in), k = as_float64(k_in), v = as_float64(v_in);
  const torch::Tensor projection = as_float64(arguments.projection);
  const double eps = arguments.eps.value_or(kFavorEps);
  return weighted_average(
      feature_weights(favor_softmax_features(q, projection, /*is_query=*/true, eps),
                      favor_softmax_features(k, projection, /*is_query=*/false, eps)),
      v);
}

torch::Tensor favor_relu(const torch::Tensor& q_in, const torch::Tensor& k_in,
                         const torch::Tensor& v_in, const MechanismArguments& arguments) {
  const torch::Tensor q = as_float64(q_in), k = as_float64(k_in), v = as_float64(v_in);
  const torch::Tensor projection = as_float64(arguments.projection);
  const double eps = arguments.eps.value_or(kFavorEps);
  const auto features = [&](const torch::Tensor& x) {
    return torch::relu(x.matmul(projection.transpose(0, 1))) + eps;
  };
  return weighted_average(feature_weights(features(q), features(k)), v);
}

torch::Tensor diffusivity_simple(const torch::Tensor& q_in, const torch::Tensor& k_in,
                                 const torch::Tensor& v_in, const MechanismArguments& arguments) {
  const torch::Tensor q = as_float64(q_in), k = as_float64(k_in), v = as_float64(v_in);
  // per_node: each vector by its own norm; global: all nodes of one batch element and head by
  // their joint (Frobenius) norm.
  const std::vector<int64_t> dims = arguments.diffusivity_norm == DiffusivityNorm::per_node
                                        ? std::vector<int64_t>{-1}
                                        : std::vector<int64_t>{-2, -1};
  const auto normalised = [&](const torch::Tensor& x) {
    return x / x.norm(2, dims, /*keepdim=*/true);
  };
  return weighted_average(1 + feature_weights(normalised(q), normalised(k)), v);
}

torch::Tensor diffusivity_sigmoid(const torch::Tensor& q_in, const torch::Tensor& k_in,
                                  const torch::Tensor& v_in, const MechanismArguments& arguments) {
  const torch::Tensor q = as_float64(q_in), k = as_float64(k_in), v = as_float64(v_in);
  const torch::Tensor allowed = allowed_pairs(q, k, arguments.pattern);
  return weighted_average(
      torch::sigmoid(q.matmul(k.transpose(-2, -1))).masked_fill(~allowed, 0.0), v);
}

}  // namespace structdiff::references
