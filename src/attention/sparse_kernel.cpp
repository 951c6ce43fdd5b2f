// Fused neighbour-list softmax attention. One pass per query row with an online softmax over
// chunks of keys; no gathered (tokens x degree x head_dim) tensors and no dense score matrix.
// The head dimension is a template parameter for the common sizes so the inner loops are fully
// unrolled and vectorised; kRuntimeDim handles any other size. This file drives the passes:
// sparse_kernel_vector.h (vector math), sparse_kernel_lists.h (neighbour-list passes),
// sparse_kernel_gemm.h (the tiles' register GEMM), sparse_kernel_tiles.h (dense-tile passes).
#include "attention/sparse_kernel.h"

#include <algorithm>
#include <atomic>
#include <tuple>
#include <vector>

#include <ATen/Parallel.h>

#include "attention/sparse_kernel_lists.h"
#include "attention/sparse_kernel_tiles.h"
#include "attention/sparse_kernel_vector.h"

namespace structdiff::kernels {
namespace {

using namespace detail;

// Dense tiles are computed a whole slice per thread (their rows scatter into any of the slice's
// rows), so they pay only with a slice for every thread.
bool use_tiles(const SparseAttentionProblem& p) {
  return p.tiles.num_tiles > 0 && p.head_dim % kTileColumnBlock == 0 &&
         p.batch * p.heads >= at::get_num_threads();
}

// fn(bh, scratch) for every (batch, head) slice, each thread taking the next slice when it is done
// with one: on a shared machine a thread can fall behind, and fixed halves left the other waiting.
template <typename T, typename Fn>
void for_each_tiled_slice(const SparseAttentionProblem& p, const TileLayout& layout, Fn&& fn) {
  std::atomic<int64_t> next_slice{0};
  at::parallel_for(0, at::get_num_threads(), 1, [&](int64_t, int64_t) {
    TileScratch<T> scratch(p, layout);
    for (int64_t bh = next_slice++; bh < p.batch * p.heads; bh = next_slice++) fn(bh, scratch);
  });
}

template <typename T, int64_t kDim>
void forward_impl(const SparseAttentionProblem& p, const T* q, const T* k, const T* v, T* out,
                  T* logsumexp, T* tile_probabilities) {
  if (tile_probabilities || use_tiles(p)) {
    const TileLayout layout(p.tiles);
    const std::vector<T> masks = tile_masks<T>(p.tiles, layout);
    for_each_tiled_slice<T>(p, layout, [&](int64_t bh, TileScratch<T>& scratch) {
      T* probabilities =
          tile_probabilities ? tile_probabilities + bh * layout.block_offsets.back() : nullptr;
      tiled_forward_slice<T, kDim>(p, bh, q, k, v, out, logsumexp, probabilities, layout, masks,
                                   scratch);
    });
    return;
  }
  const int64_t total_rows = p.batch * p.heads * p.num_queries;
  at::parallel_for(0, total_rows, 64, [&](int64_t begin, int64_t end) {
    forward_rows<T, kDim>(p, q, k, v, out, logsumexp, begin, end);
  });
}

template <typename T, int64_t kDim>
void backward_impl(const SparseAttentionProblem& p, const T* q, const T* k, const T* v,
                   const T* out, const T* logsumexp, const T* grad_out,
                   const T* tile_probabilities, T* grad_q, T* grad_k, T* grad_v) {
  const int64_t dim = p.head_dim;
  const int64_t slices = p.batch * p.heads;
  const int64_t key_block = p.num_keys * dim;
  // Each slice's key gradients are zeroed by the thread that accumulates into them: a serial fill
  // of the whole tensors up front left the other threads waiting.
  const auto zero_key_gradients = [&](int64_t bh) {
    std::fill(grad_k + bh * key_block, grad_k + (bh + 1) * key_block, T(0));
    std::fill(grad_v + bh * key_block, grad_v + (bh + 1) * key_block, T(0));
  };
  const int64_t threads = at::get_num_threads();
  if (tile_probabilities) {
    const TileLayout layout(p.tiles);
    const int64_t query_block = p.num_queries * dim;
    for_each_tiled_slice<T>(p, layout, [&](int64_t bh, TileScratch<T>& scratch) {
      tiled_backward_slice<T, kDim>(p, bh, q, k, v, out, logsumexp, grad_out, tile_probabilities,
                                    layout, grad_q + bh * query_block, grad_k + bh * key_block,
                                    grad_v + bh * key_block, scratch);
    });
    return;
  }
  if (slices >= threads) {
    // Each thread owns whole (batch, head) slices, so the scatter into grad_k/grad_v is race-free.
    at::parallel_for(0, slices, 1, [&](int64_t begin, int64_t end) {
      for (int64_t bh = begin; bh < end; ++bh) {
        zero_key_gradients(bh);
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
    zero_key_gradients(bh);
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

int64_t tile_probability_elements(const SparseAttentionProblem& problem) {
  if (!use_tiles(problem)) return 0;
  return problem.batch * problem.heads * TileLayout(problem.tiles).block_offsets.back();
}

template <typename T>
void sparse_attention_forward(const SparseAttentionProblem& problem, const T* q, const T* k,
                              const T* v, T* out, T* logsumexp, T* tile_probabilities) {
  dispatch_head_dim(problem.head_dim, [&](auto dim) {
    forward_impl<T, decltype(dim)::value>(problem, q, k, v, out, logsumexp, tile_probabilities);
  });
}

template <typename T>
void sparse_attention_backward(const SparseAttentionProblem& problem, const T* q, const T* k,
                               const T* v, const T* out, const T* logsumexp, const T* grad_out,
                               const T* tile_probabilities, T* grad_q, T* grad_k, T* grad_v) {
  dispatch_head_dim(problem.head_dim, [&](auto dim) {
    backward_impl<T, decltype(dim)::value>(problem, q, k, v, out, logsumexp, grad_out,
                                           tile_probabilities, grad_q, grad_k, grad_v);
  });
}

template void sparse_attention_forward<float>(const SparseAttentionProblem&, const float*,
                                              const float*, const float*, float*, float*, float*);
template void sparse_attention_forward<double>(const SparseAttentionProblem&, const double*,
                                               const double*, const double*, double*, double*,
                                               double*);
template void sparse_attention_backward<float>(const SparseAttentionProblem&, const float*,
                                               const float*, const float*, const float*,
                                               const float*, const float*, const float*, float*,
                                               float*, float*);
template void sparse_attention_backward<double>(const SparseAttentionProblem&, const double*,
                                                const double*, const double*, const double*,
                                                const double*, const double*, const double*,
                                                double*, double*, double*);

}  // namespace structdiff::kernels
