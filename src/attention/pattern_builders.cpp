#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>

#include "structdiff/pattern.h"
#include "structdiff/runtime.h"

namespace structdiff::patterns {
namespace {

// Collects a CSR pattern row by row; a row's columns may arrive unsorted or repeated.
class PatternAssembler {
 public:
  PatternAssembler(int64_t num_queries, int64_t num_keys)
      : num_queries_(num_queries), num_keys_(num_keys) {
    row_offsets_.reserve(num_queries + 1);
    row_offsets_.push_back(0);
  }

  void add(int64_t col) { col_indices_.push_back(col); }
  void add_range(int64_t first, int64_t last) {
    for (int64_t col = first; col <= last; ++col) col_indices_.push_back(col);
  }
  void add_all(const std::vector<int64_t>& cols) {
    col_indices_.insert(col_indices_.end(), cols.begin(), cols.end());
  }

  void end_row() {
    const auto row_begin = col_indices_.begin() + row_offsets_.back();
    std::sort(row_begin, col_indices_.end());
    col_indices_.erase(std::unique(row_begin, col_indices_.end()), col_indices_.end());
    row_offsets_.push_back(static_cast<int64_t>(col_indices_.size()));
  }

  AttentionPattern build() {
    return AttentionPattern(num_queries_, num_keys_, std::move(row_offsets_),
                            std::move(col_indices_));
  }

 private:
  int64_t num_queries_;
  int64_t num_keys_;
  std::vector<int64_t> row_offsets_;
  std::vector<int64_t> col_indices_;
};

AttentionPattern from_rows(int64_t num_queries, int64_t num_keys,
                           const std::vector<std::vector<int64_t>>& rows) {
  PatternAssembler assembler(num_queries, num_keys);
  for (const auto& row : rows) {
    assembler.add_all(row);
    assembler.end_row();
  }
  return assembler.build();
}

void require_non_negative(const char* builder, const char* name, int64_t value) {
  if (value < 0) {
    throw std::invalid_argument(std::string(builder) + ": " + name +
                                " must be non-negative, got " + std::to_string(value));
  }
}

// A pattern stores one 8-byte key index per entry and an 8-byte offset per row; builders that
// gather rows first hold a vector (24 bytes) per row beside them. Checked before any of it is
// allocated, so a size the machine cannot hold is refused by name instead of dying in the
// allocator.
void require_pattern_memory(const char* builder, double rows, double entries) {
  char size[64];
  std::snprintf(size, sizeof size, "%.4g rows and %.4g entries", rows, entries);
  require_memory(32.0 * (rows + 1) + 16.0 * entries,
                 std::string("a ") + builder + " pattern of " + size);
}

std::string range_text(int64_t n) { return "[0, " + std::to_string(n) + ")"; }

// min(2^exponent, cap) without overflowing for large exponents; cap must be positive.
int64_t capped_power_of_two(int64_t exponent, int64_t cap) {
  if (exponent >= 62) return cap;
  return std::min(int64_t{1} << exponent, cap);
}

// Uniform in [0, bound) by rejection. std::uniform_int_distribution is implementation-defined,
// so it would make the same seed give different patterns under different standard libraries.
uint64_t uniform_below(std::mt19937_64& rng, uint64_t bound) {
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  const uint64_t limit = kMax - kMax % bound;  // a multiple of bound
  uint64_t draw = rng();
  while (draw >= limit) draw = rng();
  return draw % bound;
}

// Keys a Tracformer encoder token attends to within the candidate range [first, last]: all of
// them if there are at most n_max, otherwise exactly n_max by linear sampling that keeps both
// endpoints (the endpoints are what make the scopes grow without gaps, see the tests).
//
// This follows the paper's main text (Sec. 4.1: "selects exactly N_max embeddings from this range
// by sample linearly and round to the nearest integer"). Appendix A's step d =
// floor(2^(l-1) / (N_max - 1)) can yield N_max + 1 keys (e.g. 2^(l-1) = 8, N_max = 4 gives
// d = 2 and five keys), so it is not used.
void add_linear_samples(PatternAssembler& assembler, int64_t first, int64_t last, int64_t n_max) {
  const int64_t span = last - first;
  if (span + 1 <= n_max) {
    assembler.add_range(first, last);
    return;
  }
  // span >= n_max, so consecutive samples lie more than 1 apart and stay distinct when rounded.
  for (int64_t i = 0; i < n_max; ++i) {
    const double offset = static_cast<double>(i) * static_cast<double>(span) /
                          static_cast<double>(n_max - 1);
    assembler.add(first + std::llround(offset));
  }
}

}  // namespace

AttentionPattern full(int64_t num_queries, int64_t num_keys) {
  require_non_negative("full", "num_queries", num_queries);
  require_non_negative("full", "num_keys", num_keys);
  require_pattern_memory("full", static_cast<double>(num_queries),
                         static_cast<double>(num_queries) * static_cast<double>(num_keys));
  PatternAssembler assembler(num_queries, num_keys);
  for (int64_t query = 0; query < num_queries; ++query) {
    assembler.add_range(0, num_keys - 1);
    assembler.end_row();
  }
  return assembler.build();
}

AttentionPattern causal(int64_t n) {
  require_non_negative("causal", "n", n);
  require_pattern_memory("causal", static_cast<double>(n),
                         static_cast<double>(n) * static_cast<double>(n + 1) / 2);
  PatternAssembler assembler(n, n);
  for (int64_t query = 0; query < n; ++query) {
    assembler.add_range(0, query);
    assembler.end_row();
  }
  return assembler.build();
}

AttentionPattern sliding_window(int64_t n, int64_t left, int64_t right) {
  require_non_negative("sliding_window", "n", n);
  require_non_negative("sliding_window", "left", left);
  require_non_negative("sliding_window", "right", right);
  const double width = std::min<double>(static_cast<double>(left), static_cast<double>(n)) +
                       std::min<double>(static_cast<double>(right), static_cast<double>(n)) + 1;
  require_pattern_memory("sliding_window", static_cast<double>(n), static_cast<double>(n) * width);
  PatternAssembler assembler(n, n);
  for (int64_t query = 0; query < n; ++query) {
    const int64_t first = std::max<int64_t>(0, query - left);
    // Compared as a difference so that a huge `right` cannot overflow.
    const int64_t last = right >= n - 1 - query ? n - 1 : query + right;
    assembler.add_range(first, last);
    assembler.end_row();
  }
  return assembler.build();
}

AttentionPattern from_edges(int64_t n, const std::vector<std::pair<int64_t, int64_t>>& edges,
                            EdgeOptions options) {
  require_non_negative("from_edges", "n", n);
  require_pattern_memory("from_edges", static_cast<double>(n),
                         static_cast<double>(edges.size()) * (options.symmetrize ? 2 : 1) +
                             (options.self_edges ? static_cast<double>(n) : 0.0));
  std::vector<std::vector<int64_t>> rows(n);
  for (size_t position = 0; position < edges.size(); ++position) {
    const auto [query, key] = edges[position];
    if (query < 0 || query >= n || key < 0 || key >= n) {
      throw std::invalid_argument("from_edges: edge " + std::to_string(position) + " (" +
                                  std::to_string(query) + ", " + std::to_string(key) +
                                  ") has an endpoint outside " + range_text(n));
    }
    rows[query].push_back(key);
    if (options.symmetrize) rows[key].push_back(query);
  }
  if (options.self_edges) {
    for (int64_t node = 0; node < n; ++node) rows[node].push_back(node);
  }
  return from_rows(n, n, rows);
}

AttentionPattern from_cliques(int64_t n, const std::vector<std::vector<int64_t>>& cliques,
                              bool self_edges) {
  require_non_negative("from_cliques", "n", n);
  double clique_entries = 0;
  for (const auto& clique : cliques) {
    clique_entries += static_cast<double>(clique.size()) * static_cast<double>(clique.size());
  }
  require_pattern_memory("from_cliques", static_cast<double>(n),
                         clique_entries + (self_edges ? static_cast<double>(n) : 0.0));
  std::vector<std::vector<int64_t>> rows(n);
  for (size_t clique = 0; clique < cliques.size(); ++clique) {
    for (const int64_t member : cliques[clique]) {
      if (member < 0 || member >= n) {
        throw std::invalid_argument("from_cliques: clique " + std::to_string(clique) +
                                    " has member " + std::to_string(member) + " outside " +
                                    range_text(n));
      }
    }
    for (const int64_t query : cliques[clique]) {
      for (const int64_t key : cliques[clique]) {
        if (query != key) rows[query].push_back(key);
      }
    }
  }
  if (self_edges) {
    for (int64_t node = 0; node < n; ++node) rows[node].push_back(node);
  }
  return from_rows(n, n, rows);
}

AttentionPattern random_per_row(int64_t num_queries, int64_t num_keys, int64_t k, uint64_t seed) {
  require_non_negative("random_per_row", "num_queries", num_queries);
  require_non_negative("random_per_row", "num_keys", num_keys);
  require_non_negative("random_per_row", "k", k);
  if (k > num_keys) {
    throw std::invalid_argument("random_per_row: k = " + std::to_string(k) +
                                " exceeds num_keys = " + std::to_string(num_keys));
  }
  require_pattern_memory("random_per_row", static_cast<double>(num_queries) + static_cast<double>(num_keys),
                         static_cast<double>(num_queries) * static_cast<double>(k));
  std::mt19937_64 rng(seed);
  std::vector<char> taken(num_keys, 0);
  std::vector<int64_t> row;
  PatternAssembler assembler(num_queries, num_keys);
  for (int64_t query = 0; query < num_queries; ++query) {
    // Floyd's algorithm: k distinct keys with exactly k draws, whatever k / num_keys is.
    row.clear();
    for (int64_t bound = num_keys - k; bound < num_keys; ++bound) {
      int64_t key = static_cast<int64_t>(uniform_below(rng, static_cast<uint64_t>(bound) + 1));
      if (taken[key]) key = bound;
      taken[key] = 1;
      row.push_back(key);
    }
    for (const int64_t key : row) taken[key] = 0;
    assembler.add_all(row);
    assembler.end_row();
  }
  return assembler.build();
}

AttentionPattern tracformer_encoder(int64_t T, int64_t layer, int64_t n_max,
                                    Direction direction) {
  require_non_negative("tracformer_encoder", "T", T);
  if (layer < 1) {
    throw std::invalid_argument("tracformer_encoder: layer must be >= 1, got " +
                                std::to_string(layer));
  }
  if (n_max < 2) {
    throw std::invalid_argument("tracformer_encoder: n_max must be >= 2, got " +
                                std::to_string(n_max));
  }
  // The candidate range reaches 2^(layer-1) tokens back (prefix) or ahead (suffix); capping the
  // reach at T changes nothing after clipping to [0, T).
  const int64_t reach = capped_power_of_two(layer - 1, std::max<int64_t>(T, 1));
  require_pattern_memory("tracformer_encoder", static_cast<double>(T),
                         static_cast<double>(T) * static_cast<double>(std::min(n_max, reach + 1)));
  PatternAssembler assembler(T, T);
  for (int64_t t = 0; t < T; ++t) {
    if (direction == Direction::prefix) {
      add_linear_samples(assembler, std::max<int64_t>(0, t - reach), t, n_max);
    } else {
      add_linear_samples(assembler, t, std::min(T - 1, t + reach), n_max);
    }
    assembler.end_row();
  }
  return assembler.build();
}

AttentionPattern tracformer_decoder(int64_t T, int64_t num_layers, int64_t layer,
                                    Direction direction) {
  require_non_negative("tracformer_decoder", "T", T);
  if (num_layers < 1) {
    throw std::invalid_argument("tracformer_decoder: num_layers must be >= 1, got " +
                                std::to_string(num_layers));
  }
  if (layer < 1 || layer > num_layers) {
    throw std::invalid_argument("tracformer_decoder: layer " + std::to_string(layer) +
                                " outside [1, " + std::to_string(num_layers) + "]");
  }
  // Eqs. 5 and 6: keys congruent to t -+ 1 modulo 2^(L-l+1), strictly before (prefix) or after
  // (suffix) t. A modulus of T or more leaves only t -+ 1, so capping it at T is exact.
  const int64_t modulus = capped_power_of_two(num_layers - layer + 1, std::max<int64_t>(T, 1));
  require_pattern_memory("tracformer_decoder", static_cast<double>(T),
                         static_cast<double>(T) * (static_cast<double>(T) / static_cast<double>(modulus) + 1));
  PatternAssembler assembler(T, T);
  for (int64_t t = 0; t < T; ++t) {
    if (direction == Direction::prefix) {
      for (int64_t key = t - 1; key >= 0; key -= modulus) assembler.add(key);
    } else {
      for (int64_t key = t + 1; key < T; key += modulus) assembler.add(key);
    }
    assembler.end_row();
  }
  return assembler.build();
}

AttentionPattern unite(const std::vector<AttentionPattern>& parts) {
  if (parts.empty()) throw std::invalid_argument("unite: needs at least one pattern");
  const int64_t num_queries = parts.front().num_queries();
  const int64_t num_keys = parts.front().num_keys();
  for (size_t index = 1; index < parts.size(); ++index) {
    if (parts[index].num_queries() != num_queries || parts[index].num_keys() != num_keys) {
      throw std::invalid_argument(
          "unite: part " + std::to_string(index) + " has shape " +
          std::to_string(parts[index].num_queries()) + "x" +
          std::to_string(parts[index].num_keys()) + ", expected " + std::to_string(num_queries) +
          "x" + std::to_string(num_keys));
    }
  }
  PatternAssembler assembler(num_queries, num_keys);
  for (int64_t query = 0; query < num_queries; ++query) {
    for (const auto& part : parts) {
      const auto& cols = part.col_indices();
      for (int64_t index = part.row_offsets()[query]; index < part.row_offsets()[query + 1];
           ++index) {
        assembler.add(cols[index]);
      }
    }
    assembler.end_row();
  }
  return assembler.build();
}

}  // namespace structdiff::patterns
