// Graphical model description, JSON specs, compilation to masks, Theorem 3.1 checks.
#include <fstream>
#include <set>

#include <gtest/gtest.h>

#include "structdiff/graph.h"
#include "structdiff/sudoku_model.h"
#include "support/gradcheck.h"
#include "support/temporary_files.h"

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
                    std::invalid_argument, "discrete array 'x' needs options in 2..65536, got 1");
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
                    "graphical model spec /nonexistent/spec.json does not exist");
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
  EXPECT_THROW_WITH(m.node_permutation({{{"S", 0}, {"v", 0}, {"S", 0}}, cycle}),
                    std::invalid_argument, "axis 0 of array 'S' is listed twice");
  EXPECT_THROW_WITH(m.node_permutation({{{"S", 2}}, cycle}), std::invalid_argument,
                    "array 'S' with shape [3, 3] has no axis 2; its axes are 0..1");
  EXPECT_THROW_WITH(m.node_permutation({{}, cycle}), std::invalid_argument,
                    "an index permutation needs an (array, axis) to act on");
  EXPECT_THROW_WITH(m.node_permutation({{{"S", 0}}, {0, 3, 1}}), std::invalid_argument,
                    "permutation must hold each of 0..2 exactly once; 3 is out of range");
  EXPECT_THROW_WITH(m.node_permutation({{{"S", 0}}, {0, 1, 1}}), std::invalid_argument,
                    "permutation must hold each of 0..2 exactly once; 1 appears twice");
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

// ---- Hostile specs: every bad input is one clear std::invalid_argument --------------------------

namespace structdiff::graph {
namespace {

GraphicalModel parse(const std::string& text) {
  return GraphicalModel::from_json(nlohmann::json::parse(text));
}

std::string write_temp(const std::string& name, const std::string& contents) {
  static const TemporaryDirectory directory;
  const std::string path = directory.file(name);
  std::ofstream(path, std::ios::binary) << contents;
  return path;
}

TEST(GraphicalModelLimits, ShapesWhoseSizeOverflowsOrPassesTheLimitAreRejected) {
  // 2^32 * 2^32 wraps to 0 in 64 bits: the embedding group then wrote past the end (a segfault).
  EXPECT_THROW_WITH(
      parse(R"({"arrays": [{"name": "x", "shape": [4294967296, 4294967296]}],
                              "embedding_groups": [["x[0,0]"]]})"),
      std::invalid_argument,
      "arrays[0]: array 'x' with shape [4294967296, 4294967296] has more than 1048576 "
      "variables, the most a model may hold");
  EXPECT_THROW_WITH(parse(R"({"arrays": [{"name": "x", "shape": [9223372036854775807, 2]}]})"),
                    std::invalid_argument,
                    "array 'x' with shape [9223372036854775807, 2] has more than");
  EXPECT_THROW_WITH(parse(R"({"arrays": [{"name": "x", "shape": [1024, 1024, 2]}]})"),
                    std::invalid_argument,
                    "array 'x' with shape [1024, 1024, 2] has more than 1048576");
  EXPECT_THROW_WITH(
      parse(R"({"arrays": [{"name": "x", "shape": [524288]}, {"name": "y", "shape": [524289]}]})"),
      std::invalid_argument,
      "arrays[1]: array 'y' with shape [524289] adds 524289 variables to the 524288 before "
      "it, more than the 1048576 a model may hold");
  EXPECT_THROW_WITH(
      parse(R"({"arrays": [{"name": "x", "shape": [18446744073709551615]}]})"),
      std::invalid_argument,
      "arrays[0] 'x': shape [18446744073709551615] has 18446744073709551615 on axis 0; "
      "extents are integers >= 1");
  GraphicalModel api;
  EXPECT_THROW_WITH(
      api.add_array("x", {int64_t{1} << 32, int64_t{1} << 32}, VariableType::continuous),
      std::invalid_argument, "array 'x' with shape [4294967296, 4294967296] has more than");
  EXPECT_EQ(api.num_nodes(), 0);
  api.add_array("x", {kMaxVariables}, VariableType::continuous);  // the limit itself is fine
  EXPECT_EQ(api.num_nodes(), kMaxVariables);
}

TEST(GraphicalModelLimits, WildcardsThatWouldFillTheMaskAreRejectedBeforeExpanding) {
  EXPECT_THROW_WITH(
      parse(R"({"arrays": [{"name": "x", "shape": [1048576]}], "factors": [["x[*]"]]})"),
      std::invalid_argument,
      "factors[0]: 'x[*]': expands to 1048576 elements; with the attention mask limited "
      "to 16777216 entries, at most 3966 fit here");
  EXPECT_THROW_WITH(parse(R"({"arrays": [{"name": "x", "shape": [1024, 1024]}],
                              "edges": [["x[*,*]", "x[*,*]"]]})"),
                    std::invalid_argument, "edges[0]: 'x[*,*]': expands to 1048576 elements");
  GraphicalModel api;
  api.add_array("x", {5000}, VariableType::continuous);
  std::vector<Element> members;
  for (int64_t i = 0; i < 5000; ++i) members.push_back({"x", {i}});
  EXPECT_THROW_WITH(api.add_factor(members), std::invalid_argument,
                    "a factor of 5000 elements takes the attention mask past 16777216 entries");
}

TEST(GraphicalModelJson, UnknownKeysAreErrorsThatSuggestTheNearestKey) {
  EXPECT_THROW_WITH(
      parse(R"({"arrays": [{"name": "x", "shape": [2]}], "edgs": [["x[0]", "x[1]"]]})"),
      std::invalid_argument, "unknown key 'edgs' in spec; did you mean 'edges'?");
  EXPECT_THROW_WITH(parse(R"({"arrays": [{"name": "x", "shape": [2]}], "embeding_groups": []})"),
                    std::invalid_argument,
                    "unknown key 'embeding_groups' in spec; did you mean 'embedding_groups'?");
  EXPECT_THROW_WITH(parse(R"({"arrays": [{"name": "x", "shap": [2]}]})"), std::invalid_argument,
                    "unknown key 'shap' in arrays[0]; did you mean 'shape'?");
  EXPECT_THROW_WITH(parse(R"({"arrays": [{"name": "x", "type": "discrete", "optoins": 2}]})"),
                    std::invalid_argument,
                    "unknown key 'optoins' in arrays[0]; did you mean 'options'?");
  EXPECT_THROW_WITH(parse(R"({"arrays": [{"name": "x", "Type": "discrete"}]})"),
                    std::invalid_argument, "unknown key 'Type' in arrays[0]; did you mean 'type'?");
  EXPECT_THROW_WITH(parse(R"({"arrayz": [{"name": "x"}]})"), std::invalid_argument,
                    "unknown key 'arrayz' in spec; did you mean 'arrays'?");
  EXPECT_THROW_WITH(
      parse(R"({"arrays": [{"name": "x"}], "comment": "mine"})"), std::invalid_argument,
      "unknown key 'comment' in spec; valid keys are arrays, edges, factors, embedding_groups");
  EXPECT_THROW_WITH(parse(R"({"arrays": [{"name": "R"}], "edges": [["Rr", "R"]]})"),
                    std::invalid_argument,
                    "edges[0]: 'Rr': no array named 'Rr'; did you mean 'R'?");
}

TEST(GraphicalModelJson, IntegersAreWholeIntegers) {
  const char* two_by_three =
      R"({"arrays": [{"name": "x", "shape": [2, 3]}], "edges": [["x[0,0]", "%s"]]})";
  auto edge_to = [&](const std::string& element) {
    std::string text = two_by_three;
    return parse(text.replace(text.find("%s"), 2, element));
  };
  EXPECT_THROW_WITH(edge_to("x[1x,2]"), std::invalid_argument,
                    "edges[0]: 'x[1x,2]': index '1x' is not an integer or '*'");
  EXPECT_THROW_WITH(edge_to("x[1,2.7]"), std::invalid_argument,
                    "index '2.7' is not an integer or '*'");
  EXPECT_THROW_WITH(edge_to("x[+1,2]"), std::invalid_argument,
                    "index '+1' is not an integer or '*'");
  EXPECT_THROW_WITH(edge_to("x[0x1,2]"), std::invalid_argument,
                    "index '0x1' is not an integer or '*'");
  EXPECT_THROW_WITH(edge_to("x[1,]"), std::invalid_argument, "index '' is not an integer or '*'");
  EXPECT_THROW_WITH(edge_to("x[1,2]z"), std::invalid_argument,
                    "'x[1,2]z': an element is name[i,j,...] with one integer or '*' per axis");
  EXPECT_THROW_WITH(edge_to("x[1][2]"), std::invalid_argument, "an element is name[i,j,...]");
  EXPECT_THROW_WITH(edge_to("x[1,99999999999999999999]"), std::invalid_argument,
                    "index: '99999999999999999999' is too large for a 64-bit integer");
  EXPECT_THROW_WITH(
      edge_to("x[-1,2]"), std::invalid_argument,
      "'x[-1,2]': index -1 out of range for axis 0 of array 'x' with shape [2, 3]; it takes 0..1");
  EXPECT_EQ(edge_to("x[ 1 , * ]").compile(), edge_to("x[1,*]").compile());  // spaces around entries
  // In one dimension "x[1,]" used to read as x[1].
  EXPECT_THROW_WITH(
      parse(R"({"arrays": [{"name": "x", "shape": [3]}], "edges": [["x[1,]", "x[0]"]]})"),
      std::invalid_argument, "array 'x' has shape [3], so an index needs 1 entries");

  EXPECT_THROW_WITH(parse(R"({"arrays": [{"name": "x", "shape": [2.7]}]})"), std::invalid_argument,
                    "arrays[0] 'x': shape [2.7] has 2.7 on axis 0; extents are integers >= 1");
  EXPECT_THROW_WITH(parse(R"({"arrays": [{"name": "x", "shape": [3, 2.0]}]})"),
                    std::invalid_argument, "shape [3, 2.0] has 2.0 on axis 1");
  EXPECT_THROW_WITH(parse(R"({"arrays": [{"name": "x", "shape": ["3"]}]})"), std::invalid_argument,
                    "shape ['3'] has '3' on axis 0");
  EXPECT_THROW_WITH(parse(R"({"arrays": [{"name": "x", "shape": [3, 0]}]})"), std::invalid_argument,
                    "arrays[0]: array 'x' has extent 0 on axis 1; extents must be >= 1");
  EXPECT_THROW_WITH(parse(R"({"arrays": [{"name": "x", "shape": [-3]}]})"), std::invalid_argument,
                    "array 'x' has extent -3 on axis 0; extents must be >= 1");
  // Options used to be truncated (2.7 read as 2).
  EXPECT_THROW_WITH(parse(R"({"arrays": [{"name": "x", "type": "discrete", "options": 2.7}]})"),
                    std::invalid_argument,
                    "arrays[0] 'x': options must be an integer in 2..65536, got 2.7");
  EXPECT_THROW_WITH(parse(R"({"arrays": [{"name": "x", "type": "discrete", "options": "4"}]})"),
                    std::invalid_argument, "options must be an integer in 2..65536, got '4'");
  EXPECT_THROW_WITH(parse(R"({"arrays": [{"name": "x", "type": "discrete", "options": 65537}]})"),
                    std::invalid_argument,
                    "discrete array 'x' needs options in 2..65536, got 65537");
  EXPECT_THROW_WITH(parse(R"({"arrays": [{"name": "x", "options": 0}]})"), std::invalid_argument,
                    "arrays[0] 'x': continuous arrays take no options");
}

TEST(GraphicalModelJson, CommandLineAxesAndPermutationsAreWholeIntegers) {
  EXPECT_EQ(parse_axis("R:0"), (std::pair<std::string, int64_t>{"R", 0}));
  EXPECT_EQ(parse_axis("a:b:12"), (std::pair<std::string, int64_t>{"a:b", 12}));
  EXPECT_THROW_WITH(parse_axis("R:0x"), std::invalid_argument,
                    "axis 'R:0x': '0x' is not an integer >= 0; give ARRAY:AXIS, e.g. R:0");
  EXPECT_THROW_WITH(parse_axis("R:-1"), std::invalid_argument, "'-1' is not an integer >= 0");
  EXPECT_THROW_WITH(parse_axis("R: 1"), std::invalid_argument, "' 1' is not an integer >= 0");
  EXPECT_THROW_WITH(parse_axis("R:"), std::invalid_argument, "'' is not an integer >= 0");
  EXPECT_THROW_WITH(parse_axis("R"), std::invalid_argument, "axis 'R' is not ARRAY:AXIS, e.g. R:0");
  EXPECT_THROW_WITH(parse_axis(":0"), std::invalid_argument, "axis ':0' is not ARRAY:AXIS");
  EXPECT_THROW_WITH(
      parse_axis("R:99999999999999999999"), std::invalid_argument,
      "axis 'R:99999999999999999999': '99999999999999999999' is too large for a 64-bit integer");

  EXPECT_EQ(parse_permutation("2,0,1"), (std::vector<int64_t>{2, 0, 1}));
  EXPECT_EQ(parse_permutation(" 1, 010"), (std::vector<int64_t>{1, 10}));  // decimal, not octal
  EXPECT_THROW_WITH(parse_permutation("1,0x"), std::invalid_argument,
                    "permutation '1,0x': entry 1 '0x' is not an integer >= 0");
  EXPECT_THROW_WITH(parse_permutation("1,,0"), std::invalid_argument,
                    "entry 1 '' is not an integer >= 0");
  EXPECT_THROW_WITH(parse_permutation("1,0,"), std::invalid_argument,
                    "entry 2 '' is not an integer >= 0");
  EXPECT_THROW_WITH(parse_permutation("1.5,0"), std::invalid_argument,
                    "entry 0 '1.5' is not an integer >= 0");
  EXPECT_THROW_WITH(parse_permutation("-1,0"), std::invalid_argument,
                    "entry 0 '-1' is not an integer >= 0");
  EXPECT_THROW_WITH(parse_permutation(" "), std::invalid_argument,
                    "permutation is empty; give the new position of each index value, e.g. 1,0,2");
}

TEST(GraphicalModelJson, MalformedStructureIsNamed) {
  EXPECT_THROW_WITH(parse(R"([1, 2])"), std::invalid_argument,
                    "spec: needs an \"arrays\" list in a JSON object, got [...]");
  EXPECT_THROW_WITH(parse(R"({"arrays": []})"), std::invalid_argument,
                    "spec: \"arrays\" is empty; a model needs an array");
  EXPECT_THROW_WITH(
      parse(R"({"arrays": [3]})"), std::invalid_argument,
      "arrays[0]: an array is an object like {\"name\": \"x\", \"shape\": [2, 3]}, got 3");
  EXPECT_THROW_WITH(parse(R"({"arrays": [{"name": "x", "type": 5}]})"), std::invalid_argument,
                    "arrays[0] 'x': type must be continuous or discrete, got 5");
  EXPECT_THROW_WITH(parse(R"({"arrays": [{"name": "x", "shape": 3}]})"), std::invalid_argument,
                    "arrays[0] 'x': shape must be a list of extents, got 3");
  // A number or an object here used to escape as nlohmann::json::type_error.
  EXPECT_THROW_WITH(parse(R"({"arrays": [{"name": "x", "shape": [3]}], "edges": 5})"),
                    std::invalid_argument, "spec: \"edges\" must be a list, got 5");
  EXPECT_THROW_WITH(parse(R"({"arrays": [{"name": "x", "shape": [3]}], "factors": {"a": 1}})"),
                    std::invalid_argument, "spec: \"factors\" must be a list, got {...}");
  EXPECT_THROW_WITH(parse(R"({"arrays": [{"name": "x", "shape": [3]}], "factors": [5]})"),
                    std::invalid_argument,
                    "factors[0] must be a list of elements like \"x[0,1]\", got 5");
  EXPECT_THROW_WITH(parse(R"({"arrays": [{"name": "x", "shape": [3]}], "factors": [["x[0]", 1]]})"),
                    std::invalid_argument,
                    "factors[0]: elements are strings like \"x[0,1]\", got 1");
  EXPECT_THROW_WITH(parse(R"({"arrays": [{"name": "x", "shape": [3]}], "factors": [[]]})"),
                    std::invalid_argument, "factors[0] is empty; list at least one element");
  EXPECT_THROW_WITH(parse(R"({"arrays": [{"name": "x", "shape": [3]}], "embedding_groups": [[]]})"),
                    std::invalid_argument,
                    "embedding_groups[0] is empty; list at least one element");
  EXPECT_THROW_WITH(parse(R"({"arrays": [{"name": "x", "shape": [3]}], "edges": [["x[0]", 1]]})"),
                    std::invalid_argument,
                    "edges[0]: an edge is [from, to], two elements like \"x[0,1]\"");
  EXPECT_THROW_WITH(
      parse(R"({"arrays": [{"name": "x", "shape": [3]}], "edges": [["x[1]", "x[1]"]]})"),
      std::invalid_argument,
      "edges[0]: an edge from 'x[1]' to itself; every variable attends to itself already");
  EXPECT_THROW_WITH(parse(R"({"arrays": [{"name": "x"}], "edges": [["x[0]", "x"]]})"),
                    std::invalid_argument,
                    "edges[0]: 'x[0]': array 'x' is a scalar; name it without an index");
  // Between wildcards the pairs of a variable with itself are skipped: x[*] -> x[*] is a clique.
  EXPECT_EQ(
      parse(R"({"arrays": [{"name": "x", "shape": [3]}], "edges": [["x[*]", "x[*]"]]})").compile(),
      parse(R"({"arrays": [{"name": "x", "shape": [3]}], "factors": [["x[*]"]]})").compile());
}

TEST(GraphicalModelJson, NamesAreUnicodeButNeitherBracketsNorControlCharacters) {
  const GraphicalModel m = parse(
      R"({"arrays": [{"name": "größe", "shape": [2]}], "edges": [["größe[0]", "größe[1]"]]})");
  EXPECT_EQ(m.compile().num_entries(), 4);
  EXPECT_THROW_WITH(parse(R"({"arrays": [{"name": "a[0]", "shape": [2]}]})"), std::invalid_argument,
                    "arrays[0]: array name 'a[0]' holds a bracket or control character");
  // Escaped in the message, which stays one line.
  EXPECT_THROW_WITH(parse(R"({"arrays": [{"name": "a\nb"}]})"), std::invalid_argument,
                    "array name 'a\\x0Ab' holds a bracket or control character");
  EXPECT_THROW_WITH(parse(R"({"arrays": [{"name": "x"}], "edges": [["x", "c\u0007[1]"]]})"),
                    std::invalid_argument, "edges[0]: 'c\\x07[1]': no array named 'c\\x07'");
  EXPECT_THROW_WITH(parse(R"({"arrays": [{"name": ""}]})"), std::invalid_argument,
                    "arrays[0]: array name must not be empty");
}

TEST(GraphicalModelFiles, UnreadableFilesAreNamed) {
  EXPECT_THROW_WITH(GraphicalModel::load(::testing::TempDir()), std::invalid_argument,
                    "' is a directory, not a graphical model spec");
  EXPECT_THROW_WITH(
      GraphicalModel::load("/nonexistent/spec.json"), std::invalid_argument,
      "graphical model spec /nonexistent/spec.json does not exist");
  EXPECT_THROW_WITH(GraphicalModel::load(write_temp("empty.json", "")), std::invalid_argument,
                    "empty.json' is empty; a graphical model spec is a JSON object");
  try {
    GraphicalModel::load(write_temp("binary.json", std::string("\x7f"
                                                               "ELF\x02\x01\x01\0\0\n\x89PNG",
                                                               14)));
    ADD_FAILURE() << "binary file parsed";
  } catch (const std::invalid_argument& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find(
                  "binary.json' is not valid JSON: parse error at line 1, column 1: syntax error"),
              std::string::npos)
        << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    EXPECT_EQ(message.find('\x7f'), std::string::npos) << message;
  }
  EXPECT_THROW_WITH(GraphicalModel::load(
                        write_temp("nan.json", R"({"arrays": [{"name": "x", "shape": [NaN]}]})")),
                    std::invalid_argument,
                    "nan.json' is not valid JSON: parse error at line 1, column 37: syntax error "
                    "while parsing value - invalid literal");
  // nlohmann::json reports this one as out_of_range, not as a parse error.
  EXPECT_THROW_WITH(GraphicalModel::load(
                        write_temp("big.json", R"({"arrays": [{"name": "x", "shape": [1e400]}]})")),
                    std::invalid_argument,
                    "big.json' is not valid JSON: number overflow parsing '1e400'");
  // Neither the parser nor the destructor recurses, so deep nesting is just a wrong spec.
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_THROW_WITH(GraphicalModel::load(write_temp("deep.json", deep)), std::invalid_argument,
                    "deep.json: spec: needs an \"arrays\" list in a JSON object, got [...]");
  EXPECT_THROW_WITH(GraphicalModel::load(write_temp("deep2.json", "{\"arrays\": " + deep + "}")),
                    std::invalid_argument, "arrays[0]: an array is an object");
}

TEST(GraphicalModelFiles, RepeatedKeysAreErrorsNamingTheObject) {
  // nlohmann::json keeps the last of two keys silently: this spec used to give x shape [3].
  EXPECT_THROW_WITH(GraphicalModel::load(write_temp(
                        "dup.json", R"({"arrays": [{"name": "x", "shape": [2], "shape": [3]}]})")),
                    std::invalid_argument, "dup.json: key 'shape' appears twice in arrays[0]");
  EXPECT_THROW_WITH(
      GraphicalModel::load(write_temp(
          "dup2.json",
          R"({"arrays": [{"name": "x"}, {"name": "y", "type": "discrete", "options": 2, "options": 3}],
                                                                      "edges": []})")),
      std::invalid_argument, "dup2.json: key 'options' appears twice in arrays[1]");
  EXPECT_THROW_WITH(
      GraphicalModel::load(write_temp(
          "dup3.json", R"({"edges": [], "arrays": [{"name": "x"}], "edges": [["x", "x"]]})")),
      std::invalid_argument, "dup3.json: key 'edges' appears twice in spec");
  // The same key in different objects is fine.
  EXPECT_EQ(
      GraphicalModel::load(write_temp("ok.json", R"({"arrays": [{"name": "x"}, {"name": "y"}]})"))
          .num_nodes(),
      2);
}

}  // namespace
}  // namespace structdiff::graph
