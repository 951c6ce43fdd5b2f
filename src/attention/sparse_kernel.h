// Fused neighbour-list softmax attention kernels, for the CPU and for CUDA. Plain pointers and
// sizes only, so the kernel translation units need no heavy torch headers: the CPU one is compiled
// for the host CPU, the CUDA one by nvcc.
#pragma once

#include <cstdint>
#include <vector>

namespace structdiff::kernels {

// The most members one dense tile may have (its scores are members x members).
constexpr int64_t kMaxTileMembers = 64;
// A tile's score block is its members rounded up to whole blocks of the kernel's register-blocked
// GEMM: rows of 4 or 5, whichever pads less (25 members take 25 rows, not 28), and columns of
// kTileColumnBlock; head dimensions must be whole column blocks.
constexpr int64_t kTileColumnBlock = 16;
inline int64_t round_up(int64_t value, int64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}
inline int64_t tile_row_block(int64_t members) {
  return round_up(members, 5) < round_up(members, 4) ? 5 : 4;
}
inline int64_t tile_padded_rows(int64_t members) {
  return round_up(members, tile_row_block(members));
}
inline int64_t tile_padded_columns(int64_t members) {
  return round_up(members, kTileColumnBlock);
}

// A square pattern's entries split between dense tiles and neighbour lists. Tile t's members are
// tile_nodes[tile_offsets[t] .. tile_offsets[t + 1]), ascending; every pair of members is a
// pattern entry in both directions or absent, and the tile computes the pairs its row-major
// (members x members) mask at owned + mask_offsets[t] marks. Each entry is owned by exactly one
// tile or listed in the residual CSR (offsets from 0).
struct TilePlanView {
  int64_t num_tiles = 0;
  const int64_t* tile_offsets = nullptr;
  const int64_t* tile_nodes = nullptr;
  const int64_t* mask_offsets = nullptr;
  const uint8_t* owned = nullptr;
  const int64_t* residual_offsets = nullptr;
  const int64_t* residual_cols = nullptr;
};

struct TilePlan {
  std::vector<int64_t> tile_offsets, tile_nodes, mask_offsets, residual_offsets, residual_cols;
  std::vector<uint8_t> owned;
  int64_t num_tiles() const { return static_cast<int64_t>(tile_offsets.size()) - 1; }
};

// The view of a plan packed as PatternBatch packs it: index = [num_tiles, tile_offsets,
// tile_nodes, mask_offsets, residual_offsets (num_nodes + 1), residual_cols].
TilePlanView view_packed_tiles(const int64_t* index, const uint8_t* owned, int64_t num_nodes);

// Covers the n x n pattern (CSR, offsets may start anywhere) greedily by cliques of up to
// kMaxTileMembers members, keeping those whose new entries fill enough of their padded score block
// to beat the neighbour lists; no tiles for patterns with very long rows (sparse_tiles.cpp).
TilePlan plan_clique_tiles(int64_t n, const int64_t* row_offsets, const int64_t* col_indices);

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
  // CPU only, with one shared square pattern: when it has tiles, the kernels compute the tiles'
  // entries as dense blocks and read the rest from its residual CSR instead of the pattern's.
  TilePlanView tiles;
};

// How many elements the forward pass needs to keep the tiles' attention probabilities for the
// backward pass (every tile's padded score block, per (batch, head) slice); 0 when the CPU kernels
// will not use the problem's tiles (none, a head dimension they cannot take, or fewer slices than
// threads).
int64_t tile_probability_elements(const SparseAttentionProblem& problem);

// out: contiguous (batch, heads, num_queries, head_dim); logsumexp: (batch, heads, num_queries),
// kept for the backward pass. Rows without keys give zeros. tile_probabilities: null, or
// tile_probability_elements(problem) elements (non-zero) that receive the tiles' probabilities
// (the tiles are then used whatever the thread count has become).
template <typename T>
void sparse_attention_forward(const SparseAttentionProblem& problem, const T* q, const T* k,
                              const T* v, T* out, T* logsumexp, T* tile_probabilities = nullptr);

// grad_out and out are contiguous like the forward output; grad_q, grad_k and grad_v are
// contiguous (batch, heads, tokens, head_dim) and are overwritten. With the probabilities the
// forward pass kept, the tiles' entries are differentiated from them, no score recomputed; without,
// every entry from the neighbour lists.
template <typename T>
void sparse_attention_backward(const SparseAttentionProblem& problem, const T* q, const T* k,
                               const T* v, const T* out, const T* logsumexp, const T* grad_out,
                               const T* tile_probabilities, T* grad_q, T* grad_k, T* grad_v);

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
