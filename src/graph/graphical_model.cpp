#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <numeric>
#include <optional>
#include <random>
#include <set>
#include <stdexcept>
#include <unordered_set>

#include "structdiff/enum_names.h"
#include "structdiff/graph.h"
#include "structdiff/runtime.h"
#include "graph/graph_text.h"
#include "util/text.h"

namespace structdiff::graph {

std::string past_mask_limit(const std::string& what) {
  return what + " takes the attention mask past " + std::to_string(kMaxMaskEntries) + " entries";
}

std::string element_text(const Element& e) {
  if (e.index.empty()) return printable(e.array);
  std::string text = printable(e.array) + "[";
  for (size_t i = 0; i < e.index.size(); ++i) text += (i ? "," : "") + std::to_string(e.index[i]);
  return text + "]";
}

bool is_scalar(const Array& a) {
  return a.shape.empty() || (a.shape.size() == 1 && a.shape[0] == 1);
}

std::optional<int64_t> whole_integer(const std::string& text, const std::string& where) {
  int64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (stop != end || error == std::errc::invalid_argument) return std::nullopt;
  if (error == std::errc::result_out_of_range) {
    throw std::invalid_argument(where + ": " + single_quoted(text) +
                                " is too large for a 64-bit integer");
  }
  return value;
}

int64_t Array::size() const {
  int64_t n = 1;
  for (int64_t extent : shape) n *= extent;
  return n;
}

void GraphicalModel::add_array(const std::string& name, std::vector<int64_t> shape,
                               VariableType type, int64_t options) {
  if (name.empty()) throw std::invalid_argument("array name must not be empty");
  for (const char c : name) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7F || c == '[' || c == ']') {
      throw std::invalid_argument("array name " + single_quoted(name) +
                                  " holds a bracket or control character; element texts could "
                                  "not name it");
    }
  }
  for (const Array& a : arrays_) {
    if (a.name == name) {
      throw std::invalid_argument("array " + single_quoted(name) + " is declared twice");
    }
  }
  // Checked one factor at a time: the product of the extents must neither overflow nor pass the
  // limit (shape [2^32, 2^32] wraps to 0 in 64 bits).
  int64_t size = 1;
  for (size_t axis = 0; axis < shape.size(); ++axis) {
    if (shape[axis] < 1) {
      throw std::invalid_argument("array " + single_quoted(name) + " has extent " +
                                  std::to_string(shape[axis]) + " on axis " + std::to_string(axis) +
                                  "; extents must be >= 1");
    }
    if (shape[axis] > kMaxVariables / size) {
      throw std::invalid_argument(
          "array " + single_quoted(name) + " with shape " + shape_text(shape, "[]") + " has more than " +
          std::to_string(kMaxVariables) + " variables, the most a model may hold");
    }
    size *= shape[axis];
  }
  if (size > kMaxVariables - num_nodes_) {
    throw std::invalid_argument(
        "array " + single_quoted(name) + " with shape " + shape_text(shape, "[]") + " adds " +
        std::to_string(size) + " variables to the " + std::to_string(num_nodes_) +
        " before it, more than the " + std::to_string(kMaxVariables) + " a model may hold");
  }
  if (type == VariableType::discrete && (options < 2 || options > kMaxOptions)) {
    throw std::invalid_argument("discrete array " + single_quoted(name) + " needs options in 2.." +
                                std::to_string(kMaxOptions) + ", got " + std::to_string(options));
  }
  if (type == VariableType::continuous && options != 0) {
    throw std::invalid_argument("continuous array " + single_quoted(name) + " takes no options");
  }
  if (size > mask_entries_left()) {  // its self-edges
    throw std::invalid_argument(past_mask_limit("array " + single_quoted(name)));
  }
  mask_entries_ += size;
  Array a{name, std::move(shape), type, options, num_nodes_};
  num_nodes_ += size;
  group_of_node_.resize(num_nodes_, -1);
  arrays_.push_back(std::move(a));
}

const Array& GraphicalModel::array(const std::string& name) const {
  std::vector<std::string> names;
  for (const Array& a : arrays_) {
    if (a.name == name) return a;
    names.push_back(a.name);
  }
  throw std::invalid_argument("no array named " + single_quoted(name) + did_you_mean(name, names));
}

int64_t GraphicalModel::node(const Element& e) const {
  const Array& a = array(e.array);
  if (e.index.empty() && is_scalar(a)) return a.first_node;
  if (e.index.size() != a.shape.size()) {
    throw std::invalid_argument("'" + element_text(e) + "': array " + single_quoted(a.name) +
                                " has shape " + shape_text(a.shape, "[]") + ", so an index needs " +
                                std::to_string(a.shape.size()) + " entries");
  }
  int64_t flat = 0;
  for (size_t axis = 0; axis < a.shape.size(); ++axis) {
    if (e.index[axis] < 0 || e.index[axis] >= a.shape[axis]) {
      throw std::invalid_argument("'" + element_text(e) + "': index " +
                                  std::to_string(e.index[axis]) + " out of range for axis " +
                                  std::to_string(axis) + " of array " + single_quoted(a.name) +
                                  " with shape " + shape_text(a.shape, "[]") + "; it takes 0.." +
                                  std::to_string(a.shape[axis] - 1));
    }
    flat = flat * a.shape[axis] + e.index[axis];
  }
  return a.first_node + flat;
}

const Array& GraphicalModel::array_of(int64_t node) const {
  if (node < 0 || node >= num_nodes_) {
    throw std::invalid_argument("node " + std::to_string(node) + " out of range [0, " +
                                std::to_string(num_nodes_) + ")");
  }
  for (const Array& a : arrays_) {
    if (node < a.first_node + a.size()) return a;
  }
  throw std::logic_error("array_of: inconsistent node numbering");
}

Element GraphicalModel::element(int64_t node) const {
  const Array& a = array_of(node);
  Element e{a.name, std::vector<int64_t>(a.shape.size())};
  int64_t rest = node - a.first_node;
  for (size_t axis = a.shape.size(); axis-- > 0;) {
    e.index[axis] = rest % a.shape[axis];
    rest /= a.shape[axis];
  }
  return e;
}

void GraphicalModel::add_edge(const Element& from, const Element& to) {
  const int64_t from_node = node(from), to_node = node(to);
  if (mask_entries_left() < 2) {  // both directions
    throw std::invalid_argument(
        past_mask_limit("edge '" + element_text(from) + "' -> '" + element_text(to) + "'"));
  }
  mask_entries_ += 2;
  edges_.emplace_back(from_node, to_node);
}

void GraphicalModel::add_factor(const std::vector<Element>& members) {
  std::vector<int64_t> nodes;
  for (const Element& e : members) nodes.push_back(node(e));
  const auto k = static_cast<int64_t>(nodes.size());
  if (k > 1 && k - 1 > mask_entries_left() / k) {  // k(k-1) entries, compared without overflow
    throw std::invalid_argument(past_mask_limit("a factor of " + std::to_string(k) + " elements"));
  }
  mask_entries_ += k * (k - 1);
  factors_.push_back(std::move(nodes));
}

void GraphicalModel::add_embedding_group(const std::vector<Element>& members) {
  std::vector<int64_t> nodes;
  for (const Element& e : members) {
    const int64_t n = node(e);
    if (group_of_node_[n] != -1) {
      throw std::invalid_argument("'" + element_text(e) + "' is already in embedding group " +
                                  std::to_string(group_of_node_[n]));
    }
    nodes.push_back(n);
  }
  for (int64_t n : nodes) group_of_node_[n] = num_groups_;
  ++num_groups_;
}

namespace {
const auto kMaskRuleNames = enum_names<MaskRule>("mask rule", {
    {MaskRule::standard, "standard"},
    {MaskRule::non_symmetrised, "non-symmetrised"},
    {MaskRule::random, "random"},
});
}  // namespace

MaskRule parse_mask_rule(const std::string& name) { return kMaskRuleNames.parse(name); }

std::vector<std::string> mask_rule_names() { return kMaskRuleNames.choices(); }

std::string mask_rule_name(MaskRule rule) { return kMaskRuleNames.name(rule); }

namespace {

// `pairs` distinct unordered pairs {i, j}, i != j, of n nodes, uniformly (Floyd's algorithm over
// the n(n-1)/2 pair indices), both directions of each, plus the diagonal.
AttentionPattern random_symmetric(int64_t n, int64_t pairs, uint64_t seed) {
  const int64_t total = n * (n - 1) / 2;
  std::mt19937_64 rng(seed);
  std::unordered_set<int64_t> taken;
  std::vector<std::pair<int64_t, int64_t>> edges;
  for (int64_t bound = total - pairs; bound < total; ++bound) {
    int64_t p = std::uniform_int_distribution<int64_t>(0, bound)(rng);
    if (!taken.insert(p).second) {
      p = bound;
      taken.insert(p);
    }
    // Pair index p in row-major order of the upper triangle, decoded from the end: q counts the
    // pairs after p, and the last r + 1 rows hold (r + 1)(r + 2) / 2 of them.
    const int64_t q = total - 1 - p;
    auto r = static_cast<int64_t>((std::sqrt(8.0 * static_cast<double>(q) + 1.0) - 1.0) / 2.0);
    while (r * (r + 1) / 2 > q) --r;
    while ((r + 1) * (r + 2) / 2 <= q) ++r;
    const int64_t i = n - 2 - r, j = n - 1 - (q - r * (r + 1) / 2);
    edges.emplace_back(i, j);
  }
  return patterns::from_edges(n, edges, {true, true});
}

}  // namespace

AttentionPattern GraphicalModel::compile(const MaskOptions& options) const {
  const AttentionPattern standard =
      patterns::unite({patterns::from_edges(num_nodes_, edges_, {true, true}),
                       patterns::from_cliques(num_nodes_, factors_, true)});
  switch (options.rule) {
    case MaskRule::standard: return standard;
    case MaskRule::non_symmetrised: {
      // from_edges takes (query, key): the child queries its parent.
      std::vector<std::pair<int64_t, int64_t>> child_to_parent;
      for (const auto& [parent, child] : edges_) child_to_parent.emplace_back(child, parent);
      return patterns::unite({patterns::from_edges(num_nodes_, child_to_parent, {false, true}),
                              patterns::from_cliques(num_nodes_, factors_, true)});
    }
    case MaskRule::random:
      return random_symmetric(num_nodes_, (standard.num_entries() - num_nodes_) / 2, options.seed);
  }
  throw std::logic_error("compile: unknown mask rule");
}

std::vector<int64_t> GraphicalModel::node_permutation(const IndexPermutation& p) const {
  if (p.axes.empty()) {
    throw std::invalid_argument("an index permutation needs an (array, axis) to act on");
  }
  const int64_t extent = static_cast<int64_t>(p.permutation.size());
  std::vector<char> seen(extent, 0);
  for (int64_t value : p.permutation) {
    const bool in_range = value >= 0 && value < extent;
    if (!in_range || seen[value]) {
      throw std::invalid_argument("permutation must hold each of 0.." + std::to_string(extent - 1) +
                                  " exactly once; " + std::to_string(value) +
                                  (in_range ? " appears twice" : " is out of range"));
    }
    seen[value] = 1;
  }
  // The listed axes grouped by array: all axes of one array are relabelled in the same pass.
  std::vector<std::pair<const Array*, std::vector<int64_t>>> axes_of_array;
  for (const auto& [name, axis] : p.axes) {
    const Array& a = array(name);
    const auto rank = static_cast<int64_t>(a.shape.size());
    if (axis < 0 || axis >= rank) {
      throw std::invalid_argument(
          "array " + single_quoted(name) + " with shape " + shape_text(a.shape, "[]") + " has no axis " +
          std::to_string(axis) +
          (rank == 0 ? "; it is a scalar" : "; its axes are 0.." + std::to_string(rank - 1)));
    }
    if (a.shape[axis] != extent) {
      throw std::invalid_argument("axis " + std::to_string(axis) + " of array " +
                                  single_quoted(name) + " has extent " +
                                  std::to_string(a.shape[axis]) + " but the permutation has " +
                                  std::to_string(extent) + " entries");
    }
    auto entry = std::find_if(axes_of_array.begin(), axes_of_array.end(),
                              [&](const auto& listed) { return listed.first == &a; });
    if (entry == axes_of_array.end()) entry = axes_of_array.insert(entry, {&a, {}});
    if (std::find(entry->second.begin(), entry->second.end(), axis) != entry->second.end()) {
      // Applying the permutation twice to one axis would be a different permutation.
      throw std::invalid_argument("axis " + std::to_string(axis) + " of array " +
                                  single_quoted(name) + " is listed twice");
    }
    entry->second.push_back(axis);
  }
  std::vector<int64_t> target(num_nodes_);
  std::iota(target.begin(), target.end(), 0);
  for (const auto& [a, axes] : axes_of_array) {
    for (int64_t n = a->first_node; n < a->first_node + a->size(); ++n) {
      Element e = element(n);
      for (int64_t axis : axes) e.index[axis] = p.permutation[e.index[axis]];
      target[n] = node(e);
    }
  }
  return target;
}

bool GraphicalModel::mask_invariant_under(const IndexPermutation& p) const {
  const std::vector<int64_t> pi = node_permutation(p);
  const AttentionPattern mask = compile();
  for (int64_t row = 0; row < num_nodes_; ++row) {
    for (int64_t e = mask.row_offsets()[row]; e < mask.row_offsets()[row + 1]; ++e) {
      if (!mask.contains(pi[row], pi[mask.col_indices()[e]])) return false;
    }
  }
  return true;  // pi is a bijection, so mapping every entry into M means pi M = M
}

std::pair<std::string, int64_t> parse_axis(const std::string& text) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    throw std::invalid_argument("axis " + single_quoted(text) + " is not ARRAY:AXIS, e.g. R:0");
  }
  const std::string number = text.substr(colon + 1);
  const std::optional<int64_t> axis = whole_integer(number, "axis " + single_quoted(text));
  if (!axis || *axis < 0) {
    throw std::invalid_argument("axis " + single_quoted(text) + ": " + single_quoted(number) +
                                " is not an integer >= 0; give ARRAY:AXIS, e.g. R:0");
  }
  return {text.substr(0, colon), *axis};
}

std::vector<int64_t> parse_permutation(const std::string& text) {
  if (trimmed(text).empty()) {
    throw std::invalid_argument(
        "permutation is empty; give the new position of each index value, e.g. 1,0,2");
  }
  std::vector<int64_t> permutation;
  for (const std::string& part : split(text, ',')) {
    const std::optional<int64_t> value =
        whole_integer(trimmed(part), "permutation " + single_quoted(text));
    if (!value || *value < 0) {
      throw std::invalid_argument("permutation " + single_quoted(text) + ": entry " +
                                  std::to_string(permutation.size()) + " " + single_quoted(part) +
                                  " is not an integer >= 0");
    }
    permutation.push_back(*value);
  }
  return permutation;
}

}  // namespace structdiff::graph
