// The program -> graphical-model compiler GSDM promises (paper App. J), as tracing by operator
// overloading: write the generative program in C++ with sample / observe / dirac and ordinary
// arithmetic on `Traced` values; the tracer records which variables each variable is computed
// from and yields the GraphicalModel (whose compile() is the attention mask), which variables
// are observed, and the values of one run of the program (trace and simulate at once).
//
//   Tracer t;
//   for (l...) a[l] = t.sample("A", {i, l}, VariableType::continuous, 0, {}, draw());
//   Traced acc = 0.0;
//   for (l...) acc += t.intermediate("C", {i, j, l}, a[l] * r[l]);
//   t.dirac("E", {i, j}, acc);
//   GraphicalModel model = t.graph();
//
// Rules (docs/gsdm-spec.md §3): only sample / observe / dirac / intermediate create variables;
// arithmetic never does. A variable's value reads only that variable, so edges are one hop:
// E = dirac(C0 + C1) has parents {C0, C1}, not what the C were computed from. Arrays are numbered
// in order of first creation, each row-major over its index, so trace order does not matter.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <torch/types.h>

#include "structdiff/graph.h"

namespace structdiff::graph {

class Tracer;

// A value flowing through a traced program: its concrete value and the variables it is computed
// from directly (sorted trace ids).
class Traced {
 public:
  Traced(double constant = 0.0) : value_(constant) {}  // NOLINT: constants mix with traced values
  double value() const { return value_; }
  const std::vector<int64_t>& deps() const { return deps_; }
  // Whether this value is a variable itself (what sample / observe / dirac returned) rather than
  // an expression over variables.
  bool is_variable() const { return variable_ >= 0; }

 private:
  friend class Tracer;
  friend Traced apply(const std::function<double(const std::vector<double>&)>& f,
                      const std::vector<Traced>& args);
  double value_;
  std::vector<int64_t> deps_;
  int64_t variable_ = -1;
};

// Any deterministic function of traced values: its value is f(values), its deps the union of the
// arguments' deps. The operators below are this with the obvious f.
Traced apply(const std::function<double(const std::vector<double>&)>& f,
             const std::vector<Traced>& args);
Traced operator+(const Traced& a, const Traced& b);
Traced operator-(const Traced& a, const Traced& b);
Traced operator*(const Traced& a, const Traced& b);
Traced operator/(const Traced& a, const Traced& b);
Traced operator-(const Traced& a);
Traced& operator+=(Traced& a, const Traced& b);
Traced& operator*=(Traced& a, const Traced& b);
Traced min(const Traced& a, const Traced& b);
Traced max(const Traced& a, const Traced& b);
// Truth is value != 0; the result is 0 or 1.
Traced logical_and(const Traced& a, const Traced& b);
Traced logical_or(const Traced& a, const Traced& b);
Traced logical_not(const Traced& a);

struct TraceOptions {
  // false: intermediate() returns its expression instead of a variable, so whoever consumes it
  // depends on what it was computed from (the paper's "without intermediates" graphs).
  bool intermediates = true;
};

class Tracer {
 public:
  explicit Tracer(TraceOptions options = {}) : options_(options) {}

  // A random variable `name[index]` drawn from a distribution with parameters `params` (its
  // parents are their deps), with the value this run drew: a category 0..options-1 for a
  // discrete variable. Errors (std::invalid_argument) name the variable: an element created
  // twice, an index of another length or a type or option count other than the array's first
  // variable's, a negative index, a value that is not finite or not a category.
  Traced sample(const std::string& name, std::vector<int64_t> index, VariableType type,
                int64_t options, const std::vector<Traced>& params = {}, double value = 0.0);
  // sample, marked observed (the mask does not depend on it; observed() does).
  Traced observe(const std::string& name, std::vector<int64_t> index, VariableType type,
                 int64_t options, const std::vector<Traced>& params, double value);
  // The paper's (sample name (dirac expr)): a deterministic variable, parents expr's deps.
  Traced dirac(const std::string& name, std::vector<int64_t> index, const Traced& expr,
               VariableType type = VariableType::continuous, int64_t options = 0);
  // A dirac the model may do without: a variable when the options keep intermediates, else
  // `expr` itself (no variable).
  Traced intermediate(const std::string& name, std::vector<int64_t> index, const Traced& expr,
                      VariableType type = VariableType::continuous, int64_t options = 0);
  bool keeps_intermediates() const { return options_.intermediates; }

  // An undirected constraint: every pair of variables the members depend on is connected.
  void factor(const std::vector<Traced>& members);
  // These variables share one embedding under exchangeable embeddings (EE); each must be a
  // variable (is_variable()), and in at most one group.
  void share_embedding(const std::vector<Traced>& variables);
  // A plate: the listed (array, axis) pairs carry one exchangeable index (BCMF's l on A:1, R:0,
  // C:2), so relabelling it must leave the mask unchanged (Theorem 3.1). graph() checks this.
  // Axes of arrays that are dropped intermediates are left out.
  void plate(const std::string& name, std::vector<std::pair<std::string, int64_t>> axes);

  // The graphical model of everything traced. Throws std::invalid_argument for an array with a
  // hole (naming the first missing element) and for a plate whose relabelling changes the mask.
  GraphicalModel graph() const;
  // Each plate as the two relabellings that generate all of them (a swap and a cycle of its
  // index; one for extent 2, none for 1); graph() checks exactly these.
  std::vector<IndexPermutation> plate_permutations() const;
  // In graph() node order: which variables were observed (bool), and this run's values (float;
  // the category for a discrete variable).
  torch::Tensor observed() const;
  torch::Tensor values() const;

 private:
  struct Variable {
    int64_t array;  // position in arrays_
    std::vector<int64_t> index;
    std::vector<int64_t> parents;
    double value;
    bool observed;
  };
  struct ArrayRecord {
    std::string name;
    VariableType type;
    int64_t options;
    size_t rank;
    std::vector<int64_t> shape;  // per-axis maximum index + 1
    std::vector<int64_t> variables;
  };
  struct Plate {
    std::string name;
    std::vector<std::pair<std::string, int64_t>> axes;
  };

  Traced create(const std::string& name, std::vector<int64_t> index, VariableType type,
                int64_t options, std::vector<int64_t> parents, double value, bool observed);
  // Graph node of every variable, after checking each array has no holes.
  std::vector<int64_t> node_of_variable() const;

  TraceOptions options_;
  std::vector<Variable> variables_;
  std::vector<ArrayRecord> arrays_;
  std::map<std::string, int64_t> array_by_name_;
  std::set<std::pair<int64_t, std::vector<int64_t>>> created_;
  std::set<std::string> dropped_arrays_;
  std::vector<std::vector<int64_t>> factors_;
  std::vector<std::vector<int64_t>> embedding_groups_;
  std::vector<Plate> plates_;
};

}  // namespace structdiff::graph
