// The register-blocked GEMM for the dense tiles' small products.
// Internal to the CPU kernel (sparse_kernel.cpp), compiled once for the host CPU.
#pragma once

#include <cstdint>

#include "attention/sparse_kernel_vector.h"

namespace structdiff::kernels::detail {

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

}  // namespace structdiff::kernels::detail
