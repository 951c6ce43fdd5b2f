// The undirected-network engine: variables, regularisers and activations, the graph, schedules
// and block-coordinate-descent inference.
#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <sstream>
#include <stdexcept>

#include <torch/torch.h>

#include "structdiff/dependency_tree.h"
#include "structdiff/enum_names.h"
#include "structdiff/random.h"
#include "structdiff/unn.h"
#include "util/text.h"

namespace structdiff::unn {
namespace {


// Sentence lengths of a tree variable's support (B, n + 1, n): the columns (words) with any arc.
torch::Tensor tree_lengths(const torch::Tensor& support) {
  return support.any(1).sum(1).to(torch::kLong);
}

torch::Tensor per_example_sum(const torch::Tensor& x) { return x.reshape({x.size(0), -1}).sum(1); }

const double kInfinity = std::numeric_limits<double>::infinity();

// +inf for the examples whose values fail `inside`, else `value`.
torch::Tensor outside_to_infinity(const torch::Tensor& value, const torch::Tensor& inside) {
  return torch::where(per_example_sum(inside.logical_not()) > 0, torch::full_like(value, kInfinity),
                      value);
}

torch::Tensor phi(const torch::Tensor& t) { return torch::xlogy(t, t); }

}  // namespace

namespace {
const auto kActivationNames = enum_names<Activation>("activation", {
    {Activation::identity, "identity"},
    {Activation::relu, "relu"},
    {Activation::sigmoid, "sigmoid"},
    {Activation::tanh, "tanh"},
    {Activation::softmax, "softmax"},
    {Activation::tree, "tree"},
});
}  // namespace

Activation parse_activation(const std::string& name) { return kActivationNames.parse(name); }

std::string activation_name(Activation activation) { return kActivationNames.name(activation); }

torch::Tensor activate(const Variable& variable, const torch::Tensor& z,
                       const torch::Tensor& support) {
  switch (variable.activation) {
    case Activation::identity:
      return z;
    case Activation::relu:
      return torch::relu(z);
    case Activation::sigmoid:
      return torch::sigmoid(z);
    case Activation::tanh:
      return torch::tanh(z);
    case Activation::softmax: {
      const torch::Tensor scaled = z / variable.temperature;
      if (!support.defined()) return torch::softmax(scaled, -1);
      // Rows with nothing allowed come out all zero rather than NaN.
      const torch::Tensor masked =
          scaled.masked_fill(support.logical_not(), -std::numeric_limits<float>::infinity());
      const torch::Tensor any = support.any(-1, /*keepdim=*/true);
      return torch::where(any, torch::softmax(masked.masked_fill(any.logical_not(), 0), -1),
                          torch::zeros_like(z));
    }
    case Activation::tree:
      return tree_marginals(z, support.defined() ? tree_lengths(support) : torch::Tensor())
          .marginals;
  }
  return z;
}

torch::Tensor regulariser(const Variable& variable, const torch::Tensor& x,
                          const torch::Tensor& support, const torch::Tensor& z) {
  const torch::Tensor v = x.to(torch::kDouble);
  switch (variable.activation) {
    case Activation::identity:
      return 0.5 * per_example_sum(v * v);
    case Activation::relu:
      return outside_to_infinity(0.5 * per_example_sum(v * v), v >= 0);
    case Activation::sigmoid:
      return outside_to_infinity(per_example_sum(phi(v.clamp(0, 1)) + phi(1 - v.clamp(0, 1))),
                                 (v >= 0).logical_and(v <= 1));
    case Activation::tanh: {
      const torch::Tensor p = ((1 + v) / 2).clamp(0, 1);
      return outside_to_infinity(per_example_sum(phi(p) + phi(1 - p)),
                                 (v >= -1).logical_and(v <= 1));
    }
    case Activation::softmax: {
      // On the simplex over the allowed entries of each row; rows with none allowed are zero.
      torch::Tensor allowed = support.defined() ? support : torch::ones_like(v, torch::kBool);
      const torch::Tensor row_allowed = allowed.any(-1);
      const torch::Tensor row_sum = (v * allowed).sum(-1);
      const torch::Tensor rows_ok =
          torch::where(row_allowed, (row_sum - 1).abs() <= 1e-4, torch::ones_like(row_allowed));
      const torch::Tensor entries_ok =
          torch::where(allowed, v >= 0, v == 0).all(-1).logical_and(rows_ok);
      return outside_to_infinity(variable.temperature * per_example_sum(phi(v.clamp_min(0))),
                                 entries_ok);
    }
    case Activation::tree: {
      const torch::Tensor lengths = support.defined() ? tree_lengths(support) : torch::Tensor();
      if (!z.defined()) {
        // Outside the marginal polytope (e.g. the zero start, whose columns do not sum to 1) the
        // regulariser is +inf; inside, only the pre-activation that produced x gives its value.
        const torch::Tensor columns = v.sum(1);
        const torch::Tensor words =
            lengths.defined() ? torch::arange(v.size(2)).unsqueeze(0) < lengths.unsqueeze(1)
                              : torch::ones_like(columns, torch::kBool);
        const torch::Tensor off = ((columns - 1).abs() > 1e-6).logical_and(words).any(1);
        if (off.all().item<bool>()) return torch::full({v.size(0)}, kInfinity, v.options());
        throw std::invalid_argument("the energy of tree variable '" + variable.name +
                                    "' needs its pre-activation");
      }
      const TreeMarginals tree = tree_marginals(z.to(torch::kDouble), lengths);
      return per_example_sum(z.to(torch::kDouble) * v) - tree.log_partition;
    }
  }
  return torch::Tensor();
}

// ---- factors ------------------------------------------------------------------------------------

FactorImpl::FactorImpl(std::vector<std::string> variables) : variables_(std::move(variables)) {}

torch::Tensor FactorImpl::message(size_t target, const std::vector<torch::Tensor>& values) {
  // E_f is linear in x_target, so -dE/dx_target at zero is the message; the graph is kept when
  // gradients are recorded, so training differentiates through the message as well.
  std::vector<torch::Tensor> at_zero = values;
  torch::Tensor probe = torch::zeros_like(values.at(target)).requires_grad_(true);
  at_zero[target] = probe;
  const bool record = torch::GradMode::is_enabled();
  torch::AutoGradMode enable(true);
  const torch::Tensor e = energy(at_zero).sum();
  torch::Tensor gradient =
      torch::autograd::grad({e}, {probe}, {}, /*retain_graph=*/record, /*create_graph=*/record,
                            /*allow_unused=*/true)[0];
  if (!gradient.defined()) gradient = torch::zeros_like(probe);
  return record ? -gradient : -gradient.detach();
}

void FactorImpl::check_shapes(const std::vector<std::vector<int64_t>>&) const {}

// ---- graph --------------------------------------------------------------------------------------

void GraphImpl::add_variable(const Variable& variable, at::Generator& generator,
                             int64_t bias_fan_in) {
  if (variable.name.empty()) throw std::invalid_argument("a variable needs a name");
  for (const Variable& v : variables_) {
    if (v.name == variable.name) {
      throw std::invalid_argument("variable '" + variable.name + "' declared twice");
    }
  }
  for (int64_t size : variable.shape) {
    if (size < 1) {
      throw std::invalid_argument("variable '" + variable.name + "' has shape " +
                                  shape_text(variable.shape) + "; every size must be >= 1");
    }
  }
  if (variable.activation == Activation::softmax && !(variable.temperature > 0)) {
    throw std::invalid_argument("softmax variable '" + variable.name +
                                "' needs a positive temperature");
  }
  if (variable.activation == Activation::tree &&
      (variable.shape.size() != 2 || variable.shape[0] != variable.shape[1] + 1)) {
    throw std::invalid_argument("tree variable '" + variable.name +
                                "' must have shape (n + 1, n), got " + shape_text(variable.shape));
  }
  if (!variable.bias_shape.empty()) {
    bool fits = variable.bias_shape.size() <= variable.shape.size();
    try {
      fits = fits && at::infer_size(variable.shape, variable.bias_shape) ==
                         std::vector<int64_t>(variable.shape);
    } catch (const std::exception&) {
      fits = false;
    }
    if (!fits) {
      throw std::invalid_argument("bias shape " + shape_text(variable.bias_shape) +
                                  " of variable '" + variable.name + "' does not broadcast to " +
                                  shape_text(variable.shape));
    }
    torch::Tensor bias = torch::zeros(variable.bias_shape);
    if (bias_fan_in > 0) {
      const double bound = 1.0 / std::sqrt(static_cast<double>(bias_fan_in));
      bias.uniform_(-bound, bound, generator);
    }
    biases_[variable.name] = register_parameter("bias_" + variable.name, bias);
  }
  variables_.push_back(variable);
}

void GraphImpl::add_factor(FactorPtr factor) {
  std::vector<std::vector<int64_t>> shapes;
  for (const std::string& name : factor->variables()) shapes.push_back(variable(name).shape);
  try {
    factor->check_shapes(shapes);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(factor->kind() + " factor " + std::to_string(factors_.size()) +
                                ": " + e.what());
  }
  factors_.push_back(register_module("factor_" + std::to_string(factors_.size()), factor));
}

const Variable& GraphImpl::variable(const std::string& name) const {
  for (const Variable& v : variables_) {
    if (v.name == name) return v;
  }
  std::string known;
  for (const Variable& v : variables_) known += (known.empty() ? "" : ", ") + v.name;
  throw std::invalid_argument("unknown variable '" + name + "' (the graph has " + known + ")");
}

torch::Tensor GraphImpl::bias(const std::string& name) const {
  const auto found = biases_.find(name);
  return found == biases_.end() ? torch::Tensor() : found->second;
}

std::string GraphImpl::describe() const {
  std::ostringstream out;
  for (const Variable& v : variables_) {
    out << "variable " << v.name << " " << shape_text(v.shape) << " "
        << activation_name(v.activation) << (v.bias_shape.empty() ? "" : " with bias") << "\n";
  }
  for (const FactorPtr& f : factors_) {
    out << "factor " << f->kind() << " (";
    for (size_t i = 0; i < f->variables().size(); ++i) {
      out << (i ? ", " : "") << f->variables()[i];
    }
    out << ")\n";
  }
  return out.str();
}

// ---- schedules ----------------------------------------------------------------------------------

namespace {
const auto kScheduleNames = enum_names<Schedule>("schedule", {
    {Schedule::forward, "forward"},
    {Schedule::forward_backward, "forward-backward"},
    {Schedule::explicit_order, "explicit"},
    {Schedule::random, "random"},
    {Schedule::jacobi, "jacobi"},
});
}  // namespace

Schedule parse_schedule(const std::string& name) { return kScheduleNames.parse(name); }

std::string schedule_name(Schedule schedule) { return kScheduleNames.name(schedule); }

namespace {

// The entry of `map` under `name`, undefined when there is none.
torch::Tensor find(const std::map<std::string, torch::Tensor>& map, const std::string& name) {
  const auto found = map.find(name);
  return found == map.end() ? torch::Tensor() : found->second;
}

// Free variables by breadth-first distance from the observed ones through shared factors; ties
// and unreachable variables in declaration order.
std::vector<std::string> forward_order(const Graph& graph, const std::vector<std::string>& free,
                                       const std::map<std::string, torch::Tensor>& observed) {
  std::map<std::string, int64_t> distance;
  std::deque<std::string> queue;
  for (const auto& item : observed) {
    distance[item.first] = 0;
    queue.push_back(item.first);
  }
  while (!queue.empty()) {
    const std::string current = queue.front();
    queue.pop_front();
    for (const FactorPtr& factor : graph->factors()) {
      const auto& names = factor->variables();
      if (std::find(names.begin(), names.end(), current) == names.end()) continue;
      for (const std::string& next : names) {
        if (distance.count(next) == 0) {
          distance[next] = distance[current] + 1;
          queue.push_back(next);
        }
      }
    }
  }
  std::vector<std::string> order = free;
  const int64_t unreachable = std::numeric_limits<int64_t>::max();
  std::stable_sort(order.begin(), order.end(), [&](const std::string& a, const std::string& b) {
    const int64_t da = distance.count(a) ? distance[a] : unreachable;
    const int64_t db = distance.count(b) ? distance[b] : unreachable;
    return da < db;
  });
  return order;
}

}  // namespace

// ---- network and inference ----------------------------------------------------------------------

NetworkImpl::NetworkImpl(const std::function<Graph(int64_t copy)>& build, int64_t copies) {
  if (copies < 1) throw std::invalid_argument("a network needs at least one graph copy");
  list_ = register_module("graphs", torch::nn::ModuleList());
  for (int64_t c = 0; c < copies; ++c) {
    graphs_.push_back(build(c));
    list_->push_back(graphs_.back());
  }
  const auto& names = graphs_.front()->variables();
  for (const Graph& g : graphs_) {
    if (g->variables().size() != names.size()) {
      throw std::invalid_argument("every graph copy must declare the same variables");
    }
    for (size_t i = 0; i < names.size(); ++i) {
      if (g->variables()[i].name != names[i].name ||
          g->variables()[i].activation != names[i].activation) {
        throw std::invalid_argument("graph copies differ in variable " + std::to_string(i));
      }
    }
  }
}

double NetworkImpl::energy(const std::map<std::string, torch::Tensor>& state,
                           const std::vector<std::string>& free_variables, int64_t copy,
                           const std::map<std::string, torch::Tensor>& support,
                           const std::map<std::string, torch::Tensor>& preactivation) {
  torch::NoGradGuard no_grad;
  Graph& g = graphs_.at(copy);
  double total = 0;
  for (const std::string& name : free_variables) {
    const Variable& v = g->variable(name);
    const torch::Tensor x = state.at(name);
    torch::Tensor term = regulariser(v, x, find(support, name), find(preactivation, name));
    const torch::Tensor b = g->bias(name);
    if (b.defined()) term = term - per_example_sum(x.to(torch::kDouble) * b.to(torch::kDouble));
    total += term.sum().item<double>();
  }
  for (const FactorPtr& factor : g->factors()) {
    std::vector<torch::Tensor> values;
    for (const std::string& name : factor->variables()) values.push_back(state.at(name));
    total += factor->energy(values).to(torch::kDouble).sum().item<double>();
  }
  return total;
}

namespace {

// What infer() works out from its options before the first update.
struct InferencePlan {
  int64_t batch = -1;
  torch::TensorOptions tensor_options = torch::TensorOptions().dtype(torch::kFloat);
  std::vector<std::string> free;       // the variables not observed
  std::vector<std::string> scheduled;  // those the schedule orders (free, less `then`)
  std::vector<std::string> order;      // one iteration's updates (random: drawn each iteration)
};

// Batch size, dtype and device from the observed or initial values, each of its variable's shape.
void read_batch(Graph& first, const InferenceOptions& options, InferencePlan& plan) {
  for (const auto* values : {&options.observed, &options.initial}) {
    for (const auto& item : *values) {
      const Variable& v = first->variable(item.first);
      std::vector<int64_t> expected = v.shape;
      expected.insert(expected.begin(), item.second.dim() > 0 ? item.second.size(0) : 0);
      if (item.second.dim() == 0 || item.second.sizes() != at::IntArrayRef(expected) ||
          (plan.batch >= 0 && item.second.size(0) != plan.batch)) {
        throw std::invalid_argument(
            "variable '" + item.first + "' needs shape " + shape_text(expected) + " (batch, " +
            shape_text(v.shape).substr(1) + ", got " + shape_text(item.second.sizes()));
      }
      plan.batch = item.second.size(0);
      plan.tensor_options = item.second.options();
    }
  }
  if (plan.batch < 0) {
    throw std::invalid_argument("inference needs at least one observed or initial variable");
  }
  for (const auto& item : options.initial) {
    if (options.observed.count(item.first)) {
      throw std::invalid_argument("variable '" + item.first + "' is both observed and initial");
    }
  }
}

// Throws unless `name` is a free variable; `what` names the option that named it.
void check_free(Graph& first, const InferencePlan& plan, const std::string& name, const std::string& what) {
  first->variable(name);
  if (std::find(plan.free.begin(), plan.free.end(), name) == plan.free.end()) {
    throw std::invalid_argument(what + " names observed variable '" + name + "'");
  }
}

// The free variables, and the per-variable options (support, clamp, dropout, then) checked
// against them.
void read_free_variables(Graph& first, const InferenceOptions& options, InferencePlan& plan) {
  for (const Variable& v : first->variables()) {
    if (options.observed.count(v.name) == 0) plan.free.push_back(v.name);
  }
  if (plan.free.empty()) throw std::invalid_argument("every variable is observed: nothing to infer");
  for (const auto& item : options.support) check_free(first, plan, item.first, "support");
  for (const auto& item : options.clamp) {
    check_free(first, plan, item.first, "clamp");
    const auto start = options.initial.find(item.first);
    if (start == options.initial.end()) {
      throw std::invalid_argument("clamped variable '" + item.first + "' needs initial values to hold");
    }
    if (item.second.sizes() != start->second.sizes() || item.second.scalar_type() != torch::kBool) {
      throw std::invalid_argument("the clamp of '" + item.first + "' must be boolean of shape " +
                                  shape_text(start->second.sizes()));
    }
  }
  for (const auto& item : options.dropout) {
    check_free(first, plan, item.first, "dropout");
    if (!(item.second >= 0 && item.second < 1)) {
      throw std::invalid_argument("dropout of '" + item.first + "' must be in [0, 1), got " +
                                  std::to_string(item.second));
    }
  }
  for (const std::string& name : options.then) check_free(first, plan, name, "then");
  for (const std::string& name : plan.free) {
    if (std::find(options.then.begin(), options.then.end(), name) == options.then.end()) {
      plan.scheduled.push_back(name);
    }
  }
}

// One iteration's order (random draws a new one each iteration).
void read_order(Graph& first, const InferenceOptions& options, InferencePlan& plan) {
  switch (options.schedule) {
    case Schedule::forward:
    case Schedule::jacobi:
    case Schedule::random:
      plan.order = forward_order(first, plan.scheduled, options.observed);
      break;
    case Schedule::forward_backward: {
      // Forward, then back without repeating the last or the first: the first is updated again
      // at the start of the next iteration, from the same neighbours.
      plan.order = forward_order(first, plan.scheduled, options.observed);
      const size_t n = plan.order.size();
      for (size_t i = n >= 2 ? n - 2 : 0; i >= 1 && i < n; --i) plan.order.push_back(std::string(plan.order[i]));
      break;
    }
    case Schedule::explicit_order:
      if (options.order.empty()) {
        throw std::invalid_argument("the explicit schedule needs an order of variables");
      }
      for (const std::string& name : options.order) check_free(first, plan, name, "the schedule");
      plan.order = options.order;
      break;
  }
  if (options.schedule == Schedule::random && options.generator == nullptr) {
    throw std::invalid_argument("the random schedule needs a generator");
  }
  for (const auto& item : options.dropout) {
    if (item.second != 0 && options.generator == nullptr) throw std::invalid_argument("dropout needs a generator");
  }
}

// z = bias + the sum of incoming messages, from `read`.
torch::Tensor preactivation(Graph& g, const std::string& name,
                            const std::map<std::string, torch::Tensor>& read) {
  torch::Tensor z;
  for (const FactorPtr& factor : g->factors()) {
    const auto& names = factor->variables();
    for (size_t position = 0; position < names.size(); ++position) {
      if (names[position] != name) continue;
      std::vector<torch::Tensor> values;
      for (const std::string& n : names) values.push_back(read.at(n));
      const torch::Tensor message = factor->message(position, values);
      z = z.defined() ? z + message : message;
    }
  }
  if (!z.defined()) z = torch::zeros_like(read.at(name));
  const torch::Tensor b = g->bias(name);
  return b.defined() ? z + b : z;
}

// The observed values, and the free variables' initial ones (zeros where none is given).
std::map<std::string, torch::Tensor> starting_state(Graph& first, const InferenceOptions& options,
                                                    const InferencePlan& plan) {
  std::map<std::string, torch::Tensor> state(options.observed.begin(), options.observed.end());
  for (const std::string& name : plan.free) {
    const auto given = options.initial.find(name);
    std::vector<int64_t> shape = first->variable(name).shape;
    shape.insert(shape.begin(), plan.batch);
    state[name] = given != options.initial.end() ? given->second : torch::zeros(shape, plan.tensor_options);
  }
  return state;
}

// One inverted-dropout mask per variable with a dropout rate, kept for every iteration.
std::map<std::string, torch::Tensor> dropout_masks(const InferenceOptions& options,
                                                   const std::map<std::string, torch::Tensor>& state) {
  std::map<std::string, torch::Tensor> masks;
  for (const auto& item : options.dropout) {
    if (item.second == 0) continue;
    const torch::Tensor& like = state.at(item.first);
    masks[item.first] =
        random::bernoulli(like.sizes(), 1.0 - item.second, *options.generator, like.options()) /
        (1.0 - item.second);
  }
  return masks;
}

std::vector<std::string> random_order(const std::vector<std::string>& scheduled, at::Generator& generator) {
  const torch::Tensor permutation = torch::randperm(static_cast<int64_t>(scheduled.size()), generator,
                                                    torch::TensorOptions().dtype(torch::kLong));
  std::vector<std::string> order;
  for (int64_t i = 0; i < permutation.size(0); ++i) order.push_back(scheduled[permutation[i].item<int64_t>()]);
  return order;
}

}  // namespace

InferenceResult NetworkImpl::infer(const InferenceOptions& options,
                                   const std::vector<std::string>& watch) {
  if (options.iterations < 1) {
    throw std::invalid_argument("iterations must be >= 1, got " + std::to_string(options.iterations));
  }
  if (copies() > 1 && options.iterations > copies()) {
    throw std::invalid_argument("this untied network has weights for " + std::to_string(copies()) +
                                " iterations, asked for " + std::to_string(options.iterations));
  }
  Graph& first = graphs_.front();
  InferencePlan plan;
  read_batch(first, options, plan);
  read_free_variables(first, options, plan);
  read_order(first, options, plan);
  const std::vector<std::string>& free = plan.free;
  const std::vector<std::string>& scheduled = plan.scheduled;
  std::vector<std::string>& order = plan.order;

  InferenceResult result;
  std::map<std::string, torch::Tensor>& state = result.state;
  state = starting_state(first, options, plan);
  const std::map<std::string, torch::Tensor> masks = dropout_masks(options, state);

  auto record_energy = [&](int64_t copy) {
    if (options.record_energy) {
      result.energy.push_back(energy(state, free, copy, options.support, result.preactivation));
    }
  };
  auto set = [&](Graph& g, const std::string& name, const torch::Tensor& z) {
    result.preactivation[name] = z;
    torch::Tensor x = activate(g->variable(name), z, find(options.support, name));
    const torch::Tensor mask = find(masks, name);
    if (mask.defined()) x = x * mask;
    const torch::Tensor held = find(options.clamp, name);
    state[name] = held.defined() ? torch::where(held, options.initial.at(name), x) : x;
  };

  record_energy(0);
  for (int64_t iteration = 0; iteration < options.iterations; ++iteration) {
    const int64_t copy = copies() > 1 ? iteration : 0;
    Graph& g = graphs_[copy];
    if (options.schedule == Schedule::random) order = random_order(scheduled, *options.generator);
    if (options.schedule == Schedule::jacobi) {
      const std::map<std::string, torch::Tensor> previous = state;
      std::map<std::string, torch::Tensor> z;
      for (const std::string& name : scheduled) z[name] = preactivation(g, name, previous);
      for (const std::string& name : scheduled) set(g, name, z[name]);
      record_energy(copy);
    } else {
      for (const std::string& name : order) {
        set(g, name, preactivation(g, name, state));
        record_energy(copy);
      }
    }
    for (const std::string& name : options.then) {
      set(g, name, preactivation(g, name, state));
      record_energy(copy);
    }
    std::vector<std::string> done = options.schedule == Schedule::jacobi ? scheduled : order;
    done.insert(done.end(), options.then.begin(), options.then.end());
    result.updates.push_back(done);
    for (const std::string& name : watch) {
      first->variable(name);
      result.trace[name].push_back(state.at(name));
    }
  }
  return result;
}

}  // namespace structdiff::unn
