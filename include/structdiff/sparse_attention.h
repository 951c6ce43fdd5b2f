// The fused sparse attention kernels as functions of raw CSR tensors: the forward and backward
// passes without autograd, and the one autograd wiring of them (sparse_attention_csr), which
// structdiff::sparse_attention and the PyTorch operator (src/ops/torch_ops.cpp) both use. Layouts as PatternBatch's: row_offsets (P, num_queries + 1)
// int64, absolute into col_indices, P = 1 (shared) or the batch; on the inputs' device.
#pragma once

#include <cstdint>
#include <utility>

#include <torch/types.h>

namespace structdiff {

// Throws std::invalid_argument naming what is wrong unless the CSR tensors describe P patterns of
// num_queries x num_keys with P = 1 or `batch`: int64 on `device`, offsets starting at 0 and
// never decreasing, every key index in [0, num_keys). PatternBatch holds such tensors by
// construction; tensors from elsewhere (Python) are checked with this.
void check_csr(const torch::Tensor& row_offsets, const torch::Tensor& col_indices, int64_t batch,
               int64_t num_queries, int64_t num_keys, torch::Device device);

// The transpose of CSR tensors (on the CPU): (P, num_keys + 1) offsets, absolute, into the query
// of each entry, ascending within a key.
std::pair<torch::Tensor, torch::Tensor> transpose_csr(const torch::Tensor& row_offsets,
                                                      const torch::Tensor& col_indices,
                                                      int64_t num_queries, int64_t num_keys);

struct SparseAttentionOutput {
  torch::Tensor out;        // (batch, heads, queries, head_dim), contiguous
  torch::Tensor logsumexp;  // (batch, heads, queries): the softmax normalisers, for backward
};
// Q, K, V (batch, heads, tokens, head_dim), float32 or float64, the head dimension of each
// contiguous; on the CPU or a GPU (builds with CUDA kernels). Rows without keys give zeros.
SparseAttentionOutput sparse_attention_forward(const torch::Tensor& q, const torch::Tensor& k,
                                               const torch::Tensor& v,
                                               const torch::Tensor& row_offsets,
                                               const torch::Tensor& col_indices, double scale);

struct SparseAttentionGradients {
  torch::Tensor q, k, v;
};
// key_offsets / key_queries: the transposed pattern, read on a GPU only (may be undefined on the
// CPU).
SparseAttentionGradients sparse_attention_backward(
    const torch::Tensor& grad_out, const torch::Tensor& q, const torch::Tensor& k,
    const torch::Tensor& v, const torch::Tensor& out, const torch::Tensor& logsumexp,
    const torch::Tensor& row_offsets, const torch::Tensor& col_indices,
    const torch::Tensor& key_offsets, const torch::Tensor& key_queries, double scale);

// sparse_attention_forward, differentiable in Q, K and V (the backward pass above). The caller
// has checked the inputs (check_qkv, check_csr).
torch::Tensor sparse_attention_csr(const torch::Tensor& q, const torch::Tensor& k,
                                   const torch::Tensor& v, const torch::Tensor& row_offsets,
                                   const torch::Tensor& col_indices, double scale);

}  // namespace structdiff
