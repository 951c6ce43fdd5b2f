// The GSDM paper's packed attention (Appendix C) with ordinary libtorch ops: the baseline the
// fused kernel is measured against.
#include <limits>

#include "structdiff/attention.h"

namespace structdiff {

torch::Tensor gather_attention(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, const PatternBatch& pattern,
                               Scaling scaling) {
  check_qkv(q, k, v);
  pattern.check_compatible(q, k);
  const int64_t batch = q.size(0), heads = q.size(1), queries = q.size(2), keys = k.size(2);
  const int64_t dim = q.size(3), v_dim = v.size(3);
  if (keys == 0) return torch::zeros({batch, heads, queries, v_dim}, q.options());
  torch::Tensor indices = pattern.padded_indices(q.device());  // (P, Nq, m)
  torch::Tensor valid = pattern.padded_valid(q.device());      // (P, Nq, m)
  const int64_t width = indices.size(2);
  // Global row index into the (batch * keys) token list, one per gathered slot.
  torch::Tensor batch_base = torch::arange(batch, indices.options()).view({batch, 1, 1}) * keys;
  torch::Tensor flat_index = (batch_base + indices).reshape({-1});  // P broadcasts to batch
  auto gather = [&](const torch::Tensor& t, int64_t last) {
    return t.permute({0, 2, 1, 3})
        .reshape({batch * keys, heads, last})
        .index_select(0, flat_index)
        .view({batch, queries, width, heads, last})
        .permute({0, 3, 1, 2, 4});  // (B, H, Nq, m, d)
  };
  torch::Tensor k_packed = gather(k, dim);
  torch::Tensor v_packed = gather(v, v_dim);
  torch::Tensor scores =
      torch::matmul(q.unsqueeze(-2), k_packed.transpose(-2, -1)).squeeze(-2) *
      scale_factor(scaling, dim);  // (B, H, Nq, m)
  torch::Tensor slot_valid = valid.unsqueeze(1);
  torch::Tensor row_has_keys = slot_valid.any(-1, /*keepdim=*/true);
  torch::Tensor weights =
      torch::softmax(scores.masked_fill(~(slot_valid | ~row_has_keys),
                                        -std::numeric_limits<double>::infinity()),
                     -1) *
      row_has_keys.to(q.scalar_type());
  return torch::matmul(weights.unsqueeze(-2), v_packed).squeeze(-2);
}

}  // namespace structdiff
