// Dependency trees for the structured UNN parser (spec Sec. 4.3-4.5): arc marginals and the log
// partition function over single-root non-projective trees by the matrix-tree theorem (Koo et al.
// 2007), the tree-CRF log-likelihood, maximum spanning arborescence decoding (Chu-Liu-Edmonds),
// and the parsing metrics (UAS, exact match, modifier-list accuracy).
//
// Convention, batch first. A sentence has words 1..n and the root 0. Arc scores `theta` have
// shape (B, n + 1, n): theta[b][h][m - 1] scores head h -> modifier word m, row 0 holds the root
// arcs, and entries with h == m are ignored (they may hold anything, NaN included). `lengths`
// (int64, (B), each in 1..n) is optional: sentence b then uses words 1..lengths[b] only, and
// every score that touches a later position is ignored. Heads are int64 (B, n), heads[b][m - 1]
// the head of word m (0 = root).
#pragma once

#include <cstdint>

#include <torch/types.h>

namespace structdiff::unn {

struct TreeMarginals {
  // (B, n + 1, n) in theta's dtype: marginals[b][h][m - 1] = P(h -> m) under the Gibbs
  // distribution p(tree) ~ exp(sum of its arc scores) over single-root trees. Zero where h == m
  // and at padding; every valid column sums to 1 and so does the root row (one root child).
  torch::Tensor marginals;
  // (B) float64: log Z, the log-sum-exp of the tree scores.
  torch::Tensor log_partition;
};

// The matrix-tree theorem on the packed Laplacian with its first row replaced by the root scores
// (spec 4.3), in float64 whatever theta's dtype, after subtracting each sentence's largest valid
// score. Differentiable through autograd in both outputs, to any order: d log Z / d theta equals
// the marginals, and gradients flow through the marginals too. Works on theta's device.
// Throws std::invalid_argument for a theta that is not floating point (B, n + 1, n) with n >= 1,
// or lengths that are not int64 (B) within 1..n.
TreeMarginals tree_marginals(const torch::Tensor& theta, const torch::Tensor& lengths = {});

// log p(gold tree) = sum of the gold arcs' scores - log Z, per sentence: (B) float64,
// differentiable in theta (its gradient is the gold indicator minus the marginals). `heads` is
// (B, n) int64; entries past a sentence's length are ignored. Each valid head must be in
// 0..length and not the word itself (std::invalid_argument otherwise); that the heads form a
// single-root tree is not checked, and if they do not, the value is not a log-probability.
torch::Tensor tree_log_likelihood(const torch::Tensor& theta, const torch::Tensor& heads,
                                  const torch::Tensor& lengths = {});

// The highest-scoring tree per sentence by Chu-Liu-Edmonds, exact: (B, n) int64 heads on the
// CPU, -1 at padding positions. single_root: exactly one word is attached to the root (the
// constraint of the training MTT); the search ranks trees by (fewest root children, then score)
// lexicographically, so no big constant is subtracted and no precision is lost. Otherwise any
// number of root children. Ties go to the lowest head index. theta is read without gradient;
// its valid scores must be finite (std::invalid_argument otherwise, as for bad shapes/lengths).
torch::Tensor max_spanning_tree(const torch::Tensor& theta, const torch::Tensor& lengths = {},
                                bool single_root = true);

// Parsing counts, micro-averaged over a corpus: accumulate with += over batches, read the ratios
// at the end. Ratios are fractions in [0, 1], and 0 when their denominator is 0.
//
// Modifier lists. A "head" is any of 0..length, the root included, that has at least one gold
// dependent (so every sentence's root counts, with its one gold root child); its modifier list is
// the set of words it governs. Two variants over these heads:
//  - set (the paper's definition, the default): the predicted set equals the gold set;
//  - count (the weaker check of the authors' code): the predicted list has as many words as the
//    gold one, whichever they are.
// The authors' code works on packed n x n matrices where the root arc of word h sits on the
// diagonal of h's row, so its "heads" are the words only, a word's list being its dependents
// plus itself when it is a root child. That exact quantity (count check, packed rows) is kept
// as a third variant, `packed`, for comparison with the paper's Table 4.
struct ParseScores {
  int64_t words = 0;          // scored words (padding excluded)
  int64_t correct_heads = 0;  // words whose predicted head is the gold head
  int64_t sentences = 0;
  int64_t exact = 0;                   // sentences with every head correct
  int64_t heads_with_dependents = 0;   // heads (root included) with >= 1 gold dependent
  int64_t modlist_set_correct = 0;     // ... whose predicted dependent set equals the gold set
  int64_t modlist_count_correct = 0;   // ... whose predicted dependent count equals the gold count
  int64_t packed_rows = 0;             // words with a gold 1 in their packed row (authors' code)
  int64_t modlist_packed_correct = 0;  // ... whose packed row has as many predicted 1s as gold

  double uas() const;             // correct_heads / words
  double exact_match() const;     // exact / sentences
  double modlist_set() const;     // modlist_set_correct / heads_with_dependents
  double modlist_count() const;   // modlist_count_correct / heads_with_dependents
  double modlist_packed() const;  // modlist_packed_correct / packed_rows

  ParseScores& operator+=(const ParseScores& other);
};
ParseScores operator+(ParseScores a, const ParseScores& b);

// Scores predicted against gold heads, both (B, n) int64 with valid entries in 0..length and no
// word its own head (std::invalid_argument naming the argument otherwise); padding is ignored.
// Neither needs to be a tree.
ParseScores score_parses(const torch::Tensor& predicted, const torch::Tensor& gold,
                         const torch::Tensor& lengths = {});

}  // namespace structdiff::unn
