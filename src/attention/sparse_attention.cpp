// The fused neighbour-list kernels: on raw CSR tensors, and differentiable over a PatternBatch.
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <torch/autograd.h>

#include "attention/sparse_kernel.h"
#include "structdiff/attention.h"
#include "structdiff/sparse_attention.h"

namespace structdiff {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The CPU kernels' dense tiles, from PatternBatch's packed tensors (empty: none).
kernels::TilePlanView view_tiles(const torch::Tensor& tile_index, const torch::Tensor& tile_owned,
                                 int64_t num_queries) {
  if (!tile_index.defined() || tile_index.numel() == 0) return {};
  return kernels::view_packed_tiles(tile_index.data_ptr<int64_t>(),
                                    tile_owned.data_ptr<uint8_t>(), num_queries);
}

kernels::SparseAttentionProblem describe(const torch::Tensor& q, const torch::Tensor& k,
                                         const torch::Tensor& v, const torch::Tensor& row_offsets,
                                         const torch::Tensor& col_indices, double scale,
                                         kernels::TilePlanView tiles) {
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
  problem.tiles = tiles;
  return problem;
}

// The kernels need the head dimension contiguous; other strides are passed through.
torch::Tensor with_contiguous_rows(const torch::Tensor& t) {
  return t.stride(3) == 1 ? t : t.contiguous();
}

// The forward pass's results; tile_probabilities is empty unless the backward pass is to read the
// tiles' probabilities from it.
struct ForwardResult : SparseAttentionOutput {
  torch::Tensor tile_probabilities;
};

ForwardResult forward_on_pattern(const torch::Tensor& q_in, const torch::Tensor& k_in,
                                 const torch::Tensor& v_in, const torch::Tensor& row_offsets,
                                 const torch::Tensor& col_indices, double scale,
                                 kernels::TilePlanView tiles, bool keep_tile_probabilities) {
  const torch::Tensor q = with_contiguous_rows(q_in), k = with_contiguous_rows(k_in),
                      v = with_contiguous_rows(v_in);
  ForwardResult result;
  result.out = torch::empty(q.sizes(), q.options());
  result.logsumexp = torch::empty({q.size(0), q.size(1), q.size(2)}, q.options());
  const auto problem = describe(q, k, v, row_offsets, col_indices, scale, tiles);
  const int64_t kept = keep_tile_probabilities && q.device().is_cpu()
                           ? kernels::tile_probability_elements(problem)
                           : 0;
  result.tile_probabilities = torch::empty({kept}, q.options());
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "sparse_attention_forward", [&] {
    if (q.is_cuda()) {
      kernels::sparse_attention_forward_cuda<scalar_t>(
          problem, q.get_device(), q.data_ptr<scalar_t>(), k.data_ptr<scalar_t>(),
          v.data_ptr<scalar_t>(), result.out.data_ptr<scalar_t>(),
          result.logsumexp.data_ptr<scalar_t>());
    } else {
      kernels::sparse_attention_forward<scalar_t>(
          problem, q.data_ptr<scalar_t>(), k.data_ptr<scalar_t>(), v.data_ptr<scalar_t>(),
          result.out.data_ptr<scalar_t>(), result.logsumexp.data_ptr<scalar_t>(),
          kept ? result.tile_probabilities.data_ptr<scalar_t>() : nullptr);
    }
  });
  return result;
}

SparseAttentionGradients backward_on_pattern(
    const torch::Tensor& grad_out_in, const torch::Tensor& q_in, const torch::Tensor& k_in,
    const torch::Tensor& v_in, const torch::Tensor& out, const torch::Tensor& logsumexp,
    const torch::Tensor& row_offsets, const torch::Tensor& col_indices,
    const torch::Tensor& key_offsets, const torch::Tensor& key_queries,
    const torch::Tensor& tile_probabilities, double scale, kernels::TilePlanView tiles) {
  const torch::Tensor q = with_contiguous_rows(q_in), k = with_contiguous_rows(k_in),
                      v = with_contiguous_rows(v_in);
  const auto problem = describe(q, k, v, row_offsets, col_indices, scale, tiles);
  const torch::Tensor grad_out = grad_out_in.contiguous();
  SparseAttentionGradients grads{torch::empty(q.sizes(), q.options()),
                                 torch::empty(k.sizes(), k.options()),
                                 torch::empty(v.sizes(), v.options())};
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "sparse_attention_backward", [&] {
    if (q.is_cuda()) {
      torch::Tensor delta = torch::empty_like(logsumexp);
      kernels::sparse_attention_backward_cuda<scalar_t>(
          problem, q.get_device(), key_offsets.data_ptr<int64_t>(), key_queries.data_ptr<int64_t>(),
          q.data_ptr<scalar_t>(), k.data_ptr<scalar_t>(), v.data_ptr<scalar_t>(),
          out.data_ptr<scalar_t>(), logsumexp.data_ptr<scalar_t>(), grad_out.data_ptr<scalar_t>(),
          delta.data_ptr<scalar_t>(), grads.q.data_ptr<scalar_t>(), grads.k.data_ptr<scalar_t>(),
          grads.v.data_ptr<scalar_t>());
    } else {
      kernels::sparse_attention_backward<scalar_t>(
          problem, q.data_ptr<scalar_t>(), k.data_ptr<scalar_t>(), v.data_ptr<scalar_t>(),
          out.data_ptr<scalar_t>(), logsumexp.data_ptr<scalar_t>(), grad_out.data_ptr<scalar_t>(),
          tile_probabilities.defined() && tile_probabilities.numel() > 0
              ? tile_probabilities.data_ptr<scalar_t>()
              : nullptr,
          grads.q.data_ptr<scalar_t>(), grads.k.data_ptr<scalar_t>(), grads.v.data_ptr<scalar_t>());
    }
  });
  return grads;
}

class SparseAttentionFunction : public torch::autograd::Function<SparseAttentionFunction> {
 public:
  // key_offsets / key_queries: the transposed pattern, which only the CUDA backward reads;
  // tile_index / tile_owned: the CPU kernels' dense tiles (empty tensors where unused), whose
  // probabilities are kept for the backward pass when a gradient will be asked for.
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& q,
                               const torch::Tensor& k, const torch::Tensor& v,
                               const torch::Tensor& row_offsets, const torch::Tensor& col_indices,
                               const torch::Tensor& key_offsets,
                               const torch::Tensor& key_queries, const torch::Tensor& tile_index,
                               const torch::Tensor& tile_owned, double scale,
                               bool needs_gradient) {
    const ForwardResult result =
        forward_on_pattern(q, k, v, row_offsets, col_indices, scale,
                           view_tiles(tile_index, tile_owned, q.size(2)), needs_gradient);
    ctx->save_for_backward({q, k, v, result.out, result.logsumexp, row_offsets, col_indices,
                            key_offsets, key_queries, tile_index, tile_owned,
                            result.tile_probabilities});
    ctx->saved_data["scale"] = scale;
    ctx->mark_non_differentiable({result.logsumexp});
    return {result.out, result.logsumexp};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const SparseAttentionGradients grads = backward_on_pattern(
        grad_outputs[0], saved[0], saved[1], saved[2], saved[3], saved[4], saved[5], saved[6],
        saved[7], saved[8], saved[11], ctx->saved_data["scale"].toDouble(),
        view_tiles(saved[9], saved[10], saved[0].size(2)));
    const torch::Tensor none;
    return {grads.q, grads.k, grads.v, none, none, none, none, none, none, none, none};
  }
};

}  // namespace

void check_csr(const torch::Tensor& row_offsets, const torch::Tensor& col_indices, int64_t batch,
               int64_t num_queries, int64_t num_keys, torch::Device device) {
  for (const auto& [tensor, name] : {std::pair<const torch::Tensor&, const char*>{row_offsets, "row_offsets"},
                                     {col_indices, "col_indices"}}) {
    if (!tensor.defined() || tensor.scalar_type() != torch::kLong) {
      throw std::invalid_argument(std::string("pattern ") + name + " must be an int64 tensor");
    }
    if (tensor.device() != device) {
      throw std::invalid_argument(std::string("pattern ") + name + " is on " + tensor.device().str() +
                                  " but the inputs are on " + device.str());
    }
  }
  if (row_offsets.dim() != 2 || row_offsets.size(1) != num_queries + 1 ||
      (row_offsets.size(0) != 1 && row_offsets.size(0) != batch)) {
    throw std::invalid_argument("pattern row_offsets must be (1 or " + std::to_string(batch) +
                                ", " + std::to_string(num_queries + 1) + ") for " +
                                std::to_string(num_queries) + " queries, got " +
                                c10::str(row_offsets.sizes()));
  }
  if (col_indices.dim() != 1) {
    throw std::invalid_argument("pattern col_indices must be one-dimensional, got " +
                                c10::str(col_indices.sizes()));
  }
  const torch::Tensor offsets = row_offsets.cpu().contiguous(), cols = col_indices.cpu();
  const int64_t* o = offsets.data_ptr<int64_t>();
  const int64_t patterns = offsets.size(0), width = num_queries + 1;
  int64_t expected_first = 0;
  for (int64_t p = 0; p < patterns; ++p) {
    if (o[p * width] != expected_first) {
      throw std::invalid_argument("pattern " + std::to_string(p) + "'s row_offsets start at " +
                                  std::to_string(o[p * width]) + ", expected " +
                                  std::to_string(expected_first) +
                                  " (offsets are absolute across the patterns)");
    }
    for (int64_t row = 0; row < num_queries; ++row) {
      if (o[p * width + row + 1] < o[p * width + row]) {
        throw std::invalid_argument("pattern " + std::to_string(p) + "'s row_offsets decrease at row " +
                                    std::to_string(row));
      }
    }
    expected_first = o[p * width + num_queries];
  }
  if (expected_first != cols.numel()) {
    throw std::invalid_argument("pattern row_offsets end at " + std::to_string(expected_first) +
                                " but col_indices holds " + std::to_string(cols.numel()) + " entries");
  }
  if (cols.numel() > 0) {
    const int64_t lowest = cols.min().item<int64_t>(), highest = cols.max().item<int64_t>();
    if (lowest < 0 || highest >= num_keys) {
      throw std::invalid_argument("pattern key index " + std::to_string(lowest < 0 ? lowest : highest) +
                                  " is out of range for " + std::to_string(num_keys) + " keys");
    }
  }
}

std::pair<torch::Tensor, torch::Tensor> transpose_csr(const torch::Tensor& row_offsets,
                                                      const torch::Tensor& col_indices,
                                                      int64_t num_queries, int64_t num_keys) {
  const torch::Tensor offsets_in = row_offsets.cpu().contiguous(), cols_in = col_indices.cpu().contiguous();
  const int64_t patterns = offsets_in.size(0);
  torch::Tensor key_offsets = torch::zeros({patterns, num_keys + 1}, torch::kLong);
  torch::Tensor key_queries = torch::empty({cols_in.numel()}, torch::kLong);
  auto out_offsets = key_offsets.accessor<int64_t, 2>();
  auto offsets = offsets_in.accessor<int64_t, 2>();
  const int64_t* cols = cols_in.data_ptr<int64_t>();
  int64_t* query_of = key_queries.data_ptr<int64_t>();
  for (int64_t p = 0; p < patterns; ++p) {
    const int64_t first = offsets[p][0], last = offsets[p][num_queries];
    // Counting sort of the entries by key: count, prefix-sum, then place in query order.
    std::vector<int64_t> next(num_keys + 1, 0);
    for (int64_t e = first; e < last; ++e) ++next[cols[e] + 1];
    for (int64_t key = 0; key < num_keys; ++key) next[key + 1] += next[key];
    for (int64_t key = 0; key <= num_keys; ++key) out_offsets[p][key] = first + next[key];
    for (int64_t row = 0; row < num_queries; ++row) {
      for (int64_t e = offsets[p][row]; e < offsets[p][row + 1]; ++e) {
        query_of[first + next[cols[e]]++] = row;
      }
    }
  }
  return {key_offsets, key_queries};
}

SparseAttentionOutput sparse_attention_forward(const torch::Tensor& q, const torch::Tensor& k,
                                               const torch::Tensor& v,
                                               const torch::Tensor& row_offsets,
                                               const torch::Tensor& col_indices, double scale) {
  return forward_on_pattern(q, k, v, row_offsets, col_indices, scale, {}, false);
}

SparseAttentionGradients sparse_attention_backward(
    const torch::Tensor& grad_out, const torch::Tensor& q, const torch::Tensor& k,
    const torch::Tensor& v, const torch::Tensor& out, const torch::Tensor& logsumexp,
    const torch::Tensor& row_offsets, const torch::Tensor& col_indices,
    const torch::Tensor& key_offsets, const torch::Tensor& key_queries, double scale) {
  return backward_on_pattern(grad_out, q, k, v, out, logsumexp, row_offsets, col_indices,
                             key_offsets, key_queries, torch::Tensor(), scale, {});
}

namespace {

// Throws std::invalid_argument unless sparse attention has kernels for the inputs' device.
void check_kernel_device(const torch::Tensor& q) {
  if (q.is_cuda() && !kernels::cuda_kernels_built()) {
    throw std::invalid_argument(
        "sparse attention on " + q.device().str() +
        " needs the CUDA kernels, which this build lacks (use dense or gather, or build against "
        "a CUDA libtorch with nvcc on the PATH)");
  }
  if (!q.is_cuda() && !q.device().is_cpu()) {
    throw std::invalid_argument("sparse attention has CPU and CUDA kernels only, not " +
                                q.device().str() + "; use dense or gather there");
  }
}

bool needs_gradient(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  return torch::GradMode::is_enabled() &&
         (q.requires_grad() || k.requires_grad() || v.requires_grad());
}

}  // namespace

torch::Tensor sparse_attention_csr(const torch::Tensor& q, const torch::Tensor& k,
                                   const torch::Tensor& v, const torch::Tensor& row_offsets,
                                   const torch::Tensor& col_indices, double scale) {
  check_kernel_device(q);
  // The CPU backward needs no transposed pattern, the CUDA one no tiles; libtorch 1.13's
  // Function::apply takes defined tensors only.
  const torch::Tensor unused = torch::empty({0}, torch::kLong);
  torch::Tensor key_offsets = unused, key_queries = unused;
  if (q.is_cuda()) {
    std::tie(key_offsets, key_queries) =
        transpose_csr(row_offsets, col_indices, q.size(2), k.size(2));
    key_offsets = key_offsets.to(q.device());
    key_queries = key_queries.to(q.device());
  }
  return SparseAttentionFunction::apply(q, k, v, row_offsets, col_indices, key_offsets,
                                        key_queries, unused, unused, scale,
                                        needs_gradient(q, k, v))[0];
}

torch::Tensor sparse_attention(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, const PatternBatch& pattern,
                               Scaling scaling) {
  check_qkv(q, k, v);
  pattern.check_compatible(q, k);
  if (v.size(3) != q.size(3)) {
    throw std::invalid_argument("sparse attention needs V's head_dim (" +
                                std::to_string(v.size(3)) + ") equal to Q's (" +
                                std::to_string(q.size(3)) + ")");
  }
  check_kernel_device(q);
  const double scale = scale_factor(scaling, q.size(3));
  const torch::Tensor unused = torch::empty({0}, torch::kLong);
  if (q.is_cuda()) {
    const torch::Device device = q.device();
    return SparseAttentionFunction::apply(q, k, v, pattern.row_offsets(device),
                                          pattern.col_indices(device), pattern.key_offsets(device),
                                          pattern.key_queries(device), unused, unused, scale,
                                          needs_gradient(q, k, v))[0];
  }
  // On the CPU the pattern's dense tiles go to the kernels too.
  return SparseAttentionFunction::apply(q, k, v, pattern.row_offsets(), pattern.col_indices(),
                                        unused, unused, pattern.tile_index(),
                                        pattern.tile_owned(), scale, needs_gradient(q, k, v))[0];
}

}  // namespace structdiff
