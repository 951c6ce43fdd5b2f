#include "structdiff/pattern.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "structdiff/attention_workloads.h"
#include "support/expect_throw.h"
#include "support/gradcheck.h"
#include "support/pattern_rows.h"
#include "support/temporary_files.h"

namespace structdiff {
namespace {

using patterns::Direction;
std::vector<int64_t> row_of(const AttentionPattern& pattern, int64_t row) {
  return rows_of(pattern)[row];
}

// A small example used by several tests:
//   row 0: 0 2
//   row 1: (empty)
//   row 2: 1 2 3
AttentionPattern example() { return AttentionPattern(3, 4, {0, 2, 2, 5}, {0, 2, 1, 2, 3}); }

// Layer counts that reach a scope covering the whole sequence: 1 .. ceil(log2 T) + 1.
int64_t layers_to_cover(int64_t T) {
  int64_t layers = 1;
  while ((int64_t{1} << (layers - 1)) < T) ++layers;
  return layers;
}

// scopes[t * T + u] is 1 when token u is in the scope of position t.
using Scopes = std::vector<uint8_t>;

Scopes single_token_scopes(int64_t T) {
  Scopes scopes(T * T, 0);
  for (int64_t t = 0; t < T; ++t) scopes[t * T + t] = 1;
  return scopes;
}

// scope^l_t = union over the keys t' that t attends to of scope^(l-1)_t'.
Scopes next_scopes(const AttentionPattern& layer, const Scopes& previous) {
  const int64_t T = layer.num_queries();
  Scopes scopes(T * T, 0);
  for (int64_t t = 0; t < T; ++t) {
    for (const int64_t key : row_of(layer, t)) {
      for (int64_t u = 0; u < T; ++u) scopes[t * T + u] |= previous[key * T + u];
    }
  }
  return scopes;
}

// The scopes the paper requires: the 2^layer tokens ending (prefix) or starting (suffix) at t.
bool in_expected_scope(int64_t t, int64_t u, int64_t layer, Direction direction) {
  const int64_t distance = direction == Direction::prefix ? t - u : u - t;
  return distance >= 0 && distance < (int64_t{1} << layer);
}

const std::vector<int64_t> kSequenceLengths = {1, 2, 3, 5, 16, 33, 100, 257};
const std::vector<int64_t> kNMaxValues = {2, 3, 4, 16};

// ---------------------------------------------------------------- AttentionPattern

TEST(AttentionPattern, Accessors) {
  const AttentionPattern pattern = example();
  EXPECT_EQ(pattern.num_queries(), 3);
  EXPECT_EQ(pattern.num_keys(), 4);
  EXPECT_EQ(pattern.num_entries(), 5);
  EXPECT_EQ(pattern.degree(0), 2);
  EXPECT_EQ(pattern.degree(1), 0);
  EXPECT_EQ(pattern.degree(2), 3);
  EXPECT_EQ(pattern.max_degree(), 3);
  EXPECT_FALSE(pattern.is_symmetric());
  EXPECT_EQ(pattern.row_offsets(), (std::vector<int64_t>{0, 2, 2, 5}));
  EXPECT_EQ(pattern.col_indices(), (std::vector<int64_t>{0, 2, 1, 2, 3}));
}

TEST(AttentionPattern, Contains) {
  const AttentionPattern pattern = example();
  const std::set<std::pair<int64_t, int64_t>> present = {{0, 0}, {0, 2}, {2, 1}, {2, 2}, {2, 3}};
  for (int64_t row = 0; row < 3; ++row) {
    for (int64_t col = 0; col < 4; ++col) {
      EXPECT_EQ(pattern.contains(row, col), present.count({row, col}) == 1)
          << "(" << row << ", " << col << ")";
    }
  }
  EXPECT_FALSE(pattern.contains(-1, 0));
  EXPECT_FALSE(pattern.contains(3, 0));
  EXPECT_FALSE(pattern.contains(0, 4));
}

TEST(AttentionPattern, DegreeRejectsRowOutOfRange) {
  EXPECT_THROW_WITH(example().degree(3), std::out_of_range, "row 3 out of range [0, 3)");
  EXPECT_THROW_WITH(example().degree(-1), std::out_of_range, "row -1");
}

TEST(AttentionPattern, Symmetric) {
  // {0<->1, 2->2} is symmetric; adding 0->2 alone breaks it.
  EXPECT_TRUE(AttentionPattern(3, 3, {0, 1, 2, 3}, {1, 0, 2}).is_symmetric());
  EXPECT_FALSE(AttentionPattern(3, 3, {0, 2, 3, 4}, {1, 2, 0, 2}).is_symmetric());
  // Square patterns only: a non-square pattern is never symmetric.
  EXPECT_FALSE(AttentionPattern(2, 3, {0, 0, 0}, {}).is_symmetric());
  EXPECT_TRUE(AttentionPattern(2, 2, {0, 0, 0}, {}).is_symmetric());
  EXPECT_TRUE(patterns::full(4, 4).is_symmetric());
  EXPECT_FALSE(patterns::causal(4).is_symmetric());
  EXPECT_TRUE(patterns::sliding_window(6, 2, 2).is_symmetric());
  EXPECT_FALSE(patterns::sliding_window(6, 2, 1).is_symmetric());
}

TEST(AttentionPattern, Stats) {
  const PatternStats stats = example().stats();
  EXPECT_EQ(stats.rows, 3);
  EXPECT_EQ(stats.cols, 4);
  EXPECT_EQ(stats.entries, 5);
  EXPECT_EQ(stats.max_degree, 3);
  EXPECT_EQ(stats.min_degree, 0);
  EXPECT_DOUBLE_EQ(stats.mean_degree, 5.0 / 3.0);
  EXPECT_DOUBLE_EQ(stats.density, 5.0 / 12.0);
  EXPECT_FALSE(stats.symmetric);

  const PatternStats window = patterns::sliding_window(5, 1, 1).stats();
  EXPECT_EQ(window.min_degree, 2);
  EXPECT_EQ(window.max_degree, 3);
  EXPECT_EQ(window.entries, 13);
  EXPECT_TRUE(window.symmetric);

  const PatternStats empty = AttentionPattern(0, 0, {0}, {}).stats();
  EXPECT_EQ(empty.entries, 0);
  EXPECT_EQ(empty.min_degree, 0);
  EXPECT_DOUBLE_EQ(empty.mean_degree, 0.0);
  EXPECT_DOUBLE_EQ(empty.density, 0.0);
}

TEST(AttentionPattern, DenseMask) {
  const torch::Tensor mask = example().to_dense_mask();
  EXPECT_EQ(mask.scalar_type(), torch::kBool);
  const torch::Tensor expected = torch::tensor({1, 0, 1, 0,    // row 0
                                                0, 0, 0, 0,    // row 1
                                                0, 1, 1, 1})   // row 2
                                     .view({3, 4})
                                     .to(torch::kBool);
  EXPECT_TRUE(torch::equal(mask, expected));
}

TEST(AttentionPattern, Equality) {
  EXPECT_TRUE(example() == example());
  EXPECT_FALSE(example() == AttentionPattern(3, 4, {0, 2, 2, 4}, {0, 2, 1, 2}));
  // Same entries, different number of keys.
  EXPECT_FALSE(example() == AttentionPattern(3, 5, {0, 2, 2, 5}, {0, 2, 1, 2, 3}));
}

TEST(AttentionPattern, ValidationErrors) {
  EXPECT_THROW_WITH(AttentionPattern(-1, 2, {0}, {}), std::invalid_argument, "negative shape");
  EXPECT_THROW_WITH(AttentionPattern(2, -3, {0, 0, 0}, {}), std::invalid_argument,
                    "negative shape 2x-3");
  EXPECT_THROW_WITH(AttentionPattern(2, 2, {0, 0}, {}), std::invalid_argument,
                    "row_offsets has 2 entries, expected num_queries + 1 = 3");
  EXPECT_THROW_WITH(AttentionPattern(1, 2, {1, 1}, {0}), std::invalid_argument,
                    "row_offsets[0] is 1, expected 0");
  EXPECT_THROW_WITH(AttentionPattern(1, 2, {0, 1}, {0, 1}), std::invalid_argument,
                    "row_offsets[1] is 1, expected col_indices.size() = 2");
  // The decrease is found before row 0 would read past the end of col_indices.
  EXPECT_THROW_WITH(AttentionPattern(2, 4, {0, 3, 2}, {0, 1}), std::invalid_argument,
                    "row_offsets decrease at row 1 (3 then 2)");
  EXPECT_THROW_WITH(AttentionPattern(4, 10, {0, 0, 0, 0, 2}, {3, 12}), std::invalid_argument,
                    "row 3 has column 12 out of range [0, 10)");
  EXPECT_THROW_WITH(AttentionPattern(1, 10, {0, 1}, {-1}), std::invalid_argument,
                    "row 0 has column -1 out of range [0, 10)");
  EXPECT_THROW_WITH(AttentionPattern(1, 10, {0, 2}, {9, 7}), std::invalid_argument,
                    "row 0: columns not sorted or duplicated (7 after 9)");
  EXPECT_THROW_WITH(AttentionPattern(2, 10, {0, 0, 2}, {4, 4}), std::invalid_argument,
                    "row 1: columns not sorted or duplicated (4 after 4)");
}

// ---------------------------------------------------------------- simple builders

TEST(Builders, Full) {
  const AttentionPattern pattern = patterns::full(2, 3);
  EXPECT_EQ(pattern, AttentionPattern(2, 3, {0, 3, 6}, {0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(patterns::full(0, 5).num_entries(), 0);
  EXPECT_EQ(patterns::full(3, 0), AttentionPattern(3, 0, {0, 0, 0, 0}, {}));
  EXPECT_THROW_WITH(patterns::full(-1, 2), std::invalid_argument,
                    "full: num_queries must be non-negative, got -1");
  EXPECT_THROW_WITH(patterns::full(2, -5), std::invalid_argument,
                    "full: num_keys must be non-negative, got -5");
}

TEST(Builders, Causal) {
  EXPECT_EQ(patterns::causal(3), AttentionPattern(3, 3, {0, 1, 3, 6}, {0, 0, 1, 0, 1, 2}));
  EXPECT_TRUE(torch::equal(patterns::causal(7).to_dense_mask(),
                           torch::ones({7, 7}, torch::kBool).tril()));
  EXPECT_THROW_WITH(patterns::causal(-2), std::invalid_argument,
                    "causal: n must be non-negative, got -2");
}

TEST(Builders, SlidingWindow) {
  // n = 5, one to the left, two to the right.
  EXPECT_EQ(rows_of(patterns::sliding_window(5, 1, 2)),
            (Rows{{0, 1, 2}, {0, 1, 2, 3}, {1, 2, 3, 4}, {2, 3, 4}, {3, 4}}));
  EXPECT_EQ(patterns::sliding_window(4, 0, 0), patterns::from_edges(4, {}, {false, true}));
  // Windows wider than the sequence clip to it, without overflowing.
  EXPECT_EQ(patterns::sliding_window(4, 100, INT64_MAX), patterns::full(4, 4));
  EXPECT_EQ(patterns::sliding_window(6, 6, 0), patterns::causal(6));
  EXPECT_THROW_WITH(patterns::sliding_window(-1, 1, 1), std::invalid_argument,
                    "sliding_window: n must be non-negative, got -1");
  EXPECT_THROW_WITH(patterns::sliding_window(4, -1, 1), std::invalid_argument,
                    "sliding_window: left must be non-negative, got -1");
  EXPECT_THROW_WITH(patterns::sliding_window(4, 1, -3), std::invalid_argument,
                    "sliding_window: right must be non-negative, got -3");
}

TEST(Builders, FromEdges) {
  const std::vector<std::pair<int64_t, int64_t>> edges = {{0, 2}, {2, 1}, {0, 2}, {0, 1}};
  // Duplicates merged, each row sorted.
  EXPECT_EQ(patterns::from_edges(3, edges), AttentionPattern(3, 3, {0, 2, 2, 3}, {1, 2, 1}));
  EXPECT_EQ(rows_of(patterns::from_edges(3, edges, {/*symmetrize=*/true, /*self_edges=*/false})),
            (Rows{{1, 2}, {0, 2}, {0, 1}}));
  EXPECT_EQ(rows_of(patterns::from_edges(3, edges, {/*symmetrize=*/false, /*self_edges=*/true})),
            (Rows{{0, 1, 2}, {1}, {1, 2}}));
  EXPECT_TRUE(patterns::from_edges(3, edges, {true, true}).is_symmetric());
}

TEST(Builders, FromEdgesRejectsEndpointsOutOfRange) {
  const std::vector<std::pair<int64_t, int64_t>> edges = {{0, 1}, {1, 2}, {3, 4},
                                                          {5, 6}, {2, 17}};
  EXPECT_THROW_WITH(patterns::from_edges(10, edges), std::invalid_argument,
                    "from_edges: edge 4 (2, 17) has an endpoint outside [0, 10)");
  EXPECT_THROW_WITH(patterns::from_edges(3, {{-1, 0}}), std::invalid_argument,
                    "edge 0 (-1, 0) has an endpoint outside [0, 3)");
  EXPECT_THROW_WITH(patterns::from_edges(-1, {}), std::invalid_argument,
                    "from_edges: n must be non-negative, got -1");
}

TEST(Builders, FromCliques) {
  const std::vector<std::vector<int64_t>> cliques = {{0, 1, 2}, {2, 4}};
  EXPECT_EQ(rows_of(patterns::from_cliques(5, cliques)),
            (Rows{{0, 1, 2}, {0, 1, 2}, {0, 1, 2, 4}, {3}, {2, 4}}));
  const AttentionPattern without_self = patterns::from_cliques(5, cliques, false);
  EXPECT_EQ(rows_of(without_self), (Rows{{1, 2}, {0, 2}, {0, 1, 4}, {}, {2}}));
  EXPECT_TRUE(without_self.is_symmetric());
  // Overlapping cliques and repeated members merge.
  EXPECT_EQ(patterns::from_cliques(3, {{0, 1}, {1, 0, 0}}, false),
            patterns::from_edges(3, {{0, 1}, {1, 0}}));
}

TEST(Builders, FromCliquesRejectsMembersOutOfRange) {
  EXPECT_THROW_WITH(patterns::from_cliques(10, {{0, 1}, {2, 3}, {4, 12}}),
                    std::invalid_argument, "from_cliques: clique 2 has member 12 outside [0, 10)");
  EXPECT_THROW_WITH(patterns::from_cliques(10, {{-4}}), std::invalid_argument,
                    "clique 0 has member -4 outside [0, 10)");
  EXPECT_THROW_WITH(patterns::from_cliques(-3, {}), std::invalid_argument,
                    "from_cliques: n must be non-negative, got -3");
}

TEST(Builders, RandomPerRowHasKDistinctKeys) {
  for (const int64_t k : {0, 1, 5, 19, 20}) {
    const AttentionPattern pattern = patterns::random_per_row(50, 20, k, 7);
    EXPECT_EQ(pattern.num_queries(), 50);
    EXPECT_EQ(pattern.num_keys(), 20);
    // The constructor already rejects unsorted or repeated keys; the degree is what remains.
    for (int64_t row = 0; row < 50; ++row) EXPECT_EQ(pattern.degree(row), k) << "k " << k;
  }
  EXPECT_EQ(patterns::random_per_row(4, 6, 6, 1), patterns::full(4, 6));
}

TEST(Builders, RandomPerRowIsDeterministicPerSeed) {
  EXPECT_EQ(patterns::random_per_row(30, 100, 8, 42), patterns::random_per_row(30, 100, 8, 42));
  EXPECT_FALSE(patterns::random_per_row(30, 100, 8, 42) ==
               patterns::random_per_row(30, 100, 8, 43));
  // Rows differ from one another, i.e. the generator is not reseeded per row.
  const Rows rows = rows_of(patterns::random_per_row(30, 100, 8, 42));
  EXPECT_EQ(std::set<std::vector<int64_t>>(rows.begin(), rows.end()).size(), rows.size());
}

TEST(Builders, RandomPerRowIsUniform) {
  // 4000 rows of 3 out of 10 keys: each key is expected 1200 times (standard deviation ~29).
  const AttentionPattern pattern = patterns::random_per_row(4000, 10, 3, 123);
  std::vector<int64_t> counts(10, 0);
  for (const int64_t key : pattern.col_indices()) ++counts[key];
  for (int64_t key = 0; key < 10; ++key) EXPECT_NEAR(counts[key], 1200, 150) << "key " << key;
}

TEST(Builders, RandomPerRowValidation) {
  EXPECT_THROW_WITH(patterns::random_per_row(3, 4, 5, 0), std::invalid_argument,
                    "random_per_row: k = 5 exceeds num_keys = 4");
  EXPECT_THROW_WITH(patterns::random_per_row(3, 4, -1, 0), std::invalid_argument,
                    "random_per_row: k must be non-negative, got -1");
  EXPECT_THROW_WITH(patterns::random_per_row(-3, 4, 1, 0), std::invalid_argument,
                    "random_per_row: num_queries must be non-negative, got -3");
  EXPECT_THROW_WITH(patterns::random_per_row(3, -4, 1, 0), std::invalid_argument,
                    "random_per_row: num_keys must be non-negative, got -4");
}

TEST(Builders, UniteIsTheOrOfDenseMasks) {
  const std::vector<AttentionPattern> parts = {patterns::causal(9),
                                               patterns::sliding_window(9, 0, 2),
                                               patterns::random_per_row(9, 9, 3, 5)};
  const AttentionPattern united = patterns::unite(parts);
  const torch::Tensor expected = parts[0].to_dense_mask().logical_or(parts[1].to_dense_mask())
                                     .logical_or(parts[2].to_dense_mask());
  EXPECT_TRUE(torch::equal(united.to_dense_mask(), expected));
  EXPECT_EQ(patterns::unite({parts[1]}), parts[1]);
  EXPECT_EQ(patterns::unite({patterns::causal(5), patterns::sliding_window(5, 0, 4)}),
            patterns::full(5, 5));
}

TEST(Builders, UniteValidation) {
  EXPECT_THROW_WITH(patterns::unite({}), std::invalid_argument,
                    "unite: needs at least one pattern");
  EXPECT_THROW_WITH(patterns::unite({patterns::full(3, 3), patterns::full(3, 3),
                                     patterns::full(3, 4)}),
                    std::invalid_argument, "unite: part 2 has shape 3x4, expected 3x3");
}

// ---------------------------------------------------------------- Tracformer encoder

TEST(Tracformer, EncoderSmallCases) {
  // Layer 1 reaches one token back: {t-1, t}.
  EXPECT_EQ(rows_of(patterns::tracformer_encoder(4, 1, 2, Direction::prefix)),
            (Rows{{0}, {0, 1}, {1, 2}, {2, 3}}));
  EXPECT_EQ(rows_of(patterns::tracformer_encoder(4, 1, 2, Direction::suffix)),
            (Rows{{0, 1}, {1, 2}, {2, 3}, {3}}));
  // Layer 3 reaches four back: range {t-4..t} holds 5 > n_max = 3 tokens once t >= 4, sampled
  // at t-4, t-2, t; shorter clipped ranges are taken whole.
  EXPECT_EQ(rows_of(patterns::tracformer_encoder(8, 3, 3, Direction::prefix)),
            (Rows{{0}, {0, 1}, {0, 1, 2}, {0, 2, 3}, {0, 2, 4}, {1, 3, 5}, {2, 4, 6}, {3, 5, 7}}));
  EXPECT_EQ(rows_of(patterns::tracformer_encoder(8, 3, 3, Direction::suffix)),
            (Rows{{0, 2, 4}, {1, 3, 5}, {2, 4, 6}, {3, 5, 7}, {4, 6, 7}, {5, 6, 7}, {6, 7}, {7}}));
  // Layer 4, n_max = 4 at t = 9: range {1..9}, offsets 8 * i / 3 = 0, 2.67, 5.33, 8 round to
  // 0, 3, 5, 8.
  EXPECT_EQ(row_of(patterns::tracformer_encoder(10, 4, 4, Direction::prefix), 9),
            (std::vector<int64_t>{1, 4, 6, 9}));
  EXPECT_EQ(row_of(patterns::tracformer_encoder(10, 4, 4, Direction::suffix), 0),
            (std::vector<int64_t>{0, 3, 5, 8}));
  // A range that fits n_max exactly is taken whole.
  EXPECT_EQ(row_of(patterns::tracformer_encoder(10, 3, 5, Direction::prefix), 9),
            (std::vector<int64_t>{5, 6, 7, 8, 9}));
  // Layers far beyond log2(T) do not overflow and reach the whole prefix.
  EXPECT_EQ(row_of(patterns::tracformer_encoder(6, 200, 16, Direction::prefix), 5),
            (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
}

TEST(Tracformer, EncoderRowsHaveAtMostNMaxKeysIncludingTheToken) {
  for (const Direction direction : {Direction::prefix, Direction::suffix}) {
    for (const int64_t T : kSequenceLengths) {
      for (const int64_t n_max : kNMaxValues) {
        for (int64_t layer = 1; layer <= layers_to_cover(T); ++layer) {
          const AttentionPattern pattern = patterns::tracformer_encoder(T, layer, n_max, direction);
          ASSERT_EQ(pattern.num_queries(), T);
          ASSERT_EQ(pattern.num_keys(), T);
          const int64_t reach = int64_t{1} << (layer - 1);
          for (int64_t t = 0; t < T; ++t) {
            const int64_t first = direction == Direction::prefix ? std::max<int64_t>(0, t - reach)
                                                                 : t;
            const int64_t last = direction == Direction::prefix ? t
                                                                : std::min(T - 1, t + reach);
            const std::vector<int64_t> keys = row_of(pattern, t);
            const std::string where = "T " + std::to_string(T) + " n_max " +
                                      std::to_string(n_max) + " layer " + std::to_string(layer) +
                                      " t " + std::to_string(t);
            EXPECT_EQ(static_cast<int64_t>(keys.size()), std::min(n_max, last - first + 1))
                << where;
            EXPECT_TRUE(pattern.contains(t, t)) << where;
            EXPECT_EQ(keys.front(), first) << where;
            EXPECT_EQ(keys.back(), last) << where;
          }
        }
      }
    }
  }
}

TEST(Tracformer, EncoderScopesGrowExactlyAsThePaperRequires) {
  for (const Direction direction : {Direction::prefix, Direction::suffix}) {
    for (const int64_t T : kSequenceLengths) {
      for (const int64_t n_max : kNMaxValues) {
        Scopes scopes = single_token_scopes(T);
        for (int64_t layer = 1; layer <= layers_to_cover(T); ++layer) {
          scopes = next_scopes(patterns::tracformer_encoder(T, layer, n_max, direction), scopes);
          for (int64_t t = 0; t < T; ++t) {
            for (int64_t u = 0; u < T; ++u) {
              ASSERT_EQ(scopes[t * T + u] == 1, in_expected_scope(t, u, layer, direction))
                  << (direction == Direction::prefix ? "prefix" : "suffix") << " T " << T
                  << " n_max " << n_max << " layer " << layer << " t " << t << " u " << u;
            }
          }
        }
      }
    }
  }
}

TEST(Tracformer, EncoderValidation) {
  EXPECT_THROW_WITH(patterns::tracformer_encoder(8, 0, 4, Direction::prefix),
                    std::invalid_argument, "tracformer_encoder: layer must be >= 1, got 0");
  EXPECT_THROW_WITH(patterns::tracformer_encoder(8, 1, 1, Direction::suffix),
                    std::invalid_argument, "tracformer_encoder: n_max must be >= 2, got 1");
  EXPECT_THROW_WITH(patterns::tracformer_encoder(-8, 1, 4, Direction::prefix),
                    std::invalid_argument, "tracformer_encoder: T must be non-negative, got -8");
}

// ---------------------------------------------------------------- Tracformer decoder

TEST(Tracformer, DecoderSmallCases) {
  // T = 8, L = 3. Layer 3 uses modulus 2^(3-3+1) = 2: keys t-1, t-3, ...
  EXPECT_EQ(rows_of(patterns::tracformer_decoder(8, 3, 3, Direction::prefix)),
            (Rows{{}, {0}, {1}, {0, 2}, {1, 3}, {0, 2, 4}, {1, 3, 5}, {0, 2, 4, 6}}));
  // Layer 1 uses modulus 8 >= T: only the neighbour t-1.
  EXPECT_EQ(rows_of(patterns::tracformer_decoder(8, 3, 1, Direction::prefix)),
            (Rows{{}, {0}, {1}, {2}, {3}, {4}, {5}, {6}}));
  // Suffix layer 2 uses modulus 4: keys t+1, t+5, ...
  EXPECT_EQ(rows_of(patterns::tracformer_decoder(8, 3, 2, Direction::suffix)),
            (Rows{{1, 5}, {2, 6}, {3, 7}, {4}, {5}, {6}, {7}, {}}));
  // Huge layer counts do not overflow.
  EXPECT_EQ(rows_of(patterns::tracformer_decoder(3, 500, 1, Direction::suffix)),
            (Rows{{1}, {2}, {}}));
}

TEST(Tracformer, DecoderKeysTileTheContextWithEncoderScopes) {
  for (const Direction direction : {Direction::prefix, Direction::suffix}) {
    for (const int64_t T : kSequenceLengths) {
      const int64_t max_layers = layers_to_cover(T);
      // Encoder scopes per layer, built from the encoder patterns themselves.
      std::vector<Scopes> encoder_scopes = {single_token_scopes(T)};
      for (int64_t layer = 1; layer <= max_layers; ++layer) {
        encoder_scopes.push_back(next_scopes(
            patterns::tracformer_encoder(T, layer, /*n_max=*/3, direction), encoder_scopes.back()));
      }
      for (int64_t num_layers = 1; num_layers <= max_layers; ++num_layers) {
        for (int64_t layer = 1; layer <= num_layers; ++layer) {
          const AttentionPattern decoder =
              patterns::tracformer_decoder(T, num_layers, layer, direction);
          const Scopes& scopes = encoder_scopes[num_layers - layer + 1];
          for (int64_t t = 0; t < T; ++t) {
            std::vector<int> times_covered(T, 0);
            for (const int64_t key : row_of(decoder, t)) {
              for (int64_t u = 0; u < T; ++u) times_covered[u] += scopes[key * T + u];
            }
            for (int64_t u = 0; u < T; ++u) {
              const bool in_context = direction == Direction::prefix ? u < t : u > t;
              ASSERT_EQ(times_covered[u], in_context ? 1 : 0)
                  << (direction == Direction::prefix ? "prefix" : "suffix") << " T " << T
                  << " L " << num_layers << " layer " << layer << " t " << t << " u " << u;
            }
          }
        }
      }
    }
  }
}

TEST(Tracformer, DecoderValidation) {
  EXPECT_THROW_WITH(patterns::tracformer_decoder(8, 0, 1, Direction::prefix),
                    std::invalid_argument, "tracformer_decoder: num_layers must be >= 1, got 0");
  EXPECT_THROW_WITH(patterns::tracformer_decoder(8, 3, 0, Direction::prefix),
                    std::invalid_argument, "tracformer_decoder: layer 0 outside [1, 3]");
  EXPECT_THROW_WITH(patterns::tracformer_decoder(8, 3, 4, Direction::suffix),
                    std::invalid_argument, "tracformer_decoder: layer 4 outside [1, 3]");
  EXPECT_THROW_WITH(patterns::tracformer_decoder(-1, 3, 1, Direction::suffix),
                    std::invalid_argument, "tracformer_decoder: T must be non-negative, got -1");
}

// ---------------------------------------------------------------- PNG

std::string read_file(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
}

// Width and height from the PNG header (big-endian at bytes 16 and 20 of the IHDR chunk).
std::pair<uint32_t, uint32_t> png_size(const std::string& bytes) {
  auto read_u32 = [&](size_t at) {
    uint32_t value = 0;
    for (size_t i = 0; i < 4; ++i) value = (value << 8) | static_cast<uint8_t>(bytes[at + i]);
    return value;
  };
  return {read_u32(16), read_u32(20)};
}

TEST(PatternImage, WritesPng) {
  const TemporaryDirectory directory;
  const std::string path = directory.file("small.png");
  std::remove(path.c_str());
  patterns::causal(20).write_png(path);
  const std::string bytes = read_file(path);
  ASSERT_GE(bytes.size(), 24u);
  EXPECT_EQ(bytes.substr(0, 4), "\x89PNG");
  EXPECT_EQ(png_size(bytes), (std::pair<uint32_t, uint32_t>{20, 20}));
  std::remove(path.c_str());
}

TEST(PatternImage, DownscalesByAnIntegerFactor) {
  const TemporaryDirectory directory;
  const std::string path = directory.file("scaled.png");
  // 250 x 100 with max_side 64: factor ceil(250 / 64) = 4, giving 63 rows by 25 columns.
  patterns::random_per_row(250, 100, 10, 3).write_png(path, 64);
  const std::string bytes = read_file(path);
  ASSERT_GE(bytes.size(), 24u);
  EXPECT_EQ(bytes.substr(0, 4), "\x89PNG");
  EXPECT_EQ(png_size(bytes), (std::pair<uint32_t, uint32_t>{25, 63}));
  std::remove(path.c_str());
}

TEST(PatternImage, Errors) {
  const TemporaryDirectory directory;
  const std::string missing_dir = directory.file("no_such_dir/pattern.png");
  EXPECT_THROW_WITH(patterns::full(4, 4).write_png(missing_dir), std::runtime_error,
                    "cannot write PNG " + missing_dir);
  EXPECT_THROW_WITH(patterns::full(4, 4).write_png(missing_dir, 0), std::invalid_argument,
                    "write_png: max_side must be >= 1, got 0");
  EXPECT_THROW_WITH(patterns::full(0, 4).write_png(missing_dir), std::invalid_argument,
                    "cannot write an empty 0x4 pattern");
}

// Each named workload holds its patterns and the shapes it runs at; a name outside the list is
// named with the list.
TEST(AttentionWorkloads, EveryNamedWorkloadHasPatternsAndAnUnknownOneIsNamed) {
  for (const std::string& name : attention_workload_names()) {
    const AttentionWorkload workload = make_attention_workload(name, 1);
    EXPECT_EQ(workload.name, name);
    ASSERT_FALSE(workload.patterns.empty()) << name;
    EXPECT_GT(workload.patterns.front().num_entries(), 0) << name;
    EXPECT_GT(workload.batch * workload.heads * workload.head_dim, 0) << name;
  }
  EXPECT_EQ(make_attention_workload("sudoku9", 1).patterns.front().num_entries(), 81 * 21);
  EXPECT_THROW_WITH(make_attention_workload("sudoku8", 1), std::invalid_argument,
                    "unknown attention workload 'sudoku8' (choose sudoku9, gsdm-sudoku9");
}

}  // namespace
}  // namespace structdiff
