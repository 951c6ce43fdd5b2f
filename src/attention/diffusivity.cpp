// DIFFormer diffusivities (Wu et al., 2023): the simple kernel 1 + q~.k~ in linear time and the
// sigmoid kernel sigmoid(q.k) in quadratic time (in blocks of query rows), both row-normalised.
#include <algorithm>
#include <limits>
#include <vector>

#include <torch/autograd.h>
#include <torch/torch.h>

#include "structdiff/attention.h"

namespace structdiff {
namespace {

// x divided by its L2 norm over `dims`; the floor keeps all-zero vectors at zero.
torch::Tensor l2_normalised(const torch::Tensor& x, at::IntArrayRef dims) {
  constexpr double kMinNorm = 1e-12;
  return x / at::linalg_vector_norm(x, 2, dims, /*keepdim=*/true).clamp_min(kMinNorm);
}

// Query rows per block: about kBlockElements weights per block, whatever the batch and heads.
int64_t block_rows(const torch::Tensor& q, const torch::Tensor& k) {
  constexpr int64_t kBlockElements = int64_t{1} << 18;  // 1 MB of float32 weights
  const int64_t per_row = std::max<int64_t>(1, q.size(0) * q.size(1) * k.size(2));
  return std::max<int64_t>(1, kBlockElements / per_row);
}

// Unnormalised weights of one block of query rows, shifted by the row maximum of log sigmoid(s)
// (it cancels in the normalisation): in log space a row stays correct even when all its sigmoids
// underflow (s below about -100 in float32). Masked entries and rows without keys are 0.
struct WeightBlock {
  torch::Tensor scores;   // s = q k^T
  torch::Tensor weights;  // exp(log sigmoid(s) - row maximum)
  torch::Tensor row_sum;  // sum_j weights, 1 for a row without keys (whose output must be 0)
};

WeightBlock weight_block(const torch::Tensor& q_block, const torch::Tensor& k,
                         const torch::Tensor& allowed_block) {
  WeightBlock block;
  block.scores = q_block.matmul(k.transpose(-2, -1));
  torch::Tensor log_weights = torch::log_sigmoid(block.scores);
  if (allowed_block.defined()) {
    log_weights.masked_fill_(allowed_block.unsqueeze(1).logical_not(),  // over heads
                             -std::numeric_limits<double>::infinity());
  }
  torch::Tensor row_max = log_weights.amax({-1}, /*keepdim=*/true);
  row_max.masked_fill_(torch::isinf(row_max), 0.0);
  block.weights = log_weights.sub_(row_max).exp_();
  // A row with a key sums to at least exp(0) = 1; an empty row sums to 0.
  block.row_sum = block.weights.sum(-1, /*keepdim=*/true);
  block.row_sum.masked_fill_(block.row_sum == 0, 1.0);
  return block;
}

// The mask travels outside the variable list: it may be undefined (every key allowed), which
// autograd's inputs may not be.
struct KeyMask {
  torch::Tensor allowed;  // (patterns, queries, keys) bool, or undefined for every key
};

// sigmoid(s_ij) v_j / sum_j sigmoid(s_ij) in blocks of query rows, so that no N x N matrix is
// ever held: memory O(block x N) instead of several N x N matrices, which also keeps each
// elementwise pass in cache. The backward recomputes each block's weights (one more q k^T).
class SigmoidDiffusivityFunction : public torch::autograd::Function<SigmoidDiffusivityFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& q,
                               const torch::Tensor& k, const torch::Tensor& v, KeyMask mask) {
    const torch::Tensor& allowed = mask.allowed;
    const int64_t rows = q.size(2), step = block_rows(q, k);
    torch::Tensor out = torch::empty({q.size(0), q.size(1), rows, v.size(3)}, q.options());
    for (int64_t begin = 0; begin < rows; begin += step) {
      const int64_t end = std::min(rows, begin + step);
      const WeightBlock block =
          weight_block(q.slice(2, begin, end), k, mask_rows(allowed, begin, end));
      out.slice(2, begin, end).copy_(block.weights.matmul(v).div_(block.row_sum));
    }
    ctx->save_for_backward({q, k, v, out});
    if (allowed.defined()) ctx->saved_data["allowed"] = allowed;
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &q = saved[0], &k = saved[1], &v = saved[2], &out = saved[3];
    const torch::Tensor allowed = ctx->saved_data.count("allowed") != 0
                                      ? ctx->saved_data["allowed"].toTensor()
                                      : torch::Tensor();
    const torch::Tensor& grad_out = grad_outputs[0];
    torch::Tensor grad_q = torch::empty_like(q, at::MemoryFormat::Contiguous);
    torch::Tensor grad_k = torch::zeros_like(k, at::MemoryFormat::Contiguous);
    torch::Tensor grad_v = torch::zeros_like(v, at::MemoryFormat::Contiguous);
    const int64_t rows = q.size(2), step = block_rows(q, k);
    for (int64_t begin = 0; begin < rows; begin += step) {
      const int64_t end = std::min(rows, begin + step);
      const torch::Tensor q_block = q.slice(2, begin, end);
      const torch::Tensor grad_block = grad_out.slice(2, begin, end);
      WeightBlock block = weight_block(q_block, k, mask_rows(allowed, begin, end));
      const torch::Tensor& sum = block.row_sum;
      // out_i = sum_j w_ij v_j / r_i with r_i = sum_j w_ij, so
      // dL/dw_ij = g_i . (v_j - out_i) / r_i, and dw_ij/ds_ij = w_ij sigmoid(-s_ij).
      const torch::Tensor grad_dot_out =
          (grad_block * out.slice(2, begin, end)).sum(-1, /*keepdim=*/true);
      torch::Tensor grad_scores = grad_block.matmul(v.transpose(-2, -1));
      grad_scores.sub_(grad_dot_out).div_(sum).mul_(block.weights);
      grad_scores.mul_(block.scores.neg_().sigmoid_());
      grad_q.slice(2, begin, end).copy_(grad_scores.matmul(k));
      grad_k.add_(grad_scores.transpose(-2, -1).matmul(q_block));
      grad_v.add_(block.weights.div_(sum).transpose(-2, -1).matmul(grad_block));
    }
    return {grad_q, grad_k, grad_v, torch::Tensor()};  // none for the mask
  }

 private:
  static torch::Tensor mask_rows(const torch::Tensor& allowed, int64_t begin, int64_t end) {
    return allowed.defined() ? allowed.slice(1, begin, end) : allowed;
  }
};

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
  KeyMask mask;
  if (pattern != nullptr) {
    pattern->check_compatible(q, k);
    mask.allowed = pattern->dense_mask(q.device());
  }
  return SigmoidDiffusivityFunction::apply(q, k, v, mask);
}

}  // namespace structdiff
