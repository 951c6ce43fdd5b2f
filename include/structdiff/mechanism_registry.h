// The registry of attention mechanisms: one entry per Mechanism, holding everything the library,
// the tests and `structdiff bench attention` need to know about it (name, pattern rules, the
// computation, a float64 reference, the tolerance of float32 against it, and its cost). Adding a
// mechanism is one entry: the Attention module, the test harness and the benchmark pick it up.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include <torch/types.h>

#include "structdiff/attention.h"

namespace structdiff {

// Everything a mechanism reads besides Q, K and V; each mechanism ignores what it does not use.
struct MechanismArguments {
  const PatternBatch* pattern = nullptr;         // restricts the keys each query sees
  Scaling scaling = Scaling::inverse_sqrt_dim;   // dense, sparse, gather
  torch::Tensor projection;                      // FAVOR+: (num_features, head_dim), inputs' dtype
  std::optional<double> eps;                     // linear, FAVOR+; unset: the mechanism's default
  DiffusivityNorm diffusivity_norm = DiffusivityNorm::per_node;
};

enum class PatternUse {
  none,      // attends to every key; a pattern is refused
  optional,  // every key, or only the pattern's
  required   // only the pattern's keys; refuses to run without one
};

// What a mechanism's arithmetic grows with, for fixed batch, heads and head_dim.
enum class Complexity {
  quadratic,  // every (query, key) pair, even where a pattern masks it
  pattern,    // the pattern's entries only
  linear      // the number of tokens
};

// The sizes of one attention call, for its cost.
struct AttentionSize {
  int64_t batch = 1, heads = 1, queries = 1, keys = 1, head_dim = 1;
  // Allowed (query, key) pairs summed over the batch elements (batch x entries for a shared
  // pattern); unset when the call has no pattern.
  std::optional<int64_t> pattern_entries;
  int64_t features = 0;       // FAVOR+ random features
  int64_t element_bytes = 4;  // float32; 8 for float64

  // The pairs the call may attend to: the pattern's entries, or every pair.
  double pairs() const;
};

// Counts for one forward and one backward pass (gradients of Q, K and V). FLOPs count the
// products (2 per multiply-add) of the mechanism's algorithm; elementwise work (softmax,
// feature maps) is left out. The backward pass costs twice the forward's FLOPs (each product's
// gradient is one product per operand). Bytes are the compulsory traffic: each input read and
// each output written once (forward: Q, K, V, the output and FAVOR+'s features; backward also
// the output gradient in and three gradients out) plus the pattern in the form the mechanism
// reads it, in each pass.
struct AttentionCost {
  double forward_flops = 0, backward_flops = 0, forward_bytes = 0, backward_bytes = 0;
  double flops() const { return forward_flops + backward_flops; }
  double bytes() const { return forward_bytes + backward_bytes; }
};

using MechanismFunction = torch::Tensor (*)(const torch::Tensor& q, const torch::Tensor& k,
                                            const torch::Tensor& v,
                                            const MechanismArguments& arguments);

struct MechanismInfo {
  Mechanism mechanism;
  const char* name;  // as parse_mechanism reads it, e.g. "favor-softmax"
  PatternUse pattern_use;
  bool uses_features;  // FAVOR+: needs MechanismArguments::projection
  Complexity complexity;
  // The mechanism: float32 or float64 in, same dtype out, differentiable in Q, K and V.
  MechanismFunction compute;
  // The same function as a plain dense float64 computation, written for obviousness rather than
  // speed (N x N weights, explicit sums); returns float64 whatever the inputs' dtype.
  MechanismFunction reference;
  // Largest absolute difference from the reference allowed for float32 and float64 inputs of
  // unit scale (heads of up to 64 dimensions).
  double float32_tolerance, float64_tolerance;
  AttentionCost (*cost)(const AttentionSize& size);
  // FAVOR+ softmax treats its stabilising maxima as constants: they cancel exactly only when
  // eps = 0, so only then is its backward the exact gradient of its forward.
  bool exact_gradient_needs_zero_eps;
};

// Every mechanism, in the order of the Mechanism enum.
const std::vector<MechanismInfo>& mechanism_registry();
// Throws std::invalid_argument for a value outside the enum.
const MechanismInfo& mechanism_info(Mechanism mechanism);

}  // namespace structdiff
