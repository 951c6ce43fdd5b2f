// Fused neighbour-list softmax attention kernels, for the CPU and for CUDA. Plain pointers and
// sizes only, so the kernel translation units need no heavy torch headers: the CPU one is compiled
// for the host CPU, the CUDA one by nvcc.
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

// ---- CUDA (sparse_kernel_cuda.cu; builds without CUDA link sparse_kernel_no_cuda.cpp) ----------
// Every pointer, the problem's CSR included, is on GPU `device`; kernels run on its current
// stream. Layouts as above. The backward pass also takes the transposed pattern (key_offsets:
// num_patterns blocks of num_keys + 1 offsets into key_queries, the query of each entry) and
// `delta`, scratch of batch * heads * num_queries elements. It adds no atomics: its results are
// the same on every run.

// Whether this build has the CUDA kernels.
bool cuda_kernels_built();

template <typename T>
void sparse_attention_forward_cuda(const SparseAttentionProblem& problem, int device, const T* q,
                                   const T* k, const T* v, T* out, T* logsumexp);

template <typename T>
void sparse_attention_backward_cuda(const SparseAttentionProblem& problem, int device,
                                    const int64_t* key_offsets, const int64_t* key_queries,
                                    const T* q, const T* k, const T* v, const T* out,
                                    const T* logsumexp, const T* grad_out, T* delta, T* grad_q,
                                    T* grad_k, T* grad_v);

}  // namespace structdiff::kernels
