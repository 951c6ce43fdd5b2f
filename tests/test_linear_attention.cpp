// FAVOR+, linear attention and the DIFFormer diffusivities beyond the registry harness
// (test_mechanism.cpp, which checks every mechanism against its float64 reference and finite
// differences): FAVOR+ against exact softmax attention, its random features, the global norm of
// the simple diffusivity, the blocked sigmoid kernel's edge cases, and argument validation.
#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "structdiff/attention.h"
#include "structdiff/mechanism_registry.h"
#include "structdiff/pattern.h"
#include "structdiff/runtime.h"
#include "support/gradcheck.h"

namespace structdiff {
namespace {

using testing::check_gradients;
using testing::expect_same_function;
using Inputs = std::vector<torch::Tensor>;

at::Generator seeded_generator(uint64_t seed) {
  return at::make_generator<at::CPUGeneratorImpl>(seed);
}

Inputs random_qkv(int64_t batch, int64_t heads, int64_t queries, int64_t keys, int64_t head_dim,
                  torch::ScalarType dtype = torch::kDouble, double scale = 1.0) {
  const auto options = torch::TensorOptions().dtype(dtype);
  return {torch::randn({batch, heads, queries, head_dim}, options) * scale,
          torch::randn({batch, heads, keys, head_dim}, options) * scale,
          torch::randn({batch, heads, keys, head_dim}, options)};
}

// The registry's float64 reference of `mechanism` as a function of Q, K, V.
std::function<torch::Tensor(const Inputs&)> reference_of(Mechanism mechanism,
                                                         MechanismArguments arguments = {}) {
  return [mechanism, arguments](const Inputs& in) {
    return mechanism_info(mechanism).reference(in[0], in[1], in[2], arguments);
  };
}

MechanismArguments restricted_to(const PatternBatch& pattern) {
  MechanismArguments arguments;
  arguments.pattern = &pattern;
  return arguments;
}

double relative_error(const torch::Tensor& estimate, const torch::Tensor& exact) {
  return ((estimate - exact).norm() / exact.norm()).item<double>();
}

// Mean relative error of FAVOR+ softmax attention against the exact attention, over seeds.
double mean_favor_error(int64_t num_features, bool orthogonal, int num_seeds) {
  constexpr int64_t kHeadDim = 16, kTokens = 64;
  double total = 0;
  for (int seed = 0; seed < num_seeds; ++seed) {
    torch::manual_seed(seed);
    const Inputs x = random_qkv(1, 2, kTokens, kTokens, kHeadDim, torch::kDouble, 0.5);
    const torch::Tensor projection = favor_projection(
        num_features, kHeadDim, orthogonal, seeded_generator(1000 + seed), torch::kDouble);
    total += relative_error(favor_attention(x[0], x[1], x[2], projection, FavorKernel::softmax),
                            reference_of(Mechanism::dense)(x));
  }
  return total / num_seeds;
}

// Measured over 20 seeds: about 0.58, 0.27, 0.11 and 0.044 for m = 8, 64, 512 and 4096.
TEST(FavorSoftmax, ErrorAgainstExactAttentionFallsWithFeatures) {
  const std::vector<int64_t> feature_counts = {8, 64, 512, 4096};
  std::vector<double> errors;
  for (int64_t m : feature_counts) errors.push_back(mean_favor_error(m, true, 5));
  const auto all_errors = ::testing::PrintToString(errors);
  for (size_t i = 1; i < errors.size(); ++i) {
    EXPECT_LT(errors[i], errors[i - 1]) << "m = " << feature_counts[i] << ", errors " << all_errors;
  }
  EXPECT_LT(errors.back(), 0.07) << "errors " << all_errors;
}

// Measured over 20 seeds at m = 16: about 0.42-0.49 orthogonal against 0.45-0.52 i.i.d.
TEST(FavorSoftmax, OrthogonalFeaturesBeatIidOnAverage) {
  EXPECT_LE(mean_favor_error(16, true, 20), mean_favor_error(16, false, 20));
}

// With eps = 0 the stabilising maxima cancel exactly, so the features need no maxima at all.
// (The registry harness checks the default eps, against features with the maxima.)
TEST(FavorSoftmax, MatchesQuadraticFormOfItsFeatures) {
  torch::manual_seed(1);
  const Inputs x = random_qkv(2, 2, 6, 7, 4, torch::kDouble, 0.7);
  const torch::Tensor projection =
      favor_projection(10, 4, true, seeded_generator(2), torch::kDouble);
  const auto features = [&](const torch::Tensor& t) {
    const double normalizer = std::pow(4.0, -0.25);
    return torch::exp((normalizer * t).matmul(projection.t()) -
                      t.square().sum(-1, true) * normalizer * normalizer / 2);
  };
  expect_same_function(
      [&](const Inputs& in) {
        return favor_attention(in[0], in[1], in[2], projection, FavorKernel::softmax, 0.0);
      },
      [&](const Inputs& in) {
        const torch::Tensor weights = features(in[0]).matmul(features(in[1]).transpose(-2, -1));
        return weights.matmul(in[2]) / weights.sum(-1, /*keepdim=*/true);
      },
      x);
}

TEST(FavorProjection, OrthogonalBlocksHaveChiDistributedRowNorms) {
  constexpr int64_t kHeadDim = 16, kFeatures = 4096 + 5;  // the last block is cut short
  const torch::Tensor projection =
      favor_projection(kFeatures, kHeadDim, true, seeded_generator(5), torch::kDouble);
  ASSERT_EQ(projection.sizes(), (torch::IntArrayRef{kFeatures, kHeadDim}));
  const torch::Tensor norms = projection.norm(2, {1});
  for (int64_t start = 0; start < kFeatures; start += kHeadDim) {
    const int64_t rows = std::min(kHeadDim, kFeatures - start);
    const torch::Tensor directions =
        projection.narrow(0, start, rows) / norms.narrow(0, start, rows).unsqueeze(1);
    ASSERT_TRUE(torch::allclose(directions.matmul(directions.t()), torch::eye(rows, torch::kDouble),
                                0, 1e-10))
        << "block starting at row " << start;
  }
  // LAPACK's QR gives every block's first row a negative first entry unless the sign is undone.
  const double positive_fraction = (projection.slice(0, 0, kFeatures, kHeadDim).select(1, 0) > 0)
                                       .to(torch::kDouble)
                                       .mean()
                                       .item<double>();
  EXPECT_NEAR(positive_fraction, 0.5, 0.2);
  EXPECT_GT((norms.max() - norms.min()).item<double>(), 1.0);
  EXPECT_NEAR(norms.square().mean().item<double>(), kHeadDim, 0.5);
}

TEST(FavorProjection, IidRowsAndDeterminism) {
  const torch::Tensor iid = favor_projection(4096, 8, false, seeded_generator(6), torch::kDouble);
  EXPECT_NEAR(iid.square().sum(1).mean().item<double>(), 8.0, 0.3);
  EXPECT_TRUE(torch::equal(favor_projection(20, 8, true, seeded_generator(7)),
                           favor_projection(20, 8, true, seeded_generator(7))));
  EXPECT_EQ(favor_projection(20, 8, true, seeded_generator(7)).scalar_type(), torch::kFloat);
}

TEST(FavorProjection, DefaultFeatureCountIsDLnD) {
  EXPECT_EQ(default_favor_features(1), 1);
  EXPECT_EQ(default_favor_features(2), 1);
  EXPECT_EQ(default_favor_features(16), 44);
  EXPECT_EQ(default_favor_features(64), 266);
}

// The registry harness covers the per-node norm; the global one is checked here.
TEST(DiffusivitySimple, GlobalNormMatchesReferenceAndFiniteDifferences) {
  torch::manual_seed(9);
  const Inputs x = random_qkv(2, 2, 6, 7, 4);
  MechanismArguments global;
  global.diffusivity_norm = DiffusivityNorm::global;
  const auto simple = [](const Inputs& in) {
    return diffusivity_simple(in[0], in[1], in[2], DiffusivityNorm::global);
  };
  expect_same_function(simple, reference_of(Mechanism::diffusivity_simple, global), x);
  EXPECT_EQ(check_gradients(simple, x), "");
}

TEST(DiffusivitySigmoid, MatchesMaskedFormulaWithEmptyRowsZero) {
  torch::manual_seed(10);
  constexpr int64_t kNodes = 6;
  // Query 5 has no key in `with_empty_row`.
  const AttentionPattern with_empty_row =
      patterns::from_edges(kNodes, {{0, 1}, {1, 2}, {2, 0}, {3, 4}, {4, 4}});
  const Inputs x = random_qkv(2, 3, kNodes, kNodes, 4);

  const PatternBatch per_element(
      std::vector<AttentionPattern>{with_empty_row, patterns::sliding_window(kNodes, 1, 0)});
  expect_same_function(
      [&](const Inputs& in) { return diffusivity_sigmoid(in[0], in[1], in[2], &per_element); },
      reference_of(Mechanism::diffusivity_sigmoid, restricted_to(per_element)), x);

  const PatternBatch shared(with_empty_row);
  const torch::Tensor out = diffusivity_sigmoid(x[0], x[1], x[2], &shared);
  EXPECT_FALSE(torch::isnan(out).any().item<bool>());
  EXPECT_TRUE(torch::equal(out.select(2, 5), torch::zeros_like(out.select(2, 5))));
  expect_same_function(
      [&](const Inputs& in) { return diffusivity_sigmoid(in[0], in[1], in[2], &shared); },
      reference_of(Mechanism::diffusivity_sigmoid, restricted_to(shared)), x);
}

// 2 heads x 600 keys: the kernel works in blocks of 2^18 / 1200 = 218 query rows, so 600 rows
// take three blocks, the last one shorter; outputs and gradients must not see the seams.
TEST(DiffusivitySigmoid, SpansSeveralRowBlocks) {
  torch::manual_seed(18);
  constexpr int64_t kNodes = 600;
  const Inputs x = random_qkv(1, 2, kNodes, kNodes, 3);
  // Sums over 600 keys: another BLAS (MKL in PyTorch's own builds) rounds them 1e-10 apart.
  constexpr double kAtol = 1e-9;
  expect_same_function([](const Inputs& in) { return diffusivity_sigmoid(in[0], in[1], in[2]); },
                       reference_of(Mechanism::diffusivity_sigmoid), x, kAtol);
  const PatternBatch pattern(patterns::sliding_window(kNodes, 2, 1));
  expect_same_function(
      [&](const Inputs& in) { return diffusivity_sigmoid(in[0], in[1], in[2], &pattern); },
      reference_of(Mechanism::diffusivity_sigmoid, restricted_to(pattern)), x, kAtol);
}

// The old formulation held about five N x N matrices in forward + backward (335 MB here); the
// blocked kernel must stay under a quarter of one.
TEST(DiffusivitySigmoid, NeverHoldsAnNByNMatrix) {
  torch::manual_seed(19);
  constexpr int64_t kNodes = 4096;
  const Inputs x = random_qkv(1, 1, kNodes, kNodes, 8, torch::kFloat);
  std::vector<torch::Tensor> leaves;
  for (const torch::Tensor& t : x) leaves.push_back(t.detach().requires_grad_(true));
  const int64_t one_matrix_bytes = kNodes * kNodes * static_cast<int64_t>(sizeof(float));
  PeakMemoryTracker tracker;
  diffusivity_sigmoid(leaves[0], leaves[1], leaves[2]).sum().backward();
  EXPECT_LT(tracker.peak_bytes(), one_matrix_bytes / 4) << "peak " << tracker.peak_bytes();
  EXPECT_GT(tracker.peak_bytes(), 0);
}

// All q.k = -200: every sigmoid underflows in float32, yet the weights are equal, so each query
// must get the mean of the values.
TEST(DiffusivitySigmoid, StaysFiniteWhenEverySigmoidUnderflows) {
  const auto options = torch::TensorOptions().dtype(torch::kFloat);
  const torch::Tensor q = torch::full({1, 1, 3, 2}, -10.0, options);
  const torch::Tensor k = torch::full({1, 1, 4, 2}, 10.0, options);
  const torch::Tensor v = torch::randn({1, 1, 4, 2}, options);
  const torch::Tensor out = diffusivity_sigmoid(q, k, v);
  EXPECT_TRUE(torch::allclose(out, v.mean(2, true).expand_as(out), 1e-5, 1e-6)) << out;
}

TEST(LinearTimeMechanisms, Float32GivesFiniteOutputs) {
  torch::manual_seed(14);
  const Inputs x = random_qkv(2, 2, 16, 16, 8, torch::kFloat);
  const torch::Tensor projection = favor_projection(20, 8, true, seeded_generator(15));
  const std::vector<torch::Tensor> outputs = {
      favor_attention(x[0], x[1], x[2], projection, FavorKernel::softmax),
      favor_attention(x[0], x[1], x[2], projection, FavorKernel::relu),
      linear_attention(x[0], x[1], x[2]),
      diffusivity_simple(x[0], x[1], x[2], DiffusivityNorm::per_node),
      diffusivity_simple(x[0], x[1], x[2], DiffusivityNorm::global),
      diffusivity_sigmoid(x[0], x[1], x[2])};
  for (const torch::Tensor& out : outputs) {
    EXPECT_EQ(out.scalar_type(), torch::kFloat);
    EXPECT_EQ(out.sizes(), x[0].sizes());
    EXPECT_TRUE(torch::isfinite(out).all().item<bool>());
  }
}

TEST(LinearTimeMechanisms, RejectInvalidArguments) {
  torch::manual_seed(16);
  const Inputs x = random_qkv(1, 1, 4, 4, 3, torch::kFloat);
  const torch::Tensor projection = favor_projection(5, 3, true, seeded_generator(17));
  const auto favor = [&](const torch::Tensor& p, double eps) {
    return favor_attention(x[0], x[1], x[2], p, FavorKernel::softmax, eps);
  };
  EXPECT_THROW_WITH(favor(torch::ones({5, 3, 1}), 1e-4), std::invalid_argument,
                    "projection must be a 2-D (num_features, head_dim) tensor, got 3-D");
  EXPECT_THROW_WITH(favor(torch::ones({5, 4}), 1e-4), std::invalid_argument,
                    "projection has shape (5, 4), expected (num_features >= 1, head_dim = 3)");
  EXPECT_THROW_WITH(favor(torch::ones({0, 3}), 1e-4), std::invalid_argument,
                    "projection has shape (0, 3)");
  EXPECT_THROW_WITH(favor(projection.to(torch::kDouble), 1e-4), std::invalid_argument,
                    "projection must have the inputs' dtype and device, got Double");
  EXPECT_THROW_WITH(favor(projection, -1.0), std::invalid_argument,
                    "favor_attention: eps must be >= 0, got -1");
  EXPECT_THROW_WITH(linear_attention(x[0], x[1], x[2], -0.5), std::invalid_argument,
                    "linear_attention: eps must be >= 0, got -0.5");
  EXPECT_THROW_WITH(favor_projection(0, 3, true, seeded_generator(0)), std::invalid_argument,
                    "favor_projection: num_features must be >= 1, got 0");
  EXPECT_THROW_WITH(favor_projection(4, -2, false, seeded_generator(0)), std::invalid_argument,
                    "favor_projection: head_dim must be >= 1, got -2");
  EXPECT_THROW_WITH(favor_projection(4, 3, true, seeded_generator(0), torch::kHalf),
                    std::invalid_argument, "dtype must be float32 or float64, got Half");
  EXPECT_THROW_WITH(default_favor_features(0), std::invalid_argument,
                    "default_favor_features: head_dim must be >= 1, got 0");

  // Q, K, V themselves are validated by check_qkv, and patterns by PatternBatch.
  const torch::Tensor wrong_dtype = x[1].to(torch::kDouble);
  EXPECT_THROW(favor_attention(x[0], wrong_dtype, x[2], projection, FavorKernel::relu),
               std::invalid_argument);
  EXPECT_THROW(linear_attention(x[0], wrong_dtype, x[2]), std::invalid_argument);
  EXPECT_THROW(diffusivity_simple(x[0], wrong_dtype, x[2], DiffusivityNorm::global),
               std::invalid_argument);
  EXPECT_THROW(diffusivity_sigmoid(x[0], wrong_dtype, x[2]), std::invalid_argument);
  const PatternBatch too_small(patterns::full(3, 3));
  EXPECT_THROW(diffusivity_sigmoid(x[0], x[1], x[2], &too_small), std::invalid_argument);
}

}  // namespace
}  // namespace structdiff
