// The program -> graphical-model tracer: the spec note's worked masks (§3.3 a-e) bit for bit, the
// five problem families traced as programs against their hand-built graphs, plates checked by
// Theorem 3.1, the mask ablations, and every bad program named.
#include <algorithm>
#include <map>
#include <numeric>
#include <random>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "structdiff/gsdm_problems.h"
#include "structdiff/sudoku_model.h"
#include "structdiff/tracer.h"
#include "support/expect_throw.h"
#include "support/pattern_rows.h"

namespace structdiff::graph {
namespace {

// Embedding groups as a partition: group ids renumbered by first appearance.
std::vector<int64_t> canonical_groups(const GraphicalModel& m) {
  std::map<int64_t, int64_t> renamed;
  std::vector<int64_t> out;
  for (int64_t g : m.embedding_group_of_node()) {
    if (g < 0) {
      out.push_back(-1);
    } else {
      out.push_back(renamed.emplace(g, static_cast<int64_t>(renamed.size())).first->second);
    }
  }
  return out;
}

void expect_same_model(const GraphicalModel& traced, const GraphicalModel& hand_built) {
  ASSERT_EQ(traced.arrays().size(), hand_built.arrays().size());
  for (size_t i = 0; i < traced.arrays().size(); ++i) {
    const Array &a = traced.arrays()[i], &b = hand_built.arrays()[i];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.size(), b.size()) << a.name;  // {} and {1} both denote a scalar
    if (a.size() > 1) EXPECT_EQ(a.shape, b.shape) << a.name;
    EXPECT_EQ(a.type, b.type) << a.name;
    EXPECT_EQ(a.options, b.options) << a.name;
  }
  EXPECT_EQ(rows_of(traced.compile()), rows_of(hand_built.compile()));
  EXPECT_EQ(canonical_groups(traced), canonical_groups(hand_built));
}

// ---- the five families as generative programs -------------------------------------------------

// E (m x n) = A (m x k) R (k x n) through C_ijl = A_il R_lj (BCMF: R binary; matrix inversion: R
// continuous and A observed). Paper Fig. 17 is bcmf_program(3, 3, 2).
Tracer product_program(int64_t m, int64_t n, int64_t k, VariableType r_type, bool observe_a,
                       bool intermediates, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  Tracer t({intermediates});
  t.plate("i", {{"A", 0}, {"C", 0}, {"E", 0}});
  t.plate("j", {{"R", 1}, {"C", 1}, {"E", 1}});
  t.plate("l", {{"A", 1}, {"R", 0}, {"C", 2}});
  std::vector<std::vector<Traced>> A(m), R(k);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t l = 0; l < k; ++l) {
      A[i].push_back(observe_a
                         ? t.observe("A", {i, l}, VariableType::continuous, 0, {}, uniform(rng))
                         : t.sample("A", {i, l}, VariableType::continuous, 0, {}, uniform(rng)));
    }
  }
  const int64_t r_options = r_type == VariableType::discrete ? 2 : 0;
  for (int64_t l = 0; l < k; ++l) {
    for (int64_t j = 0; j < n; ++j) {
      const double r =
          r_type == VariableType::discrete ? (uniform(rng) < 0.3 ? 1.0 : 0.0) : uniform(rng);
      R[l].push_back(t.sample("R", {l, j}, r_type, r_options, {}, r));
    }
  }
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      Traced dot = 0.0;
      for (int64_t l = 0; l < k; ++l) dot += t.intermediate("C", {i, j, l}, A[i][l] * R[l][j]);
      t.observe("E", {i, j}, VariableType::continuous, 0, {dot}, dot.value());
    }
  }
  return t;
}

// u observed; P the permutation that sorts it; C_ij = P_ij u_j; s_i = sum_j C_ij, with factors on
// P's rows and columns and between neighbours of s; EE groups as the hand-built graph's.
Tracer sorting_program(int64_t n, bool intermediates, std::mt19937_64& rng) {
  std::normal_distribution<double> normal;
  Tracer t({intermediates});
  t.plate("j", {{"u", 0}, {"P", 1}, {"C", 1}});
  std::vector<Traced> u, s, c_all, p_all;
  std::vector<double> drawn;
  for (int64_t j = 0; j < n; ++j) drawn.push_back(normal(rng));
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return drawn[a] < drawn[b]; });
  for (int64_t j = 0; j < n; ++j)
    u.push_back(t.observe("u", {j}, VariableType::continuous, 0, {}, drawn[j]));
  std::vector<std::vector<Traced>> P(n);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      P[i].push_back(t.sample("P", {i, j}, VariableType::discrete, 2, {}, order[i] == j ? 1 : 0));
      p_all.push_back(P[i][j]);
    }
  }
  for (int64_t i = 0; i < n; ++i) {
    Traced sum = 0.0;
    for (int64_t j = 0; j < n; ++j) {
      const Traced c = t.intermediate("C", {i, j}, P[i][j] * u[j]);
      c_all.push_back(c);
      sum += c;
    }
    s.push_back(t.dirac("s", {i}, sum));
  }
  for (int64_t i = 0; i < n; ++i) {
    std::vector<Traced> row, column;
    for (int64_t j = 0; j < n; ++j) {
      row.push_back(P[i][j]);
      column.push_back(P[j][i]);
    }
    t.factor(row);
    t.factor(column);
  }
  for (int64_t i = 0; i + 1 < n; ++i) t.factor({s[i], s[i + 1]});
  t.share_embedding(u);
  t.share_embedding(p_all);
  if (t.keeps_intermediates()) t.share_embedding(c_all);
  for (const Traced& si : s) t.share_embedding({si});
  return t;
}

// A balanced tree of AND gates over 2^depth observed bits; inner gate outputs are intermediates.
Tracer circuit_program(int64_t depth, bool intermediates, std::mt19937_64& rng) {
  Tracer t({intermediates});
  std::vector<Traced> layer;
  for (int64_t i = 0; i < (int64_t{1} << depth); ++i) {
    layer.push_back(
        t.observe("x", {i}, VariableType::discrete, 2, {}, static_cast<double>(rng() & 1)));
  }
  for (int64_t level = 1; level <= depth; ++level) {
    std::vector<Traced> next;
    for (size_t g = 0; g < layer.size() / 2; ++g) {
      const Traced out = logical_and(layer[2 * g], layer[2 * g + 1]);
      next.push_back(level == depth
                         ? t.dirac("y", {}, out, VariableType::discrete, 2)
                         : t.intermediate("h" + std::to_string(level), {static_cast<int64_t>(g)},
                                          out, VariableType::discrete, 2));
    }
    layer = next;
  }
  return t;
}

Tracer sudoku_program(int64_t n) {
  const int64_t side = n * n;
  Tracer t;
  std::vector<std::vector<Traced>> cell(side);
  for (int64_t r = 0; r < side; ++r) {
    for (int64_t c = 0; c < side; ++c) {
      cell[r].push_back(
          t.sample("cell", {r, c}, VariableType::discrete, side, {}, (r * n + r / n + c) % side));
    }
  }
  for (int64_t i = 0; i < side; ++i) {
    std::vector<Traced> row, column, block;
    for (int64_t j = 0; j < side; ++j) {
      row.push_back(cell[i][j]);
      column.push_back(cell[j][i]);
      block.push_back(cell[(i / n) * n + j / n][(i % n) * n + j % n]);
    }
    t.factor(row);
    t.factor(column);
    t.factor(block);
  }
  for (int64_t r = 0; r < side; ++r) {
    for (int64_t stack = 0; stack < n; ++stack) {
      std::vector<Traced> group(cell[r].begin() + stack * n, cell[r].begin() + (stack + 1) * n);
      t.share_embedding(group);
    }
  }
  return t;
}

GraphicalModel registry_graph(const std::string& name, std::vector<int64_t> size,
                              bool intermediates) {
  const gsdm::Problem& p = gsdm::find_problem(name);
  return p.graph(gsdm::resolve_options(p, {std::move(size), intermediates}));
}

// ---- spec note §3.3
// ------------------------------------------------------------------------------

TEST(Tracer, BcmfWithIntermediatesIsWorkedExampleA) {
  std::mt19937_64 rng(1);
  const GraphicalModel m =
      product_program(1, 2, 2, VariableType::discrete, false, true, rng).graph();
  const Rows expected = {{0, 6, 8},     {1, 7, 9},     {2, 6},        {3, 8},
                         {4, 7},        {5, 9},        {0, 2, 6, 10}, {1, 4, 7, 10},
                         {0, 3, 8, 11}, {1, 5, 9, 11}, {6, 7, 10},    {8, 9, 11}};
  EXPECT_EQ(rows_of(m.compile()), expected);
  EXPECT_EQ(m.compile().num_entries(), 36);
}

TEST(Tracer, DroppingIntermediatesIsWorkedExampleB) {
  std::mt19937_64 rng(1);
  const GraphicalModel m =
      product_program(1, 2, 2, VariableType::discrete, false, false, rng).graph();
  const Rows expected = {{0, 6, 7}, {1, 6, 7}, {2, 6},          {3, 7},
                         {4, 6},    {5, 7},    {0, 1, 2, 4, 6}, {0, 1, 3, 5, 7}};
  EXPECT_EQ(rows_of(m.compile()), expected);
}

// Figure 17's program is the hand-built BCMF(3,3,2), and the project's JSON example of it
// (examples/bcmf-small.json: A and E transposed, C named K and indexed [l, j, i]).
TEST(Tracer, Figure17ProgramIsTheHandBuiltBcmf) {
  std::mt19937_64 rng(1);
  const GraphicalModel traced =
      product_program(3, 3, 2, VariableType::discrete, false, true, rng).graph();
  EXPECT_EQ(traced.num_nodes(), 39);
  EXPECT_EQ(traced.compile().num_entries(), 147);
  expect_same_model(traced, registry_graph("bcmf", {3, 3, 2}, true));
  const GraphicalModel json =
      GraphicalModel::load(STRUCTDIFF_SOURCE_DIR "/examples/bcmf-small.json");
  const auto in_json = [&](int64_t node) {
    Element e = traced.element(node);
    if (e.array == "A" || e.array == "E") std::swap(e.index[0], e.index[1]);
    if (e.array == "C") e = {"K", {e.index[2], e.index[1], e.index[0]}};
    return json.node(e);
  };
  const AttentionPattern a = traced.compile(), b = json.compile();
  ASSERT_EQ(a.num_entries(), b.num_entries());
  for (int64_t q = 0; q < traced.num_nodes(); ++q) {
    for (int64_t k = 0; k < traced.num_nodes(); ++k) {
      EXPECT_EQ(a.contains(q, k), b.contains(in_json(q), in_json(k))) << q << ", " << k;
    }
  }
}

TEST(Tracer, BooleanCircuitIsWorkedExampleD) {
  std::mt19937_64 rng(1);
  EXPECT_EQ(rows_of(circuit_program(2, true, rng).graph().compile()),
            (Rows{{0, 4}, {1, 4}, {2, 5}, {3, 5}, {0, 1, 4, 6}, {2, 3, 5, 6}, {4, 5, 6}}));
  EXPECT_EQ(rows_of(circuit_program(2, false, rng).graph().compile()),
            (Rows{{0, 4}, {1, 4}, {2, 4}, {3, 4}, {0, 1, 2, 3, 4}}));
}

TEST(Tracer, SortingWithFactorsIsWorkedExampleE) {
  std::mt19937_64 rng(1);
  const Rows expected = {{0, 6, 8},     {1, 7, 9},     {2, 3, 4, 6},   {2, 3, 5, 7},
                         {2, 4, 5, 8},  {3, 4, 5, 9},  {0, 2, 6, 10},  {1, 3, 7, 10},
                         {0, 4, 8, 11}, {1, 5, 9, 11}, {6, 7, 10, 11}, {8, 9, 10, 11}};
  const AttentionPattern mask = sorting_program(2, true, rng).graph().compile();
  EXPECT_EQ(rows_of(mask), expected);
  EXPECT_EQ(mask.num_entries(), 46);
}

TEST(Tracer, AFactorOverExpressionsConnectsWhatTheyReadAndArithmeticCreatesNoVariables) {
  Tracer t;
  const Traced a = t.sample("s", {0}, VariableType::continuous, 0);
  const Traced b = t.sample("s", {1}, VariableType::continuous, 0);
  const Traced sum = max(a, -b) * 2.0 + logical_not(a) / 3.0;
  EXPECT_FALSE(sum.is_variable());
  EXPECT_EQ(sum.deps(), (std::vector<int64_t>{0, 1}));
  t.factor({sum});
  const GraphicalModel m = t.graph();
  EXPECT_EQ(m.num_nodes(), 2);
  EXPECT_EQ(rows_of(m.compile()), (Rows{{0, 1}, {0, 1}}));
}

// A variable's value reads only itself: E = dirac(C0 + C1) has parents {C0, C1}, not A and R.
TEST(Tracer, EdgesAreOneHop) {
  Tracer t;
  const Traced a = t.sample("a", {}, VariableType::continuous, 0);
  const Traced c = t.dirac("c", {}, a * 2.0);
  t.dirac("e", {}, c + 1.0);
  EXPECT_EQ(rows_of(t.graph().compile()), (Rows{{0, 1}, {0, 1, 2}, {1, 2}}));
}

// ---- the five families against their hand-built graphs
// -------------------------------------------

TEST(Tracer, EveryProblemFamilyTracesToItsHandBuiltGraph) {
  std::mt19937_64 rng(7);
  for (const bool intermediates : {true, false}) {
    SCOPED_TRACE(intermediates ? "with intermediates" : "without intermediates");
    for (int64_t n : {2, 5, 20}) {
      expect_same_model(sorting_program(n, intermediates, rng).graph(),
                        registry_graph("sorting", {n}, intermediates));
    }
    for (std::vector<int64_t> s : {std::vector<int64_t>{3, 3, 2}, {8, 8, 4}, {5, 7, 3}}) {
      expect_same_model(
          product_program(s[0], s[1], s[2], VariableType::discrete, false, intermediates, rng)
              .graph(),
          registry_graph("bcmf", s, intermediates));
    }
    for (int64_t n : {2, 5}) {
      expect_same_model(
          product_program(n, n, n, VariableType::continuous, true, intermediates, rng).graph(),
          registry_graph("matrix-inversion", {n}, intermediates));
    }
    for (int64_t depth : {1, 2, 5}) {
      expect_same_model(circuit_program(depth, intermediates, rng).graph(),
                        registry_graph("boolean", {depth}, intermediates));
    }
  }
  for (int64_t n : {2, 3}) expect_same_model(sudoku_program(n).graph(), sudoku::graphical_model(n));
}

// A traced model written as a JSON spec reads back as the same model (what `structdiff gsdm mask
// --spec` draws), scalars and embedding groups included.
TEST(Tracer, ModelsRoundTripThroughTheirJsonSpec) {
  std::mt19937_64 rng(1);
  for (const GraphicalModel& m :
       {sorting_program(4, true, rng).graph(), circuit_program(3, false, rng).graph(),
        product_program(2, 3, 2, VariableType::discrete, false, true, rng).graph(),
        sudoku_program(2).graph()}) {
    const nlohmann::json spec = m.to_json();
    expect_same_model(GraphicalModel::from_json(nlohmann::json::parse(spec.dump())), m);
  }
}

// The plates' relabellings are the invariances the hand-built graphs were checked for.
TEST(Tracer, PlatePermutationsPassTheInvarianceCheck) {
  std::mt19937_64 rng(1);
  const Tracer bcmf = product_program(3, 4, 2, VariableType::discrete, false, true, rng);
  const std::vector<IndexPermutation> perms = bcmf.plate_permutations();
  ASSERT_EQ(perms.size(), 5u);  // i and j: a swap and a cycle each; l (extent 2): one swap
  const GraphicalModel hand_built = registry_graph("bcmf", {3, 4, 2}, true);
  for (const IndexPermutation& p : perms) EXPECT_TRUE(hand_built.mask_invariant_under(p));
  EXPECT_EQ(perms[4].axes,
            (std::vector<std::pair<std::string, int64_t>>{{"A", 1}, {"R", 0}, {"C", 2}}));
  EXPECT_EQ(perms[4].permutation, (std::vector<int64_t>{1, 0}));
  // Without intermediates the plates skip the dropped array C.
  const Tracer without = product_program(3, 4, 2, VariableType::discrete, false, false, rng);
  EXPECT_EQ(without.plate_permutations()[4].axes,
            (std::vector<std::pair<std::string, int64_t>>{{"A", 1}, {"R", 0}}));
  for (const IndexPermutation& p : sorting_program(5, true, rng).plate_permutations()) {
    EXPECT_TRUE(registry_graph("sorting", {5}, true).mask_invariant_under(p));
  }
}

TEST(Tracer, APlateThatIsNoSymmetryIsRejected) {
  Tracer t;
  t.plate("j", {{"u", 0}});  // P's columns carry j too, but are not listed
  std::vector<Traced> u;
  for (int64_t j = 0; j < 3; ++j)
    u.push_back(t.observe("u", {j}, VariableType::continuous, 0, {}, 0.0));
  for (int64_t j = 0; j < 3; ++j) t.dirac("s", {j}, u[j] + u[(j + 1) % 3] * (j == 0 ? 1.0 : 0.0));
  EXPECT_THROW_WITH(t.graph(), std::invalid_argument,
                    "relabelling the index of a plate over u:0 changes the mask, so its variables "
                    "are not exchangeable (Theorem 3.1)");
}

// Values in graph order whatever the trace order; observed() marks what observe created.
TEST(Tracer, TraceOrderWithinAnArrayDoesNotMatterAndValuesFollowTheGraphsOrder) {
  Tracer forward, backward;
  for (int64_t i = 0; i < 2; ++i) {
    for (int64_t j = 0; j < 3; ++j)
      forward.observe("x", {i, j}, VariableType::continuous, 0, {}, 10.0 * i + j);
  }
  for (int64_t i = 2; i-- > 0;) {
    for (int64_t j = 3; j-- > 0;)
      backward.observe("x", {i, j}, VariableType::continuous, 0, {}, 10.0 * i + j);
  }
  const Traced y = forward.sample("y", {}, VariableType::discrete, 3, {}, 2.0);
  backward.sample("y", {}, VariableType::discrete, 3, {}, 2.0);
  EXPECT_TRUE(y.is_variable());
  expect_same_model(forward.graph(), backward.graph());
  const torch::Tensor expected = torch::tensor({0.0f, 1.0f, 2.0f, 10.0f, 11.0f, 12.0f, 2.0f});
  EXPECT_TRUE(forward.values().equal(expected));
  EXPECT_TRUE(backward.values().equal(expected));
  EXPECT_TRUE(
      backward.observed().equal(torch::tensor({true, true, true, true, true, true, false})));
}

// The sorting program simulates as it traces: s is u sorted, P sorts it.
TEST(Tracer, TracingSimulatesTheProgram) {
  std::mt19937_64 rng(3);
  const Tracer t = sorting_program(6, true, rng);
  const GraphicalModel m = t.graph();
  const torch::Tensor v = t.values();
  const auto part = [&](const char* name) {
    return v.narrow(0, m.array(name).first_node, m.array(name).size());
  };
  EXPECT_TRUE(part("s").equal(std::get<0>(part("u").sort())));
  EXPECT_TRUE(torch::allclose(part("P").view({6, 6}).matmul(part("u")), part("s")));
  EXPECT_EQ(t.observed().sum().item<int64_t>(), 6);
}

// A generative program is a whole GSDM problem: its graph, and examples from running it.
TEST(Tracer, AProgramIsAProblem) {
  gsdm::Problem sorting;
  sorting.name = "traced-sorting";
  const gsdm::Problem p = gsdm::traced_problem(
      sorting, [](Tracer& t, const gsdm::ProblemOptions& o, std::mt19937_64& rng) {
        t = sorting_program(o.size.at(0), o.intermediates, rng);
      });
  for (const bool intermediates : {true, false}) {
    const gsdm::ProblemOptions options{{4}, intermediates};
    const GraphicalModel graph = p.graph(options);
    expect_same_model(graph, registry_graph("sorting", {4}, intermediates));
    std::mt19937_64 rng(5);
    const gsdm::TrainingBatch batch = p.make_examples(graph, options, 3, rng);
    const gsdm::StateLayout layout(graph);
    const torch::Tensor values = gsdm::decode_state(layout, graph, batch.x0);
    const auto part = [&](const char* name) {
      return values.narrow(1, graph.array(name).first_node, graph.array(name).size());
    };
    EXPECT_TRUE(part("s").equal(std::get<0>(part("u").sort(1))));
    EXPECT_EQ(batch.observed.sum().item<int64_t>(), 3 * 4);  // u only
    EXPECT_FALSE(batch.x0[0].equal(batch.x0[1]));
  }
  const gsdm::Problem ragged = gsdm::traced_problem(
      sorting, [](Tracer& t, const gsdm::ProblemOptions&, std::mt19937_64& rng) {
        const int64_t n = rng() % 2 == 0 ? 2 : 3;
        for (int64_t i = 0; i < n; ++i) t.sample("x", {i}, VariableType::continuous, 0);
      });
  const gsdm::ProblemOptions options{{1}, true};
  std::mt19937_64 rng(1);
  EXPECT_THROW_WITH(ragged.make_examples(ragged.graph(options), options, 16, rng),
                    std::invalid_argument, "what it creates must not depend on its draws");
}

// ---- bad programs
// ---------------------------------------------------------------------------------

TEST(Tracer, BadProgramsAreNamed) {
  const auto continuous = VariableType::continuous, discrete = VariableType::discrete;
  {
    Tracer t;
    t.sample("x", {0, 1}, continuous, 0);
    EXPECT_THROW_WITH(t.sample("x", {0, 1}, continuous, 0), std::invalid_argument,
                      "'x[0,1]' is created twice");
    EXPECT_THROW_WITH(t.sample("x", {1}, continuous, 0), std::invalid_argument,
                      "'x[1]' has 1 index entries; the first variable of array 'x' had 2");
    EXPECT_THROW_WITH(
        t.sample("x", {1, 1}, discrete, 4), std::invalid_argument,
        "'x[1,1]' is discrete with 4 options, but the first variable of array 'x' is continuous");
    EXPECT_THROW_WITH(t.sample("x", {-1, 0}, continuous, 0), std::invalid_argument,
                      "'x[-1,0]': index -1 on axis 0 is outside 0..");
    EXPECT_THROW_WITH(t.sample("x", {1, 1}, continuous, 0, {}, std::nan("")), std::invalid_argument,
                      "'x[1,1]' has the value nan; values must be finite");
    t.sample("x", {1, 0}, continuous, 0);
    EXPECT_THROW_WITH(
        t.graph(), std::invalid_argument,
        "array 'x' has a hole: 'x[0,0]' was never created (2 of 4 elements of its shape were)");
    EXPECT_THROW_WITH(t.values(), std::invalid_argument, "'x[0,0]' was never created");
  }
  {
    Tracer t;
    EXPECT_THROW_WITH(
        t.sample("d", {0}, discrete, 3, {}, 3.0), std::invalid_argument,
        "'d[0]' has the value 3.000000; a discrete variable's value is a category 0..2");
    EXPECT_THROW_WITH(t.sample("d", {0}, discrete, 3, {}, 0.5), std::invalid_argument,
                      "a category 0..2");
    EXPECT_THROW_WITH(t.sample("d", {0}, discrete, 1), std::invalid_argument,
                      "'d[0]' is discrete and needs options in 2..65536, got 1");
    EXPECT_THROW_WITH(t.sample("c", {}, continuous, 2), std::invalid_argument,
                      "'c' is continuous and takes no options, got 2");
    EXPECT_THROW_WITH(t.sample("", {}, continuous, 0), std::invalid_argument,
                      "needs an array name");
    // A rejected variable leaves no trace: 'd' is still free to be declared with 3 options.
    EXPECT_NO_THROW(t.sample("d", {0}, discrete, 3, {}, 2.0));
    const Traced a = t.sample("a", {0}, continuous, 0);
    EXPECT_THROW_WITH(
        t.share_embedding({a + 1.0}), std::invalid_argument,
        "share_embedding takes variables (what sample, observe or dirac returned), not "
        "an expression over them");
    t.plate("k", {{"a", 1}});
    EXPECT_THROW_WITH(t.graph(), std::invalid_argument,
                      "plate 'k': array 'a' has 1 axes, so no axis 1");
  }
  {
    Tracer t;
    t.plate("k", {{"b", 0}});
    t.sample("a", {0}, continuous, 0);
    EXPECT_THROW_WITH(t.graph(), std::invalid_argument,
                      "plate 'k' names array 'b', which the program never created");
  }
  {
    Tracer t;
    t.plate("k", {{"a", 0}, {"b", 0}});
    t.sample("a", {1}, continuous, 0);
    t.sample("a", {0}, continuous, 0);
    t.sample("b", {0}, continuous, 0);
    EXPECT_THROW_WITH(t.graph(), std::invalid_argument,
                      "plate 'k': axis 0 of array 'b' has extent 1, the plate's other axes 2");
  }
}

// ---- the mask ablations
// ---------------------------------------------------------------------------

// Spec note §5.6: with the non-symmetrised rule the child attends to its parents only, so P00 (a
// parent of C00) keeps just its factor cliques and itself.
TEST(MaskRules, NonSymmetrisedLetsOnlyChildrenAttendToParents) {
  const GraphicalModel m = registry_graph("sorting", {2}, true);
  const Rows rows = rows_of(m.compile({MaskRule::non_symmetrised}));
  EXPECT_EQ(rows[2], (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(rows[6], (std::vector<int64_t>{0, 2, 6}));        // C00 hears u0 and P00
  EXPECT_EQ(rows[10], (std::vector<int64_t>{6, 7, 10, 11}));  // s0: its C and its factor
  EXPECT_EQ(rows[0], (std::vector<int64_t>{0}));              // u0 hears nobody
}

TEST(MaskRules, RandomHasTheStandardEntryCountIsSymmetricAndFollowsItsSeed) {
  for (const GraphicalModel& m :
       {registry_graph("sorting", {20}, true), registry_graph("bcmf", {3, 3, 2}, true),
        registry_graph("boolean", {1}, true)}) {
    const AttentionPattern standard = m.compile();
    const AttentionPattern random = m.compile({MaskRule::random, 5});
    EXPECT_EQ(random.num_entries(), standard.num_entries());
    EXPECT_TRUE(random.is_symmetric());
    for (int64_t i = 0; i < m.num_nodes(); ++i) EXPECT_TRUE(random.contains(i, i));
    EXPECT_EQ(random, m.compile({MaskRule::random, 5}));
    if (m.num_nodes() > 10) EXPECT_FALSE(random == m.compile({MaskRule::random, 6}));
  }
  // A complete graph leaves the random rule nothing to choose.
  GraphicalModel clique;
  clique.add_array("v", {4}, VariableType::continuous);
  clique.add_factor({{"v", {0}}, {"v", {1}}, {"v", {2}}, {"v", {3}}});
  EXPECT_EQ(clique.compile({MaskRule::random, 1}), clique.compile());
}

TEST(MaskRules, NamesParseBothWays) {
  for (MaskRule r : {MaskRule::standard, MaskRule::non_symmetrised, MaskRule::random}) {
    EXPECT_EQ(parse_mask_rule(mask_rule_name(r)), r);
  }
  EXPECT_THROW_WITH(parse_mask_rule("symmetric"), std::invalid_argument,
                    "unknown mask rule 'symmetric' (choose standard, non-symmetrised or random)");
}

}  // namespace
}  // namespace structdiff::graph
