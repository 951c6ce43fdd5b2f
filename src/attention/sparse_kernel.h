// Fused neighbour-list softmax attention kernels (CPU). Plain pointers and sizes only, so the
// kernel translation unit needs no heavy torch headers and can be compiled for the host CPU.
#pragma once

#include <cstdint>

namespace structdiff::kernels {

struct SparseAttentionProblem {
  int64_t batch = 0, heads = 0, num_queries = 0, num_keys = 0, head_dim = 0;
  // Strides in elements over (batch, head, token); the head dimension must be contiguous.
  int64_t q_stride[3] = {0, 0, 0};
  int64_t k_stride[3] = {0, 0, 0};
  int64_t v_stride[3] = {0, 0, 0};
  // CSR: num_patterns (1 = shared by the batch, or `batch`) blocks of num_queries + 1 offsets,
  // absolute into col_indices.
  int64_t num_patterns = 1;
  const int64_t* row_offsets = nullptr;
  const int64_t* col_indices = nullptr;
  double scale = 1.0;
};

// out: contiguous (batch, heads, num_queries, head_dim); logsumexp: (batch, heads, num_queries),
// kept for the backward pass. Rows without keys give zeros.
template <typename T>
void sparse_attention_forward(const SparseAttentionProblem& problem, const T* q, const T* k,
                              const T* v, T* out, T* logsumexp);

// grad_out and out are contiguous like the forward output; grad_q, grad_k and grad_v are
// contiguous (batch, heads, tokens, head_dim) and are overwritten.
template <typename T>
void sparse_attention_backward(const SparseAttentionProblem& problem, const T* q, const T* k,
                               const T* v, const T* out, const T* logsumexp, const T* grad_out,
                               T* grad_q, T* grad_k, T* grad_v);

}  // namespace structdiff::kernels
