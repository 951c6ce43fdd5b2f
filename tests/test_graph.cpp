// Graphical model description, JSON specs, compilation to masks, Theorem 3.1 checks.
#include <fstream>
#include <set>

#include <gtest/gtest.h>

#include "structdiff/graph.h"
#include "structdiff/sudoku_model.h"
#include "support/gradcheck.h"

namespace structdiff::graph {
namespace {

std::set<int64_t> keys_of(const AttentionPattern& p, int64_t row) {
  return {p.col_indices().begin() + p.row_offsets()[row],
          p.col_indices().begin() + p.row_offsets()[row + 1]};
}

TEST(GraphicalModel, SudokuMaskMatchesHandComputed) {
  const AttentionPattern mask = sudoku::graphical_model(2).compile();
  ASSERT_EQ(mask.num_queries(), 16);
  // Cell (0,0): its row 0..3, column 0,4,8,12, block 0,1,4,5.
  EXPECT_EQ(keys_of(mask, 0), (std::set<int64_t>{0, 1, 2, 3, 4, 5, 8, 12}));
  // Cell (2,3) = 11: row 8..11, column 3,7,11,15, block 10,11,14,15.
  EXPECT_EQ(keys_of(mask, 11), (std::set<int64_t>{3, 7, 8, 9, 10, 11, 14, 15}));
  EXPECT_TRUE(mask.is_symmetric());
  // 9x9: every cell sees 20 others and itself.
  const AttentionPattern big = sudoku::graphical_model(3).compile();
  EXPECT_EQ(big.num_entries(), 81 * 21);
  EXPECT_EQ(big.max_degree(), 21);
}

// The sorting graph of the GSDM paper for n = 2: u observed, P permutation (discrete), K = P u
// intermediates, s sorted. Edges: s chain, P row/column factors, u_j - K[:, j], K[i, :] - s_i,
// P_ij - K_ij.
GraphicalModel sorting2() {
  GraphicalModel m;
  m.add_array("u", {2}, VariableType::continuous);
  m.add_array("P", {2, 2}, VariableType::discrete, 2);
  m.add_array("K", {2, 2}, VariableType::continuous);
  m.add_array("s", {2}, VariableType::continuous);
  m.add_edge({"s", {0}}, {"s", {1}});
  for (int64_t i = 0; i < 2; ++i) {
    m.add_factor({{"P", {i, 0}}, {"P", {i, 1}}});
    m.add_factor({{"P", {0, i}}, {"P", {1, i}}});
    for (int64_t j = 0; j < 2; ++j) {
      m.add_edge({"u", {j}}, {"K", {i, j}});
      m.add_edge({"K", {i, j}}, {"s", {i}});
      m.add_edge({"P", {i, j}}, {"K", {i, j}});
    }
  }
  return m;
}

TEST(GraphicalModel, SortingMaskMatchesHandComputed) {
  const GraphicalModel m = sorting2();
  ASSERT_EQ(m.num_nodes(), 12);  // u 0-1, P 2-5, K 6-9, s 10-11
  const AttentionPattern mask = m.compile();
  EXPECT_EQ(keys_of(mask, 0), (std::set<int64_t>{0, 6, 8}));           // u0: K00, K10
  EXPECT_EQ(keys_of(mask, 2), (std::set<int64_t>{2, 3, 4, 6}));        // P00: row, column, K00
  EXPECT_EQ(keys_of(mask, 7), (std::set<int64_t>{1, 3, 7, 10}));       // K01: u1, P01, s0
  EXPECT_EQ(keys_of(mask, 10), (std::set<int64_t>{6, 7, 10, 11}));     // s0: K0*, s1
  EXPECT_TRUE(mask.is_symmetric());
}

TEST(GraphicalModel, ElementsAndNodesRoundTrip) {
  const GraphicalModel m = sorting2();
  for (int64_t node = 0; node < m.num_nodes(); ++node) EXPECT_EQ(m.node(m.element(node)), node);
  EXPECT_EQ(m.array_of(7).name, "K");
  EXPECT_EQ(m.array("P").width(), 2);
}

TEST(GraphicalModel, JsonSpecEqualsApi) {
  const nlohmann::json spec = nlohmann::json::parse(R"({
    "arrays": [{"name": "u", "shape": [2]},
               {"name": "P", "shape": [2, 2], "type": "discrete", "options": 2},
               {"name": "K", "shape": [2, 2]},
               {"name": "s", "shape": [2]}],
    "edges": [["s[0]", "s[1]"], ["u[*]", "K[0,*]"], ["K[0,*]", "s[0]"], ["K[1,*]", "s[1]"],
              ["P[0,0]", "K[0,0]"], ["P[0,1]", "K[0,1]"], ["P[1,0]", "K[1,0]"], ["P[1,1]", "K[1,1]"],
              ["u[0]", "K[1,0]"], ["u[1]", "K[1,1]"]],
    "factors": [["P[0,*]"], ["P[1,*]"], ["P[*,0]"], ["P[*,1]"]]
  })");
  // u[*] -> K[0,*] adds all four pairs, so the API model gets the extra cross edges too.
  GraphicalModel api = sorting2();
  api.add_edge({"u", {0}}, {"K", {0, 1}});
  api.add_edge({"u", {1}}, {"K", {0, 0}});
  EXPECT_EQ(GraphicalModel::from_json(spec).compile(), api.compile());
}

TEST(GraphicalModel, ValidationMessagesNameTheProblem) {
  using nlohmann::json;
  auto parse = [](const char* text) { return GraphicalModel::from_json(json::parse(text)); };
  EXPECT_THROW_WITH(parse(R"({"edges": []})"), std::invalid_argument, "needs an \"arrays\" list");
  EXPECT_THROW_WITH(parse(R"({"arrays": [{"name": "x", "shape": [3, 0]}]})"), std::invalid_argument,
                    "arrays[0]: array 'x' has extent 0 on axis 1");
  EXPECT_THROW_WITH(parse(R"({"arrays": [{"name": "x", "type": "discrete", "options": 1}]})"),
                    std::invalid_argument, "discrete array 'x' needs options >= 2, got 1");
  EXPECT_THROW_WITH(parse(R"({"arrays": [{"name": "x", "type": "boolean"}]})"), std::invalid_argument,
                    "type must be continuous or discrete, got 'boolean'");
  EXPECT_THROW_WITH(parse(R"({"arrays": [{"name": "x"}, {"name": "x"}]})"), std::invalid_argument,
                    "array 'x' is declared twice");
  EXPECT_THROW_WITH(parse(R"({"arrays": [{"name": "x", "shape": [3]}], "edges": [["x[0]", "y[1]"]]})"),
                    std::invalid_argument, "edges[0]: 'y[1]': no array named 'y'");
  EXPECT_THROW_WITH(parse(R"({"arrays": [{"name": "x", "shape": [3]}], "edges": [["x[0]", "x[3]"]]})"),
                    std::invalid_argument,
                    "edges[0]: 'x[3]': index 3 out of range for axis 0 of array 'x' with shape [3]");
  EXPECT_THROW_WITH(parse(R"({"arrays": [{"name": "x", "shape": [3, 3]}], "factors": [["x[1]"]]})"),
                    std::invalid_argument, "factors[0]: 'x[1]': array 'x' has shape [3, 3], so an index needs 2 entries");
  EXPECT_THROW_WITH(parse(R"({"arrays": [{"name": "x", "shape": [3]}], "edges": [["x[0]"]]})"),
                    std::invalid_argument, "edges[0]: an edge is [from, to]");
  EXPECT_THROW_WITH(parse(R"({"arrays": [{"name": "x", "shape": [3]}],
                              "embedding_groups": [["x[0]", "x[1]"], ["x[1]"]]})"),
                    std::invalid_argument, "embedding_groups[1]: 'x[1]' is already in embedding group 0");
  EXPECT_THROW_WITH(GraphicalModel::load("/nonexistent/spec.json"), std::invalid_argument,
                    "cannot open graphical model spec '/nonexistent/spec.json'");
}

TEST(Theorem31, SudokuRowsWithinABandAreInvariantAcrossBandsNot) {
  const GraphicalModel m = sudoku::graphical_model(3);
  EXPECT_TRUE(m.mask_invariant_under({{{"cell", 0}}, {1, 0, 2, 3, 4, 5, 6, 7, 8}}));
  EXPECT_TRUE(m.mask_invariant_under({{{"cell", 1}}, {0, 1, 2, 5, 3, 4, 6, 7, 8}}));
  EXPECT_TRUE(m.mask_invariant_under({{{"cell", 0}}, {3, 4, 5, 0, 1, 2, 6, 7, 8}}));  // bands
  EXPECT_FALSE(m.mask_invariant_under({{{"cell", 0}}, {3, 1, 2, 0, 4, 5, 6, 7, 8}}));
}

// The matrix S of a symmetric relation: S[i,j] and S[j,i] are linked, and v[i] to S[i,i].
GraphicalModel symmetric_matrix() {
  GraphicalModel m;
  m.add_array("S", {3, 3}, VariableType::continuous);
  m.add_array("v", {3}, VariableType::continuous);
  for (int64_t i = 0; i < 3; ++i) {
    m.add_edge({"v", {i}}, {"S", {i, i}});
    for (int64_t j = i + 1; j < 3; ++j) m.add_edge({"S", {i, j}}, {"S", {j, i}});
  }
  return m;
}

TEST(Theorem31, TwoAxesOfOneArrayArePermutedTogether) {
  const GraphicalModel m = symmetric_matrix();
  const std::vector<int64_t> cycle = {1, 2, 0};  // index 0 goes to 1, 1 to 2, 2 to 0
  // S[r,c] (node 3r+c) goes to S[cycle[r], cycle[c]]; v[i] (node 9+i) stays.
  EXPECT_EQ(m.node_permutation({{{"S", 0}, {"S", 1}}, cycle}),
            (std::vector<int64_t>{4, 5, 3, 7, 8, 6, 1, 2, 0, 9, 10, 11}));
  // Rows and columns together keep S[i,j] - S[j,i]; with v moved too, v[i] - S[i,i] as well.
  EXPECT_FALSE(m.mask_invariant_under({{{"S", 0}, {"S", 1}}, cycle}));
  EXPECT_TRUE(m.mask_invariant_under({{{"S", 0}, {"S", 1}, {"v", 0}}, cycle}));
  EXPECT_FALSE(m.mask_invariant_under({{{"S", 1}, {"v", 0}}, cycle}));  // columns alone do not
  EXPECT_THROW_WITH(m.node_permutation({{{"S", 0}, {"v", 0}, {"S", 0}}, cycle}), std::invalid_argument,
                    "axis 0 of array 'S' is listed twice");
}

TEST(Theorem31, BcmfPlateIndexMustMoveInEveryArray) {
  GraphicalModel m;
  const int64_t k = 3, n = 2, mm = 2;
  m.add_array("R", {k, n}, VariableType::discrete, 2);
  m.add_array("A", {k, mm}, VariableType::continuous);
  m.add_array("K", {k, n, mm}, VariableType::continuous);
  m.add_array("E", {n, mm}, VariableType::continuous);
  for (int64_t t = 0; t < k; ++t) {
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < mm; ++j) {
        m.add_edge({"K", {t, i, j}}, {"R", {t, i}});
        m.add_edge({"K", {t, i, j}}, {"A", {t, j}});
        m.add_edge({"E", {i, j}}, {"K", {t, i, j}});
      }
    }
  }
  const std::vector<int64_t> swap = {1, 0, 2};
  EXPECT_TRUE(m.mask_invariant_under({{{"R", 0}, {"A", 0}, {"K", 0}}, swap}));
  EXPECT_FALSE(m.mask_invariant_under({{{"R", 0}}, swap}));
  EXPECT_THROW_WITH(m.mask_invariant_under({{{"E", 0}}, swap}), std::invalid_argument,
                    "axis 0 of array 'E' has extent 2 but the permutation has 3 entries");
  EXPECT_THROW_WITH(m.mask_invariant_under({{{"R", 0}}, {0, 0, 1}}), std::invalid_argument,
                    "permutation must hold each of 0..2 exactly once");
}

}  // namespace
}  // namespace structdiff::graph

namespace structdiff::graph {
namespace {

TEST(GraphicalModel, ShippedExamplesLoad) {
  const std::string examples = std::string(STRUCTDIFF_SOURCE_DIR) + "/examples/";
  EXPECT_EQ(GraphicalModel::load(examples + "sudoku4.json").compile(),
            sudoku::graphical_model(2).compile());
  const GraphicalModel bcmf = GraphicalModel::load(examples + "bcmf-small.json");
  EXPECT_EQ(bcmf.num_nodes(), 39);  // the paper's Figure 1 example
  EXPECT_TRUE(bcmf.mask_invariant_under({{{"R", 0}, {"A", 0}, {"K", 0}}, {1, 0}}));
}

}  // namespace
}  // namespace structdiff::graph
