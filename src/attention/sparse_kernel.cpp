// Fused neighbour-list softmax attention. One pass per query row with an online softmax over
// chunks of keys; no gathered (tokens x degree x head_dim) tensors and no dense score matrix.
// The head dimension is a template parameter for the common sizes so the inner loops are fully
// unrolled and vectorised; kRuntimeDim handles any other size.
#include "attention/sparse_kernel.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <tuple>
#include <vector>

#include <ATen/Parallel.h>

#if defined(__AVX__)
#include <immintrin.h>
#endif

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

// ---- Vectors ---------------------------------------------------------------------------------

// GCC/Clang vector types (eight floats or four doubles), moved with memcpy: unaligned, and no
// alignment attribute for a template alias to lose.
template <typename T>
struct VectorOf;
template <>
struct VectorOf<float> {
  typedef float type __attribute__((vector_size(32)));
};
template <>
struct VectorOf<double> {
  typedef double type __attribute__((vector_size(32)));
};
template <typename T>
using Vec = typename VectorOf<T>::type;

template <typename T>
Vec<T> load(const T* from) {
  Vec<T> value;
  std::memcpy(&value, from, sizeof value);
  return value;
}

template <typename T>
void store(const Vec<T>& value, T* to) {
  std::memcpy(to, &value, sizeof value);
}
template <typename T>
constexpr int64_t kLanes = 32 / sizeof(T);

// exp of a vector. float: Cephes' expf polynomial with the power of two put in by integer
// arithmetic (relative error below 2e-7); inputs below -87.3, the masked -inf among them, give
// exactly 0. double: std::exp per lane (the double kernels serve references and tests).
inline Vec<float> exp_vector(Vec<float> in) {
  typedef int32_t Int __attribute__((vector_size(32)));
  const Vec<float> low = in < -87.3f ? Vec<float>{} - 87.3f : in;
  // Rounds to the nearest integer: adding 1.5 * 2^23 leaves no fraction bits.
  const Vec<float> whole = (low * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  const Vec<float> r = low - whole * 0.693359375f + whole * 2.12194440e-4f;
  Vec<float> y = r * 1.9875691500e-4f + 1.3981999507e-3f;
  y = y * r + 8.3334519073e-3f;
  y = y * r + 4.1665795894e-2f;
  y = y * r + 1.6666665459e-1f;
  y = y * r + 5.0000001201e-1f;
  y = y * r * r + r + 1.0f;
  const Int bits = (__builtin_convertvector(whole, Int) + 127) << 23;
  Vec<float> power;
  std::memcpy(&power, &bits, sizeof power);
  return in < -87.3f ? Vec<float>{} : y * power;
}

inline Vec<double> exp_vector(Vec<double> in) {
  for (int i = 0; i < kLanes<double>; ++i) in[i] = std::exp(in[i]);
  return in;
}

// exp over n values (any n), in vectors; a short tail is padded with -inf, whose exp is 0.
template <typename T>
void exp_in_place(T* values, int64_t n) {
  int64_t i = 0;
  for (; i + kLanes<T> <= n; i += kLanes<T>) store(exp_vector(load(values + i)), values + i);
  if (i == n) return;
  Vec<T> tail;
  for (int64_t j = 0; j < kLanes<T>; ++j) {
    tail[j] = i + j < n ? values[i + j] : -std::numeric_limits<T>::infinity();
  }
  tail = exp_vector(tail);
  for (int64_t j = 0; i + j < n; ++j) values[i + j] = tail[j];
}

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

// ---- Dense tiles (TilePlanView) --------------------------------------------------------------

// row (width, a multiple of the lanes) = scale * row + bias.
template <typename T>
// Selected, not added, so that a NaN key stays out of the rows that do not attend to it.
void scale_and_mask(T* row, const T* bias, T scale, int64_t width) {
  for (int64_t b = 0; b < width; b += kLanes<T>) {
    const Vec<T> masked = load(bias + b);
    store<T>(masked < 0 ? masked : load(row + b) * scale, row + b);
  }
}

template <typename T>
// NaN if the row holds one: a NaN row must not pass for a row that owns nothing (max -inf).
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

// ---- Register-blocked GEMM for the tiles' small products -----------------------------------

// The GEMM's block: kRows (4 or 5) rows x 2 vectors of columns, eight or ten accumulators held in
// registers; the tiles' column padding (kTileColumnBlock) is a whole number of these blocks for
// float and double.
template <typename T>
constexpr int64_t kColumnBlock = 2 * kLanes<T>;
static_assert(kTileColumnBlock % kColumnBlock<float> == 0 &&
              kTileColumnBlock % kColumnBlock<double> == 0);

// A GEMM operand by rows: a block with a row stride, or a tile's members read in place from their
// slice (the rows past the members point at a row of zeros), so that no rows are copied.
template <typename T>
struct BlockRows {
  const T* data;
  int64_t stride;
  const T* row(int64_t i) const { return data + i * stride; }
};
template <typename T>
struct MemberRows {
  const T* const* rows;
  const T* row(int64_t i) const { return rows[i]; }
};

// c (rows x width, row stride ldc) = a (rows x inner) * b (inner x width), or a^T * b with a
// (inner x rows); rows a multiple of kRows, width of kColumnBlock<T>.
template <typename T, bool kTransposeA, int64_t kRows, typename ARows, typename BRows>
void gemm_blocked(ARows a, BRows b, T* __restrict c, int64_t ldc, int64_t rows, int64_t inner,
                  int64_t width) {
  constexpr int64_t lanes = kLanes<T>;
  for (int64_t r = 0; r < rows; r += kRows) {
    const T* a_rows[kRows];
    for (int64_t i = 0; i < kRows; ++i) a_rows[i] = kTransposeA ? nullptr : a.row(r + i);
    for (int64_t col = 0; col < width; col += kColumnBlock<T>) {
      Vec<T> acc[kRows][2] = {};
      for (int64_t k = 0; k < inner; ++k) {
        const T* b_row = b.row(k);
        Vec<T> b0 = load(b_row + col), b1 = load(b_row + col + lanes);
        // Keeps b0 and b1 in registers: folded into each FMA as memory operands, they would be
        // loaded once per row, and loads, not FMAs, would bound the loop.
#if defined(__x86_64__)
        asm("" : "+x"(b0), "+x"(b1));
#endif
        const T* a_column = kTransposeA ? a.row(k) + r : nullptr;
        for (int64_t i = 0; i < kRows; ++i) {
          const T factor = kTransposeA ? a_column[i] : a_rows[i][k];
          acc[i][0] += factor * b0;
          acc[i][1] += factor * b1;
        }
      }
      for (int64_t i = 0; i < kRows; ++i) {
        for (int64_t half = 0; half < 2; ++half) {
          store(acc[i][half], c + (r + i) * ldc + col + half * lanes);
        }
      }
    }
  }
}

// The same with the row block a tile's padding was chosen for (tile_row_block).
template <typename T, bool kTransposeA, typename ARows, typename BRows>
void gemm(int64_t row_block, ARows a, BRows b, T* __restrict c, int64_t ldc, int64_t rows,
          int64_t inner, int64_t width) {
  if (row_block == 5) {
    gemm_blocked<T, kTransposeA, 5>(a, b, c, ldc, rows, inner, width);
  } else {
    gemm_blocked<T, kTransposeA, 4>(a, b, c, ldc, rows, inner, width);
  }
}

// Where a (batch, head) slice's Q, K and V rows start.
template <typename T>
struct SliceRows {
  const T *q, *k, *v;
  SliceRows(const SparseAttentionProblem& p, int64_t bh, const T* q_all, const T* k_all,
            const T* v_all) {
    const SliceOffsets slice{bh / p.heads, bh % p.heads};
    q = q_all + slice.offset(p.q_stride);
    k = k_all + slice.offset(p.k_stride);
    v = v_all + slice.offset(p.v_stride);
  }
};

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

TileShape tile_shape(const TilePlanView& plan, int64_t t) {
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
  if (!probabilities) return;
  // exp(score - m) with the maximum m of the time, times exp(m - lse): the probability. A row
  // that owned nothing when its block was computed has m = -inf and stays 0.
  for (int64_t t = 0; t < plan.num_tiles; ++t) {
    const TileShape tile = tile_shape(plan, t);
    T* block = probabilities + layout.block_offsets[t];
    for (int64_t a = 0; a < tile.size; ++a) {
      const T shift = s.tile_row_max[layout.row_offsets[t] + a];
      if (shift == neg_inf) continue;
      scale_in_place(std::exp(shift - lse_slice[tile.members[a]]), block + a * tile.width,
                     tile.width);
    }
  }
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
