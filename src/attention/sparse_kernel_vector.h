// The CPU kernel's vector math: head-dimension dispatch constants, dot/axpy/scale, GCC vector types
// and a vectorised exp.
// Internal to the CPU kernel (sparse_kernel.cpp), compiled once for the host CPU.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace structdiff::kernels::detail {

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

}  // namespace structdiff::kernels::detail
