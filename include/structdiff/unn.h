// Undirected neural networks (Mihaylova, Niculae and Martins, "Modeling Structure with Undirected
// Neural Networks", ICML 2022) as a generic factor-graph engine: a network is a set of variables
// and multilinear factors with one total energy
//
//   E(x) = sum_i (-<b_i, x_i> + Psi_i(x_i)) + sum_f E_f(x_f),
//
// and inference is block coordinate descent: each free variable in turn is set to the exact
// minimiser of E in that block, x_i = activation_i(b_i + sum_f message_f->i), where the message is
// -dE_f/dx_i (independent of x_i, since E_f is multilinear). Which variables are observed, and in
// what order the others are updated, is chosen at inference time, so one trained network runs in
// any direction. Unrolling the updates gives an ordinary computation graph, trained end to end.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Generator.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

namespace structdiff::unn {

// A variable's regulariser Psi and so its activation, the gradient of Psi's convex conjugate
// (paper Table 1).
enum class Activation {
  identity,  // Psi = |x|^2 / 2
  relu,      // |x|^2 / 2 on x >= 0
  sigmoid,   // binary entropy on [0, 1]
  tanh,      // binary entropy of (1 + x) / 2 on [-1, 1]
  softmax,   // temperature * negative Shannon entropy over the last axis, on the simplex
  tree,      // negative max-entropy over the marginal polytope of dependency trees: arc marginals
             // by the matrix-tree theorem; shape (n + 1, n), see dependency_tree.h
};
Activation parse_activation(const std::string& name);  // "identity", "relu", ... "tree"
std::string activation_name(Activation activation);

struct Variable {
  std::string name;
  std::vector<int64_t> shape;  // per example, without the batch axis
  Activation activation = Activation::identity;
  double temperature = 1.0;         // softmax only: softmax(z / temperature)
  std::vector<int64_t> bias_shape;  // empty: no bias; else broadcast against `shape`
};

// A factor: a multilinear energy over the variables it names (in that order), with parameters of
// its own. A new factor needs only energy(); its messages then come from autograd.
class FactorImpl : public torch::nn::Module {
 public:
  explicit FactorImpl(std::vector<std::string> variables);
  const std::vector<std::string>& variables() const { return variables_; }
  // E_f per example, shape (B), for the values (B, shape...) of variables(), in that order.
  virtual torch::Tensor energy(const std::vector<torch::Tensor>& values) = 0;
  // The message to variables()[target], -dE_f/dx_target, shaped like that variable. The default
  // differentiates energy() (keeping the graph when gradients are recorded, so training flows
  // through it); the built-in factors override it with their closed forms.
  virtual torch::Tensor message(size_t target, const std::vector<torch::Tensor>& values);
  // Throws std::invalid_argument when the variables' per-example shapes do not fit the factor.
  virtual void check_shapes(const std::vector<std::vector<int64_t>>& shapes) const;
  // "linear", "conv2d", ...: for messages and the printed graph.
  virtual std::string kind() const { return "custom"; }

 private:
  std::vector<std::string> variables_;
};
using FactorPtr = std::shared_ptr<FactorImpl>;

// ---- built-in factors ---------------------------------------------------------------------------
// Weights start as PyTorch's layer defaults, U(+-1 / sqrt(fan_in)), drawn from the generator
// passed in (Graph builders pass one seeded by the model's init_seed).

// E = -<out, (in + offset) W^T> with W (out_features, in_features). By default `in` and `out`
// are flattened after the batch axis (a dense layer); with `rows`, W acts on the last axis of
// every row, in (n, in_features) -> out (n, out_features), like torch::nn::Linear on a sequence.
// `offset` (optional, shaped like `in` per example) is a constant added to the input, e.g. fixed
// positional encodings.
class LinearFactorImpl : public FactorImpl {
 public:
  LinearFactorImpl(std::string in, std::string out, int64_t in_features, int64_t out_features,
                   at::Generator& generator, torch::Tensor offset = {}, bool rows = false);
  torch::Tensor energy(const std::vector<torch::Tensor>& values) override;
  torch::Tensor message(size_t target, const std::vector<torch::Tensor>& values) override;
  void check_shapes(const std::vector<std::vector<int64_t>>& shapes) const override;
  std::string kind() const override { return "linear"; }
  torch::Tensor weight;

 private:
  torch::Tensor offset_;
  bool rows_;
};
TORCH_MODULE(LinearFactor);

// E = -<out, conv2d(in, W, stride)>, no padding; W is (out_channels, in_channels, kernel,
// kernel). The message to `in` is the adjoint, conv_transpose2d with the same weight and stride.
class Conv2dFactorImpl : public FactorImpl {
 public:
  Conv2dFactorImpl(std::string in, std::string out, int64_t in_channels, int64_t out_channels,
                   int64_t kernel, int64_t stride, at::Generator& generator);
  torch::Tensor energy(const std::vector<torch::Tensor>& values) override;
  torch::Tensor message(size_t target, const std::vector<torch::Tensor>& values) override;
  void check_shapes(const std::vector<std::vector<int64_t>>& shapes) const override;
  std::string kind() const override { return "conv2d"; }
  torch::Tensor weight;

 private:
  int64_t stride_;
};
TORCH_MODULE(Conv2dFactor);

// A general multilinear energy E = -einsum(equation)(W, x_1, ..., x_m), e.g. "ij,bi,bj->b"
// (a bilinear form) or "ijk,bi,bj,bk->b"; the batch axis is 'b' in every variable's subscripts
// and the weight's subscripts come first and must not contain 'b'. The message to x_t is the
// same contraction with x_t's subscripts as the output. W starts U(+-1/sqrt(fan_in)) with
// fan_in = the weight's numel / its first dimension.
class ContractionFactorImpl : public FactorImpl {
 public:
  ContractionFactorImpl(const std::string& equation, std::vector<std::string> variables,
                        std::vector<int64_t> weight_shape, at::Generator& generator);
  torch::Tensor energy(const std::vector<torch::Tensor>& values) override;
  torch::Tensor message(size_t target, const std::vector<torch::Tensor>& values) override;
  void check_shapes(const std::vector<std::vector<int64_t>>& shapes) const override;
  std::string kind() const override { return "contraction"; }
  torch::Tensor weight;

 private:
  std::string weight_subscripts_;
  std::vector<std::string> variable_subscripts_;
};
TORCH_MODULE(ContractionFactor);

// Attention's score factor E = -<S, Q K^T> over S (n, n), Q (n, d), K (n, d); no parameters.
// With S a softmax variable of temperature sqrt(d), its update is scaled dot-product attention.
class AttentionScoreFactorImpl : public FactorImpl {
 public:
  AttentionScoreFactorImpl(std::string scores, std::string queries, std::string keys);
  torch::Tensor energy(const std::vector<torch::Tensor>& values) override;
  torch::Tensor message(size_t target, const std::vector<torch::Tensor>& values) override;
  void check_shapes(const std::vector<std::vector<int64_t>>& shapes) const override;
  std::string kind() const override { return "attention-score"; }
};
TORCH_MODULE(AttentionScoreFactor);

// Attention's value factor E = -<H, S V> over H (n, d), S (n, n), V (n, d); no parameters.
class AttentionValueFactorImpl : public FactorImpl {
 public:
  AttentionValueFactorImpl(std::string output, std::string scores, std::string values);
  torch::Tensor energy(const std::vector<torch::Tensor>& values) override;
  torch::Tensor message(size_t target, const std::vector<torch::Tensor>& values) override;
  void check_shapes(const std::vector<std::vector<int64_t>>& shapes) const override;
  std::string kind() const override { return "attention-value"; }
};
TORCH_MODULE(AttentionValueFactor);

// The biaffine arc factor E = -<Y, H V M^T> over Y (n + 1, n), H (n + 1, d), M (n, d), with V
// (d, d) drawn from N(0, 0.01^2) as the authors do.
class BiaffineFactorImpl : public FactorImpl {
 public:
  BiaffineFactorImpl(std::string arcs, std::string heads, std::string modifiers, int64_t features,
                     at::Generator& generator);
  torch::Tensor energy(const std::vector<torch::Tensor>& values) override;
  torch::Tensor message(size_t target, const std::vector<torch::Tensor>& values) override;
  void check_shapes(const std::vector<std::vector<int64_t>>& shapes) const override;
  std::string kind() const override { return "biaffine"; }
  torch::Tensor weight;
};
TORCH_MODULE(BiaffineFactor);

// ---- the graph ----------------------------------------------------------------------------------

// Variables (with their biases as parameters "bias_<name>") and factors (submodules
// "factor_<i>"). add_factor checks that the factor's variables exist and fit it.
class GraphImpl : public torch::nn::Module {
 public:
  // `generator` draws bias initial values, U(+-1/sqrt(bias_fan_in)) (0: zeros).
  void add_variable(const Variable& variable, at::Generator& generator, int64_t bias_fan_in = 0);
  void add_factor(FactorPtr factor);
  template <typename Impl>
  void add_factor(const torch::nn::ModuleHolder<Impl>& factor) {
    add_factor(FactorPtr(factor.ptr()));
  }
  const std::vector<Variable>& variables() const { return variables_; }
  const Variable& variable(const std::string& name) const;  // std::invalid_argument if unknown
  const std::vector<FactorPtr>& factors() const { return factors_; }
  torch::Tensor bias(const std::string& name) const;  // undefined when the variable has none
  // A one-line-per-node description: variables with shapes and activations, then factors.
  std::string describe() const;

 private:
  std::vector<Variable> variables_;
  std::vector<FactorPtr> factors_;
  std::map<std::string, torch::Tensor> biases_;
};
TORCH_MODULE(Graph);

// ---- inference ----------------------------------------------------------------------------------

enum class Schedule {
  forward,           // free variables by distance from the observed ones (ties: declaration order)
  forward_backward,  // forward, then back again without repeating the last
  explicit_order,    // the order given in InferenceOptions::order
  random,            // a fresh random permutation of the free variables every iteration
  jacobi,            // all free variables at once, each from the previous iteration's state
};
Schedule parse_schedule(const std::string& name);  // "forward", "forward-backward", "explicit", ...
std::string schedule_name(Schedule schedule);

struct InferenceOptions {
  int64_t iterations = 1;
  Schedule schedule = Schedule::forward;
  std::vector<std::string> order;  // explicit_order: one iteration's updates (repeats allowed)
  // Updated in this order at the end of every iteration, whatever the schedule, and left out of
  // the schedule's own updates (e.g. the readout of a sequence model, after its attention).
  std::vector<std::string> then;
  // Clamped variables (B, shape...); every other variable is free.
  std::map<std::string, torch::Tensor> observed;
  // Starting values of free variables; the rest start at zero (the paper's "zero init").
  std::map<std::string, torch::Tensor> initial;
  // Partly observed variables: boolean (B, shape...) of the entries held at their `initial`
  // values (e.g. the unmasked tokens of a sequence); the other entries are updated.
  std::map<std::string, torch::Tensor> clamp;
  // Softmax and tree variables: boolean (B, shape...) of the entries allowed to be non-zero
  // (e.g. padding excluded); a row with none allowed is all zero.
  std::map<std::string, torch::Tensor> support;
  // Dropout probability per free variable: one mask per example, drawn once per call from
  // `generator` and applied after the activation in every iteration, so dropped units stay
  // dropped. Training only; needs `generator`.
  std::map<std::string, double> dropout;
  at::Generator* generator = nullptr;  // dropout masks and the random schedule
  // Record the total energy (float64) before inference and after every block update; slow.
  bool record_energy = false;
};

struct InferenceResult {
  std::map<std::string, torch::Tensor> state;          // every variable's final value
  std::map<std::string, torch::Tensor> preactivation;  // each free variable's last z = b + messages
  // Each iteration's order of updates (for jacobi: the free variables, updated together).
  std::vector<std::vector<std::string>> updates;
  // With record_energy: the energy before inference, then after each update (jacobi: after each
  // iteration); summed over the batch. +inf while a variable is outside its domain (e.g. a zero
  // softmax variable off the simplex).
  std::vector<double> energy;
  // State snapshots of chosen variables after every iteration (see Network::infer's `watch`).
  std::map<std::string, std::vector<torch::Tensor>> trace;
};

// A network: one graph (tied weights: every iteration uses it) or one graph per iteration
// (untied: iteration i uses copy i, of the same variables with possibly other sizes than the
// tied one would have, e.g. Table 3's budget-matched copies).
class NetworkImpl : public torch::nn::Module {
 public:
  // `build(copy)` makes copy number `copy`; `copies` is 1 (tied) or the iteration count.
  NetworkImpl(const std::function<Graph(int64_t copy)>& build, int64_t copies);
  int64_t copies() const { return static_cast<int64_t>(graphs_.size()); }
  Graph& graph(int64_t copy = 0) { return graphs_.at(copy); }
  // Runs inference; throws std::invalid_argument for an unknown, unobserved-but-required or
  // misshapen variable, a schedule naming an unknown or observed variable, or an untied network
  // asked for more iterations than it has copies. `watch` names variables whose state is
  // recorded after every iteration (result.trace).
  InferenceResult infer(const InferenceOptions& options,
                        const std::vector<std::string>& watch = {});
  // The total energy of a complete state (free variables' unary terms and every factor), float64,
  // summed over the batch, for copy `copy`'s parameters.
  // Tree variables' regulariser needs their pre-activation (see regulariser()).
  double energy(const std::map<std::string, torch::Tensor>& state,
                const std::vector<std::string>& free_variables, int64_t copy = 0,
                const std::map<std::string, torch::Tensor>& support = {},
                const std::map<std::string, torch::Tensor>& preactivation = {});

 private:
  std::vector<Graph> graphs_;
  torch::nn::ModuleList list_;
};
TORCH_MODULE(Network);

// Psi(x) summed per example (B), float64-safe: +inf where x lies outside the domain. `support`
// as in InferenceOptions (may be undefined). Tree variables: the negative entropy of the
// max-entropy tree distribution with marginals x, valid where x = tree marginals of `z`, from
// Fenchel-Young: Psi(x) = <z, x> - log Z(z); `z` is needed then and ignored otherwise.
torch::Tensor regulariser(const Variable& variable, const torch::Tensor& x,
                          const torch::Tensor& support = {}, const torch::Tensor& z = {});
// The activation, grad Psi^*(z) (with `support` for softmax and tree variables).
torch::Tensor activate(const Variable& variable, const torch::Tensor& z,
                       const torch::Tensor& support = {});

}  // namespace structdiff::unn
