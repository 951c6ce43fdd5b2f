// The dense-tile passes: each clique tile's score block by the register GEMM, an online softmax
// per row across tiles, then the residual neighbour lists; backward from the kept probabilities.
// Internal to the CPU kernel (sparse_kernel.cpp), compiled once for the host CPU.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "attention/sparse_kernel.h"
#include "attention/sparse_kernel_gemm.h"
#include "attention/sparse_kernel_vector.h"

#if defined(__AVX__)
#include <immintrin.h>
#endif

namespace structdiff::kernels::detail {

// ---- Dense tiles (TilePlanView) --------------------------------------------------------------

// row (width, a multiple of the lanes) = scale * row + bias.
// Selected, not added, so that a NaN key stays out of the rows that do not attend to it.
template <typename T>
void scale_and_mask(T* row, const T* bias, T scale, int64_t width) {
  for (int64_t b = 0; b < width; b += kLanes<T>) {
    const Vec<T> masked = load(bias + b);
    store<T>(masked < 0 ? masked : load(row + b) * scale, row + b);
  }
}

// NaN if the row holds one: a NaN row must not pass for a row that owns nothing (max -inf).
template <typename T>
T row_max(const T* row, int64_t width) {
  Vec<T> best = load(row);
  for (int64_t b = kLanes<T>; b < width; b += kLanes<T>) {
    const Vec<T> next = load(row + b);
    best = (next > best) | (next != next) ? next : best;
  }
  T result = best[0];
  for (int i = 1; i < kLanes<T>; ++i) result = best[i] > result || best[i] != best[i] ? best[i] : result;
  return result;
}

// row = exp(row - shift); returns the row's sum.
template <typename T>
T exp_shifted(T* row, T shift, int64_t width) {
  Vec<T> sum{};
  for (int64_t b = 0; b < width; b += kLanes<T>) {
    const Vec<T> value = exp_vector(load(row + b) - shift);
    store(value, row + b);
    sum += value;
  }
  T result = 0;
  for (int i = 0; i < kLanes<T>; ++i) result += sum[i];
  return result;
}

// ---- One tile -------------------------------------------------------------------------------

// y = x for a row not yet written, y += x after; n a multiple of the lanes. Copied in vectors: a
// call to memcpy (which GCC makes of a plain copy loop) costs more than a row this short.
template <typename T>
void write_or_add(const T* x, T* y, int64_t n, bool written) {
  if (written) {
    axpy(T(1), x, y, n);
    return;
  }
  for (int64_t i = 0; i < n; i += kLanes<T>) {
    Vec<T> value = load(x + i);
#if defined(__x86_64__)
    asm("" : "+x"(value));
#endif
    store(value, y + i);
  }
}

// out (cols x rows, row stride ldo) = in (rows x cols) transposed; rows and cols are multiples of
// kLanes<T>. float on AVX: 8 x 8 blocks transposed in registers (a scalar transpose, one strided
// store per element, took most of the tiles' gather time).
template <typename T>
void transpose(MemberRows<T> in, int64_t rows, int64_t cols, T* out, int64_t ldo) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) out[c * ldo + r] = in.row(r)[c];
  }
}

#if defined(__AVX__)
template <>
void transpose<float>(MemberRows<float> in, int64_t rows, int64_t cols, float* out, int64_t ldo) {
  for (int64_t r = 0; r < rows; r += 8) {
    for (int64_t c = 0; c < cols; c += 8) {
      __m256 row[8], pair[8], quad[8];
      for (int i = 0; i < 8; ++i) row[i] = _mm256_loadu_ps(in.row(r + i) + c);
      for (int i = 0; i < 8; i += 2) {
        pair[i] = _mm256_unpacklo_ps(row[i], row[i + 1]);
        pair[i + 1] = _mm256_unpackhi_ps(row[i], row[i + 1]);
      }
      for (int i = 0; i < 8; i += 4) {
        quad[i] = _mm256_shuffle_ps(pair[i], pair[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
        quad[i + 1] = _mm256_shuffle_ps(pair[i], pair[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
        quad[i + 2] = _mm256_shuffle_ps(pair[i + 1], pair[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
        quad[i + 3] = _mm256_shuffle_ps(pair[i + 1], pair[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
      }
      float* to = out + c * ldo + r;
      for (int i = 0; i < 4; ++i) {
        _mm256_storeu_ps(to + i * ldo, _mm256_permute2f128_ps(quad[i], quad[i + 4], 0x20));
        _mm256_storeu_ps(to + (i + 4) * ldo, _mm256_permute2f128_ps(quad[i], quad[i + 4], 0x31));
      }
    }
  }
}
#endif

// A tile's shape: `size` members; score blocks of `rows` x `width` (size rounded up to whole
// blocks of `row_block` rows and kTileColumnBlock columns).
struct TileShape {
  const int64_t* members;
  int64_t size, row_block, rows, width;
};

inline TileShape tile_shape(const TilePlanView& plan, int64_t t) {
  const int64_t size = plan.tile_offsets[t + 1] - plan.tile_offsets[t];
  return {plan.tile_nodes + plan.tile_offsets[t], size, tile_row_block(size),
          tile_padded_rows(size), tile_padded_columns(size)};
}

// Where each tile's padded score block starts (in a slice's kept probabilities, and in the masks)
// and where its rows start among all the tiles' rows; the last entries are the totals.
struct TileLayout {
  std::vector<int64_t> block_offsets{0}, row_offsets{0};
  explicit TileLayout(const TilePlanView& plan) {
    for (int64_t t = 0; t < plan.num_tiles; ++t) {
      const TileShape tile = tile_shape(plan, t);
      block_offsets.push_back(block_offsets.back() + tile.rows * tile.width);
      row_offsets.push_back(row_offsets.back() + tile.size);
    }
  }
};

// Every tile's mask as an additive bias over its score block: 0 for the pairs it owns, -inf
// elsewhere and in the padding. Built once per forward call and read by every thread.
template <typename T>
std::vector<T> tile_masks(const TilePlanView& plan, const TileLayout& layout) {
  std::vector<T> bias(layout.block_offsets.back(), -std::numeric_limits<T>::infinity());
  for (int64_t t = 0; t < plan.num_tiles; ++t) {
    const TileShape tile = tile_shape(plan, t);
    const uint8_t* owned = plan.owned + plan.mask_offsets[t];
    T* block = bias.data() + layout.block_offsets[t];
    for (int64_t a = 0; a < tile.size; ++a) {
      for (int64_t b = 0; b < tile.size; ++b) {
        if (owned[a * tile.size + b]) block[a * tile.width + b] = T(0);
      }
    }
  }
  return bias;
}

// Per-thread buffers, reused across the slices a thread computes.
template <typename T>
struct TileScratch {
  std::vector<T> keys_t, values_t, scores, products, block, zeros;
  // Row pointers of the tile's members in Q, K, V and the output gradient.
  std::vector<const T*> query_rows, key_rows, value_rows, grad_out_rows;
  std::vector<T> row_max, row_sum, acc;
  // Whether a node's rows of the accumulator (forward) or of the gradients (backward) hold a value
  // yet this slice: the first tile to reach a row writes it, so no block needs zeroing up front.
  std::vector<char> written;
  // The running maximum each tile row's weights were taken against (forward, kept probabilities).
  std::vector<T> tile_row_max;
  TileScratch(const SparseAttentionProblem& p, const TileLayout& layout)
      : keys_t(p.head_dim * kMaxTileMembers), values_t(p.head_dim * kMaxTileMembers),
        scores(kMaxTileMembers * kMaxTileMembers), products(kMaxTileMembers * kMaxTileMembers),
        block(kMaxTileMembers * p.head_dim), zeros(p.head_dim),
        query_rows(kMaxTileMembers), key_rows(kMaxTileMembers), value_rows(kMaxTileMembers),
        grad_out_rows(kMaxTileMembers),
        row_max(p.num_queries), row_sum(p.num_queries), acc(p.num_queries * p.head_dim),
        written(p.num_queries), tile_row_max(layout.row_offsets.back()) {}
};

// The tile's members' rows of a strided slice (`stride` apart from `base`), padded with zero rows
// to the tile's padded width (never less than its padded rows). A product whose rows are a tile
// operand's therefore has zero rows in its padding, and no product reads past the members in its
// inner dimension, so the padding needs no clearing.
template <typename T>
MemberRows<T> tile_rows(const TileShape& tile, const T* base, int64_t stride, TileScratch<T>& s,
                        std::vector<const T*>& rows) {
  for (int64_t m = 0; m < tile.size; ++m) rows[m] = base + tile.members[m] * stride;
  std::fill(rows.begin() + tile.size, rows.begin() + tile.width, s.zeros.data());
  return {rows.data()};
}

// Scaled scores of a tile into `scores` (rows x width): its owned pairs, -inf elsewhere.
template <typename T>
void tile_scores(const SparseAttentionProblem& p, const TileShape& tile, MemberRows<T> queries,
                 MemberRows<T> keys, const T* bias, TileScratch<T>& s, T* scores) {
  const int64_t dim = p.head_dim;
  transpose(keys, tile.width, dim, s.keys_t.data(), tile.width);
  gemm<T, false>(tile.row_block, queries, BlockRows<T>{s.keys_t.data(), tile.width}, scores,
                 tile.width, tile.rows, dim, tile.width);
  for (int64_t a = 0; a < tile.size; ++a) {
    scale_and_mask(scores + a * tile.width, bias + a * tile.width, static_cast<T>(p.scale),
                   tile.width);
  }
}

// The kept blocks of a forward slice into probabilities: exp(score - m) with the row maximum m of
// the time, times exp(m - lse). A row that owned nothing when its block was computed has
// m = -inf and stays 0.
template <typename T>
void normalise_kept_blocks(const TilePlanView& plan, const TileLayout& layout,
                           const TileScratch<T>& s, const T* lse_slice, T* probabilities) {
  for (int64_t t = 0; t < plan.num_tiles; ++t) {
    const TileShape tile = tile_shape(plan, t);
    T* block = probabilities + layout.block_offsets[t];
    for (int64_t a = 0; a < tile.size; ++a) {
      const T shift = s.tile_row_max[layout.row_offsets[t] + a];
      if (shift == -std::numeric_limits<T>::infinity()) continue;
      scale_in_place(std::exp(shift - lse_slice[tile.members[a]]), block + a * tile.width,
                     tile.width);
    }
  }
}

// Forward over one (batch, head) slice: each tile's block of scores with an online softmax per
// row (the accumulated weights and values rescaled when a tile raises a row's maximum), then the
// residual neighbour lists. With `probabilities` (the slice's part of the kept blocks), the blocks
// are computed there and normalised into probabilities once the rows' log-sum-exps are known.
template <typename T, int64_t kDim>
void tiled_forward_slice(const SparseAttentionProblem& p, int64_t bh, const T* q, const T* k,
                         const T* v, T* out, T* logsumexp, T* probabilities,
                         const TileLayout& layout, const std::vector<T>& masks,
                         TileScratch<T>& s) {
  const TilePlanView& plan = p.tiles;
  const int64_t dim = HeadDim<kDim>(p.head_dim).value;
  const int64_t n = p.num_queries;
  const SliceRows<T> rows(p, bh, q, k, v);
  const T *q_base = rows.q, *k_base = rows.k, *v_base = rows.v;
  const T scale = static_cast<T>(p.scale);
  const T neg_inf = -std::numeric_limits<T>::infinity();
  std::fill(s.row_max.begin(), s.row_max.end(), neg_inf);
  std::fill(s.row_sum.begin(), s.row_sum.end(), T(0));
  std::fill(s.written.begin(), s.written.end(), 0);
  const auto raise_max = [&](int64_t node, T candidate) {
    if (candidate <= s.row_max[node]) return;
    const T shrink = std::exp(s.row_max[node] - candidate);  // 0 the first time
    s.row_sum[node] *= shrink;
    if (s.written[node]) scale_in_place(shrink, s.acc.data() + node * dim, dim);
    s.row_max[node] = candidate;
  };
  for (int64_t t = 0; t < plan.num_tiles; ++t) {
    const TileShape tile = tile_shape(plan, t);
    T* scores = probabilities ? probabilities + layout.block_offsets[t] : s.scores.data();
    tile_scores(p, tile, tile_rows(tile, q_base, p.q_stride[2], s, s.query_rows),
                tile_rows(tile, k_base, p.k_stride[2], s, s.key_rows),
                masks.data() + layout.block_offsets[t], s, scores);
    for (int64_t a = 0; a < tile.size; ++a) {
      T* row = scores + a * tile.width;
      const int64_t node = tile.members[a];
      raise_max(node, row_max(row, tile.width));
      s.tile_row_max[layout.row_offsets[t] + a] = s.row_max[node];
      if (s.row_max[node] == neg_inf) {  // owns nothing here, nor so far elsewhere
        std::fill(row, row + tile.width, T(0));
        continue;
      }
      s.row_sum[node] += exp_shifted(row, s.row_max[node], tile.width);
    }
    gemm<T, false>(tile.row_block, BlockRows<T>{scores, tile.width},
                   tile_rows(tile, v_base, p.v_stride[2], s, s.value_rows), s.block.data(), dim,
                   tile.rows, tile.size, dim);
    for (int64_t a = 0; a < tile.size; ++a) {
      const int64_t node = tile.members[a];
      write_or_add(s.block.data() + a * dim, s.acc.data() + node * dim, dim, s.written[node]);
      s.written[node] = 1;
    }
  }
  T* out_slice = out + bh * n * dim;
  T* lse_slice = logsumexp + bh * n;
  for (int64_t row = 0; row < n; ++row) {
    const T* q_row = q_base + row * p.q_stride[2];
    T* acc_row = s.acc.data() + row * dim;
    if (!s.written[row]) {  // in no tile: the residual lists are all its entries
      std::fill(acc_row, acc_row + dim, T(0));
      s.written[row] = 1;
    }
    for (int64_t e = plan.residual_offsets[row]; e < plan.residual_offsets[row + 1]; ++e) {
      const int64_t col = plan.residual_cols[e];
      const T score = scale * dot(q_row, k_base + col * p.k_stride[2], dim);
      raise_max(row, score);
      const T weight = std::exp(score - s.row_max[row]);
      s.row_sum[row] += weight;
      axpy(weight, v_base + col * p.v_stride[2], acc_row, dim);
    }
    T* out_row = out_slice + row * dim;
    if (s.row_sum[row] == 0) {  // no keys (a NaN sum is normalised: NaN out)
      std::fill(out_row, out_row + dim, T(0));
      lse_slice[row] = 0;
    } else {
      const T inverse = T(1) / s.row_sum[row];
      for (int64_t d = 0; d < dim; ++d) out_row[d] = acc_row[d] * inverse;
      lse_slice[row] = s.row_max[row] + std::log(s.row_sum[row]);
    }
  }
  if (probabilities) normalise_kept_blocks(plan, layout, s, lse_slice, probabilities);
}

// Backward over one slice from the probabilities its forward pass kept. grad_q, grad_k and grad_v
// are this slice's (tokens x dim) blocks, overwritten.
template <typename T, int64_t kDim>
void tiled_backward_slice(const SparseAttentionProblem& p, int64_t bh, const T* q, const T* k,
                          const T* v, const T* out, const T* logsumexp, const T* grad_out,
                          const T* probabilities, const TileLayout& layout, T* grad_q,
                          T* grad_k, T* grad_v, TileScratch<T>& s) {
  const TilePlanView& plan = p.tiles;
  const int64_t dim = HeadDim<kDim>(p.head_dim).value;
  const int64_t n = p.num_queries;
  const SliceRows<T> rows(p, bh, q, k, v);
  const T *q_base = rows.q, *k_base = rows.k, *v_base = rows.v;
  const T* grad_out_slice = grad_out + bh * n * dim;
  const T* lse = logsumexp + bh * n;
  const T scale = static_cast<T>(p.scale);
  probabilities += bh * layout.block_offsets.back();
  // D_i = dO_i . O_i, the softmax Jacobian's correction term (kept in s.row_sum).
  for (int64_t row = 0; row < n; ++row) {
    s.row_sum[row] = dot(grad_out_slice + row * dim, out + (bh * n + row) * dim, dim);
  }
  std::fill(s.written.begin(), s.written.end(), 0);
  for (int64_t t = 0; t < plan.num_tiles; ++t) {
    const TileShape tile = tile_shape(plan, t);
    const T* probs = probabilities + layout.block_offsets[t];
    const MemberRows<T> queries = tile_rows(tile, q_base, p.q_stride[2], s, s.query_rows);
    const MemberRows<T> keys = tile_rows(tile, k_base, p.k_stride[2], s, s.key_rows);
    const MemberRows<T> values = tile_rows(tile, v_base, p.v_stride[2], s, s.value_rows);
    const MemberRows<T> grad_outs = tile_rows(tile, grad_out_slice, dim, s, s.grad_out_rows);
    transpose(values, tile.width, dim, s.values_t.data(), tile.width);
    // products = dO V^T, then dS = P (dO V^T - D).
    gemm<T, false>(tile.row_block, grad_outs, BlockRows<T>{s.values_t.data(), tile.width},
                   s.products.data(), tile.width, tile.rows, dim, tile.width);
    for (int64_t a = 0; a < tile.size; ++a) {
      const T* row = probs + a * tile.width;
      T* grad_row = s.products.data() + a * tile.width;
      const T correction = s.row_sum[tile.members[a]];
      for (int64_t b = 0; b < tile.width; ++b) {
        grad_row[b] = scale * row[b] * (grad_row[b] - correction);
      }
    }
    // dQ = scale dS K.
    gemm<T, false>(tile.row_block, BlockRows<T>{s.products.data(), tile.width}, keys,
                   s.block.data(), dim, tile.rows, tile.size, dim);
    for (int64_t a = 0; a < tile.size; ++a) {
      const int64_t node = tile.members[a];
      write_or_add(s.block.data() + a * dim, grad_q + node * dim, dim, s.written[node]);
    }
    // dK = scale dS^T Q and dV = P^T dO.
    for (const auto& [block, source, target] :
         {std::tuple<const T*, MemberRows<T>, T*>{s.products.data(), queries, grad_k},
          std::tuple<const T*, MemberRows<T>, T*>{probs, grad_outs, grad_v}}) {
      gemm<T, true>(tile.row_block, BlockRows<T>{block, tile.width}, source, s.block.data(), dim,
                    tile.rows, tile.size, dim);
      for (int64_t b = 0; b < tile.size; ++b) {
        const int64_t node = tile.members[b];
        write_or_add(s.block.data() + b * dim, target + node * dim, dim, s.written[node]);
      }
    }
    for (int64_t a = 0; a < tile.size; ++a) s.written[tile.members[a]] = 1;
  }
  for (int64_t row = 0; row < n; ++row) {
    if (s.written[row]) continue;
    for (T* gradient : {grad_q, grad_k, grad_v}) {
      std::fill(gradient + row * dim, gradient + (row + 1) * dim, T(0));
    }
  }
  for (int64_t row = 0; row < n; ++row) {
    const T* q_row = q_base + row * p.q_stride[2];
    const T* grad_out_row = grad_out_slice + row * dim;
    const T correction = s.row_sum[row];
    for (int64_t e = plan.residual_offsets[row]; e < plan.residual_offsets[row + 1]; ++e) {
      const int64_t col = plan.residual_cols[e];
      const T* k_row = k_base + col * p.k_stride[2];
      const T* v_row = v_base + col * p.v_stride[2];
      const T prob = std::exp(scale * dot(q_row, k_row, dim) - lse[row]);
      const T grad_score = prob * (dot(grad_out_row, v_row, dim) - correction);
      axpy(prob, grad_out_row, grad_v + col * dim, dim);
      axpy(grad_score * scale, k_row, grad_q + row * dim, dim);
      axpy(grad_score * scale, q_row, grad_k + col * dim, dim);
    }
  }
}

}  // namespace structdiff::kernels::detail
