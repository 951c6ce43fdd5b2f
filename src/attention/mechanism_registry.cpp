#include "structdiff/mechanism_registry.h"

#include <stdexcept>
#include <string>

#include "attention/mechanism_references.h"
#include "attention/sparse_kernel.h"

namespace structdiff {
namespace {

const PatternBatch& required_pattern(const MechanismArguments& arguments, const char* name) {
  if (arguments.pattern == nullptr) {
    throw std::invalid_argument(std::string("attention mechanism '") + name + "' needs a pattern");
  }
  return *arguments.pattern;
}

// ---- the computations ----------------------------------------------------------------------

torch::Tensor compute_dense(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                            const MechanismArguments& arguments) {
  return dense_attention(q, k, v, arguments.scaling, arguments.pattern);
}

torch::Tensor compute_sparse(const torch::Tensor& q, const torch::Tensor& k,
                             const torch::Tensor& v, const MechanismArguments& arguments) {
  return sparse_attention(q, k, v, required_pattern(arguments, "sparse"), arguments.scaling);
}

torch::Tensor compute_structured(const torch::Tensor& q, const torch::Tensor& k,
                                 const torch::Tensor& v, const MechanismArguments& arguments) {
  const PatternBatch& pattern = required_pattern(arguments, "structured");
  return structured_uses_sparse(pattern, q.device())
             ? sparse_attention(q, k, v, pattern, arguments.scaling)
             : dense_attention(q, k, v, arguments.scaling, &pattern);
}

torch::Tensor compute_gather(const torch::Tensor& q, const torch::Tensor& k,
                             const torch::Tensor& v, const MechanismArguments& arguments) {
  return gather_attention(q, k, v, required_pattern(arguments, "gather"), arguments.scaling);
}

torch::Tensor compute_favor_softmax(const torch::Tensor& q, const torch::Tensor& k,
                                    const torch::Tensor& v, const MechanismArguments& arguments) {
  return favor_attention(q, k, v, arguments.projection, FavorKernel::softmax,
                         arguments.eps.value_or(kFavorEps));
}

torch::Tensor compute_favor_relu(const torch::Tensor& q, const torch::Tensor& k,
                                 const torch::Tensor& v, const MechanismArguments& arguments) {
  return favor_attention(q, k, v, arguments.projection, FavorKernel::relu,
                         arguments.eps.value_or(kFavorEps));
}

torch::Tensor compute_linear(const torch::Tensor& q, const torch::Tensor& k,
                             const torch::Tensor& v, const MechanismArguments& arguments) {
  return linear_attention(q, k, v, arguments.eps.value_or(kLinearAttentionEps));
}

torch::Tensor compute_diffusivity_simple(const torch::Tensor& q, const torch::Tensor& k,
                                         const torch::Tensor& v,
                                         const MechanismArguments& arguments) {
  return diffusivity_simple(q, k, v, arguments.diffusivity_norm);
}

torch::Tensor compute_diffusivity_sigmoid(const torch::Tensor& q, const torch::Tensor& k,
                                          const torch::Tensor& v,
                                          const MechanismArguments& arguments) {
  return diffusivity_sigmoid(q, k, v, arguments.pattern);
}

// ---- the costs (see AttentionCost for what is counted) -------------------------------------

double batch_heads(const AttentionSize& s) {
  return static_cast<double>(s.batch) * static_cast<double>(s.heads);
}

// Q and the output per query, K and V per key: the tensors a forward pass reads and writes.
double qkv_output_bytes(const AttentionSize& s) {
  return batch_heads(s) * static_cast<double>(s.head_dim) *
         (2.0 * static_cast<double>(s.queries) + 2.0 * static_cast<double>(s.keys)) *
         static_cast<double>(s.element_bytes);
}

// The backward pass reads Q, K, V, the output and its gradient and writes three gradients: twice
// the forward's tensor traffic. `read_each_pass` (pattern, features) is read again.
AttentionCost forward_and_backward(const AttentionSize& s, double forward_flops,
                                   double read_each_pass) {
  return {forward_flops, 2 * forward_flops, qkv_output_bytes(s) + read_each_pass,
          2 * qkv_output_bytes(s) + read_each_pass};
}

// s = q.k and sum_j w_ij v_j for every pair; a pattern is read as a one-byte mask entry per pair
// of each batch element.
AttentionCost all_pairs_cost(const AttentionSize& s) {
  const double every_pair = static_cast<double>(s.batch) * static_cast<double>(s.queries) *
                            static_cast<double>(s.keys);
  const double mask_bytes = s.pattern_entries ? every_pair : 0.0;
  return forward_and_backward(
      s, 4.0 * static_cast<double>(s.head_dim) * every_pair * static_cast<double>(s.heads),
      mask_bytes);
}

// The same products for the pattern's entries only, reading `bytes_per_entry` of pattern for each.
AttentionCost entries_cost(const AttentionSize& s, double bytes_per_entry) {
  return forward_and_backward(
      s, 4.0 * static_cast<double>(s.head_dim) * s.pairs() * static_cast<double>(s.heads),
      bytes_per_entry * s.pairs());
}

// A column index (int64) per entry.
AttentionCost sparse_cost(const AttentionSize& s) { return entries_cost(s, 8.0); }
// A padded column index (int64) and a validity flag per entry; padding slots are not counted.
AttentionCost gather_cost(const AttentionSize& s) { return entries_cost(s, 9.0); }

// Kernelised attention with `features` features per token: phi(K)^T V and phi(K)^T 1 are
// summarised over the keys, then each query multiplies them: 2 f d per key and per query, and
// 2 f per query for the normaliser.
double feature_summary_flops(const AttentionSize& s, double features) {
  const auto d = static_cast<double>(s.head_dim);
  return batch_heads(s) * (2.0 * features * d * static_cast<double>(s.queries + s.keys) +
                           2.0 * features * static_cast<double>(s.queries));
}

// The features themselves cost x W^T, 2 m d per token, on top of the summaries; the projection
// is read in each pass.
AttentionCost favor_cost(const AttentionSize& s) {
  const auto features = static_cast<double>(s.features), d = static_cast<double>(s.head_dim);
  const double projections =
      batch_heads(s) * 2.0 * features * d * static_cast<double>(s.queries + s.keys);
  return forward_and_backward(s, projections + feature_summary_flops(s, features),
                              features * d * static_cast<double>(s.element_bytes));
}

// Linear attention and the simple diffusivity: head_dim features, elementwise feature maps.
AttentionCost head_dim_features_cost(const AttentionSize& s) {
  return forward_and_backward(s, feature_summary_flops(s, static_cast<double>(s.head_dim)), 0.0);
}

}  // namespace

const std::vector<MechanismInfo>& mechanism_registry() {
  // Measured float32 errors are at most 5e-7, on the test harness's inputs and on the bench
  // workloads (head_dim 4 to 64, up to 1024 keys); float64 ones at most 1e-15. The tolerances
  // leave headroom for other sizes, and stay far below what a wrong formula gives.
  constexpr double kFloat32 = 1e-5, kFloat64 = 1e-12;
  static const std::vector<MechanismInfo> registry = {
      {Mechanism::dense, "dense", PatternUse::optional, /*uses_features=*/false,
       Complexity::quadratic, compute_dense, references::masked_softmax, kFloat32, kFloat64,
       all_pairs_cost, /*exact_gradient_needs_zero_eps=*/false},
      {Mechanism::sparse, "sparse", PatternUse::required, /*uses_features=*/false,
       Complexity::pattern, compute_sparse, references::masked_softmax, kFloat32, kFloat64,
       sparse_cost, /*exact_gradient_needs_zero_eps=*/false},
      {Mechanism::gather, "gather", PatternUse::required, /*uses_features=*/false,
       Complexity::pattern, compute_gather, references::masked_softmax, kFloat32, kFloat64,
       gather_cost, /*exact_gradient_needs_zero_eps=*/false},
      {Mechanism::favor_softmax, "favor-softmax", PatternUse::none, /*uses_features=*/true,
       Complexity::linear, compute_favor_softmax, references::favor_softmax, kFloat32, kFloat64,
       favor_cost, /*exact_gradient_needs_zero_eps=*/true},
      {Mechanism::favor_relu, "favor-relu", PatternUse::none, /*uses_features=*/true,
       Complexity::linear, compute_favor_relu, references::favor_relu, kFloat32, kFloat64,
       favor_cost, /*exact_gradient_needs_zero_eps=*/false},
      {Mechanism::linear, "linear", PatternUse::none, /*uses_features=*/false,
       Complexity::linear, compute_linear, references::linear, kFloat32, kFloat64,
       head_dim_features_cost, /*exact_gradient_needs_zero_eps=*/false},
      {Mechanism::diffusivity_simple, "diffusivity-simple", PatternUse::none,
       /*uses_features=*/false, Complexity::linear, compute_diffusivity_simple,
       references::diffusivity_simple, kFloat32, kFloat64, head_dim_features_cost,
       /*exact_gradient_needs_zero_eps=*/false},
      {Mechanism::diffusivity_sigmoid, "diffusivity-sigmoid", PatternUse::optional,
       /*uses_features=*/false, Complexity::quadratic, compute_diffusivity_sigmoid,
       references::diffusivity_sigmoid, kFloat32, kFloat64, all_pairs_cost,
       /*exact_gradient_needs_zero_eps=*/false},
      {Mechanism::structured, "structured", PatternUse::required, /*uses_features=*/false,
       Complexity::pattern, compute_structured, references::masked_softmax, kFloat32, kFloat64,
       sparse_cost, /*exact_gradient_needs_zero_eps=*/false},
  };
  return registry;
}

bool structured_uses_sparse(const PatternBatch& pattern, torch::Device device) {
  // The pattern's share of all pairs below which the sparse kernel is predicted faster (header).
  constexpr double kSparseBelowDensity = 0.6;
  if (!device.is_cpu()) return kernels::cuda_kernels_built();
  const double pairs = static_cast<double>(pattern.size()) *
                       static_cast<double>(pattern.num_queries()) *
                       static_cast<double>(pattern.num_keys());
  return static_cast<double>(pattern.num_entries()) < kSparseBelowDensity * pairs;
}

double AttentionSize::pairs() const {
  return pattern_entries ? static_cast<double>(*pattern_entries)
                         : static_cast<double>(batch) * static_cast<double>(queries) *
                               static_cast<double>(keys);
}

const MechanismInfo& mechanism_info(Mechanism mechanism) {
  for (const MechanismInfo& entry : mechanism_registry()) {
    if (entry.mechanism == mechanism) return entry;
  }
  throw std::invalid_argument("invalid Mechanism value " +
                              std::to_string(static_cast<int>(mechanism)));
}

std::vector<std::string> mechanism_names() {
  std::vector<std::string> names;
  for (const MechanismInfo& entry : mechanism_registry()) names.emplace_back(entry.name);
  return names;
}

Mechanism parse_mechanism(const std::string& name) {
  for (const MechanismInfo& entry : mechanism_registry()) {
    if (name == entry.name) return entry.mechanism;
  }
  std::string known;
  for (const MechanismInfo& entry : mechanism_registry()) {
    known += std::string(known.empty() ? "" : ", ") + entry.name;
  }
  throw std::invalid_argument("unknown attention mechanism '" + name + "' (known: " + known + ")");
}

std::string mechanism_name(Mechanism mechanism) { return mechanism_info(mechanism).name; }

}  // namespace structdiff
