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

#include "structdiff/graph.h"
#include "structdiff/runtime.h"
#include "util/text.h"

namespace structdiff::graph {
namespace {

// User text as a message shows it: control characters and bytes that are not UTF-8 escaped (a
// message stays one printable line), texts longer than `max_shown` bytes cut short.
std::string printable(const std::string& text, size_t max_shown = 60) {
  std::string out;
  size_t i = 0;
  while (i < text.size() && i < max_shown) {
    const auto byte = static_cast<unsigned char>(text[i]);
    const size_t length = utf8_sequence_length(text, i);
    if (length == 0 || byte < 0x20 || byte == 0x7F) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02X", byte);
      out += escaped;
      ++i;
    } else {
      out.append(text, i, length);
      i += length;
    }
  }
  return i < text.size() ? out + "..." : out;
}

std::string single_quoted(const std::string& text, size_t max_shown = 60) {
  return "'" + printable(text, max_shown) + "'";
}

std::string past_mask_limit(const std::string& what) {
  return what + " takes the attention mask past " + std::to_string(kMaxMaskEntries) + " entries";
}

// Paths are shown whole: a shortened one would not say which file is meant.
constexpr size_t kWholePath = 4096;

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

std::string element_text(const Element& e) {
  if (e.index.empty()) return printable(e.array);
  std::string text = printable(e.array) + "[";
  for (size_t i = 0; i < e.index.size(); ++i) text += (i ? "," : "") + std::to_string(e.index[i]);
  return text + "]";
}

// Shape {} and {1} both denote a scalar.
bool is_scalar(const Array& a) {
  return a.shape.empty() || (a.shape.size() == 1 && a.shape[0] == 1);
}

// "; did you mean 'edges'?" when one of `candidates` is close enough to `word` to be its typo.
std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates) {
  const std::string closest = closest_name(word, candidates);
  return closest.empty() ? "" : "; did you mean " + single_quoted(closest) + "?";
}

// A whole decimal integer: an optional '-' and digits, nothing else (no '+', spaces, "0x" or
// trailing text). nullopt if `text` is not one; one too large for 64 bits throws, `where` first.
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

std::string trimmed(const std::string& text) {
  const auto first = text.find_first_not_of(' ');
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(' ') - first + 1);
}

// Splits at every `separator`, keeping empty parts ("1," is two parts, the second empty).
std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts{""};
  for (char c : text) {
    if (c == separator) {
      parts.emplace_back();
    } else {
      parts.back() += c;
    }
  }
  return parts;
}

}  // namespace

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
          "array " + single_quoted(name) + " with shape " + shape_text(shape) + " has more than " +
          std::to_string(kMaxVariables) + " variables, the most a model may hold");
    }
    size *= shape[axis];
  }
  if (size > kMaxVariables - num_nodes_) {
    throw std::invalid_argument(
        "array " + single_quoted(name) + " with shape " + shape_text(shape) + " adds " +
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
                                " has shape " + shape_text(a.shape) + ", so an index needs " +
                                std::to_string(a.shape.size()) + " entries");
  }
  int64_t flat = 0;
  for (size_t axis = 0; axis < a.shape.size(); ++axis) {
    if (e.index[axis] < 0 || e.index[axis] >= a.shape[axis]) {
      throw std::invalid_argument("'" + element_text(e) + "': index " +
                                  std::to_string(e.index[axis]) + " out of range for axis " +
                                  std::to_string(axis) + " of array " + single_quoted(a.name) +
                                  " with shape " + shape_text(a.shape) + "; it takes 0.." +
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

MaskRule parse_mask_rule(const std::string& name) {
  for (MaskRule rule : {MaskRule::standard, MaskRule::non_symmetrised, MaskRule::random}) {
    if (mask_rule_name(rule) == name) return rule;
  }
  throw std::invalid_argument("unknown mask rule " + single_quoted(name) +
                              "; use standard, non-symmetrised or random");
}

std::string mask_rule_name(MaskRule rule) {
  switch (rule) {
    case MaskRule::standard: return "standard";
    case MaskRule::non_symmetrised: return "non-symmetrised";
    case MaskRule::random: return "random";
  }
  throw std::logic_error("mask_rule_name: unknown rule");
}

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
          "array " + single_quoted(name) + " with shape " + shape_text(a.shape) + " has no axis " +
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

// ---- JSON ------------------------------------------------------------------------------------

namespace {

using nlohmann::json;

// A JSON value as a message shows it: scalars as written, containers by their brackets.
std::string json_text(const json& value) {
  if (value.is_string()) return single_quoted(value.get<std::string>());
  if (value.is_array()) return "[...]";
  if (value.is_object()) return "{...}";
  if (value.is_number_float() && !std::isfinite(value.get<double>())) {
    return "a number out of range";
  }
  return value.dump();
}

// A JSON list as a message shows it, e.g. [4294967296, 2.7]; long lists cut short.
std::string json_list_text(const json& list) {
  constexpr size_t kMaxShown = 8;
  std::string text = "[";
  for (size_t i = 0; i < list.size() && i < kMaxShown; ++i) {
    text += (i ? ", " : "") + json_text(list[i]);
  }
  return text + (list.size() > kMaxShown ? ", ...]" : "]");
}

// Whether `value` is a JSON integer that fits int64_t: 2.7, 2.0, "2" and 2^64 - 1 are not.
bool is_int64(const json& value) {
  return value.is_number_integer() &&
         !(value.is_number_unsigned() &&
           value.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()));
}

// A misspelt key would otherwise be ignored, silently dropping what it was meant to say.
void reject_unknown_keys(const json& object, const std::vector<std::string>& keys,
                         const std::string& where) {
  for (const auto& item : object.items()) {
    if (std::find(keys.begin(), keys.end(), item.key()) != keys.end()) continue;
    std::string hint = did_you_mean(item.key(), keys);
    if (hint.empty()) {
      hint = "; valid keys are ";
      for (size_t i = 0; i < keys.size(); ++i) hint += (i ? ", " : "") + keys[i];
    }
    throw std::invalid_argument("unknown key " + single_quoted(item.key()) + " in " + where + hint);
  }
}

// spec[key], which must be a list if present; an empty list if absent.
json list_field(const json& spec, const std::string& key) {
  if (!spec.contains(key)) return json::array();
  const json& list = spec.at(key);
  if (!list.is_array()) {
    throw std::invalid_argument("spec: \"" + key + "\" must be a list, got " + json_text(list));
  }
  return list;
}

void add_array_from_json(GraphicalModel& model, const json& a, const std::string& where) {
  if (!a.is_object()) {
    throw std::invalid_argument(
        where + ": an array is an object like {\"name\": \"x\", \"shape\": [2, 3]}, got " +
        json_text(a));
  }
  reject_unknown_keys(a, {"name", "shape", "type", "options"}, where);
  if (!a.contains("name") || !a.at("name").is_string()) {
    throw std::invalid_argument(where + ": needs a \"name\" string");
  }
  const std::string name = a.at("name");
  const std::string here = where + " " + single_quoted(name);
  std::vector<int64_t> shape;
  if (a.contains("shape")) {
    const json& extents = a.at("shape");
    if (!extents.is_array()) {
      throw std::invalid_argument(here + ": shape must be a list of extents, got " +
                                  json_text(extents));
    }
    for (size_t axis = 0; axis < extents.size(); ++axis) {
      if (!is_int64(extents[axis])) {
        throw std::invalid_argument(here + ": shape " + json_list_text(extents) + " has " +
                                    json_text(extents[axis]) + " on axis " + std::to_string(axis) +
                                    "; extents are integers >= 1");
      }
      shape.push_back(extents[axis].get<int64_t>());
    }
  }
  VariableType type = VariableType::continuous;
  if (a.contains("type")) {
    const json& text = a.at("type");
    if (text == "discrete") {
      type = VariableType::discrete;
    } else if (text != "continuous") {
      throw std::invalid_argument(here + ": type must be continuous or discrete, got " +
                                  json_text(text));
    }
  }
  int64_t options = 0;
  if (a.contains("options")) {
    if (type == VariableType::continuous) {
      throw std::invalid_argument(here + ": continuous arrays take no options");
    }
    const json& count = a.at("options");
    if (!is_int64(count)) {
      throw std::invalid_argument(here + ": options must be an integer in 2.." +
                                  std::to_string(kMaxOptions) + ", got " + json_text(count));
    }
    options = count.get<int64_t>();
  }
  try {
    model.add_array(name, std::move(shape), type, options);
  } catch (const std::invalid_argument& error) {
    throw std::invalid_argument(where + ": " + error.what());
  }
}

// "name", "name[1,2]" or "name[1,*]" ('*' expands over the whole axis; spaces around an entry
// are allowed). More than `max_count` elements (but always one) is an error raised before any is
// made, so that wildcards cannot exhaust memory.
std::vector<Element> parse_elements(const GraphicalModel& model, const std::string& text,
                                    const std::string& where, int64_t max_count) {
  std::vector<Element> out;
  try {
    const auto open = text.find('[');
    const Array& a = model.array(text.substr(0, open));
    std::vector<std::vector<int64_t>> values_per_axis;
    if (open == std::string::npos) {
      if (!is_scalar(a)) {
        throw std::invalid_argument("array " + single_quoted(a.name) + " has shape " +
                                    shape_text(a.shape) + "; give an index");
      }
    } else {
      if (a.shape.empty()) {
        throw std::invalid_argument("array " + single_quoted(a.name) +
                                    " is a scalar; name it without an index");
      }
      if (text.back() != ']' || text.find_first_of("[]", open + 1) != text.size() - 1) {
        throw std::invalid_argument("an element is name[i,j,...] with one integer or '*' per axis");
      }
      const std::vector<std::string> parts =
          split(text.substr(open + 1, text.size() - open - 2), ',');
      if (parts.size() != a.shape.size()) {
        throw std::invalid_argument("array " + single_quoted(a.name) + " has shape " +
                                    shape_text(a.shape) + ", so an index needs " +
                                    std::to_string(a.shape.size()) + " entries");
      }
      int64_t count = 1;  // at most a.size(), so it cannot overflow
      for (size_t axis = 0; axis < parts.size(); ++axis) {
        const std::string part = trimmed(parts[axis]);
        std::vector<int64_t> values;
        if (part == "*") {
          for (int64_t v = 0; v < a.shape[axis]; ++v) values.push_back(v);
        } else {
          const std::optional<int64_t> value = whole_integer(part, "index");
          if (!value) {
            throw std::invalid_argument("index " + single_quoted(parts[axis]) +
                                        " is not an integer or '*'");
          }
          values.push_back(*value);
        }
        count *= static_cast<int64_t>(values.size());
        values_per_axis.push_back(std::move(values));
      }
      if (count > 1 && count > max_count) {
        throw std::invalid_argument("expands to " + std::to_string(count) +
                                    " elements; with the attention mask limited to " +
                                    std::to_string(kMaxMaskEntries) + " entries, at most " +
                                    std::to_string(max_count) + " fit here");
      }
    }
    out.push_back({a.name, {}});
    for (const std::vector<int64_t>& values : values_per_axis) {
      std::vector<Element> next;
      for (const Element& e : out) {
        for (int64_t v : values) {
          next.push_back(e);
          next.back().index.push_back(v);
        }
      }
      out = std::move(next);
    }
  } catch (const std::invalid_argument& error) {
    throw std::invalid_argument(where + ": " + single_quoted(text) + ": " + error.what());
  }
  // Wildcard entries are in range, so the first element has every explicit entry to check.
  try {
    model.node(out.front());  // its message names the element
  } catch (const std::invalid_argument& error) {
    throw std::invalid_argument(where + ": " + error.what());
  }
  return out;
}

std::vector<Element> parse_element_list(const GraphicalModel& model, const json& list,
                                        const std::string& where, int64_t max_count) {
  if (!list.is_array()) {
    throw std::invalid_argument(where + " must be a list of elements like \"x[0,1]\", got " +
                                json_text(list));
  }
  if (list.empty()) throw std::invalid_argument(where + " is empty; list at least one element");
  std::vector<Element> out;
  for (const json& item : list) {
    if (!item.is_string()) {
      throw std::invalid_argument(where + ": elements are strings like \"x[0,1]\", got " +
                                  json_text(item));
    }
    const int64_t room = max_count - static_cast<int64_t>(out.size());
    std::vector<Element> part = parse_elements(model, item.get<std::string>(), where, room);
    out.insert(out.end(), part.begin(), part.end());
  }
  return out;
}

// Names a key repeated within one object, which nlohmann::json would otherwise resolve silently
// (the last one wins). A parser callback: it follows the parse to say where the object is.
class DuplicateKeyCheck {
 public:
  bool operator()(int /*depth*/, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        open_.push_back({event == json::parse_event_t::object_start, {}, {}, 0});
        break;
      case json::parse_event_t::key: {
        Container& object = open_.back();
        object.key = parsed.get<std::string>();
        if (!object.keys.insert(object.key).second) {
          throw std::invalid_argument("key " + single_quoted(object.key) + " appears twice in " +
                                      path());
        }
        break;
      }
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        open_.pop_back();
        value_done();
        break;
      case json::parse_event_t::value:
        value_done();
        break;
    }
    return true;
  }

 private:
  struct Container {
    bool is_object;
    std::set<std::string> keys;
    std::string key;      // object: the latest key
    size_t elements = 0;  // list: values so far
  };

  void value_done() {
    if (!open_.empty() && !open_.back().is_object) ++open_.back().elements;
  }

  // Where the innermost open object is, e.g. "arrays[1]".
  std::string path() const {
    std::string text;
    for (size_t i = 0; i + 1 < open_.size(); ++i) {
      text += open_[i].is_object ? (text.empty() ? "" : ".") + printable(open_[i].key)
                                 : "[" + std::to_string(open_[i].elements) + "]";
    }
    return text.empty() ? "spec" : text;
  }

  std::vector<Container> open_;
};

}  // namespace

GraphicalModel GraphicalModel::from_json(const json& spec) {
  if (!spec.is_object()) {
    throw std::invalid_argument("spec: needs an \"arrays\" list in a JSON object, got " +
                                json_text(spec));
  }
  reject_unknown_keys(spec, {"arrays", "edges", "factors", "embedding_groups"}, "spec");
  if (!spec.contains("arrays") || !spec.at("arrays").is_array()) {
    throw std::invalid_argument("spec: needs an \"arrays\" list");
  }
  const json& arrays = spec.at("arrays");
  if (arrays.empty()) {
    throw std::invalid_argument("spec: \"arrays\" is empty; a model needs an array");
  }
  GraphicalModel model;
  for (size_t i = 0; i < arrays.size(); ++i) {
    add_array_from_json(model, arrays[i], "arrays[" + std::to_string(i) + "]");
  }
  const json edges = list_field(spec, "edges");
  for (size_t i = 0; i < edges.size(); ++i) {
    const std::string where = "edges[" + std::to_string(i) + "]";
    const json& edge = edges[i];
    if (!edge.is_array() || edge.size() != 2 || !edge[0].is_string() || !edge[1].is_string()) {
      throw std::invalid_argument(where + ": an edge is [from, to], two elements like \"x[0,1]\"");
    }
    // Wildcards expand both ends; every (from, to) pair becomes an edge, two mask entries.
    const int64_t pairs_left = model.mask_entries_left() / 2;
    const std::vector<Element> from =
        parse_elements(model, edge[0].get<std::string>(), where, pairs_left);
    const std::vector<Element> to = parse_elements(model, edge[1].get<std::string>(), where,
                                                   pairs_left / static_cast<int64_t>(from.size()));
    if (from.size() == 1 && to.size() == 1 && model.node(from[0]) == model.node(to[0])) {
      throw std::invalid_argument(where + ": an edge from '" + element_text(from[0]) +
                                  "' to itself; every variable attends to itself already");
    }
    try {
      for (const Element& f : from) {
        for (const Element& t : to) {
          if (model.node(f) != model.node(t)) model.add_edge(f, t);  // self-pairs are implied
        }
      }
    } catch (const std::invalid_argument& error) {
      throw std::invalid_argument(where + ": " + error.what());
    }
  }
  const json factors = list_field(spec, "factors");
  for (size_t i = 0; i < factors.size(); ++i) {
    const std::string where = "factors[" + std::to_string(i) + "]";
    // A factor of k elements takes k(k-1) mask entries.
    const auto max_members =
        static_cast<int64_t>(std::sqrt(static_cast<double>(model.mask_entries_left()))) + 1;
    const std::vector<Element> members = parse_element_list(model, factors[i], where, max_members);
    try {
      model.add_factor(members);
    } catch (const std::invalid_argument& error) {
      throw std::invalid_argument(where + ": " + error.what());
    }
  }
  const json groups = list_field(spec, "embedding_groups");
  for (size_t i = 0; i < groups.size(); ++i) {
    const std::string where = "embedding_groups[" + std::to_string(i) + "]";
    const std::vector<Element> members =
        parse_element_list(model, groups[i], where, model.num_nodes());
    try {
      model.add_embedding_group(members);
    } catch (const std::invalid_argument& error) {
      throw std::invalid_argument(where + ": " + error.what());
    }
  }
  return model;
}

json GraphicalModel::to_json() const {
  json arrays = json::array();
  for (const Array& a : arrays_) {
    json entry = {{"name", a.name}, {"shape", a.shape}};
    if (a.type == VariableType::discrete) {
      entry["type"] = "discrete";
      entry["options"] = a.options;
    }
    arrays.push_back(entry);
  }
  const auto text = [&](int64_t node) { return element_text(element(node)); };
  json edges = json::array(), factors = json::array(), groups = json::array();
  for (const auto& [from, to] : edges_) edges.push_back({text(from), text(to)});
  for (const auto& members : factors_) {
    json factor = json::array();
    for (int64_t node : members) factor.push_back(text(node));
    factors.push_back(factor);
  }
  std::vector<json> group_members(num_groups_, json::array());
  for (int64_t node = 0; node < num_nodes_; ++node) {
    if (group_of_node_[node] >= 0) group_members[group_of_node_[node]].push_back(text(node));
  }
  for (json& members : group_members) groups.push_back(std::move(members));
  return {{"arrays", arrays}, {"edges", edges}, {"factors", factors}, {"embedding_groups", groups}};
}

GraphicalModel GraphicalModel::load(const std::string& path) {
  std::error_code ignored;
  if (std::filesystem::is_directory(path, ignored)) {
    throw std::invalid_argument(single_quoted(path, kWholePath) +
                                " is a directory, not a graphical model spec");
  }
  const std::string text = read_bounded(path, kMaxSpecBytes, "graphical model spec");
  if (text.empty()) {
    throw std::invalid_argument(
        single_quoted(path, kWholePath) +
        " is empty; a graphical model spec is a JSON object (docs/gsdm-spec.md)");
  }
  json spec;
  DuplicateKeyCheck duplicate_keys;
  try {
    spec = json::parse(text, [&](int depth, json::parse_event_t event, json& parsed) {
      return duplicate_keys(depth, event, parsed);
    });
  } catch (const json::exception& error) {
    // A syntax error, or a number too large for a double (1e400). "[json.exception.parse_error.101]
    // parse error at line 1, ...": the bracketed id says nothing to a user.
    const std::string message = error.what();
    const auto id_end = message.find("] ");
    throw std::invalid_argument(
        single_quoted(path, kWholePath) + " is not valid JSON: " +
        printable(id_end == std::string::npos ? message : message.substr(id_end + 2),
                  message.size()));
  } catch (const std::invalid_argument& error) {
    throw std::invalid_argument(printable(path, kWholePath) + ": " + error.what());
  }
  try {
    return from_json(spec);
  } catch (const std::invalid_argument& error) {
    throw std::invalid_argument(printable(path, kWholePath) + ": " + error.what());
  }
}

}  // namespace structdiff::graph
