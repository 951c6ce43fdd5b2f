// Undirected self-attention: one forward sweep is masked softmax attention followed by the read-out
// X = Q Wq + K Wk + V Wv at the masked rows; given rows never move; the energy never rises; the
// model learns number-sequence completion in CI time; model files; bad input.
#include <cmath>
#include <limits>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "structdiff/attention_unn.h"
#include "structdiff/number_sequences.h"
#include "structdiff/sinusoidal.h"
#include "support/expect_throw.h"
#include "support/modules.h"
#include "support/temporary_files.h"

namespace unn = structdiff::unn;
namespace data = structdiff::data;
using unn::Schedule;

namespace {

unn::AttentionUnn small_model(int64_t d, uint64_t seed = 0) {
  unn::AttentionUnnConfig config;
  config.d_model = d;
  config.init_seed = seed;
  return unn::AttentionUnn(config);
}

// Two sequences: 3 4 [MASK] 6 7 8 9 10 and 20 19 18 [MASK] [MASK] 15 14 13 12 11, padded to 24.
torch::Tensor two_sequences() {
  torch::Tensor tokens = torch::zeros({2, data::kSequenceLength}, torch::kLong);
  for (int64_t i = 0; i < 8; ++i) tokens[0][i] = data::sequence_token(3 + i);
  for (int64_t i = 0; i < 10; ++i) tokens[1][i] = data::sequence_token(20 - i);
  tokens[0][2] = data::kSequenceMask;
  tokens[1][3] = data::kSequenceMask;
  tokens[1][4] = data::kSequenceMask;
  return tokens;
}

torch::Tensor weight(unn::AttentionUnn& model, int factor) {
  return model->network()->graph()->factors()[factor]->as<unn::LinearFactorImpl>()->weight;
}

}  // namespace

TEST(AttentionUnn, OneForwardSweepIsMaskedSoftmaxAttention) {
  unn::AttentionUnn model = small_model(8, 1);
  model->to(torch::kDouble);
  const torch::Tensor tokens = two_sequences();
  const unn::InferenceResult result = model->infer(tokens, 1, Schedule::forward);
  ASSERT_EQ(result.updates.at(0), (std::vector<std::string>{"Q", "K", "V", "S", "H", "X"}));

  const torch::Tensor masked = tokens.eq(data::kSequenceMask).unsqueeze(2);
  const torch::Tensor x =
      torch::where(masked, torch::zeros({}, torch::kDouble),
                   model->embedding.index_select(0, tokens.view(-1)).view({2, 24, 8}));
  const torch::Tensor p =
      structdiff::sinusoidal_embedding(torch::arange(24, torch::kFloat), 8,
                                       structdiff::FrequencySpacing::transformer)
          .to(torch::kDouble);
  const torch::Tensor q = torch::matmul(x + p, weight(model, 0).t());
  const torch::Tensor k = torch::matmul(x + p, weight(model, 1).t());
  const torch::Tensor v = torch::matmul(x + p, weight(model, 2).t());
  const torch::Tensor real = tokens.ne(data::kSequencePad);
  const torch::Tensor allowed = real.unsqueeze(2).logical_and(real.unsqueeze(1));
  torch::Tensor s = torch::softmax((torch::matmul(q, k.transpose(1, 2)) / std::sqrt(8.0))
                                       .masked_fill(allowed.logical_not(), -1e30),
                                   -1);
  s = s.masked_fill(allowed.logical_not(), 0);
  EXPECT_TRUE(torch::allclose(result.state.at("S"), s, 1e-12, 1e-12));
  EXPECT_TRUE(torch::allclose(result.state.at("H"), torch::matmul(s, v), 1e-12, 1e-12));
  // Read-out: the masked rows become Q Wq + K Wk + V Wv; given rows keep their embeddings.
  const torch::Tensor filled = torch::matmul(q, weight(model, 0)) +
                               torch::matmul(k, weight(model, 1)) +
                               torch::matmul(v, weight(model, 2));
  EXPECT_TRUE(torch::allclose(result.state.at("X"), torch::where(masked, filled, x), 1e-12, 1e-12));
}

TEST(AttentionUnn, BlockUpdatesNeverRaiseTheEnergy) {
  unn::AttentionUnn model = small_model(8, 2);
  model->to(torch::kDouble);
  for (Schedule schedule : {Schedule::forward_backward, Schedule::random}) {
    const std::vector<double> energy =
        model->infer(two_sequences(), 3, schedule, nullptr, true).energy;
    ASSERT_EQ(energy.size(), 1u + 3 * (schedule == Schedule::forward_backward ? 10 : 6));
    for (size_t i = 1; i < energy.size(); ++i) {
      if (std::isinf(energy[i - 1])) continue;
      EXPECT_LE(energy[i], energy[i - 1] + 1e-9 * std::abs(energy[i - 1])) << i;
    }
  }
}

TEST(AttentionUnn, LearnsSequenceCompletionInAFewSteps) {
  const data::NumberSequences all = data::generate_number_sequences();
  const data::NumberSequences subset = data::select_number_sequences(
      all, torch::randperm(all.size(), torch::kLong).narrow(0, 0, 6000));
  unn::AttentionUnnConfig config;
  config.d_model = 32;
  unn::AttentionUnn model(config);
  unn::AttentionUnnTraining options;
  options.batch_size = 64;
  options.dev_size = 1000;
  options.loop.steps = 300;
  options.loop.learning_rate = 1e-2;
  options.loop.ema_decay = 0;
  options.loop.clip_norm = 10;
  options.loop.validate_every = 300;
  options.loop.show_progress = false;
  const unn::AttentionUnnTrainingResult result = unn::train_attention_unn(model, subset, options);
  EXPECT_GT(result.best_dev_accuracy, 0.25) << "chance is 1/66";
}

// Train 8 steps straight, or 4, stop, and resume to 8 from the checkpoint: the same weights,
// best-validation copy included, to the bit.
TEST(AttentionUnn, ResumedTrainingIsBitExact) {
  const data::NumberSequences all = data::generate_number_sequences();
  const data::NumberSequences subset = data::select_number_sequences(
      all, torch::arange(0, all.size(), all.size() / 1500, torch::kLong));
  TemporaryDirectory scratch;
  unn::AttentionUnnConfig config;
  config.d_model = 12;
  unn::AttentionUnnTraining options;
  options.batch_size = 32;
  options.dev_size = 200;
  options.loop.steps = 8;
  options.loop.validate_every = 2;
  options.loop.show_progress = false;
  unn::AttentionUnn straight(config);
  unn::train_attention_unn(straight, subset, options);

  unn::AttentionUnn interrupted(config);
  options.loop.checkpoint_path = scratch.file("run.pt");
  options.loop.checkpoint_every = 2;
  options.loop.steps = 4;
  unn::train_attention_unn(interrupted, subset, options);
  unn::AttentionUnn resumed(config);
  options.loop.steps = 8;
  options.loop.resume = true;
  unn::train_attention_unn(resumed, subset, options);
  expect_identical(*straight, *resumed);
}

TEST(AttentionUnn, ModelFileRoundTrip) {
  TemporaryDirectory scratch;
  unn::AttentionUnn model = small_model(6, 3);
  unn::save_attention_unn(scratch.file("a.pt"), model, {{"accuracy", 0.25}});
  nlohmann::json metadata;
  unn::AttentionUnn loaded = unn::load_attention_unn(scratch.file("a.pt"), &metadata);
  expect_identical(*model, *loaded);
  EXPECT_EQ(loaded->config().d_model, 6);
}

TEST(AttentionUnn, BadInputNamesTheProblem) {
  unn::AttentionUnnConfig config;
  config.d_model = 7;
  EXPECT_THROW_WITH(unn::AttentionUnn{config}, std::invalid_argument, "d_model must be even");
  unn::AttentionUnn model = small_model(4);
  EXPECT_THROW_WITH(model->infer(torch::zeros({2, 23}, torch::kLong), 1, Schedule::forward),
                    std::invalid_argument, "token batches must be (batch, 24)");
  EXPECT_THROW_WITH(model->infer(torch::full({1, 24}, 66, torch::kLong), 1, Schedule::forward),
                    std::invalid_argument, "tokens must be ids in 0..65");
}
