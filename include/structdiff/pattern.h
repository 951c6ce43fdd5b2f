// Attention patterns: for each query, the sorted list of keys it may attend to (CSR).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <torch/types.h>

namespace structdiff {

struct PatternStats {
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t entries = 0;
  int64_t max_degree = 0;
  int64_t min_degree = 0;
  double mean_degree = 0.0;
  double density = 0.0;  // entries / (rows * cols)
  bool symmetric = false;
};

// Immutable CSR pattern. Rows index queries, columns index keys. Construction validates
// its input and throws std::invalid_argument naming the offending row or index.
class AttentionPattern {
 public:
  AttentionPattern(int64_t num_queries, int64_t num_keys, std::vector<int64_t> row_offsets,
                   std::vector<int64_t> col_indices);

  int64_t num_queries() const { return num_queries_; }
  int64_t num_keys() const { return num_keys_; }
  int64_t num_entries() const { return static_cast<int64_t>(col_indices_.size()); }
  int64_t degree(int64_t row) const;
  int64_t max_degree() const { return max_degree_; }
  // True when square and (i, j) present iff (j, i) present.
  bool is_symmetric() const { return symmetric_; }
  bool contains(int64_t row, int64_t col) const;

  const std::vector<int64_t>& row_offsets() const { return row_offsets_; }
  const std::vector<int64_t>& col_indices() const { return col_indices_; }

  PatternStats stats() const;
  // Boolean (num_queries, num_keys) mask; for references and tests, O(rows * cols).
  torch::Tensor to_dense_mask() const;
  // Writes the mask as a PNG (white = allowed), one pixel per entry scaled to fit max_side.
  void write_png(const std::string& path, int64_t max_side = 1024) const;

  bool operator==(const AttentionPattern& other) const;

 private:
  int64_t num_queries_;
  int64_t num_keys_;
  std::vector<int64_t> row_offsets_;
  std::vector<int64_t> col_indices_;
  int64_t max_degree_ = 0;
  bool symmetric_ = false;
};

// Pattern builders. All validate sizes and indices and throw std::invalid_argument.
namespace patterns {

struct EdgeOptions {
  bool symmetrize = false;  // add (j, i) for every (i, j)
  bool self_edges = false;  // add (i, i) for every node
};

enum class Direction { prefix, suffix };

// Every query attends to every key.
AttentionPattern full(int64_t num_queries, int64_t num_keys);
// Query i attends to keys 0..i.
AttentionPattern causal(int64_t n);
// Query i attends to keys i-left .. i+right (clipped).
AttentionPattern sliding_window(int64_t n, int64_t left, int64_t right);
// Directed edges (query, key) over n nodes; duplicates are merged.
AttentionPattern from_edges(int64_t n, const std::vector<std::pair<int64_t, int64_t>>& edges,
                            EdgeOptions options = {});
// Undirected factors: every pair inside each clique is connected (both directions).
AttentionPattern from_cliques(int64_t n, const std::vector<std::vector<int64_t>>& cliques,
                              bool self_edges = true);
// Each query attends to k distinct keys drawn uniformly (deterministic given seed).
AttentionPattern random_per_row(int64_t num_queries, int64_t num_keys, int64_t k, uint64_t seed);
// Tracformer multi-scope encoder layer `layer` (1-based) over T tokens: the prefix version has
// scope {t - 2^layer + 1 .. t}, the suffix version {t .. t + 2^layer - 1} (paper Eq. 3, App. A).
AttentionPattern tracformer_encoder(int64_t T, int64_t layer, int64_t n_max, Direction direction);
// Tracformer decoder cross-attention for decoder layer `layer` (1-based) of `num_layers`,
// attending encoder layer num_layers - layer + 1 (paper Eqs. 5 and 6).
AttentionPattern tracformer_decoder(int64_t T, int64_t num_layers, int64_t layer,
                                    Direction direction);
// Entry-wise union; all patterns must have the same shape.
AttentionPattern unite(const std::vector<AttentionPattern>& parts);

}  // namespace patterns
}  // namespace structdiff
