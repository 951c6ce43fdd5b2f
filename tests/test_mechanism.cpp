// The registry harness: every registered mechanism, with and without a pattern as it allows,
// against its float64 reference in float32 and float64, its gradients against finite differences
// and its cost model's scaling. Then the one interface over all mechanisms: names, pattern rules,
// FAVOR+ feature redraw policy.
#include <algorithm>
#include <cmath>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "structdiff/attention.h"
#include "structdiff/mechanism_registry.h"
#include "support/gpu.h"
#include "support/gradcheck.h"

namespace structdiff {
namespace {

using Inputs = std::vector<torch::Tensor>;

// ---- the registry harness ----------------------------------------------------------------------

// Cross-attention (queries != keys) with head_dim 4 and 10 FAVOR+ features (not a multiple of
// head_dim, so the last orthogonal block is cut short): small enough for finite differences.
constexpr int64_t kBatch = 2, kHeads = 2, kQueries = 6, kKeys = 7, kHeadDim = 4, kFeatures = 10;

// One pattern per batch element: a hand-made ragged one whose query 3 has no key, and a random one.
PatternBatch harness_pattern() {
  const AttentionPattern ragged(kQueries, kKeys, {0, 2, 5, 6, 6, 9, 11},
                                {1, 6, 0, 2, 3, 4, 0, 3, 5, 2, 6});
  return PatternBatch({ragged, patterns::random_per_row(kQueries, kKeys, 3, 5)});
}

// Standard normal values that float32 holds exactly, so float32 and float64 runs see one input.
torch::Tensor representable_in_float32(torch::Tensor t) {
  return t.to(torch::kFloat).to(torch::kDouble);
}

struct HarnessCase {
  const MechanismInfo* mechanism;
  bool with_pattern;
};

std::vector<HarnessCase> harness_cases() {
  std::vector<HarnessCase> cases;
  for (const MechanismInfo& mechanism : mechanism_registry()) {
    if (mechanism.pattern_use != PatternUse::required) cases.push_back({&mechanism, false});
    if (mechanism.pattern_use != PatternUse::none) cases.push_back({&mechanism, true});
  }
  return cases;
}

std::string case_name(const HarnessCase& harness_case) {
  std::string name = harness_case.mechanism->name;
  std::replace(name.begin(), name.end(), '-', '_');
  return harness_case.with_pattern ? name + "_with_pattern" : name;
}

// For gtest's messages.
void PrintTo(const HarnessCase& harness_case, std::ostream* out) {
  *out << case_name(harness_case);
}

class MechanismHarness : public ::testing::TestWithParam<HarnessCase> {
 protected:
  void SetUp() override {
    torch::manual_seed(2024);
    const auto float64 = torch::TensorOptions().dtype(torch::kDouble);
    inputs_ = {representable_in_float32(torch::randn({kBatch, kHeads, kQueries, kHeadDim}, float64)),
               representable_in_float32(torch::randn({kBatch, kHeads, kKeys, kHeadDim}, float64)),
               representable_in_float32(torch::randn({kBatch, kHeads, kKeys, kHeadDim}, float64))};
    if (GetParam().with_pattern) arguments_.pattern = &pattern_;
    if (mechanism().uses_features) {
      arguments_.projection = representable_in_float32(favor_projection(
          kFeatures, kHeadDim, /*orthogonal=*/true,
          at::make_generator<at::CPUGeneratorImpl>(7), torch::kDouble));
    }
  }

  const MechanismInfo& mechanism() const { return *GetParam().mechanism; }

  // The mechanism on the inputs in `dtype`; the features follow the inputs' dtype.
  torch::Tensor compute(const Inputs& x, torch::ScalarType dtype) const {
    MechanismArguments arguments = arguments_;
    if (arguments.projection.defined()) arguments.projection = arguments.projection.to(dtype);
    return mechanism().compute(x[0].to(dtype), x[1].to(dtype), x[2].to(dtype), arguments);
  }

  double max_error_against_reference(torch::ScalarType dtype) const {
    const torch::Tensor out = compute(inputs_, dtype);
    const torch::Tensor reference =
        mechanism().reference(inputs_[0], inputs_[1], inputs_[2], arguments_);
    EXPECT_EQ(out.scalar_type(), dtype);
    EXPECT_EQ(reference.scalar_type(), torch::kDouble);
    EXPECT_EQ(out.sizes(), reference.sizes());
    EXPECT_TRUE(torch::isfinite(reference).all().item<bool>());
    return (out.to(torch::kDouble) - reference).abs().max().item<double>();
  }

  PatternBatch pattern_ = harness_pattern();
  Inputs inputs_;
  MechanismArguments arguments_;
};

TEST_P(MechanismHarness, Float64MatchesReference) {
  EXPECT_LE(max_error_against_reference(torch::kDouble), mechanism().float64_tolerance);
}

TEST_P(MechanismHarness, Float32MatchesReference) {
  EXPECT_LE(max_error_against_reference(torch::kFloat), mechanism().float32_tolerance);
}

// Every mechanism on the GPU against the same float64 reference (computed on the CPU).
TEST_P(MechanismHarness, OnTheGpuMatchesReference) {
  SKIP_WITHOUT_GPU();
  const torch::Tensor reference =
      mechanism().reference(inputs_[0], inputs_[1], inputs_[2], arguments_);
  for (const torch::ScalarType dtype : {torch::kDouble, torch::kFloat}) {
    MechanismArguments arguments = arguments_;
    if (arguments.projection.defined()) {
      arguments.projection = arguments.projection.to(torch::kCUDA, dtype);
    }
    const auto on_gpu = [&](const torch::Tensor& t) { return t.to(torch::kCUDA, dtype); };
    const torch::Tensor out =
        mechanism().compute(on_gpu(inputs_[0]), on_gpu(inputs_[1]), on_gpu(inputs_[2]), arguments);
    EXPECT_TRUE(out.is_cuda());
    const double error = (out.cpu().to(torch::kDouble) - reference).abs().max().item<double>();
    EXPECT_LE(error, dtype == torch::kDouble ? mechanism().float64_tolerance
                                             : mechanism().float32_tolerance)
        << c10::toString(dtype);
  }
}

TEST_P(MechanismHarness, GradientsMatchFiniteDifferences) {
  if (mechanism().exact_gradient_needs_zero_eps) arguments_.eps = 0.0;
  EXPECT_EQ(testing::check_gradients(
                [&](const Inputs& x) { return compute(x, torch::kDouble); }, inputs_),
            "");
}

// A changed size's cost over the base size's.
struct CostRatio {
  double flops, bytes;
};

TEST_P(MechanismHarness, CostIsPositiveAndScalesWithTheSizes) {
  AttentionSize base;
  base.batch = 2;
  base.heads = 3;
  base.queries = 50;
  base.keys = 40;
  base.head_dim = 16;
  base.features = 24;
  if (GetParam().with_pattern) base.pattern_entries = base.batch * base.queries * 5;
  const MechanismInfo& m = mechanism();
  const AttentionCost cost = m.cost(base);
  EXPECT_GT(cost.forward_flops, 0);
  EXPECT_GT(cost.backward_flops, 0);
  EXPECT_GT(cost.forward_bytes, 0);
  EXPECT_GT(cost.backward_bytes, cost.forward_bytes) << "the backward moves more tensors";

  const auto ratio = [&](const auto& change) {
    AttentionSize changed = base;
    change(changed);
    const AttentionCost c = m.cost(changed);
    return CostRatio{c.flops() / cost.flops(), c.bytes() / cost.bytes()};
  };
  const auto scale_entries = [](AttentionSize& s) {
    if (s.pattern_entries) *s.pattern_entries *= 2;
  };

  // Every batch element is one more independent problem of the same size.
  const CostRatio batch = ratio([&](AttentionSize& s) {
    s.batch *= 2;
    scale_entries(s);
  });
  EXPECT_DOUBLE_EQ(batch.flops, 2.0) << "twice the batch";
  EXPECT_GT(batch.bytes, 1.0) << "twice the batch";
  EXPECT_LE(batch.bytes, 2.0) << "twice the batch";  // FAVOR+'s features are read once per call
  // Heads share the pattern, so its bytes do not double with them.
  const CostRatio heads = ratio([](AttentionSize& s) { s.heads *= 2; });
  EXPECT_DOUBLE_EQ(heads.flops, 2.0) << "twice the heads";
  EXPECT_GT(heads.bytes, 1.0) << "twice the heads";
  EXPECT_LE(heads.bytes, 2.0) << "twice the heads";

  // Twice the tokens, at the same pattern density per query.
  const CostRatio tokens = ratio([&](AttentionSize& s) {
    s.queries *= 2;
    s.keys *= 2;
    scale_entries(s);
  });
  EXPECT_DOUBLE_EQ(tokens.flops, m.complexity == Complexity::quadratic ? 4.0 : 2.0)
      << "twice the tokens";
  EXPECT_GT(tokens.bytes, 1.0) << "twice the tokens";
  EXPECT_LE(tokens.bytes, tokens.flops) << "twice the tokens";
  const CostRatio keys = ratio([](AttentionSize& s) { s.keys *= 2; });
  switch (m.complexity) {
    case Complexity::quadratic: EXPECT_DOUBLE_EQ(keys.flops, 2.0) << "twice the keys"; break;
    case Complexity::pattern: EXPECT_DOUBLE_EQ(keys.flops, 1.0) << "twice the keys"; break;
    case Complexity::linear:
      EXPECT_GT(keys.flops, 1.0) << "twice the keys";
      EXPECT_LT(keys.flops, 2.0) << "twice the keys";
      break;
  }
  if (GetParam().with_pattern) {
    const CostRatio entries = ratio(scale_entries);
    EXPECT_DOUBLE_EQ(entries.flops, m.complexity == Complexity::pattern ? 2.0 : 1.0)
        << "twice the pattern entries";
  }

  const CostRatio head_dim = ratio([](AttentionSize& s) { s.head_dim *= 2; });
  EXPECT_GT(head_dim.flops, 1.0) << "twice the head_dim";
  EXPECT_GT(head_dim.bytes, 1.0) << "twice the head_dim";
  const CostRatio features = ratio([](AttentionSize& s) { s.features *= 2; });
  EXPECT_DOUBLE_EQ(features.flops, m.uses_features ? 2.0 : 1.0) << "twice the features";
  const CostRatio float64 = ratio([](AttentionSize& s) { s.element_bytes = 8; });
  EXPECT_DOUBLE_EQ(float64.flops, 1.0) << "float64";
  EXPECT_GT(float64.bytes, 1.0) << "float64";
  EXPECT_LE(float64.bytes, 2.0) << "float64";
}

INSTANTIATE_TEST_SUITE_P(Registry, MechanismHarness, ::testing::ValuesIn(harness_cases()),
                         [](const auto& info) { return case_name(info.param); });

TEST(Mechanism, RegistryHasOneEntryPerMechanismInEnumOrder) {
  std::set<std::string> names;
  for (size_t i = 0; i < mechanism_registry().size(); ++i) {
    const MechanismInfo& entry = mechanism_registry()[i];
    EXPECT_EQ(static_cast<size_t>(entry.mechanism), i) << entry.name;
    EXPECT_EQ(&mechanism_info(entry.mechanism), &entry);
    EXPECT_TRUE(names.insert(entry.name).second) << "duplicate name " << entry.name;
    EXPECT_GT(entry.float32_tolerance, entry.float64_tolerance) << entry.name;
  }
  EXPECT_THROW_WITH(mechanism_info(static_cast<Mechanism>(-1)), std::invalid_argument,
                    "invalid Mechanism value -1");
}

// ---- the Attention module ---------------------------------------------------------------------

AttentionConfig config_for(Mechanism m, int64_t head_dim = 8) {
  AttentionConfig c;
  c.mechanism = m;
  c.head_dim = head_dim;
  return c;
}

std::vector<torch::Tensor> qkv(int64_t n = 6, int64_t d = 8) {
  return {torch::randn({2, 2, n, d}, torch::kDouble), torch::randn({2, 2, n, d}, torch::kDouble),
          torch::randn({2, 2, n, d}, torch::kDouble)};
}

TEST(Mechanism, NamesRoundTrip) {
  for (const std::string& name : mechanism_names()) {
    EXPECT_EQ(mechanism_name(parse_mechanism(name)), name);
  }
  EXPECT_THROW_WITH(parse_mechanism("flash"), std::invalid_argument,
                    "unknown attention mechanism 'flash' (known: dense, sparse");
}

// Mechanism::structured runs dense attention with the pattern as a mask only for patterns dense
// enough that the cost model predicts it faster; either way, the same attention.
TEST(Mechanism, StructuredTakesDenseAttentionOnlyForDensePatterns) {
  const PatternBatch full(patterns::full(6, 6)), sparse(patterns::random_per_row(6, 6, 2, 3));
  EXPECT_FALSE(structured_uses_sparse(full, torch::kCPU));
  EXPECT_TRUE(structured_uses_sparse(sparse, torch::kCPU));
  Attention structured(config_for(Mechanism::structured));
  for (const PatternBatch* pattern : {&full, &sparse}) {
    const std::vector<torch::Tensor> x = qkv();
    EXPECT_TRUE(torch::allclose(
        structured->forward(x[0], x[1], x[2], pattern),
        dense_attention(x[0], x[1], x[2], Scaling::inverse_sqrt_dim, pattern), 1e-12, 1e-12));
  }
}

TEST(Mechanism, ModuleMatchesFunctions) {
  torch::manual_seed(1);
  auto x = qkv();
  PatternBatch batch(patterns::causal(6));
  EXPECT_TRUE(torch::allclose(Attention(config_for(Mechanism::sparse))->forward(x[0], x[1], x[2], &batch),
                              sparse_attention(x[0], x[1], x[2], batch, Scaling::inverse_sqrt_dim)));
  EXPECT_TRUE(torch::allclose(Attention(config_for(Mechanism::dense))->forward(x[0], x[1], x[2]),
                              dense_attention(x[0], x[1], x[2], Scaling::inverse_sqrt_dim)));
  EXPECT_TRUE(torch::allclose(Attention(config_for(Mechanism::linear))->forward(x[0], x[1], x[2]),
                              linear_attention(x[0], x[1], x[2])));
}

TEST(Mechanism, PatternRules) {
  auto x = qkv();
  PatternBatch batch(patterns::causal(6));
  EXPECT_THROW_WITH(Attention(config_for(Mechanism::sparse))->forward(x[0], x[1], x[2]),
                    std::invalid_argument, "attention mechanism 'sparse' needs a pattern");
  EXPECT_THROW_WITH(Attention(config_for(Mechanism::gather))->forward(x[0], x[1], x[2]),
                    std::invalid_argument, "'gather' needs a pattern");
  EXPECT_THROW_WITH(Attention(config_for(Mechanism::linear))->forward(x[0], x[1], x[2], &batch),
                    std::invalid_argument, "'linear' cannot be restricted to a pattern");
  EXPECT_THROW_WITH(
      Attention(config_for(Mechanism::favor_softmax))->forward(x[0], x[1], x[2], &batch),
      std::invalid_argument, "'favor-softmax' cannot be restricted to a pattern");
  EXPECT_THROW_WITH(Attention(config_for(Mechanism::dense, 4))->forward(x[0], x[1], x[2]),
                    std::invalid_argument, "configured for head_dim 4 got inputs with head_dim 8");
}

TEST(Mechanism, ConfigValidation) {
  EXPECT_THROW_WITH(Attention(config_for(Mechanism::dense, 0)), std::invalid_argument,
                    "head_dim must be >= 1, got 0");
  AttentionConfig c = config_for(Mechanism::favor_relu);
  c.num_features = -3;
  EXPECT_THROW_WITH(Attention{c}, std::invalid_argument, "num_features must be >= 1, got -3");
  c = config_for(Mechanism::favor_relu);
  c.redraw_interval = -1;
  EXPECT_THROW_WITH(Attention{c}, std::invalid_argument, "redraw_interval must be >= 0");
}

TEST(Mechanism, FavorDefaultsToDLogDFeatures) {
  Attention a(config_for(Mechanism::favor_softmax, 32));
  EXPECT_EQ(a->config().num_features, std::lround(32 * std::log(32.0)));
  EXPECT_EQ(a->named_buffers()["projection"].size(0), a->config().num_features);
  EXPECT_EQ(a->named_buffers()["projection"].size(1), 32);
}

TEST(Mechanism, FavorRedrawsEveryNTrainingCallsAndIsFrozenInEval) {
  AttentionConfig c = config_for(Mechanism::favor_softmax);
  c.redraw_interval = 2;
  c.seed = 7;
  Attention a(c);
  auto x = qkv();
  auto projection = [&] { return a->named_buffers()["projection"].clone(); };
  torch::Tensor initial = projection();
  a->train();
  a->forward(x[0], x[1], x[2]);
  a->forward(x[0], x[1], x[2]);
  EXPECT_TRUE(torch::equal(projection(), initial)) << "redrawn before 2 calls";
  a->forward(x[0], x[1], x[2]);
  torch::Tensor redrawn = projection();
  EXPECT_FALSE(torch::equal(redrawn, initial)) << "not redrawn on the third call";
  EXPECT_EQ(a->calls_since_redraw(), 1);
  a->eval();
  for (int i = 0; i < 5; ++i) a->forward(x[0], x[1], x[2]);
  EXPECT_TRUE(torch::equal(projection(), redrawn)) << "features changed in eval mode";
  // Same seed, same draws: runs are reproducible.
  EXPECT_TRUE(torch::equal(Attention(c)->named_buffers()["projection"], initial));
}

}  // namespace
}  // namespace structdiff
