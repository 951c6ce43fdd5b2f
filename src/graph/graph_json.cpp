// Graphical models from and to their JSON description (docs/gsdm-spec.md), and from a file.
#include <cmath>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "graph/graph_text.h"
#include "structdiff/graph.h"
#include "structdiff/runtime.h"
#include "util/text.h"

namespace structdiff::graph {

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
                                    shape_text(a.shape, "[]") + "; give an index");
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
                                    shape_text(a.shape, "[]") + ", so an index needs " +
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
