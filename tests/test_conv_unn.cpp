// The convolutional UNN: the paper's parameter counts (tied and Table 3's untied copies), one
// forward sweep equal to the plain CNN and one backward sweep equal to its transposed decoder,
// energy never raised in either direction, learning on MNIST in CI time, exact resume, model
// files and bad input.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "structdiff/conv_unn.h"
#include "structdiff/images.h"
#include "support/data.h"
#include "support/expect_throw.h"
#include "support/modules.h"
#include "support/temporary_files.h"

namespace unn = structdiff::unn;
using unn::Schedule;

namespace {

const std::string kMnistDir = std::string(STRUCTDIFF_SOURCE_DIR) + "/data/mnist";

int64_t parameter_count(torch::nn::Module& module) {
  int64_t count = 0;
  for (const auto& p : module.parameters()) count += p.numel();
  return count;
}

unn::ConvUnn model_with(int64_t iterations, bool tied, uint64_t seed = 0) {
  unn::ConvUnnConfig config;
  config.iterations = iterations;
  config.tied = tied;
  config.init_seed = seed;
  return unn::ConvUnn(config);
}

struct Weights {
  torch::Tensor w1, b1, w2, b2, w3, b3;
};
Weights weights_of(unn::ConvUnn& model) {
  unn::Graph& g = model->network()->graph();
  return {g->factors()[0]->as<unn::Conv2dFactorImpl>()->weight, g->bias("H1"),
          g->factors()[1]->as<unn::Conv2dFactorImpl>()->weight, g->bias("H2"),
          g->factors()[2]->as<unn::LinearFactorImpl>()->weight, g->bias("y")};
}

structdiff::data::ImageDataset small_mnist(int64_t count, structdiff::data::ImageSplit split) {
  auto data = structdiff::data::load_image_dataset(
      "mnist", split, kMnistDir);
  data.images = data.images.narrow(0, 0, count);
  data.labels = data.labels.narrow(0, 0, count);
  return data;
}

}  // namespace

TEST(ConvUnn, ParameterCountsMatchThePaper) {
  unn::ConvUnn tied = model_with(3, true);
  EXPECT_EQ(parameter_count(*tied), 50026);  // Table 3, k = 1
  const std::vector<std::pair<int64_t, int64_t>> untied = {
      {2, 51220}, {3, 51651}, {4, 53608}, {5, 51750}};
  for (const auto& [k, count] : untied) {
    unn::ConvUnn model = model_with(k, false);
    EXPECT_EQ(parameter_count(*model), count) << "k = " << k;
  }
}

TEST(ConvUnn, OneForwardSweepIsTheFeedForwardNetwork) {
  unn::ConvUnn model = model_with(1, true, 3);
  model->to(torch::kDouble);
  const Weights w = weights_of(model);
  torch::manual_seed(0);
  const torch::Tensor images = torch::rand({5, 1, 28, 28}, torch::kDouble);
  const torch::Tensor x = images * 2 - 1;
  const torch::Tensor h1 = torch::tanh(torch::conv2d(x, w.w1, w.b1.view(-1), 2));
  const torch::Tensor h2 = torch::tanh(torch::conv2d(h1, w.w2, w.b2.view(-1), 2));
  const torch::Tensor logits = torch::linear(h2.flatten(1), w.w3, w.b3);
  const unn::InferenceResult result = model->classify(images, 1, Schedule::forward);
  EXPECT_TRUE(torch::allclose(result.preactivation.at("y"), logits, 1e-12, 1e-12));

  // The other direction from zero: y -> H2 -> H1 -> X through the transposed operators.
  const torch::Tensor labels = torch::arange(5);
  const torch::Tensor y = torch::one_hot(labels, 10).to(torch::kDouble);
  const torch::Tensor g2 = torch::tanh(torch::matmul(y, w.w3).view({5, 64, 5, 5}) + w.b2);
  const torch::Tensor g1 = torch::tanh(torch::conv_transpose2d(g2, w.w2, {}, 2) + w.b1);
  const torch::Tensor image_logits = torch::conv_transpose2d(g1, w.w1, {}, 2);
  EXPECT_TRUE(torch::allclose(model->generate(labels, 1, Schedule::forward).preactivation.at("X"),
                              image_logits, 1e-12, 1e-12));
}

TEST(ConvUnn, BlockUpdatesNeverRaiseTheEnergy) {
  unn::ConvUnn model = model_with(3, true, 4);
  model->to(torch::kDouble);
  torch::manual_seed(1);
  const torch::Tensor images = torch::rand({4, 1, 28, 28}, torch::kDouble);
  for (Schedule schedule : {Schedule::forward, Schedule::forward_backward}) {
    for (const auto& result : {model->classify(images, 3, schedule, nullptr, true),
                               model->generate(torch::arange(4), 3, schedule, true)}) {
      const std::vector<double>& energy = result.energy;
      for (size_t i = 1; i < energy.size(); ++i) {
        if (std::isinf(energy[i - 1])) continue;
        EXPECT_LE(energy[i], energy[i - 1] + 1e-9 * std::abs(energy[i - 1])) << i;
      }
      EXPECT_TRUE(std::isfinite(energy.back()));
    }
  }
}

TEST(ConvUnn, LearnsMnistInAFewSteps) {
  SKIP_WITHOUT_DATA(kMnistDir + "/train-images-idx3-ubyte.gz");
  const auto train = small_mnist(1200, structdiff::data::ImageSplit::train);
  const unn::ImageSplits splits = unn::split_off_dev(train, 200);
  unn::ConvUnnConfig config;
  config.iterations = 2;
  config.classify_schedule = Schedule::forward_backward;
  config.gamma = 0.1;
  unn::ConvUnn model(config);
  const double before = unn::conv_unn_accuracy(model, splits.dev, 2, Schedule::forward_backward);
  unn::ConvUnnTraining options;
  options.batch_size = 64;
  options.loop.steps = 60;
  options.loop.learning_rate = 2e-3;
  options.loop.ema_decay = 0;
  options.loop.clip_norm = std::numeric_limits<double>::infinity();
  options.loop.show_progress = false;
  const unn::ConvUnnTrainingResult result = unn::train_conv_unn(model, splits, options);
  EXPECT_LT(before, 0.3);
  EXPECT_GT(result.best_dev_accuracy, 0.7);
  EXPECT_DOUBLE_EQ(unn::conv_unn_accuracy(model, splits.dev, 2, Schedule::forward_backward),
                   result.best_dev_accuracy);  // the kept weights are the best validation's
}

TEST(ConvUnn, ResumedTrainingIsBitExact) {
  SKIP_WITHOUT_DATA(kMnistDir + "/train-images-idx3-ubyte.gz");
  const auto train = small_mnist(300, structdiff::data::ImageSplit::train);
  const unn::ImageSplits splits = unn::split_off_dev(train, 100);
  TemporaryDirectory scratch;
  unn::ConvUnnConfig config;
  config.iterations = 2;
  config.gamma = 0.1;
  unn::ConvUnnTraining options;
  options.batch_size = 50;
  options.loop.steps = 8;
  options.loop.ema_decay = 0;
  options.loop.validate_every = 2;
  options.loop.show_progress = false;
  unn::ConvUnn straight(config);
  unn::train_conv_unn(straight, splits, options);

  unn::ConvUnn interrupted(config);
  options.loop.checkpoint_path = scratch.file("run.pt");
  options.loop.checkpoint_every = 2;
  options.loop.steps = 4;
  unn::train_conv_unn(interrupted, splits, options);
  unn::ConvUnn resumed(config);
  options.loop.steps = 8;
  options.loop.resume = true;
  unn::train_conv_unn(resumed, splits, options);
  expect_identical(*straight, *resumed);
}

TEST(ConvUnn, ModelFileRoundTrip) {
  TemporaryDirectory scratch;
  unn::ConvUnn model = model_with(2, false, 5);
  unn::save_conv_unn(scratch.file("m.pt"), model, {{"accuracy", 0.5}});
  nlohmann::json metadata;
  unn::ConvUnn loaded = unn::load_conv_unn(scratch.file("m.pt"), &metadata);
  expect_identical(*model, *loaded);
  EXPECT_EQ(metadata.at("accuracy").get<double>(), 0.5);
  EXPECT_FALSE(loaded->config().tied);
  std::ofstream(scratch.file("junk.pt")) << "not a model";
  EXPECT_THROW(unn::load_conv_unn(scratch.file("junk.pt")), std::runtime_error);
}

TEST(ConvUnn, BadInputNamesTheProblem) {
  SKIP_WITHOUT_DATA(kMnistDir + "/train-images-idx3-ubyte.gz");
  unn::ConvUnnConfig config;
  config.iterations = 0;
  EXPECT_THROW_WITH(unn::ConvUnn{config}, std::invalid_argument,
                    "iterations must be in 1..64, got 0");
  config.iterations = 2;
  config.dropout = 1;
  EXPECT_THROW_WITH(unn::ConvUnn{config}, std::invalid_argument, "dropout must be in [0, 1)");
  config.dropout = 0.3;
  config.dataset = "cifar";
  EXPECT_THROW_WITH(unn::ConvUnn{config}, std::invalid_argument,
                    "dataset must be mnist or fashion-mnist");
  unn::ConvUnn model = model_with(2, false);
  EXPECT_THROW_WITH(model->classify(torch::zeros({2, 1, 28, 27}), 1, Schedule::forward),
                    std::invalid_argument, "images must be (batch, 1, 28, 28)");
  EXPECT_THROW_WITH(model->generate(torch::tensor({3, 10}), 1, Schedule::forward),
                    std::invalid_argument, "class labels must be in 0..9");
  EXPECT_THROW_WITH(model->classify(torch::zeros({2, 1, 28, 28}), 3, Schedule::forward),
                    std::invalid_argument, "has weights for 2 iterations, asked for 3");
  const auto train = small_mnist(100, structdiff::data::ImageSplit::train);
  EXPECT_THROW_WITH(unn::split_off_dev(train, 100), std::invalid_argument,
                    "the development split needs 1..99 images, got 100");
}
