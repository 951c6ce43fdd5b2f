// Fused neighbour-list softmax attention. One pass per query row with an online softmax over
// chunks of keys; no gathered (tokens x degree x head_dim) tensors and no dense score matrix.
// The head dimension is a template parameter for the common sizes so the inner loops are fully
// unrolled and vectorised; kRuntimeDim handles any other size.
#include "attention/sparse_kernel.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <ATen/Parallel.h>

namespace structdiff::kernels {
namespace {

constexpr int64_t kRuntimeDim = 0;
// Keys scored together before the running maximum is updated: amortises the rescaling of the
// accumulator while keeping the score buffer on the stack.
constexpr int64_t kKeyChunk = 32;

template <int64_t kDim>
struct HeadDim {
  explicit HeadDim(int64_t runtime) : value(kDim == kRuntimeDim ? runtime : kDim) {}
  int64_t value;
};

// Forced inline so that a compile-time head dimension reaches the loops and they unroll into a
// few vector instructions; GCC otherwise keeps dot as a call with a generic loop.
template <typename T>
[[gnu::always_inline]] inline T dot(const T* __restrict a, const T* __restrict b, int64_t n) {
  T sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

template <typename T>
[[gnu::always_inline]] inline void axpy(T alpha, const T* __restrict x, T* __restrict y,
                                        int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

template <typename T>
[[gnu::always_inline]] inline void scale_in_place(T alpha, T* __restrict y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] *= alpha;
}

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
      for (int64_t c = 0; c < count; ++c) {
        const T weight = std::exp(scores[c] - running_max);
        running_sum += weight;
        axpy(weight, v_base + cols[c] * p.v_stride[2], acc.data(), dim);
      }
    }
    if (running_sum > 0) {
      const T inverse = T(1) / running_sum;
      for (int64_t d = 0; d < dim; ++d) out_row[d] = acc[d] * inverse;
      logsumexp[flat] = running_max + std::log(running_sum);
    } else {
      std::fill(out_row, out_row + dim, T(0));
      logsumexp[flat] = 0;
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
    for (int64_t e = offsets[row]; e < offsets[row + 1]; ++e) {
      const int64_t col = p.col_indices[e];
      const T* k_row = k_base + col * p.k_stride[2];
      const T* v_row = v_base + col * p.v_stride[2];
      const T prob = std::exp(scale * dot(q_row, k_row, dim) - row_lse);
      const T grad_score = prob * (dot(grad_out_row, v_row, dim) - correction);
      axpy(prob, grad_out_row, grad_v + col * dim, dim);
      axpy(grad_score, k_row, grad_q_acc.data(), dim);
      axpy(grad_score * scale, q_row, grad_k + col * dim, dim);
    }
    T* grad_q_row = grad_q + flat * dim;
    for (int64_t d = 0; d < dim; ++d) grad_q_row[d] = grad_q_acc[d] * scale;
  }
}

template <typename T, int64_t kDim>
void forward_impl(const SparseAttentionProblem& p, const T* q, const T* k, const T* v, T* out,
                  T* logsumexp) {
  const int64_t total_rows = p.batch * p.heads * p.num_queries;
  at::parallel_for(0, total_rows, 64, [&](int64_t begin, int64_t end) {
    forward_rows<T, kDim>(p, q, k, v, out, logsumexp, begin, end);
  });
}

template <typename T, int64_t kDim>
void backward_impl(const SparseAttentionProblem& p, const T* q, const T* k, const T* v,
                   const T* out, const T* logsumexp, const T* grad_out, T* grad_q, T* grad_k,
                   T* grad_v) {
  const int64_t dim = p.head_dim;
  const int64_t slices = p.batch * p.heads;
  const int64_t key_block = p.num_keys * dim;
  std::fill(grad_k, grad_k + slices * key_block, T(0));
  std::fill(grad_v, grad_v + slices * key_block, T(0));
  const int64_t threads = at::get_num_threads();
  if (slices >= threads) {
    // Each thread owns whole (batch, head) slices, so the scatter into grad_k/grad_v is race-free.
    at::parallel_for(0, slices, 1, [&](int64_t begin, int64_t end) {
      for (int64_t bh = begin; bh < end; ++bh) {
        backward_rows<T, kDim>(p, bh, q, k, v, out, logsumexp, grad_out, grad_q,
                               grad_k + bh * key_block, grad_v + bh * key_block, 0,
                               p.num_queries);
      }
    });
    return;
  }
  // Few slices: split rows across threads, each scattering into a private key buffer.
  std::vector<std::vector<T>> private_k(threads, std::vector<T>(key_block));
  std::vector<std::vector<T>> private_v(threads, std::vector<T>(key_block));
  for (int64_t bh = 0; bh < slices; ++bh) {
    at::parallel_for(0, p.num_queries, 16, [&](int64_t begin, int64_t end) {
      const int64_t id = at::get_thread_num();
      backward_rows<T, kDim>(p, bh, q, k, v, out, logsumexp, grad_out, grad_q,
                             private_k[id].data(), private_v[id].data(), begin, end);
    });
    for (int64_t id = 0; id < threads; ++id) {
      axpy(T(1), private_k[id].data(), grad_k + bh * key_block, key_block);
      axpy(T(1), private_v[id].data(), grad_v + bh * key_block, key_block);
      std::fill(private_k[id].begin(), private_k[id].end(), T(0));
      std::fill(private_v[id].begin(), private_v[id].end(), T(0));
    }
  }
}

template <typename Fn>
void dispatch_head_dim(int64_t dim, Fn&& fn) {
  switch (dim) {
    case 8: fn(std::integral_constant<int64_t, 8>{}); break;
    case 16: fn(std::integral_constant<int64_t, 16>{}); break;
    case 32: fn(std::integral_constant<int64_t, 32>{}); break;
    case 64: fn(std::integral_constant<int64_t, 64>{}); break;
    case 128: fn(std::integral_constant<int64_t, 128>{}); break;
    default: fn(std::integral_constant<int64_t, kRuntimeDim>{}); break;
  }
}

}  // namespace

template <typename T>
void sparse_attention_forward(const SparseAttentionProblem& problem, const T* q, const T* k,
                              const T* v, T* out, T* logsumexp) {
  dispatch_head_dim(problem.head_dim, [&](auto dim) {
    forward_impl<T, decltype(dim)::value>(problem, q, k, v, out, logsumexp);
  });
}

template <typename T>
void sparse_attention_backward(const SparseAttentionProblem& problem, const T* q, const T* k,
                               const T* v, const T* out, const T* logsumexp, const T* grad_out,
                               T* grad_q, T* grad_k, T* grad_v) {
  dispatch_head_dim(problem.head_dim, [&](auto dim) {
    backward_impl<T, decltype(dim)::value>(problem, q, k, v, out, logsumexp, grad_out, grad_q,
                                           grad_k, grad_v);
  });
}

template void sparse_attention_forward<float>(const SparseAttentionProblem&, const float*,
                                              const float*, const float*, float*, float*);
template void sparse_attention_forward<double>(const SparseAttentionProblem&, const double*,
                                               const double*, const double*, double*, double*);
template void sparse_attention_backward<float>(const SparseAttentionProblem&, const float*,
                                               const float*, const float*, const float*,
                                               const float*, const float*, float*, float*,
                                               float*);
template void sparse_attention_backward<double>(const SparseAttentionProblem&, const double*,
                                                const double*, const double*, const double*,
                                                const double*, const double*, double*, double*,
                                                double*);

}  // namespace structdiff::kernels
