// Linear attention (Katharopoulos et al., 2020) with the feature map phi = elu + 1.
#include <stdexcept>
#include <string>

#include <torch/torch.h>

#include "structdiff/attention.h"

namespace structdiff {

torch::Tensor linear_attention(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, double eps) {
  check_qkv(q, k, v);
  if (!(eps >= 0)) {
    throw std::invalid_argument("linear_attention: eps must be >= 0, got " + std::to_string(eps));
  }
  const torch::Tensor query_features = torch::elu(q) + 1;
  const torch::Tensor key_features = torch::elu(k) + 1;
  // (head_dim x head_dim) summaries of the keys keep the cost linear in the tokens.
  const torch::Tensor key_value_summary = key_features.transpose(-2, -1).matmul(v);
  const torch::Tensor key_feature_sum = key_features.sum(-2).unsqueeze(-1);
  return query_features.matmul(key_value_summary) / (query_features.matmul(key_feature_sum) + eps);
}

}  // namespace structdiff
