// Graphical models as GSDM describes them: named arrays of variables, directed edges between
// elements, factors over sets of elements and embedding-sharing groups; compiled to an attention
// pattern with one token per variable.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "structdiff/pattern.h"

namespace structdiff::graph {

enum class VariableType { continuous, discrete };

// Bounds on a model, so that a hostile description fails with a message instead of overflowing
// or exhausting memory: far above any model this library trains, far below what a machine holds.
constexpr int64_t kMaxVariables = int64_t{1} << 20;    // nodes over all arrays
constexpr int64_t kMaxOptions = int64_t{1} << 16;      // values of a discrete variable
constexpr int64_t kMaxMaskEntries = int64_t{1} << 24;  // attention-mask entries the model implies

struct Array {
  std::string name;
  std::vector<int64_t> shape;  // {} or {1} for a scalar
  VariableType type = VariableType::continuous;
  int64_t options = 0;      // discrete: number of values (>= 2)
  int64_t first_node = 0;   // nodes of this array are first_node .. first_node + size() - 1
  int64_t size() const;
  // Values per variable in the diffused state: 1 for continuous, `options` (one-hot) for discrete.
  int64_t width() const { return type == VariableType::discrete ? options : 1; }
};

// One variable: an array and an index tuple (empty for a scalar).
struct Element {
  std::string array;
  std::vector<int64_t> index;
};

// Relabels one index, shared by one or more (array, axis) pairs, e.g. BCMF's plate index k
// across R, A and K. permutation[i] is where index value i goes. Two axes of one array are both
// relabelled (a symmetric matrix's rows and columns together); a pair may be listed only once.
struct IndexPermutation {
  std::vector<std::pair<std::string, int64_t>> axes;
  std::vector<int64_t> permutation;
};

// The command-line forms of an IndexPermutation (`structdiff gsdm invariance`): "ARRAY:AXIS" and
// "2,0,1". Numbers are whole decimal integers >= 0; anything else throws std::invalid_argument.
std::pair<std::string, int64_t> parse_axis(const std::string& text);
std::vector<int64_t> parse_permutation(const std::string& text);

// The paper's mask ablations (§4, Fig. 7) as variants of the compiled mask.
enum class MaskRule {
  standard,         // every edge in both directions, all pairs within each factor, self-edges
  non_symmetrised,  // an edge p -> c lets only the child attend to its parent
  random,  // as many undirected pairs as the standard mask, drawn uniformly, plus self-edges
};
struct MaskOptions {
  MaskRule rule = MaskRule::standard;
  uint64_t seed = 1;  // random: the draw (fixed per model, so a model file rebuilds its mask)
};
MaskRule parse_mask_rule(const std::string& name);  // "standard" | "non-symmetrised" | "random"
std::vector<std::string> mask_rule_names();
std::string mask_rule_name(MaskRule rule);

class GraphicalModel {
 public:
  // Validation errors throw std::invalid_argument naming the array and index; so does passing
  // kMaxVariables or kMaxMaskEntries (self-edges, both directions of each edge, k(k-1) per factor).
  void add_array(const std::string& name, std::vector<int64_t> shape, VariableType type,
                 int64_t options = 0);
  void add_edge(const Element& from, const Element& to);  // directed
  void add_factor(const std::vector<Element>& members);   // undirected: all pairs connected
  // Nodes in `members` share one embedding (EE); a node may be in at most one group.
  void add_embedding_group(const std::vector<Element>& members);

  int64_t num_nodes() const { return num_nodes_; }
  const std::vector<Array>& arrays() const { return arrays_; }
  const Array& array(const std::string& name) const;
  int64_t node(const Element& element) const;
  Element element(int64_t node) const;
  const Array& array_of(int64_t node) const;
  // For each node, its embedding group (-1 if none).
  const std::vector<int64_t>& embedding_group_of_node() const { return group_of_node_; }
  int64_t num_embedding_groups() const { return num_groups_; }

  // Paper §3.1: every edge in both directions, all pairs within each factor, self-edges; or an
  // ablation of it.
  AttentionPattern compile(const MaskOptions& options = {}) const;
  // Theorem 3.1's condition: whether the compiled mask M satisfies M = pi M for the node
  // permutation pi induced by `permutation` (so sharing embeddings over it is valid).
  bool mask_invariant_under(const IndexPermutation& permutation) const;
  std::vector<int64_t> node_permutation(const IndexPermutation& permutation) const;

  // JSON description (see docs/gsdm-spec.md). Errors name the offending entry; load also rejects
  // a key repeated within one object, which from_json cannot see.
  static GraphicalModel from_json(const nlohmann::json& spec);
  // The description from_json reads back to this model: arrays, every edge and factor element by
  // element, embedding groups (e.g. to hand a traced program to `structdiff gsdm mask --spec`).
  nlohmann::json to_json() const;
  // Reads at most kMaxSpecBytes.
  static GraphicalModel load(const std::string& path);
  static constexpr int64_t kMaxSpecBytes = int64_t{64} << 20;

 private:
  std::vector<Array> arrays_;
  int64_t num_nodes_ = 0;
  std::vector<std::pair<int64_t, int64_t>> edges_;
  std::vector<std::vector<int64_t>> factors_;
  std::vector<int64_t> group_of_node_;
  int64_t num_groups_ = 0;
  int64_t mask_entries_ = 0;  // an upper bound: duplicates are counted

  int64_t mask_entries_left() const { return kMaxMaskEntries - mask_entries_; }
};

}  // namespace structdiff::graph
