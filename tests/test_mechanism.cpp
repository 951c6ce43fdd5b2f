// The one interface over all mechanisms: names, pattern rules, FAVOR+ feature redraw policy.
#include <cmath>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "structdiff/attention.h"
#include "support/gradcheck.h"

namespace structdiff {
namespace {

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
