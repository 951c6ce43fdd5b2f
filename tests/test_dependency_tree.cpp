// Dependency-tree math of the structured UNN parser: the matrix-tree theorem and Chu-Liu-Edmonds
// against brute-force enumeration of all trees (n <= 6), autograd and finite differences,
// padding, the parsing metrics on hand-made trees, and the messages for bad input.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "structdiff/dependency_tree.h"
#include "support/expect_throw.h"
#include "support/gradcheck.h"

namespace structdiff::unn {
namespace {

using Heads = std::vector<int64_t>;  // heads[m - 1] = head of word m

// Every word reaches the root by following heads (so no cycle); single_root: one root child.
bool is_tree(const Heads& heads, bool single_root) {
  const auto n = static_cast<int64_t>(heads.size());
  int64_t root_children = 0;
  for (int64_t m = 1; m <= n; ++m) {
    if (heads[m - 1] == 0) ++root_children;
    int64_t v = m;
    for (int64_t steps = 0; v != 0 && steps <= n; ++steps) v = heads[v - 1];
    if (v != 0) return false;
  }
  return !single_root || root_children == 1;
}

// All trees on n words by enumerating every head assignment without self-loops; cached.
const std::vector<Heads>& all_trees(int64_t n, bool single_root) {
  static std::map<std::pair<int64_t, bool>, std::vector<Heads>> cache;
  auto found = cache.find({n, single_root});
  if (found != cache.end()) return found->second;
  std::vector<Heads> trees;
  Heads heads(n, 0);
  while (true) {
    bool self_loop = false;
    for (int64_t m = 1; m <= n; ++m) self_loop = self_loop || heads[m - 1] == m;
    if (!self_loop && is_tree(heads, single_root)) trees.push_back(heads);
    int64_t i = 0;  // odometer over 0..n in each position
    while (i < n && heads[i] == n) heads[i++] = 0;
    if (i == n) break;
    ++heads[i];
  }
  return cache[{n, single_root}] = std::move(trees);
}

// theta for one sentence: (n + 1, n) float64.
double tree_score(const torch::Tensor& theta, const Heads& heads) {
  const auto s = theta.accessor<double, 2>();
  double total = 0;
  for (size_t m = 1; m <= heads.size(); ++m) total += s[heads[m - 1]][m - 1];
  return total;
}

struct BruteForce {
  double log_partition;
  torch::Tensor marginals;  // (n + 1, n)
};
BruteForce brute_force_marginals(const torch::Tensor& theta) {
  const int64_t n = theta.size(1);
  const std::vector<Heads>& trees = all_trees(n, /*single_root=*/true);
  std::vector<double> scores;
  double best = -std::numeric_limits<double>::infinity();
  for (const Heads& heads : trees) {
    scores.push_back(tree_score(theta, heads));
    best = std::max(best, scores.back());
  }
  double z = 0;
  for (double s : scores) z += std::exp(s - best);
  torch::Tensor marginals = torch::zeros({n + 1, n}, torch::kDouble);
  auto mu = marginals.accessor<double, 2>();
  for (size_t t = 0; t < trees.size(); ++t) {
    const double p = std::exp(scores[t] - best) / z;
    for (int64_t m = 1; m <= n; ++m) mu[trees[t][m - 1]][m - 1] += p;
  }
  return {best + std::log(z), marginals};
}

// The best tree by enumeration (with the scores of continuous random draws it is unique).
Heads brute_force_argmax(const torch::Tensor& theta, bool single_root) {
  Heads best;
  double best_score = -std::numeric_limits<double>::infinity();
  for (const Heads& heads : all_trees(theta.size(1), single_root)) {
    const double score = tree_score(theta, heads);
    if (score > best_score) best_score = score, best = heads;
  }
  return best;
}

Heads row(const torch::Tensor& heads, int64_t b, int64_t length) {
  const torch::Tensor r = heads[b].narrow(0, 0, length).contiguous();
  return Heads(r.data_ptr<int64_t>(), r.data_ptr<int64_t>() + length);
}

torch::Tensor longs(const std::vector<int64_t>& values) {
  return torch::tensor(values, torch::kLong);
}

// ---- matrix-tree theorem ------------------------------------------------------------------------

TEST(TreeMarginals, MatchBruteForceEnumerationUpToSixWords) {
  torch::manual_seed(0);
  double worst_log_z = 0, worst_marginal = 0;
  for (int64_t n = 1; n <= 6; ++n) {
    for (int trial = 0; trial < 3; ++trial) {
      const torch::Tensor theta = 2.0 * torch::randn({2, n + 1, n}, torch::kDouble);
      const TreeMarginals tree = tree_marginals(theta);
      ASSERT_EQ(tree.marginals.sizes(), theta.sizes());
      ASSERT_EQ(tree.log_partition.sizes(), torch::IntArrayRef({2}));
      for (int64_t b = 0; b < 2; ++b) {
        const BruteForce expected = brute_force_marginals(theta[b]);
        worst_log_z = std::max(
            worst_log_z, std::abs(tree.log_partition[b].item<double>() - expected.log_partition));
        worst_marginal = std::max(
            worst_marginal, (tree.marginals[b] - expected.marginals).abs().max().item<double>());
      }
    }
  }
  EXPECT_LE(worst_log_z, 1e-9);
  EXPECT_LE(worst_marginal, 1e-9);
}

TEST(TreeMarginals, SingleWordAttachesToTheRoot) {
  const torch::Tensor theta = torch::tensor({{{0.7}, {123.0}}}, torch::kDouble);  // (1, 2, 1)
  const TreeMarginals tree = tree_marginals(theta);
  EXPECT_NEAR(tree.log_partition.item<double>(), 0.7, 1e-15);
  EXPECT_NEAR(tree.marginals[0][0][0].item<double>(), 1.0, 1e-15);
  EXPECT_EQ(tree.marginals[0][1][0].item<double>(), 0.0);  // the ignored self arc
}

TEST(TreeMarginals, AreTheGradientOfTheLogPartition) {
  torch::manual_seed(1);
  const torch::Tensor theta =
      torch::randn({3, 8, 7}, torch::kDouble).mul(3).set_requires_grad(true);
  const torch::Tensor lengths = longs({7, 4, 1});
  const TreeMarginals tree = tree_marginals(theta, lengths);
  const torch::Tensor gradient = torch::autograd::grad({tree.log_partition.sum()}, {theta})[0];
  EXPECT_LE((gradient - tree.marginals).abs().max().item<double>(), 1e-12);
}

TEST(TreeMarginals, ColumnsAndTheRootRowSumToOne) {
  torch::manual_seed(2);
  const int64_t n = 12;
  const torch::Tensor theta = 10.0 * torch::randn({4, n + 1, n}, torch::kDouble);
  const std::vector<int64_t> length = {12, 9, 2, 1};
  const TreeMarginals tree = tree_marginals(theta, longs(length));
  const torch::Tensor& mu = tree.marginals;
  EXPECT_GE(mu.min().item<double>(), -1e-12);
  for (int64_t m = 1; m <= n; ++m) {  // the ignored self arcs
    EXPECT_EQ(mu.select(1, m).select(1, m - 1).abs().max().item<double>(), 0);
  }
  for (int64_t b = 0; b < 4; ++b) {
    const torch::Tensor columns = mu[b].sum(0);
    for (int64_t m = 0; m < n; ++m) {
      EXPECT_NEAR(columns[m].item<double>(), m < length[b] ? 1.0 : 0.0, 1e-10) << b << " " << m;
    }
    EXPECT_NEAR(mu[b][0].sum().item<double>(), 1.0, 1e-10) << b;
    // Nothing attaches to or from a padding word.
    if (length[b] < n) {
      EXPECT_EQ(mu[b].narrow(0, length[b] + 1, n - length[b]).abs().max().item<double>(), 0);
      EXPECT_EQ(mu[b].narrow(1, length[b], n - length[b]).abs().max().item<double>(), 0);
    }
  }
}

TEST(TreeMarginals, ShiftedScoresShiftLogZByNAndStayFiniteInFloat32) {
  torch::manual_seed(3);
  const int64_t n = 6;
  const torch::Tensor theta = torch::randn({2, n + 1, n}, torch::kDouble);
  const TreeMarginals base = tree_marginals(theta);
  // Every tree has n arcs: adding c to all scores adds n c to log Z, the marginals do not move.
  const TreeMarginals shifted = tree_marginals(theta + 1000.0);
  EXPECT_LE((shifted.log_partition - base.log_partition - n * 1000.0).abs().max().item<double>(),
            1e-9);
  EXPECT_LE((shifted.marginals - base.marginals).abs().max().item<double>(), 1e-10);
  // exp(1000) overflows float64 and exp(100) float32: the max shift keeps both finite.
  const TreeMarginals single = tree_marginals((theta * 50.0 + 1000.0).to(torch::kFloat));
  EXPECT_EQ(single.marginals.scalar_type(), torch::kFloat);
  EXPECT_EQ(single.log_partition.scalar_type(), torch::kDouble);
  EXPECT_TRUE(torch::isfinite(single.marginals).all().item<bool>());
  EXPECT_TRUE(torch::isfinite(single.log_partition).all().item<bool>());
  EXPECT_NEAR(single.marginals.sum().item<double>(), 2.0 * n, 1e-4);
}

TEST(TreeMarginals, WordsScoredFarBelowTheRestStayExact) {
  // Every tree gives word m exactly one head, so lowering all arcs into m by c lowers log Z by c
  // and leaves the marginals alone. With c = 2000 a per-sentence shift would underflow m's whole
  // column to zero (a singular Laplacian); the per-column shift keeps it exact.
  torch::manual_seed(4);
  const int64_t n = 5;
  const torch::Tensor theta = torch::randn({1, n + 1, n}, torch::kDouble);
  torch::Tensor lowered = theta.clone();
  lowered.select(2, 2).sub_(2000.0);
  const TreeMarginals base = tree_marginals(theta), low = tree_marginals(lowered);
  EXPECT_NEAR(low.log_partition.item<double>(), base.log_partition.item<double>() - 2000.0, 1e-9);
  EXPECT_LE((low.marginals - base.marginals).abs().max().item<double>(), 1e-10);
}

TEST(TreeMarginals, ScoresBeyondFloat64AreAClearError) {
  // Two words that each score the other 2000 above their root arc: every tree's weight
  // underflows against the 2-cycle's, and the Laplacian is singular in float64.
  torch::Tensor theta = torch::zeros({1, 3, 2}, torch::kDouble);
  theta[0][0][0] = -2000.0;
  theta[0][0][1] = -2000.0;
  EXPECT_THROW_WITH(tree_marginals(theta), std::runtime_error,
                    "tree_marginals: the matrix-tree Laplacian of sentence 0 is singular");
}

TEST(TreeMarginals, PaddedBatchEqualsSentencesAloneAndIgnoresGarbage) {
  torch::manual_seed(4);
  const int64_t n = 7;
  const std::vector<int64_t> length = {7, 3, 1};
  torch::Tensor theta = torch::randn({3, n + 1, n}, torch::kDouble);
  // Garbage where only padding or self arcs are: it must reach neither values nor gradients.
  for (int64_t b = 0; b < 3; ++b) {
    theta[b].narrow(0, length[b] + 1, n - length[b]).fill_(std::nan(""));
    theta[b].narrow(1, length[b], n - length[b]).fill_(std::numeric_limits<double>::infinity());
    for (int64_t m = 1; m <= n; ++m) theta[b][m][m - 1] = std::nan("");
  }
  theta.set_requires_grad(true);
  const TreeMarginals tree = tree_marginals(theta, longs(length));
  for (int64_t b = 0; b < 3; ++b) {
    const int64_t len = length[b];
    const torch::Tensor alone = theta.detach()[b].narrow(0, 0, len + 1).narrow(1, 0, len);
    const TreeMarginals expected = tree_marginals(alone.unsqueeze(0));
    EXPECT_NEAR(tree.log_partition[b].item<double>(), expected.log_partition[0].item<double>(),
                1e-12);
    EXPECT_LE((tree.marginals[b].narrow(0, 0, len + 1).narrow(1, 0, len) - expected.marginals[0])
                  .abs()
                  .max()
                  .item<double>(),
              1e-12);
    EXPECT_EQ(tree.marginals[b].abs().sum().item<double>(),
              tree.marginals[b].narrow(0, 0, len + 1).narrow(1, 0, len).abs().sum().item<double>());
  }
  EXPECT_TRUE(torch::isfinite(tree.marginals).all().item<bool>());
  const torch::Tensor weights = torch::randn(tree.marginals.sizes(), torch::kDouble);
  const torch::Tensor gradient = torch::autograd::grad(
      {tree.log_partition.sum() + (tree.marginals * weights).sum()}, {theta})[0];
  EXPECT_TRUE(torch::isfinite(gradient).all().item<bool>());
  EXPECT_EQ(gradient[2].narrow(0, 2, n - 1).abs().max().item<double>(), 0);  // padding heads
}

TEST(TreeMarginals, GradientsMatchCentralDifferences) {
  torch::manual_seed(5);
  const torch::Tensor theta = torch::randn({2, 5, 4}, torch::kDouble);
  const torch::Tensor lengths = longs({4, 2});
  // Both outputs at once; the marginals' gradient is log Z's second derivative, which the later
  // UNN iterations back-propagate through.
  const auto f = [&](const std::vector<torch::Tensor>& in) {
    const TreeMarginals tree = tree_marginals(in[0], lengths);
    return torch::cat({tree.marginals.flatten(), tree.log_partition});
  };
  EXPECT_EQ(testing::check_gradients(f, {theta}, 1e-6, 1e-8, 1e-6), "");
}

// ---- log-likelihood -----------------------------------------------------------------------------

TEST(TreeLogLikelihood, IsANormalisedLogProbabilityWithTheCrfGradient) {
  torch::manual_seed(6);
  const int64_t n = 5;
  torch::Tensor theta = torch::randn({2, n + 1, n}, torch::kDouble);
  const torch::Tensor lengths = longs({5, 4});
  double total[2] = {0, 0};
  for (int64_t b = 0; b < 2; ++b) {
    const int64_t len = b == 0 ? 5 : 4;
    for (const Heads& tree : all_trees(len, true)) {
      Heads padded = tree;
      padded.resize(n, -1);
      torch::Tensor heads = torch::zeros({2, n}, torch::kLong);
      heads[b] = longs(padded);
      total[b] += std::exp(tree_log_likelihood(theta, heads, lengths)[b].item<double>());
    }
  }
  EXPECT_NEAR(total[0], 1.0, 1e-10);
  EXPECT_NEAR(total[1], 1.0, 1e-10);

  const torch::Tensor gold = longs({2, 0, 2, 3, 3, 2, 0, 1, 2, -1}).view({2, n});
  theta.set_requires_grad(true);
  const torch::Tensor log_likelihood = tree_log_likelihood(theta, gold, lengths);
  EXPECT_EQ(log_likelihood.scalar_type(), torch::kDouble);
  const torch::Tensor gradient = torch::autograd::grad({log_likelihood.sum()}, {theta})[0];
  torch::Tensor expected = -tree_marginals(theta.detach(), lengths).marginals;
  for (int64_t b = 0; b < 2; ++b) {
    for (int64_t m = 1; m <= (b == 0 ? 5 : 4); ++m)
      expected[b][gold[b][m - 1].item<int64_t>()][m - 1] += 1;
  }
  EXPECT_LE((gradient - expected).abs().max().item<double>(), 1e-12);
}

// ---- Chu-Liu-Edmonds ----------------------------------------------------------------------------

TEST(MaxSpanningTree, SingleRootEqualsBruteForceArgmax) {
  torch::manual_seed(7);
  int mismatches = 0, differs_from_multi_root = 0;
  for (int64_t n = 1; n <= 6; ++n) {
    for (int trial = 0; trial < 60; ++trial) {
      // Root arcs shifted up so that the unconstrained best tree often has several root children.
      torch::Tensor theta = torch::randn({1, n + 1, n}, torch::kDouble);
      theta[0][0] += 1.0;
      const Heads expected = brute_force_argmax(theta[0], /*single_root=*/true);
      const Heads actual = row(max_spanning_tree(theta), 0, n);
      if (actual != expected) ++mismatches;
      if (actual != brute_force_argmax(theta[0], false)) ++differs_from_multi_root;
    }
  }
  EXPECT_EQ(mismatches, 0);
  EXPECT_GT(differs_from_multi_root, 20);  // the constraint was exercised
}

TEST(MaxSpanningTree, MultiRootEqualsBruteForceArgmax) {
  torch::manual_seed(8);
  int mismatches = 0, several_root_children = 0;
  for (int64_t n = 1; n <= 6; ++n) {
    for (int trial = 0; trial < 60; ++trial) {
      torch::Tensor theta = torch::randn({1, n + 1, n}, torch::kDouble);
      theta[0][0] += 1.0;
      const Heads expected = brute_force_argmax(theta[0], /*single_root=*/false);
      const Heads actual = row(max_spanning_tree(theta, {}, /*single_root=*/false), 0, n);
      if (actual != expected) ++mismatches;
      if (std::count(actual.begin(), actual.end(), 0) > 1) ++several_root_children;
    }
  }
  EXPECT_EQ(mismatches, 0);
  EXPECT_GT(several_root_children, 20);
}

TEST(MaxSpanningTree, SingleRootIsTheBestRootChildOnLongSentences) {
  // Too long to enumerate: compare with "fix the root child r, decode, keep the best r", where
  // fixing means pushing every other root arc far down.
  torch::manual_seed(9);
  const int64_t n = 30;
  for (int trial = 0; trial < 3; ++trial) {
    torch::Tensor theta = torch::randn({1, n + 1, n}, torch::kDouble);
    theta[0][0] += 2.0;
    const Heads single = row(max_spanning_tree(theta), 0, n);
    ASSERT_TRUE(is_tree(single, true));
    double best = -std::numeric_limits<double>::infinity();
    for (int64_t r = 1; r <= n; ++r) {
      torch::Tensor fixed = theta.clone();
      fixed[0][0] -= 1e4;
      fixed[0][0][r - 1] = theta[0][0][r - 1];
      const Heads heads = row(max_spanning_tree(fixed, {}, false), 0, n);
      ASSERT_TRUE(is_tree(heads, false));
      best = std::max(best, tree_score(theta[0], heads));
    }
    EXPECT_NEAR(tree_score(theta[0], single), best, 1e-9);
    const Heads multi = row(max_spanning_tree(theta, {}, false), 0, n);
    EXPECT_GE(tree_score(theta[0], multi), best - 1e-9);
  }
}

TEST(MaxSpanningTree, PaddingIsMinusOneAndSentencesAreIndependent) {
  torch::manual_seed(10);
  const int64_t n = 6;
  torch::Tensor theta = torch::randn({3, n + 1, n}, torch::kDouble);
  const std::vector<int64_t> length = {6, 4, 1};
  for (int64_t b = 0; b < 3; ++b) {
    theta[b].narrow(0, length[b] + 1, n - length[b]).fill_(std::nan(""));  // never read
    theta[b].narrow(1, length[b], n - length[b]).fill_(std::nan(""));
  }
  const torch::Tensor heads = max_spanning_tree(theta.to(torch::kFloat), longs(length));
  ASSERT_EQ(heads.sizes(), torch::IntArrayRef({3, n}));
  ASSERT_EQ(heads.scalar_type(), torch::kLong);
  for (int64_t b = 0; b < 3; ++b) {
    const int64_t len = length[b];
    const torch::Tensor alone = theta[b].narrow(0, 0, len + 1).narrow(1, 0, len).unsqueeze(0);
    EXPECT_EQ(row(heads, b, len), row(max_spanning_tree(alone), 0, len)) << b;
    EXPECT_EQ(row(heads, b, len),
              brute_force_argmax(alone.to(torch::kFloat).to(torch::kDouble)[0], true));
    for (int64_t m = len; m < n; ++m) EXPECT_EQ(heads[b][m].item<int64_t>(), -1);
  }
  EXPECT_EQ(row(heads, 2, 1), Heads({0}));
}

// ---- metrics
// -------------------------------------------------------------------------------------

TEST(ParseScores, SetAndCountModifierListsDiffer) {
  // Gold: 2 is the root child and governs {1, 3}; 3 governs {4}.
  // Predicted: 2 governs {1, 4} (same count, other set), 4 governs {3}, 3 governs nothing.
  const torch::Tensor gold = longs({2, 0, 2, 3}).view({1, 4});
  const torch::Tensor predicted = longs({2, 0, 4, 2}).view({1, 4});
  const ParseScores s = score_parses(predicted, gold);
  EXPECT_EQ(s.words, 4);
  EXPECT_EQ(s.correct_heads, 2);
  EXPECT_EQ(s.sentences, 1);
  EXPECT_EQ(s.exact, 0);
  EXPECT_EQ(s.heads_with_dependents, 3);  // root, 2, 3
  EXPECT_EQ(s.modlist_set_correct, 1);    // root only
  EXPECT_EQ(s.modlist_count_correct, 2);  // root and 2
  // Packed rows (authors' code): word 2 holds {1, 3} + its root arc = 3 ones, word 3 holds 1.
  EXPECT_EQ(s.packed_rows, 2);
  EXPECT_EQ(s.modlist_packed_correct, 1);
  EXPECT_DOUBLE_EQ(s.uas(), 0.5);
  EXPECT_DOUBLE_EQ(s.exact_match(), 0.0);
  EXPECT_DOUBLE_EQ(s.modlist_set(), 1.0 / 3.0);
  EXPECT_DOUBLE_EQ(s.modlist_count(), 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(s.modlist_packed(), 0.5);
}

TEST(ParseScores, RootIsAHeadAndThePackedVariantFoldsItIntoItsChild) {
  // Gold: 1 <- 0, 2 <- 1, 3 <- 1. Predicted: 2 <- 0, 1 <- 2, 3 <- 2: the root's list {1} vs {2}
  // has the right count, the wrong set; word 1's packed row (2 deps + root arc = 3) against 0.
  const torch::Tensor gold = longs({0, 1, 1}).view({1, 3});
  const torch::Tensor predicted = longs({2, 0, 2}).view({1, 3});
  const ParseScores s = score_parses(predicted, gold);
  EXPECT_EQ(s.correct_heads, 0);
  EXPECT_EQ(s.heads_with_dependents, 2);  // root and 1
  EXPECT_EQ(s.modlist_set_correct, 0);
  EXPECT_EQ(s.modlist_count_correct, 1);  // the root: one child each
  EXPECT_EQ(s.packed_rows, 1);            // word 1 only; the root has no packed row
  EXPECT_EQ(s.modlist_packed_correct, 0);
  // A perfect parse scores 1 everywhere.
  const ParseScores perfect = score_parses(gold, gold);
  EXPECT_DOUBLE_EQ(perfect.uas(), 1.0);
  EXPECT_DOUBLE_EQ(perfect.exact_match(), 1.0);
  EXPECT_DOUBLE_EQ(perfect.modlist_set(), 1.0);
  EXPECT_DOUBLE_EQ(perfect.modlist_count(), 1.0);
  EXPECT_DOUBLE_EQ(perfect.modlist_packed(), 1.0);
  EXPECT_DOUBLE_EQ(ParseScores().uas(), 0.0);  // empty: 0, not NaN
}

TEST(ParseScores, AccumulateAcrossBatchesAndIgnorePadding) {
  const torch::Tensor gold = longs({2, 0, 2, 3, 0, 1, 1, -7}).view({2, 4});
  const torch::Tensor predicted = longs({2, 0, 4, 2, 2, 0, 2, 99}).view({2, 4});
  const ParseScores batch = score_parses(predicted, gold, longs({4, 3}));
  ParseScores sum = score_parses(predicted.narrow(0, 0, 1), gold.narrow(0, 0, 1));
  sum +=
      score_parses(predicted[1].narrow(0, 0, 3).view({1, 3}), gold[1].narrow(0, 0, 3).view({1, 3}));
  EXPECT_EQ(batch.words, 7);
  EXPECT_EQ(batch.sentences, 2);
  EXPECT_EQ(batch.correct_heads, sum.correct_heads);
  EXPECT_EQ(batch.heads_with_dependents, 5);
  EXPECT_EQ(batch.heads_with_dependents, sum.heads_with_dependents);
  EXPECT_EQ(batch.modlist_set_correct, sum.modlist_set_correct);
  EXPECT_EQ(batch.modlist_count_correct, sum.modlist_count_correct);
  EXPECT_EQ(batch.packed_rows, sum.packed_rows);
  EXPECT_EQ(batch.modlist_packed_correct, sum.modlist_packed_correct);
  const ParseScores twice = batch + batch;
  EXPECT_EQ(twice.words, 14);
  EXPECT_EQ(twice.modlist_count_correct, 2 * batch.modlist_count_correct);
  EXPECT_DOUBLE_EQ(twice.uas(), batch.uas());
}

// ---- bad input
// -----------------------------------------------------------------------------------

TEST(DependencyTreeErrors, NameTheArgumentAndTheValue) {
  const torch::Tensor theta = torch::randn({2, 4, 3}, torch::kDouble);
  EXPECT_THROW_WITH(tree_marginals(torch::randn({4, 3})), std::invalid_argument,
                    "tree_marginals: theta must be 3-D (B, n + 1, n), got shape [4, 3]");
  EXPECT_THROW_WITH(tree_marginals(torch::randn({2, 3, 3})), std::invalid_argument,
                    "theta.size(1) must be theta.size(2) + 1 (root row + n words), got shape "
                    "[2, 3, 3]");
  EXPECT_THROW_WITH(tree_marginals(torch::randn({2, 1, 0})), std::invalid_argument,
                    "theta must have at least one word, got shape [2, 1, 0]");
  EXPECT_THROW_WITH(tree_marginals(torch::zeros({2, 4, 3}, torch::kLong)), std::invalid_argument,
                    "theta must be floating point, got Long");
  EXPECT_THROW_WITH(tree_marginals(theta, longs({3, 4})), std::invalid_argument,
                    "tree_marginals: lengths[1] = 4 is out of range 1..3");
  EXPECT_THROW_WITH(tree_marginals(theta, longs({0, 3})), std::invalid_argument,
                    "lengths[0] = 0 is out of range 1..3");
  EXPECT_THROW_WITH(tree_marginals(theta, longs({3})), std::invalid_argument,
                    "lengths must be an int64 tensor of shape [2] (B), got Long of shape [1]");
  EXPECT_THROW_WITH(tree_marginals(theta, torch::tensor({3, 3}, torch::kInt)),
                    std::invalid_argument, "got Int of shape [2]");
  EXPECT_THROW_WITH(max_spanning_tree(torch::randn({2, 3})), std::invalid_argument,
                    "max_spanning_tree: theta must be 3-D");
  EXPECT_THROW_WITH(max_spanning_tree(theta, longs({3, 9})), std::invalid_argument,
                    "max_spanning_tree: lengths[1] = 9 is out of range 1..3");
  torch::Tensor infinite = theta.clone();
  infinite[1][2][0] = -std::numeric_limits<double>::infinity();
  EXPECT_THROW_WITH(max_spanning_tree(infinite), std::invalid_argument,
                    "max_spanning_tree: theta[1][2][0] = -inf is not finite");

  const torch::Tensor heads = longs({0, 1, 1, 2, 0, 2}).view({2, 3});
  EXPECT_THROW_WITH(tree_log_likelihood(theta, longs({0, 1, 1})), std::invalid_argument,
                    "tree_log_likelihood: heads must be an int64 tensor of shape [2, 3] (B, n), "
                    "got Long of shape [3]");
  EXPECT_THROW_WITH(tree_log_likelihood(theta, longs({0, 1, 4, 2, 0, 2}).view({2, 3})),
                    std::invalid_argument,
                    "tree_log_likelihood: heads[0][2] = 4 (head of word 3) is out of range 0..3");
  EXPECT_THROW_WITH(tree_log_likelihood(theta, longs({0, 1, 1, 2, 2, 2}).view({2, 3})),
                    std::invalid_argument, "heads[1][1] = 2 (head of word 2) is a self-loop");
  EXPECT_THROW_WITH(
      tree_log_likelihood(theta, longs({0, 1, 1, 3, 0, 2}).view({2, 3}), longs({3, 2})),
      std::invalid_argument, "heads[1][0] = 3 (head of word 1) is out of range 0..2");
  EXPECT_NO_THROW(
      tree_log_likelihood(theta, longs({0, 1, 1, 2, 0, -1}).view({2, 3}), longs({3, 2})));

  EXPECT_THROW_WITH(score_parses(heads, longs({0, 1, 1})), std::invalid_argument,
                    "score_parses: gold must be 2-D (B, n), got shape [3]");
  EXPECT_THROW_WITH(score_parses(heads.narrow(1, 0, 2), heads), std::invalid_argument,
                    "score_parses: predicted must be an int64 tensor of shape [2, 3] (B, n), got "
                    "Long of shape [2, 2]");
  EXPECT_THROW_WITH(score_parses(longs({0, 1, 1, 2, 0, -1}).view({2, 3}), heads),
                    std::invalid_argument,
                    "score_parses: predicted[1][2] = -1 (head of word 3) is out of range 0..3");
  EXPECT_THROW_WITH(score_parses(heads, heads, longs({3, 4})), std::invalid_argument,
                    "score_parses: lengths[1] = 4 is out of range 1..3");
}

}  // namespace
}  // namespace structdiff::unn
