// The neighbour-list passes: one query row at a time, forward with an online softmax over chunks of
// keys, backward from the kept log-sum-exps.
// Internal to the CPU kernel (sparse_kernel.cpp), compiled once for the host CPU.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "attention/sparse_kernel.h"
#include "attention/sparse_kernel_vector.h"

namespace structdiff::kernels::detail {

// ---- Neighbour lists -----------------------------------------------------------------------

// Offsets of the (batch, head) slices of a strided (batch, head, token, dim) tensor.
struct SliceOffsets {
  int64_t batch_index, head_index;
  int64_t offset(const int64_t stride[3]) const {
    return batch_index * stride[0] + head_index * stride[1];
  }
};

template <typename T, int64_t kDim>
void forward_rows(const SparseAttentionProblem& p, const T* q, const T* k, const T* v, T* out,
                  T* logsumexp, int64_t first_row, int64_t last_row) {
  const int64_t dim = HeadDim<kDim>(p.head_dim).value;
  const T scale = static_cast<T>(p.scale);
  const T neg_inf = -std::numeric_limits<T>::infinity();
  std::vector<T> acc(dim);
  T scores[kKeyChunk];
  for (int64_t flat = first_row; flat < last_row; ++flat) {
    const int64_t row = flat % p.num_queries;
    const int64_t bh = flat / p.num_queries;
    const SliceOffsets slice{bh / p.heads, bh % p.heads};
    const int64_t* offsets =
        p.row_offsets + (p.num_patterns == 1 ? 0 : slice.batch_index) * (p.num_queries + 1);
    const T* q_row = q + slice.offset(p.q_stride) + row * p.q_stride[2];
    const T* k_base = k + slice.offset(p.k_stride);
    const T* v_base = v + slice.offset(p.v_stride);
    T* out_row = out + flat * dim;

    std::fill(acc.begin(), acc.end(), T(0));
    T running_max = neg_inf;
    T running_sum = 0;
    for (int64_t chunk = offsets[row]; chunk < offsets[row + 1]; chunk += kKeyChunk) {
      const int64_t count = std::min(kKeyChunk, offsets[row + 1] - chunk);
      const int64_t* cols = p.col_indices + chunk;
      T chunk_max = neg_inf;
      for (int64_t c = 0; c < count; ++c) {
        scores[c] = scale * dot(q_row, k_base + cols[c] * p.k_stride[2], dim);
        chunk_max = std::max(chunk_max, scores[c]);
      }
      if (chunk_max > running_max) {
        const T shrink = std::exp(running_max - chunk_max);  // 0 for the first chunk
        scale_in_place(shrink, acc.data(), dim);
        running_sum *= shrink;
        running_max = chunk_max;
      }
      for (int64_t c = 0; c < count; ++c) scores[c] -= running_max;
      exp_in_place(scores, count);
      for (int64_t c = 0; c < count; ++c) {
        running_sum += scores[c];
        axpy(scores[c], v_base + cols[c] * p.v_stride[2], acc.data(), dim);
      }
    }
    if (running_sum == 0) {  // no keys: zeros, as the dense path gives
      std::fill(out_row, out_row + dim, T(0));
      logsumexp[flat] = 0;
    } else {  // a NaN score made the sum NaN: the row comes out NaN, as PyTorch's softmax gives
      const T inverse = T(1) / running_sum;
      for (int64_t d = 0; d < dim; ++d) out_row[d] = acc[d] * inverse;
      logsumexp[flat] = running_max + std::log(running_sum);
    }
  }
}

// Backward for rows [first_row, last_row) of one (batch, head) slice. grad_q rows are written;
// grad_k and grad_v (num_keys x dim, this slice or a private buffer) are accumulated into.
template <typename T, int64_t kDim>
void backward_rows(const SparseAttentionProblem& p, int64_t bh, const T* q, const T* k,
                   const T* v, const T* out, const T* logsumexp, const T* grad_out, T* grad_q,
                   T* grad_k, T* grad_v, int64_t first_row, int64_t last_row) {
  const int64_t dim = HeadDim<kDim>(p.head_dim).value;
  const T scale = static_cast<T>(p.scale);
  const SliceOffsets slice{bh / p.heads, bh % p.heads};
  const int64_t* offsets =
      p.row_offsets + (p.num_patterns == 1 ? 0 : slice.batch_index) * (p.num_queries + 1);
  const T* k_base = k + slice.offset(p.k_stride);
  const T* v_base = v + slice.offset(p.v_stride);
  std::vector<T> grad_q_acc(dim);
  for (int64_t row = first_row; row < last_row; ++row) {
    const int64_t flat = bh * p.num_queries + row;
    const T* q_row = q + slice.offset(p.q_stride) + row * p.q_stride[2];
    const T* grad_out_row = grad_out + flat * dim;
    const T row_lse = logsumexp[flat];
    // D_i = dO_i . O_i equals sum_j P_ij (dO_i . v_j), the softmax Jacobian's correction term.
    const T correction = dot(grad_out_row, out + flat * dim, dim);
    std::fill(grad_q_acc.begin(), grad_q_acc.end(), T(0));
    // Chunks of keys: their probabilities exponentiated together, then the three updates.
    T probs[kKeyChunk], grad_outs_dot_v[kKeyChunk];
    for (int64_t chunk = offsets[row]; chunk < offsets[row + 1]; chunk += kKeyChunk) {
      const int64_t count = std::min(kKeyChunk, offsets[row + 1] - chunk);
      const int64_t* cols = p.col_indices + chunk;
      for (int64_t c = 0; c < count; ++c) {
        probs[c] = scale * dot(q_row, k_base + cols[c] * p.k_stride[2], dim) - row_lse;
        grad_outs_dot_v[c] = dot(grad_out_row, v_base + cols[c] * p.v_stride[2], dim);
      }
      exp_in_place(probs, count);
      for (int64_t c = 0; c < count; ++c) {
        const int64_t col = cols[c];
        const T grad_score = probs[c] * (grad_outs_dot_v[c] - correction);
        axpy(probs[c], grad_out_row, grad_v + col * dim, dim);
        axpy(grad_score, k_base + col * p.k_stride[2], grad_q_acc.data(), dim);
        axpy(grad_score * scale, q_row, grad_k + col * dim, dim);
      }
    }
    T* grad_q_row = grad_q + flat * dim;
    for (int64_t d = 0; d < dim; ++d) grad_q_row[d] = grad_q_acc[d] * scale;
  }
}

}  // namespace structdiff::kernels::detail
