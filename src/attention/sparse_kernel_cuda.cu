// Fused neighbour-list softmax attention on CUDA. One warp per query row, each lane holding
// head_dim / 32 elements in registers; keys are visited one at a time with an online softmax,
// each score a warp-wide reduction. The backward pass never scatters with atomics: grad Q comes
// from the query rows, grad K and grad V from the transposed pattern (one warp per key), so a
// run gives the same bits every time.
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

#include "attention/sparse_kernel.h"

namespace structdiff::kernels {
namespace {

constexpr int kWarp = 32;
constexpr int kWarpsPerBlock = 4;
constexpr unsigned kAllLanes = 0xffffffffu;

__device__ inline float exp_of(float x) { return expf(x); }
__device__ inline double exp_of(double x) { return ::exp(x); }
__device__ inline float log_of(float x) { return logf(x); }
__device__ inline double log_of(double x) { return ::log(x); }

template <typename T>
__device__ inline T warp_sum(T value) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    value += __shfl_xor_sync(kAllLanes, value, offset);
  }
  return value;
}

// A row of head_dim elements split over the warp: lane l holds elements l, l + 32, ...
template <typename T, int kPerLane>
struct LaneRow {
  T x[kPerLane];

  __device__ void load(const T* row, int64_t dim, int lane) {
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int64_t d = lane + static_cast<int64_t>(i) * kWarp;
      x[i] = d < dim ? row[d] : T(0);
    }
  }
  __device__ void fill(T value) {
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) x[i] = value;
  }
  // This lane's share of the dot product with a row in memory.
  __device__ T partial_dot(const T* row, int64_t dim, int lane) const {
    T sum = 0;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int64_t d = lane + static_cast<int64_t>(i) * kWarp;
      if (d < dim) sum += x[i] * row[d];
    }
    return sum;
  }
  __device__ void add_scaled(T alpha, const T* row, int64_t dim, int lane) {
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int64_t d = lane + static_cast<int64_t>(i) * kWarp;
      if (d < dim) x[i] += alpha * row[d];
    }
  }
  __device__ void scale(T alpha) {
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) x[i] *= alpha;
  }
  __device__ void store(T* row, T alpha, int64_t dim, int lane) const {
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int64_t d = lane + static_cast<int64_t>(i) * kWarp;
      if (d < dim) row[d] = x[i] * alpha;
    }
  }
};

// Where one warp's token row of a (batch, head, token, dim) tensor starts.
struct Slice {
  int64_t batch, head;
  __device__ int64_t offset(const int64_t stride[3], int64_t token) const {
    return batch * stride[0] + head * stride[1] + token * stride[2];
  }
};

// The token row this warp works on: one of `rows` rows (queries, or keys in the key pass) of each
// (batch, head) slice, and its pattern's CSR offsets (`offsets`: num_patterns blocks of rows + 1).
struct WarpRow {
  int64_t flat, row, bh;
  Slice slice;
  const int64_t* offsets;
  int lane;
  bool active;
};

__device__ inline WarpRow warp_row(const SparseAttentionProblem& p, int64_t rows,
                                   const int64_t* offsets) {
  WarpRow w;
  w.flat = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
  w.lane = threadIdx.x % kWarp;
  w.active = w.flat < p.batch * p.heads * rows;
  w.row = w.flat % rows;
  w.bh = w.flat / rows;
  w.slice = Slice{w.bh / p.heads, w.bh % p.heads};
  w.offsets = offsets + (p.num_patterns == 1 ? 0 : w.slice.batch) * (rows + 1);
  return w;
}

template <typename T, int kPerLane>
__global__ void forward_kernel(SparseAttentionProblem p, const T* __restrict__ q,
                               const T* __restrict__ k, const T* __restrict__ v,
                               T* __restrict__ out, T* __restrict__ logsumexp) {
  const WarpRow w = warp_row(p, p.num_queries, p.row_offsets);
  if (!w.active) return;  // the whole warp: no shuffle misses a lane
  const int64_t flat = w.flat, row = w.row;
  const int lane = w.lane;
  const Slice slice = w.slice;
  const int64_t* offsets = w.offsets;
  const T scale = static_cast<T>(p.scale);

  LaneRow<T, kPerLane> q_row, acc;
  q_row.load(q + slice.offset(p.q_stride, row), p.head_dim, lane);
  acc.fill(T(0));
  T running_max = -static_cast<T>(INFINITY);
  T running_sum = 0;
  for (int64_t e = offsets[row]; e < offsets[row + 1]; ++e) {
    const int64_t col = p.col_indices[e];
    const T score =
        scale * warp_sum(q_row.partial_dot(k + slice.offset(p.k_stride, col), p.head_dim, lane));
    if (score > running_max) {
      const T shrink = exp_of(running_max - score);  // 0 for the first key
      acc.scale(shrink);
      running_sum *= shrink;
      running_max = score;
    }
    const T weight = exp_of(score - running_max);
    running_sum += weight;
    acc.add_scaled(weight, v + slice.offset(p.v_stride, col), p.head_dim, lane);
  }
  T* out_row = out + flat * p.head_dim;
  if (running_sum == T(0)) {  // no keys: zeros (a NaN sum is normalised: NaN out, as on the CPU)
    acc.store(out_row, T(0), p.head_dim, lane);
    if (lane == 0) logsumexp[flat] = 0;
  } else {
    acc.store(out_row, T(1) / running_sum, p.head_dim, lane);
    if (lane == 0) logsumexp[flat] = running_max + log_of(running_sum);
  }
}

// grad Q, one warp per query row; also keeps delta_i = dO_i . O_i for the key pass.
template <typename T, int kPerLane>
__global__ void backward_query_kernel(SparseAttentionProblem p, const T* __restrict__ q,
                                      const T* __restrict__ k, const T* __restrict__ v,
                                      const T* __restrict__ out,
                                      const T* __restrict__ logsumexp,
                                      const T* __restrict__ grad_out, T* __restrict__ grad_q,
                                      T* __restrict__ delta) {
  const WarpRow w = warp_row(p, p.num_queries, p.row_offsets);
  if (!w.active) return;  // the whole warp: no shuffle misses a lane
  const int64_t flat = w.flat, row = w.row;
  const int lane = w.lane;
  const Slice slice = w.slice;
  const int64_t* offsets = w.offsets;
  const T scale = static_cast<T>(p.scale);

  LaneRow<T, kPerLane> q_row, grad_out_row, grad_q_acc;
  q_row.load(q + slice.offset(p.q_stride, row), p.head_dim, lane);
  grad_out_row.load(grad_out + flat * p.head_dim, p.head_dim, lane);
  grad_q_acc.fill(T(0));
  // delta_i = dO_i . O_i equals sum_j P_ij (dO_i . v_j), the softmax Jacobian's correction term.
  const T correction = warp_sum(grad_out_row.partial_dot(out + flat * p.head_dim, p.head_dim, lane));
  const T row_lse = logsumexp[flat];
  for (int64_t e = offsets[row]; e < offsets[row + 1]; ++e) {
    const int64_t col = p.col_indices[e];
    const T* k_row = k + slice.offset(p.k_stride, col);
    const T prob = exp_of(scale * warp_sum(q_row.partial_dot(k_row, p.head_dim, lane)) - row_lse);
    const T grad_score =
        prob * (warp_sum(grad_out_row.partial_dot(v + slice.offset(p.v_stride, col), p.head_dim,
                                                  lane)) -
                correction);
    grad_q_acc.add_scaled(grad_score, k_row, p.head_dim, lane);
  }
  grad_q_acc.store(grad_q + flat * p.head_dim, scale, p.head_dim, lane);
  if (lane == 0) delta[flat] = correction;
}

// grad K and grad V, one warp per key, over the queries that attend to it.
template <typename T, int kPerLane>
__global__ void backward_key_kernel(SparseAttentionProblem p, const int64_t* __restrict__ key_offsets,
                                    const int64_t* __restrict__ key_queries,
                                    const T* __restrict__ q, const T* __restrict__ k,
                                    const T* __restrict__ v, const T* __restrict__ logsumexp,
                                    const T* __restrict__ grad_out, const T* __restrict__ delta,
                                    T* __restrict__ grad_k, T* __restrict__ grad_v) {
  const WarpRow w = warp_row(p, p.num_keys, key_offsets);
  if (!w.active) return;
  const int64_t flat = w.flat, key = w.row, bh = w.bh;
  const int lane = w.lane;
  const Slice slice = w.slice;
  const int64_t* offsets = w.offsets;
  const T scale = static_cast<T>(p.scale);

  LaneRow<T, kPerLane> k_row, v_row, grad_k_acc, grad_v_acc;
  k_row.load(k + slice.offset(p.k_stride, key), p.head_dim, lane);
  v_row.load(v + slice.offset(p.v_stride, key), p.head_dim, lane);
  grad_k_acc.fill(T(0));
  grad_v_acc.fill(T(0));
  for (int64_t e = offsets[key]; e < offsets[key + 1]; ++e) {
    const int64_t query = key_queries[e];
    const int64_t query_flat = bh * p.num_queries + query;
    const T* q_row = q + slice.offset(p.q_stride, query);
    const T* grad_out_row = grad_out + query_flat * p.head_dim;
    const T prob =
        exp_of(scale * warp_sum(k_row.partial_dot(q_row, p.head_dim, lane)) - logsumexp[query_flat]);
    const T grad_score =
        prob * (warp_sum(v_row.partial_dot(grad_out_row, p.head_dim, lane)) - delta[query_flat]);
    grad_v_acc.add_scaled(prob, grad_out_row, p.head_dim, lane);
    grad_k_acc.add_scaled(grad_score * scale, q_row, p.head_dim, lane);
  }
  grad_k_acc.store(grad_k + flat * p.head_dim, T(1), p.head_dim, lane);
  grad_v_acc.store(grad_v + flat * p.head_dim, T(1), p.head_dim, lane);
}

// Registers per lane for the head dimension; larger heads are refused by name.
template <typename Fn>
void dispatch_lane_width(int64_t head_dim, Fn&& fn) {
  if (head_dim <= 32) return fn(std::integral_constant<int, 1>{});
  if (head_dim <= 64) return fn(std::integral_constant<int, 2>{});
  if (head_dim <= 128) return fn(std::integral_constant<int, 4>{});
  if (head_dim <= 256) return fn(std::integral_constant<int, 8>{});
  throw std::invalid_argument("sparse attention on CUDA takes head_dim up to 256, got " +
                              std::to_string(head_dim));
}

dim3 grid_for(int64_t warps) {
  return dim3(static_cast<unsigned>((warps + kWarpsPerBlock - 1) / kWarpsPerBlock));
}

void check_launch(const char* what) {
  const cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess) {
    throw std::runtime_error(std::string(what) + " failed on the GPU: " +
                             cudaGetErrorString(status));
  }
}

}  // namespace

bool cuda_kernels_built() { return true; }

template <typename T>
void sparse_attention_forward_cuda(const SparseAttentionProblem& problem, int device, const T* q,
                                   const T* k, const T* v, T* out, T* logsumexp) {
  const int64_t rows = problem.batch * problem.heads * problem.num_queries;
  if (rows == 0) return;
  const c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  dispatch_lane_width(problem.head_dim, [&](auto per_lane) {
    forward_kernel<T, decltype(per_lane)::value>
        <<<grid_for(rows), kWarpsPerBlock * kWarp, 0, stream>>>(problem, q, k, v, out, logsumexp);
  });
  check_launch("sparse attention forward");
}

template <typename T>
void sparse_attention_backward_cuda(const SparseAttentionProblem& problem, int device,
                                    const int64_t* key_offsets, const int64_t* key_queries,
                                    const T* q, const T* k, const T* v, const T* out,
                                    const T* logsumexp, const T* grad_out, T* delta, T* grad_q,
                                    T* grad_k, T* grad_v) {
  const int64_t rows = problem.batch * problem.heads * problem.num_queries;
  const int64_t keys = problem.batch * problem.heads * problem.num_keys;
  const c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  dispatch_lane_width(problem.head_dim, [&](auto per_lane) {
    constexpr int kPerLane = decltype(per_lane)::value;
    if (rows > 0) {
      backward_query_kernel<T, kPerLane><<<grid_for(rows), kWarpsPerBlock * kWarp, 0, stream>>>(
          problem, q, k, v, out, logsumexp, grad_out, grad_q, delta);
    }
    if (keys > 0) {
      backward_key_kernel<T, kPerLane><<<grid_for(keys), kWarpsPerBlock * kWarp, 0, stream>>>(
          problem, key_offsets, key_queries, q, k, v, logsumexp, grad_out, delta, grad_k, grad_v);
    }
  });
  check_launch("sparse attention backward");
}

template void sparse_attention_forward_cuda<float>(const SparseAttentionProblem&, int,
                                                   const float*, const float*, const float*,
                                                   float*, float*);
template void sparse_attention_forward_cuda<double>(const SparseAttentionProblem&, int,
                                                    const double*, const double*, const double*,
                                                    double*, double*);
template void sparse_attention_backward_cuda<float>(const SparseAttentionProblem&, int,
                                                    const int64_t*, const int64_t*, const float*,
                                                    const float*, const float*, const float*,
                                                    const float*, const float*, float*, float*,
                                                    float*, float*);
template void sparse_attention_backward_cuda<double>(const SparseAttentionProblem&, int,
                                                     const int64_t*, const int64_t*,
                                                     const double*, const double*, const double*,
                                                     const double*, const double*, const double*,
                                                     double*, double*, double*, double*);

}  // namespace structdiff::kernels
