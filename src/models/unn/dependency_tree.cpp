// Dependency-tree math for the structured UNN parser: the matrix-tree theorem, the tree-CRF
// log-likelihood, Chu-Liu-Edmonds decoding and the parsing metrics (see dependency_tree.h).
#include "structdiff/dependency_tree.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <torch/torch.h>

namespace structdiff::unn {
namespace {

std::string shape_of(const torch::Tensor& t) {
  std::ostringstream out;
  out << t.sizes();
  return out.str();
}

// theta must be floating point (B, n + 1, n) with n >= 1.
void check_theta(const std::string& where, const torch::Tensor& theta) {
  if (!theta.defined()) throw std::invalid_argument(where + ": theta is undefined");
  if (theta.dim() != 3) {
    throw std::invalid_argument(where + ": theta must be 3-D (B, n + 1, n), got shape " +
                                shape_of(theta));
  }
  if (theta.size(1) != theta.size(2) + 1) {
    throw std::invalid_argument(where + ": theta.size(1) must be theta.size(2) + 1 (root row + n " +
                                "words), got shape " + shape_of(theta));
  }
  if (theta.size(2) < 1) {
    throw std::invalid_argument(where + ": theta must have at least one word, got shape " +
                                shape_of(theta));
  }
  if (!theta.is_floating_point()) {
    throw std::invalid_argument(where + ": theta must be floating point, got " +
                                std::string(c10::toString(theta.scalar_type())));
  }
}

// The sentence lengths as numbers on the host; all n when `lengths` is undefined.
std::vector<int64_t> read_lengths(const std::string& where, const torch::Tensor& lengths,
                                  int64_t batch, int64_t n) {
  if (!lengths.defined()) return std::vector<int64_t>(batch, n);
  if (lengths.dim() != 1 || lengths.size(0) != batch || lengths.scalar_type() != torch::kLong) {
    throw std::invalid_argument(where + ": lengths must be an int64 tensor of shape [" +
                                std::to_string(batch) + "] (B), got " +
                                std::string(c10::toString(lengths.scalar_type())) + " of shape " +
                                shape_of(lengths));
  }
  const torch::Tensor host = lengths.to(torch::kCPU).contiguous();
  const int64_t* data = host.data_ptr<int64_t>();
  std::vector<int64_t> out(data, data + batch);
  for (int64_t b = 0; b < batch; ++b) {
    if (out[b] < 1 || out[b] > n) {
      throw std::invalid_argument(where + ": lengths[" + std::to_string(b) +
                                  "] = " + std::to_string(out[b]) + " is out of range 1.." +
                                  std::to_string(n));
    }
  }
  return out;
}

// heads (B, n) int64; each valid entry in 0..length and not the word itself. Returns it on the
// host, contiguous.
torch::Tensor read_heads(const std::string& where, const std::string& name,
                         const torch::Tensor& heads, const std::vector<int64_t>& lengths,
                         int64_t n) {
  const auto batch = static_cast<int64_t>(lengths.size());
  if (!heads.defined()) throw std::invalid_argument(where + ": " + name + " is undefined");
  if (heads.dim() != 2 || heads.size(0) != batch || heads.size(1) != n ||
      heads.scalar_type() != torch::kLong) {
    throw std::invalid_argument(where + ": " + name + " must be an int64 tensor of shape [" +
                                std::to_string(batch) + ", " + std::to_string(n) +
                                "] (B, n), got " + std::string(c10::toString(heads.scalar_type())) +
                                " of shape " + shape_of(heads));
  }
  torch::Tensor host = heads.to(torch::kCPU).contiguous();
  const auto h = host.accessor<int64_t, 2>();
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t m = 1; m <= lengths[b]; ++m) {
      const int64_t head = h[b][m - 1];
      const std::string entry = name + "[" + std::to_string(b) + "][" + std::to_string(m - 1) +
                                "] = " + std::to_string(head) + " (head of word " +
                                std::to_string(m) + ")";
      if (head < 0 || head > lengths[b]) {
        throw std::invalid_argument(where + ": " + entry + " is out of range 0.." +
                                    std::to_string(lengths[b]));
      }
      if (head == m) throw std::invalid_argument(where + ": " + entry + " is a self-loop");
    }
  }
  return host;
}

// (B, n) bool: word m (0-based m - 1) exists in sentence b.
torch::Tensor word_mask(const std::vector<int64_t>& lengths, int64_t n,
                        const torch::Device& device) {
  const torch::Tensor len = torch::tensor(lengths, torch::kLong).to(device);
  return torch::arange(n, torch::TensorOptions().dtype(torch::kLong).device(device))
      .unsqueeze(0)
      .lt(len.unsqueeze(1));
}

// ---- Chu-Liu-Edmonds ---------------------------------------------------------------------------

// An arc weight ordered lexicographically: first `roots` (minus the number of root arcs when a
// single root is wanted, else 0), then `score`. An ordered group, which is all CLE needs, so the
// single-root search is exact without a large constant that would eat the scores' precision.
struct Weight {
  int64_t roots = 0;
  double score = 0;
};
bool operator<(const Weight& a, const Weight& b) {
  return a.roots != b.roots ? a.roots < b.roots : a.score < b.score;
}
Weight operator-(const Weight& a, const Weight& b) {
  return {a.roots - b.roots, a.score - b.score};
}

// Heads of the maximum arborescence rooted at node 0 of the complete graph on `size` nodes,
// w[h * size + m] the weight of h -> m (arcs into 0 and self-loops are never read). head[0] = -1.
// The recursive contraction form: O(size^3) at worst, ample for sentence lengths.
std::vector<int64_t> chu_liu_edmonds(const std::vector<Weight>& w, int64_t size) {
  std::vector<int64_t> head(size, -1);
  for (int64_t m = 1; m < size; ++m) {
    for (int64_t h = 0; h < size; ++h) {
      if (h == m) continue;
      if (head[m] < 0 || w[head[m] * size + m] < w[h * size + m]) head[m] = h;
    }
  }
  // Find a cycle of the greedy choice: walk up from each node, stamping the walk with its start.
  std::vector<int64_t> stamp(size, -1);
  std::vector<bool> in_cycle(size, false);
  bool found = false;
  for (int64_t start = 1; start < size && !found; ++start) {
    int64_t v = start;
    while (v != 0 && stamp[v] < 0) {
      stamp[v] = start;
      v = head[v];
    }
    if (v != 0 && stamp[v] == start) {  // came back onto this walk: v lies on a cycle
      found = true;
      for (int64_t u = v; !in_cycle[u]; u = head[u]) in_cycle[u] = true;
    }
  }
  if (!found) return head;

  // Contract the cycle into one node c, the last index; the others keep their order (0 stays 0).
  std::vector<int64_t> index(size, -1), original;
  for (int64_t v = 0; v < size; ++v) {
    if (!in_cycle[v]) {
      index[v] = static_cast<int64_t>(original.size());
      original.push_back(v);
    }
  }
  const auto c = static_cast<int64_t>(original.size());
  const int64_t contracted = c + 1;
  std::vector<Weight> w2(contracted * contracted);
  std::vector<int64_t> enters(contracted, -1), leaves(contracted, -1);
  for (int64_t u = 0; u < size; ++u) {
    if (in_cycle[u]) continue;
    for (int64_t v = 1; v < size; ++v) {
      if (in_cycle[v] || u == v) continue;
      w2[index[u] * contracted + index[v]] = w[u * size + v];
    }
    // Entering the cycle at v breaks v's cycle arc: the gain relative to keeping it.
    for (int64_t v = 1; v < size; ++v) {
      if (!in_cycle[v]) continue;
      const Weight gain = w[u * size + v] - w[head[v] * size + v];
      if (enters[index[u]] < 0 || w2[index[u] * contracted + c] < gain) {
        w2[index[u] * contracted + c] = gain;
        enters[index[u]] = v;
      }
    }
  }
  for (int64_t v = 1; v < size; ++v) {
    if (in_cycle[v]) continue;
    for (int64_t u = 1; u < size; ++u) {
      if (!in_cycle[u]) continue;
      if (leaves[index[v]] < 0 || w2[c * contracted + index[v]] < w[u * size + v]) {
        w2[c * contracted + index[v]] = w[u * size + v];
        leaves[index[v]] = u;
      }
    }
  }
  const std::vector<int64_t> head2 = chu_liu_edmonds(w2, contracted);
  for (int64_t v = 1; v < size; ++v) {
    if (in_cycle[v]) continue;
    const int64_t h2 = head2[index[v]];
    head[v] = h2 == c ? leaves[index[v]] : original[h2];
  }
  const int64_t entering_from = head2[c];
  head[enters[entering_from]] = original[entering_from];  // the rest of the cycle keeps its arcs
  return head;
}

}  // namespace

TreeMarginals tree_marginals(const torch::Tensor& theta, const torch::Tensor& lengths) {
  const std::string where = "tree_marginals";
  check_theta(where, theta);
  const int64_t batch = theta.size(0), n = theta.size(2);
  const std::vector<int64_t> length = read_lengths(where, lengths, batch, n);
  const torch::Device device = theta.device();
  const auto options = torch::TensorOptions().dtype(torch::kDouble).device(device);

  const torch::Tensor scores = theta.to(torch::kDouble);
  const torch::Tensor word = word_mask(length, n, device);                       // (B, n)
  const torch::Tensor valid = word.unsqueeze(2).logical_and(word.unsqueeze(1));  // (B, n, n)
  const torch::Tensor eye = torch::eye(n, options.dtype(torch::kBool));
  // Packed scores: word h -> word m off the diagonal, the root arc of m on the diagonal.
  const torch::Tensor root = scores.select(1, 0);  // (B, n)
  const torch::Tensor packed =
      torch::where(eye, root.unsqueeze(1).expand({batch, n, n}), scores.narrow(1, 1, n));

  // Shift every column (the arcs into one word, root arc included) by its largest valid score.
  // Every entry of Lhat's column m is an arc into m, so the shift scales that column by
  // exp(-c_m): log det gains sum_m c_m and the marginal formula below is unchanged. Per column
  // rather than per sentence, so that a word whose arcs all score far below the sentence's best
  // still has a non-zero column (a per-sentence shift underflows it to zero and Lhat becomes
  // singular once scores spread over more than about 700). The shift is a constant (no gradient
  // needed through it). Invalid entries are replaced before exp, not after, so that garbage there
  // (inf, NaN) reaches neither the values nor the gradients.
  torch::Tensor shift;
  {
    torch::NoGradGuard no_grad;
    shift = torch::where(valid, packed,
                         torch::full({}, -std::numeric_limits<double>::infinity(), options))
                .amax({1});  // (B, n)
    shift = torch::where(torch::isfinite(shift), shift, torch::zeros_like(shift));
  }
  const torch::Tensor zero = torch::zeros({}, options);
  const torch::Tensor shifted = torch::where(valid, packed - shift.unsqueeze(1), zero);
  const torch::Tensor weights = torch::where(valid, shifted.exp(), zero);  // (B, n, n)
  const torch::Tensor arcs = torch::where(eye, zero, weights);             // A: word -> word
  const torch::Tensor root_weights = weights.diagonal(0, 1, 2);            // r: root -> word

  // Laplacian L = diag(column sums of A) - A, its first row replaced by r; padding rows and
  // columns are zero there, and become the identity so that they drop out of det and inverse.
  const torch::Tensor laplacian = torch::diag_embed(arcs.sum(1)) - arcs;
  const torch::Tensor padding = word.logical_not().to(torch::kDouble);
  const torch::Tensor lhat =
      torch::cat({root_weights.unsqueeze(1), laplacian.narrow(1, 1, n - 1)}, 1) +
      torch::diag_embed(padding);

  const torch::Tensor log_partition =
      torch::logdet(lhat) + torch::where(word, shift, torch::zeros_like(shift)).sum(1);

  // Koo et al. 2007 (1-based): mu_root[m] = r[m] B[m][1];
  // mu[h][m] = A[h][m] ([m != 1] B[m][m] - [h != 1] B[m][h]), B the inverse of Lhat.
  const auto [inverse, info] = torch::linalg_inv_ex(lhat);
  if (info.ne(0).any().item<bool>()) {
    const int64_t b = info.ne(0).nonzero()[0][0].item<int64_t>();
    throw std::runtime_error(
        where + ": the matrix-tree Laplacian of sentence " + std::to_string(b) +
        " is singular in float64: its arc scores spread over more than float64 can hold (about "
        "700 between the arcs into one word); bound the scores or lower the learning rate");
  }
  const torch::Tensor not_first =
      torch::arange(n, options.dtype(torch::kLong)).ne(0).to(torch::kDouble);  // (n)
  const torch::Tensor root_marginals = root_weights * inverse.select(2, 0);
  const torch::Tensor word_marginals =
      arcs * ((inverse.diagonal(0, 1, 2) * not_first).unsqueeze(1) -
              not_first.view({1, n, 1}) * inverse.transpose(1, 2));
  const torch::Tensor marginals =
      torch::cat({root_marginals.unsqueeze(1), word_marginals}, 1).to(theta.scalar_type());
  return {marginals, log_partition};
}

torch::Tensor tree_log_likelihood(const torch::Tensor& theta, const torch::Tensor& heads,
                                  const torch::Tensor& lengths) {
  const std::string where = "tree_log_likelihood";
  check_theta(where, theta);
  const int64_t batch = theta.size(0), n = theta.size(2);
  const std::vector<int64_t> length = read_lengths(where, lengths, batch, n);
  read_heads(where, "heads", heads, length, n);
  const torch::Tensor word = word_mask(length, n, theta.device());
  const torch::Tensor scores = theta.to(torch::kDouble);
  // Padding heads may be anything (-1): point them at the root before gathering, then drop them.
  const torch::Tensor index =
      torch::where(word, heads.to(theta.device()), torch::zeros_like(word, torch::kLong));
  const torch::Tensor gold = scores.gather(1, index.unsqueeze(1)).squeeze(1);  // (B, n)
  const torch::Tensor gold_score =
      torch::where(word, gold, torch::zeros({}, gold.options())).sum(1);
  return gold_score - tree_marginals(theta, lengths).log_partition;
}

torch::Tensor max_spanning_tree(const torch::Tensor& theta, const torch::Tensor& lengths,
                                bool single_root) {
  const std::string where = "max_spanning_tree";
  check_theta(where, theta);
  const int64_t batch = theta.size(0), n = theta.size(2);
  const std::vector<int64_t> length = read_lengths(where, lengths, batch, n);
  const torch::Tensor scores = theta.detach().to(torch::kCPU, torch::kDouble).contiguous();
  const auto s = scores.accessor<double, 3>();
  torch::Tensor heads = torch::full({batch, n}, -1, torch::kLong);
  auto out = heads.accessor<int64_t, 2>();
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t size = length[b] + 1;
    std::vector<Weight> w(size * size);
    for (int64_t h = 0; h < size; ++h) {
      for (int64_t m = 1; m < size; ++m) {
        if (h == m) continue;
        const double score = s[b][h][m - 1];
        if (!std::isfinite(score)) {
          throw std::invalid_argument(where + ": theta[" + std::to_string(b) + "][" +
                                      std::to_string(h) + "][" + std::to_string(m - 1) +
                                      "] = " + std::to_string(score) + " is not finite");
        }
        w[h * size + m] = {h == 0 && single_root ? -1 : 0, score};
      }
    }
    const std::vector<int64_t> head = chu_liu_edmonds(w, size);
    for (int64_t m = 1; m < size; ++m) out[b][m - 1] = head[m];
  }
  return heads;
}

namespace {
double ratio(int64_t numerator, int64_t denominator) {
  return denominator == 0 ? 0.0 : static_cast<double>(numerator) / static_cast<double>(denominator);
}
}  // namespace

double ParseScores::uas() const { return ratio(correct_heads, words); }
double ParseScores::exact_match() const { return ratio(exact, sentences); }
double ParseScores::modlist_set() const {
  return ratio(modlist_set_correct, heads_with_dependents);
}
double ParseScores::modlist_count() const {
  return ratio(modlist_count_correct, heads_with_dependents);
}
double ParseScores::modlist_packed() const { return ratio(modlist_packed_correct, packed_rows); }

ParseScores& ParseScores::operator+=(const ParseScores& other) {
  words += other.words;
  correct_heads += other.correct_heads;
  sentences += other.sentences;
  exact += other.exact;
  heads_with_dependents += other.heads_with_dependents;
  modlist_set_correct += other.modlist_set_correct;
  modlist_count_correct += other.modlist_count_correct;
  packed_rows += other.packed_rows;
  modlist_packed_correct += other.modlist_packed_correct;
  return *this;
}

ParseScores operator+(ParseScores a, const ParseScores& b) { return a += b; }

ParseScores score_parses(const torch::Tensor& predicted, const torch::Tensor& gold,
                         const torch::Tensor& lengths) {
  const std::string where = "score_parses";
  if (!gold.defined() || gold.dim() != 2) {
    throw std::invalid_argument(where + ": gold must be 2-D (B, n), got shape " +
                                (gold.defined() ? shape_of(gold) : std::string("undefined")));
  }
  const int64_t batch = gold.size(0), n = gold.size(1);
  const std::vector<int64_t> length = read_lengths(where, lengths, batch, n);
  const torch::Tensor gold_host = read_heads(where, "gold", gold, length, n);
  const torch::Tensor predicted_host = read_heads(where, "predicted", predicted, length, n);
  const auto g = gold_host.accessor<int64_t, 2>();
  const auto p = predicted_host.accessor<int64_t, 2>();

  ParseScores scores;
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t len = length[b];
    // dependents[h][m]: h governs m, for heads 0..len and words 1..len.
    std::vector<std::vector<bool>> gold_deps(len + 1, std::vector<bool>(len + 1, false));
    std::vector<std::vector<bool>> predicted_deps = gold_deps;
    std::vector<int64_t> gold_count(len + 1, 0), predicted_count(len + 1, 0);
    int64_t correct = 0;
    for (int64_t m = 1; m <= len; ++m) {
      const int64_t gh = g[b][m - 1], ph = p[b][m - 1];
      gold_deps[gh][m] = true;
      predicted_deps[ph][m] = true;
      ++gold_count[gh];
      ++predicted_count[ph];
      if (gh == ph) ++correct;
    }
    scores.words += len;
    scores.correct_heads += correct;
    scores.sentences += 1;
    if (correct == len) scores.exact += 1;
    for (int64_t h = 0; h <= len; ++h) {
      if (gold_count[h] == 0) continue;
      scores.heads_with_dependents += 1;
      if (gold_deps[h] == predicted_deps[h]) scores.modlist_set_correct += 1;
      if (gold_count[h] == predicted_count[h]) scores.modlist_count_correct += 1;
    }
    // The authors' packed rows: word h's dependents plus its own root arc on the diagonal.
    for (int64_t h = 1; h <= len; ++h) {
      const int64_t gold_row = gold_count[h] + (g[b][h - 1] == 0 ? 1 : 0);
      const int64_t predicted_row = predicted_count[h] + (p[b][h - 1] == 0 ? 1 : 0);
      if (gold_row == 0) continue;
      scores.packed_rows += 1;
      if (gold_row == predicted_row) scores.modlist_packed_correct += 1;
    }
  }
  return scores;
}

}  // namespace structdiff::unn
