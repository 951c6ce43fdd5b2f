// Autograd wrapper around the fused neighbour-list kernels.
#include <torch/autograd.h>

#include "attention/sparse_kernel.h"
#include "structdiff/attention.h"

namespace structdiff {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

kernels::SparseAttentionProblem describe(const torch::Tensor& q, const torch::Tensor& k,
                                         const torch::Tensor& v, const torch::Tensor& row_offsets,
                                         const torch::Tensor& col_indices, double scale) {
  kernels::SparseAttentionProblem problem;
  problem.batch = q.size(0);
  problem.heads = q.size(1);
  problem.num_queries = q.size(2);
  problem.num_keys = k.size(2);
  problem.head_dim = q.size(3);
  for (int i = 0; i < 3; ++i) {
    problem.q_stride[i] = q.stride(i);
    problem.k_stride[i] = k.stride(i);
    problem.v_stride[i] = v.stride(i);
  }
  problem.num_patterns = row_offsets.size(0);
  problem.row_offsets = row_offsets.data_ptr<int64_t>();
  problem.col_indices = col_indices.data_ptr<int64_t>();
  problem.scale = scale;
  return problem;
}

// The kernels need the head dimension contiguous; other strides are passed through.
torch::Tensor with_contiguous_rows(const torch::Tensor& t) {
  return t.stride(3) == 1 ? t : t.contiguous();
}

class SparseAttentionFunction : public torch::autograd::Function<SparseAttentionFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& q_in,
                               const torch::Tensor& k_in, const torch::Tensor& v_in,
                               const torch::Tensor& row_offsets, const torch::Tensor& col_indices,
                               double scale) {
    torch::Tensor q = with_contiguous_rows(q_in), k = with_contiguous_rows(k_in),
                  v = with_contiguous_rows(v_in);
    torch::Tensor out = torch::empty(q.sizes(), q.options());
    torch::Tensor logsumexp = torch::empty({q.size(0), q.size(1), q.size(2)}, q.options());
    const auto problem = describe(q, k, v, row_offsets, col_indices, scale);
    AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "sparse_attention_forward", [&] {
      kernels::sparse_attention_forward<scalar_t>(
          problem, q.data_ptr<scalar_t>(), k.data_ptr<scalar_t>(), v.data_ptr<scalar_t>(),
          out.data_ptr<scalar_t>(), logsumexp.data_ptr<scalar_t>());
    });
    ctx->save_for_backward({q, k, v, out, logsumexp, row_offsets, col_indices});
    ctx->saved_data["scale"] = scale;
    ctx->mark_non_differentiable({logsumexp});
    return {out, logsumexp};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &q = saved[0], &k = saved[1], &v = saved[2], &out = saved[3],
                        &logsumexp = saved[4];
    const auto problem = describe(q, k, v, saved[5], saved[6], ctx->saved_data["scale"].toDouble());
    torch::Tensor grad_out = grad_outputs[0].contiguous();
    torch::Tensor grad_q = torch::empty(q.sizes(), q.options());
    torch::Tensor grad_k = torch::empty(k.sizes(), k.options());
    torch::Tensor grad_v = torch::empty(v.sizes(), v.options());
    AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "sparse_attention_backward", [&] {
      kernels::sparse_attention_backward<scalar_t>(
          problem, q.data_ptr<scalar_t>(), k.data_ptr<scalar_t>(), v.data_ptr<scalar_t>(),
          out.data_ptr<scalar_t>(), logsumexp.data_ptr<scalar_t>(),
          grad_out.data_ptr<scalar_t>(), grad_q.data_ptr<scalar_t>(),
          grad_k.data_ptr<scalar_t>(), grad_v.data_ptr<scalar_t>());
    });
    return {grad_q, grad_k, grad_v, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor sparse_attention(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, const PatternBatch& pattern,
                               Scaling scaling) {
  check_qkv(q, k, v);
  pattern.check_compatible(q, k);
  if (!q.device().is_cpu()) {
    throw std::invalid_argument("sparse attention has CPU kernels only; use dense or gather on " +
                                q.device().str());
  }
  if (v.size(3) != q.size(3)) {
    throw std::invalid_argument("sparse attention needs V's head_dim (" +
                                std::to_string(v.size(3)) + ") equal to Q's (" +
                                std::to_string(q.size(3)) + ")");
  }
  return SparseAttentionFunction::apply(q, k, v, pattern.row_offsets(), pattern.col_indices(),
                                        scale_factor(scaling, q.size(3)))[0];
}

}  // namespace structdiff
