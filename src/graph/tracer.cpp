#include "structdiff/tracer.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include <torch/torch.h>

namespace structdiff::graph {
namespace {

std::string element_text(const std::string& name, const std::vector<int64_t>& index) {
  std::string text = "'" + name;
  if (!index.empty()) {
    text += "[";
    for (size_t i = 0; i < index.size(); ++i) text += (i ? "," : "") + std::to_string(index[i]);
    text += "]";
  }
  return text + "'";
}

std::vector<int64_t> united(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  std::vector<int64_t> out;
  out.reserve(a.size() + b.size());
  std::set_union(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

std::vector<int64_t> deps_of(const std::vector<Traced>& values) {
  std::vector<int64_t> deps;
  for (const Traced& v : values) deps = united(deps, v.deps());
  return deps;
}

}  // namespace

Traced apply(const std::function<double(const std::vector<double>&)>& f,
             const std::vector<Traced>& args) {
  std::vector<double> values;
  values.reserve(args.size());
  for (const Traced& a : args) values.push_back(a.value());
  Traced out(f(values));
  out.deps_ = deps_of(args);
  return out;
}

Traced operator+(const Traced& a, const Traced& b) {
  return apply([](const auto& v) { return v[0] + v[1]; }, {a, b});
}
Traced operator-(const Traced& a, const Traced& b) {
  return apply([](const auto& v) { return v[0] - v[1]; }, {a, b});
}
Traced operator*(const Traced& a, const Traced& b) {
  return apply([](const auto& v) { return v[0] * v[1]; }, {a, b});
}
Traced operator/(const Traced& a, const Traced& b) {
  return apply([](const auto& v) { return v[0] / v[1]; }, {a, b});
}
Traced operator-(const Traced& a) {
  return apply([](const auto& v) { return -v[0]; }, {a});
}
Traced& operator+=(Traced& a, const Traced& b) { return a = a + b; }
Traced& operator*=(Traced& a, const Traced& b) { return a = a * b; }
Traced min(const Traced& a, const Traced& b) {
  return apply([](const auto& v) { return std::min(v[0], v[1]); }, {a, b});
}
Traced max(const Traced& a, const Traced& b) {
  return apply([](const auto& v) { return std::max(v[0], v[1]); }, {a, b});
}
Traced logical_and(const Traced& a, const Traced& b) {
  return apply([](const auto& v) { return v[0] != 0.0 && v[1] != 0.0 ? 1.0 : 0.0; }, {a, b});
}
Traced logical_or(const Traced& a, const Traced& b) {
  return apply([](const auto& v) { return v[0] != 0.0 || v[1] != 0.0 ? 1.0 : 0.0; }, {a, b});
}
Traced logical_not(const Traced& a) {
  return apply([](const auto& v) { return v[0] == 0.0 ? 1.0 : 0.0; }, {a});
}

Traced Tracer::create(const std::string& name, std::vector<int64_t> index, VariableType type,
                      int64_t options, std::vector<int64_t> parents, double value, bool observed) {
  const std::string what = element_text(name, index);
  if (name.empty()) throw std::invalid_argument("a traced variable needs an array name");
  for (size_t axis = 0; axis < index.size(); ++axis) {
    if (index[axis] < 0 || index[axis] >= kMaxVariables) {
      throw std::invalid_argument(what + ": index " + std::to_string(index[axis]) + " on axis " +
                                  std::to_string(axis) + " is outside 0.." +
                                  std::to_string(kMaxVariables - 1));
    }
  }
  if (static_cast<int64_t>(variables_.size()) >= kMaxVariables) {
    throw std::invalid_argument(what + " passes the " + std::to_string(kMaxVariables) +
                                " variables a model may hold");
  }
  // Everything is checked before anything is recorded: a rejected variable leaves no trace.
  const auto found = array_by_name_.find(name);
  if (found == array_by_name_.end()) {
    if (type == VariableType::discrete && (options < 2 || options > kMaxOptions)) {
      throw std::invalid_argument(what + " is discrete and needs options in 2.." +
                                  std::to_string(kMaxOptions) + ", got " + std::to_string(options));
    }
    if (type == VariableType::continuous && options != 0) {
      throw std::invalid_argument(what + " is continuous and takes no options, got " +
                                  std::to_string(options));
    }
  } else {
    const ArrayRecord& array = arrays_[found->second];
    if (index.size() != array.rank) {
      throw std::invalid_argument(what + " has " + std::to_string(index.size()) +
                                  " index entries; the first variable of array '" + name +
                                  "' had " + std::to_string(array.rank));
    }
    if (type != array.type || options != array.options) {
      const auto kind = [](VariableType t, int64_t k) {
        return t == VariableType::discrete ? "discrete with " + std::to_string(k) + " options"
                                           : std::string("continuous");
      };
      throw std::invalid_argument(what + " is " + kind(type, options) +
                                  ", but the first variable of array '" + name + "' is " +
                                  kind(array.type, array.options));
    }
    if (created_.count({found->second, index})) {
      throw std::invalid_argument(what + " is created twice");
    }
  }
  if (!std::isfinite(value)) {
    throw std::invalid_argument(what + " has the value " + std::to_string(value) +
                                "; values must be finite");
  }
  if (type == VariableType::discrete &&
      (value != std::floor(value) || value < 0 || value >= static_cast<double>(options))) {
    throw std::invalid_argument(what + " has the value " + std::to_string(value) +
                                "; a discrete variable's value is a category 0.." +
                                std::to_string(options - 1));
  }
  int64_t position;
  if (found == array_by_name_.end()) {
    position = static_cast<int64_t>(arrays_.size());
    array_by_name_.emplace(name, position);
    arrays_.push_back(
        {name, type, options, index.size(), std::vector<int64_t>(index.size(), 0), {}});
  } else {
    position = found->second;
  }
  ArrayRecord& array = arrays_[position];
  created_.emplace(position, index);
  for (size_t axis = 0; axis < index.size(); ++axis) {
    array.shape[axis] = std::max(array.shape[axis], index[axis] + 1);
  }
  const auto id = static_cast<int64_t>(variables_.size());
  array.variables.push_back(id);
  variables_.push_back({position, std::move(index), std::move(parents), value, observed});
  Traced out(value);
  out.deps_ = {id};
  out.variable_ = id;
  return out;
}

Traced Tracer::sample(const std::string& name, std::vector<int64_t> index, VariableType type,
                      int64_t options, const std::vector<Traced>& params, double value) {
  return create(name, std::move(index), type, options, deps_of(params), value, false);
}

Traced Tracer::observe(const std::string& name, std::vector<int64_t> index, VariableType type,
                       int64_t options, const std::vector<Traced>& params, double value) {
  return create(name, std::move(index), type, options, deps_of(params), value, true);
}

Traced Tracer::dirac(const std::string& name, std::vector<int64_t> index, const Traced& expr,
                     VariableType type, int64_t options) {
  return create(name, std::move(index), type, options, expr.deps(), expr.value(), false);
}

Traced Tracer::intermediate(const std::string& name, std::vector<int64_t> index, const Traced& expr,
                            VariableType type, int64_t options) {
  if (options_.intermediates) return dirac(name, std::move(index), expr, type, options);
  dropped_arrays_.insert(name);
  return expr;
}

void Tracer::factor(const std::vector<Traced>& members) {
  std::vector<int64_t> deps = deps_of(members);
  if (deps.size() > 1) factors_.push_back(std::move(deps));
}

void Tracer::share_embedding(const std::vector<Traced>& variables) {
  std::vector<int64_t> group;
  for (const Traced& v : variables) {
    if (!v.is_variable()) {
      throw std::invalid_argument(
          "share_embedding takes variables (what sample, observe or dirac returned), not an "
          "expression over them" +
          std::string(options_.intermediates ? "" : ", nor a dropped intermediate"));
    }
    group.push_back(v.variable_);
  }
  embedding_groups_.push_back(std::move(group));
}

void Tracer::plate(const std::string& name, std::vector<std::pair<std::string, int64_t>> axes) {
  if (axes.empty()) throw std::invalid_argument("plate '" + name + "' lists no axes");
  plates_.push_back({name, std::move(axes)});
}

std::vector<int64_t> Tracer::node_of_variable() const {
  std::vector<int64_t> node(variables_.size());
  int64_t first = 0;
  for (const ArrayRecord& a : arrays_) {
    int64_t size = 1;
    for (int64_t extent : a.shape) size *= extent;
    if (size != static_cast<int64_t>(a.variables.size())) {
      // The first row-major index that was never created.
      std::vector<int64_t> index(a.rank, 0);
      for (int64_t flat = 0; flat < size; ++flat) {
        int64_t rest = flat;
        for (size_t axis = a.rank; axis-- > 0;) {
          index[axis] = rest % a.shape[axis];
          rest /= a.shape[axis];
        }
        if (!created_.count({array_by_name_.at(a.name), index})) break;
      }
      throw std::invalid_argument("array '" + a.name +
                                  "' has a hole: " + element_text(a.name, index) +
                                  " was never created (" + std::to_string(a.variables.size()) +
                                  " of " + std::to_string(size) + " elements of its shape were)");
    }
    for (int64_t id : a.variables) {
      int64_t flat = 0;
      for (size_t axis = 0; axis < a.rank; ++axis) {
        flat = flat * a.shape[axis] + variables_[id].index[axis];
      }
      node[id] = first + flat;
    }
    first += size;
  }
  return node;
}

GraphicalModel Tracer::graph() const {
  const std::vector<int64_t> node = node_of_variable();
  GraphicalModel model;
  for (const ArrayRecord& a : arrays_) model.add_array(a.name, a.shape, a.type, a.options);
  std::vector<int64_t> variable_at(variables_.size());
  for (size_t id = 0; id < variables_.size(); ++id)
    variable_at[node[id]] = static_cast<int64_t>(id);
  const auto element = [&](int64_t id) {
    const Variable& v = variables_[id];
    return Element{arrays_[v.array].name, v.index};
  };
  // Edges in node order of the children, so the model does not depend on trace order.
  for (int64_t id : variable_at) {
    for (int64_t parent : variables_[id].parents) model.add_edge(element(parent), element(id));
  }
  for (const auto& members : factors_) {
    std::vector<Element> elements;
    for (int64_t id : members) elements.push_back(element(id));
    model.add_factor(elements);
  }
  for (const auto& members : embedding_groups_) {
    std::vector<Element> elements;
    for (int64_t id : members) elements.push_back(element(id));
    model.add_embedding_group(elements);
  }
  for (const IndexPermutation& p : plate_permutations()) {
    if (!model.mask_invariant_under(p)) {
      std::string axes;
      for (const auto& [array, axis] : p.axes) {
        axes += (axes.empty() ? "" : ", ") + array + ":" + std::to_string(axis);
      }
      throw std::invalid_argument(
          "relabelling the index of a plate over " + axes +
          " changes the mask, so its variables are not exchangeable (Theorem 3.1); a plate must "
          "list every axis its index appears on");
    }
  }
  return model;
}

std::vector<IndexPermutation> Tracer::plate_permutations() const {
  std::vector<IndexPermutation> out;
  for (const Plate& plate : plates_) {
    IndexPermutation base;
    int64_t extent = -1;
    for (const auto& [array, axis] : plate.axes) {
      const auto found = array_by_name_.find(array);
      if (found == array_by_name_.end()) {
        if (dropped_arrays_.count(array)) continue;
        throw std::invalid_argument("plate '" + plate.name + "' names array '" + array +
                                    "', which the program never created");
      }
      const ArrayRecord& a = arrays_[found->second];
      if (axis < 0 || axis >= static_cast<int64_t>(a.rank)) {
        throw std::invalid_argument("plate '" + plate.name + "': array '" + array + "' has " +
                                    std::to_string(a.rank) + " axes, so no axis " +
                                    std::to_string(axis));
      }
      if (extent >= 0 && a.shape[axis] != extent) {
        throw std::invalid_argument("plate '" + plate.name + "': axis " + std::to_string(axis) +
                                    " of array '" + array + "' has extent " +
                                    std::to_string(a.shape[axis]) + ", the plate's other axes " +
                                    std::to_string(extent));
      }
      extent = a.shape[axis];
      base.axes.emplace_back(array, axis);
    }
    if (extent < 2) continue;
    std::vector<int64_t> swap(extent), cycle(extent);
    std::iota(swap.begin(), swap.end(), 0);
    std::swap(swap[0], swap[1]);
    for (int64_t i = 0; i < extent; ++i) cycle[i] = (i + 1) % extent;
    out.push_back({base.axes, swap});
    if (extent > 2) out.push_back({base.axes, cycle});
  }
  return out;
}

torch::Tensor Tracer::observed() const {
  const std::vector<int64_t> node = node_of_variable();
  torch::Tensor out = torch::zeros({static_cast<int64_t>(variables_.size())}, torch::kBool);
  bool* data = out.data_ptr<bool>();
  for (size_t id = 0; id < variables_.size(); ++id) data[node[id]] = variables_[id].observed;
  return out;
}

torch::Tensor Tracer::values() const {
  const std::vector<int64_t> node = node_of_variable();
  std::vector<float> out(variables_.size());
  for (size_t id = 0; id < variables_.size(); ++id) {
    out[node[id]] = static_cast<float>(variables_[id].value);
  }
  return torch::tensor(out);
}

}  // namespace structdiff::graph
