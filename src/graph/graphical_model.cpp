#include <algorithm>
#include <fstream>
#include <numeric>
#include <sstream>
#include <stdexcept>

#include "structdiff/graph.h"

namespace structdiff::graph {
namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

std::string element_text(const Element& e) {
  if (e.index.empty()) return e.array;
  std::string text = e.array + "[";
  for (size_t i = 0; i < e.index.size(); ++i) text += (i ? "," : "") + std::to_string(e.index[i]);
  return text + "]";
}

// Shape {} and {1} both denote a scalar.
bool is_scalar(const Array& a) {
  return a.shape.empty() || (a.shape.size() == 1 && a.shape[0] == 1);
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
  for (const Array& a : arrays_) {
    if (a.name == name) throw std::invalid_argument("array '" + name + "' is declared twice");
  }
  for (size_t axis = 0; axis < shape.size(); ++axis) {
    if (shape[axis] < 1) {
      throw std::invalid_argument("array '" + name + "' has extent " + std::to_string(shape[axis]) +
                                  " on axis " + std::to_string(axis) + "; extents must be >= 1");
    }
  }
  if (type == VariableType::discrete && options < 2) {
    throw std::invalid_argument("discrete array '" + name + "' needs options >= 2, got " +
                                std::to_string(options));
  }
  if (type == VariableType::continuous && options != 0) {
    throw std::invalid_argument("continuous array '" + name + "' takes no options");
  }
  Array a{name, std::move(shape), type, options, num_nodes_};
  num_nodes_ += a.size();
  group_of_node_.resize(num_nodes_, -1);
  arrays_.push_back(std::move(a));
}

const Array& GraphicalModel::array(const std::string& name) const {
  for (const Array& a : arrays_) {
    if (a.name == name) return a;
  }
  throw std::invalid_argument("no array named '" + name + "'");
}

int64_t GraphicalModel::node(const Element& e) const {
  const Array& a = array(e.array);
  if (e.index.empty() && is_scalar(a)) return a.first_node;
  if (e.index.size() != a.shape.size()) {
    throw std::invalid_argument("'" + element_text(e) + "': array '" + a.name + "' has shape " +
                                shape_text(a.shape) + ", so an index needs " +
                                std::to_string(a.shape.size()) + " entries");
  }
  int64_t flat = 0;
  for (size_t axis = 0; axis < a.shape.size(); ++axis) {
    if (e.index[axis] < 0 || e.index[axis] >= a.shape[axis]) {
      throw std::invalid_argument("'" + element_text(e) + "': index " +
                                  std::to_string(e.index[axis]) + " out of range for axis " +
                                  std::to_string(axis) + " of array '" + a.name +
                                  "' with shape " + shape_text(a.shape));
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
  edges_.emplace_back(node(from), node(to));
}

void GraphicalModel::add_factor(const std::vector<Element>& members) {
  std::vector<int64_t> nodes;
  for (const Element& e : members) nodes.push_back(node(e));
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

AttentionPattern GraphicalModel::compile() const {
  return patterns::unite({patterns::from_edges(num_nodes_, edges_, {true, true}),
                          patterns::from_cliques(num_nodes_, factors_, true)});
}

std::vector<int64_t> GraphicalModel::node_permutation(const IndexPermutation& p) const {
  const int64_t extent = static_cast<int64_t>(p.permutation.size());
  std::vector<char> seen(extent, 0);
  for (int64_t value : p.permutation) {
    if (value < 0 || value >= extent || seen[value]) {
      throw std::invalid_argument("permutation must hold each of 0.." + std::to_string(extent - 1) +
                                  " exactly once");
    }
    seen[value] = 1;
  }
  // The listed axes grouped by array: all axes of one array are relabelled in the same pass.
  std::vector<std::pair<const Array*, std::vector<int64_t>>> axes_of_array;
  for (const auto& [name, axis] : p.axes) {
    const Array& a = array(name);
    if (axis < 0 || axis >= static_cast<int64_t>(a.shape.size())) {
      throw std::invalid_argument("array '" + name + "' with shape " + shape_text(a.shape) +
                                  " has no axis " + std::to_string(axis));
    }
    if (a.shape[axis] != extent) {
      throw std::invalid_argument("axis " + std::to_string(axis) + " of array '" + name +
                                  "' has extent " + std::to_string(a.shape[axis]) +
                                  " but the permutation has " + std::to_string(extent) +
                                  " entries");
    }
    auto entry = std::find_if(axes_of_array.begin(), axes_of_array.end(),
                              [&](const auto& listed) { return listed.first == &a; });
    if (entry == axes_of_array.end()) entry = axes_of_array.insert(entry, {&a, {}});
    if (std::find(entry->second.begin(), entry->second.end(), axis) != entry->second.end()) {
      // Applying the permutation twice to one axis would be a different permutation.
      throw std::invalid_argument("axis " + std::to_string(axis) + " of array '" + name +
                                  "' is listed twice");
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

// ---- JSON ------------------------------------------------------------------------------------

namespace {

// "name", "name[1,2]" or "name[1,*]" ('*' expands over the whole axis).
std::vector<Element> parse_elements(const GraphicalModel& model, const std::string& text,
                                    const std::string& where) {
  const auto open = text.find('[');
  Element base{text.substr(0, open), {}};
  std::vector<Element> out{base};
  try {
    const Array& a = model.array(base.array);
    if (open == std::string::npos) {
      if (!is_scalar(a)) {
        throw std::invalid_argument("array '" + a.name + "' has shape " + shape_text(a.shape) +
                                    "; give an index");
      }
      return out;
    }
    if (text.back() != ']') throw std::invalid_argument("missing ']'");
    std::vector<std::string> parts;
    std::stringstream inner(text.substr(open + 1, text.size() - open - 2));
    for (std::string part; std::getline(inner, part, ',');) parts.push_back(part);
    if (parts.size() != a.shape.size()) {
      throw std::invalid_argument("array '" + a.name + "' has shape " + shape_text(a.shape) +
                                  ", so an index needs " + std::to_string(a.shape.size()) +
                                  " entries");
    }
    for (size_t axis = 0; axis < parts.size(); ++axis) {
      std::vector<int64_t> values;
      if (parts[axis] == "*") {
        for (int64_t v = 0; v < a.shape[axis]; ++v) values.push_back(v);
      } else {
        size_t used = 0;
        try {
          values.push_back(std::stoll(parts[axis], &used));
        } catch (const std::logic_error&) {
          used = std::string::npos;
        }
        if (used != parts[axis].size()) {
          throw std::invalid_argument("index '" + parts[axis] + "' is not an integer or '*'");
        }
      }
      std::vector<Element> next;
      for (const Element& e : out) {
        for (int64_t v : values) {
          Element copy = e;
          copy.index.push_back(v);
          next.push_back(copy);
        }
      }
      out = std::move(next);
    }
  } catch (const std::invalid_argument& error) {
    throw std::invalid_argument(where + ": '" + text + "': " + error.what());
  }
  for (const Element& e : out) {
    try {
      model.node(e);  // range check; its message names the element
    } catch (const std::invalid_argument& error) {
      throw std::invalid_argument(where + ": " + error.what());
    }
  }
  return out;
}

std::vector<Element> parse_element_list(const GraphicalModel& model, const nlohmann::json& list,
                                        const std::string& where) {
  if (!list.is_array()) throw std::invalid_argument(where + " must be a list of elements");
  std::vector<Element> out;
  for (const auto& item : list) {
    if (!item.is_string()) throw std::invalid_argument(where + ": elements are strings like \"x[0,1]\"");
    auto part = parse_elements(model, item.get<std::string>(), where);
    out.insert(out.end(), part.begin(), part.end());
  }
  return out;
}

}  // namespace

GraphicalModel GraphicalModel::from_json(const nlohmann::json& spec) {
  GraphicalModel model;
  if (!spec.is_object() || !spec.contains("arrays") || !spec["arrays"].is_array()) {
    throw std::invalid_argument("spec: needs an \"arrays\" list");
  }
  for (size_t i = 0; i < spec["arrays"].size(); ++i) {
    const auto& a = spec["arrays"][i];
    const std::string where = "arrays[" + std::to_string(i) + "]";
    if (!a.is_object() || !a.contains("name") || !a["name"].is_string()) {
      throw std::invalid_argument(where + ": needs a \"name\" string");
    }
    const std::string name = a["name"];
    std::vector<int64_t> shape;
    if (a.contains("shape")) {
      if (!a["shape"].is_array()) throw std::invalid_argument(where + " '" + name + "': shape must be a list");
      for (const auto& extent : a["shape"]) {
        if (!extent.is_number_integer()) {
          throw std::invalid_argument(where + " '" + name + "': shape entries must be integers");
        }
        shape.push_back(extent.get<int64_t>());
      }
    }
    const std::string type = a.value("type", "continuous");
    if (type != "continuous" && type != "discrete") {
      throw std::invalid_argument(where + " '" + name + "': type must be continuous or discrete, got '" +
                                  type + "'");
    }
    try {
      model.add_array(name, shape,
                      type == "discrete" ? VariableType::discrete : VariableType::continuous,
                      a.value("options", int64_t{0}));
    } catch (const std::invalid_argument& error) {
      throw std::invalid_argument(where + ": " + error.what());
    }
  }
  const auto& edges = spec.value("edges", nlohmann::json::array());
  for (size_t i = 0; i < edges.size(); ++i) {
    const std::string where = "edges[" + std::to_string(i) + "]";
    if (!edges[i].is_array() || edges[i].size() != 2) {
      throw std::invalid_argument(where + ": an edge is [from, to]");
    }
    // Wildcards expand both ends; every (from, to) pair becomes an edge.
    for (const Element& from : parse_element_list(model, nlohmann::json::array({edges[i][0]}), where)) {
      for (const Element& to : parse_element_list(model, nlohmann::json::array({edges[i][1]}), where)) {
        model.add_edge(from, to);
      }
    }
  }
  const auto& factors = spec.value("factors", nlohmann::json::array());
  for (size_t i = 0; i < factors.size(); ++i) {
    model.add_factor(parse_element_list(model, factors[i], "factors[" + std::to_string(i) + "]"));
  }
  const auto& groups = spec.value("embedding_groups", nlohmann::json::array());
  for (size_t i = 0; i < groups.size(); ++i) {
    const std::string where = "embedding_groups[" + std::to_string(i) + "]";
    try {
      model.add_embedding_group(parse_element_list(model, groups[i], where));
    } catch (const std::invalid_argument& error) {
      const std::string message = error.what();
      throw std::invalid_argument(message.rfind(where, 0) == 0 ? message : where + ": " + message);
    }
  }
  return model;
}

GraphicalModel GraphicalModel::load(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument("cannot open graphical model spec '" + path + "'");
  nlohmann::json spec;
  try {
    spec = nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& error) {
    throw std::invalid_argument("'" + path + "' is not valid JSON: " + error.what());
  }
  try {
    return from_json(spec);
  } catch (const std::invalid_argument& error) {
    throw std::invalid_argument(path + ": " + error.what());
  }
}

}  // namespace structdiff::graph
