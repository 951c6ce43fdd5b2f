// Data-parallel training on c10d (Gloo), on the loopback: ranks are threads of this process, each
// with its own process group. Two ranks with half the batch each end where one process with the
// whole batch ends; a checkpoint written by two ranks resumes on one; a rank that stops makes the
// other fail with a clear error within its timeout instead of hanging.
#include <chrono>
#include <exception>
#include <future>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "structdiff/gsdm_training.h"
#include "structdiff/ranks.h"
#include "structdiff/runtime.h"
#include "structdiff/sudoku_model.h"
#include "support/expect_throw.h"
#include "support/temporary_files.h"

namespace structdiff {
namespace {

// Initial weights come from libtorch's one default generator (seeded in a scope): ranks that are
// threads of one process must build their models one at a time to get the same ones.
sudoku::TrainedModel tiny_sudoku() {
  static std::mutex building;
  const std::lock_guard<std::mutex> lock(building);
  gsdm::GsdmConfig config;
  config.dim = 16;
  config.blocks = 1;
  config.heads = 2;
  DefaultGeneratorGuard weights(3);
  return sudoku::build_model(sudoku::model_metadata(2, sudoku::GridFamily::broad, config,
                                                    diffusion::ScheduleConfig{}));
}

gsdm::TrainingProblem sudoku_problem() {
  gsdm::TrainingProblem problem;
  problem.metadata = {{"test", "distributed"}};
  problem.make_batch = [](int64_t batch, std::mt19937_64& rng) {
    const sudoku::Batch b = sudoku::make_training_batch(2, batch, rng);
    return gsdm::TrainingBatch{b.x0, b.observed};
  };
  return problem;
}

gsdm::TrainingOptions options_for(int64_t steps) {
  gsdm::TrainingOptions options;
  options.batch = 8;
  options.loop.steps = steps;
  options.loop.learning_rate = 1e-3;
  options.loop.show_progress = false;
  return options;
}

// What a trained model computes, on fixed inputs: compared instead of raw weights, because a
// weight whose gradient is exactly zero (an attention key bias: softmax ignores a shift shared by
// all keys) gets Adam steps driven by rounding noise alone, which differ between runs.
torch::Tensor outputs_of(sudoku::TrainedModel& model) {
  std::mt19937_64 rng(99);
  const sudoku::Batch batch = sudoku::make_training_batch(2, 16, rng);
  const at::Generator draws = at::make_generator<at::CPUGeneratorImpl>(99);
  const torch::Tensor x_t = torch::randn(batch.x0.sizes(), draws);
  const torch::Tensor t = torch::arange(16, torch::kLong) * 60;
  torch::NoGradGuard no_grad;
  model.model->eval();
  return model.model->forward(x_t, t, batch.observed);
}

// Trains a tiny Sudoku GSDM on `world_size` ranks (threads), checks that every rank ends with
// rank 0's weights to the bit, and returns rank 0's outputs on fixed inputs.
torch::Tensor train_on_ranks(int world_size, gsdm::TrainingOptions options) {
  const int port = train::free_loopback_port();
  std::vector<std::future<std::vector<torch::Tensor>>> ranks;
  for (int rank = 0; rank < world_size; ++rank) {
    ranks.push_back(std::async(std::launch::async, [=]() mutable {
      at::set_num_threads(1);
      train::RankAddress address;
      address.port = port;
      address.rank = rank;
      address.world_size = world_size;
      address.timeout = std::chrono::seconds(30);
      options.loop.ranks = train::Ranks::connect(address);
      sudoku::TrainedModel model = tiny_sudoku(), ema = tiny_sudoku();
      gsdm::train(model.model, ema.model, model.schedule, sudoku_problem(), options, 11);
      std::vector<torch::Tensor> weights;
      for (const torch::Tensor& p : model.model->parameters()) weights.push_back(p.detach().clone());
      weights.push_back(outputs_of(model));
      return weights;
    }));
  }
  std::vector<torch::Tensor> root = ranks[0].get();
  for (int rank = 1; rank < world_size; ++rank) {
    const std::vector<torch::Tensor> other = ranks[rank].get();
    for (size_t i = 0; i < root.size(); ++i) {
      EXPECT_TRUE(torch::equal(root[i], other[i])) << "rank " << rank << " drifted, tensor " << i;
    }
  }
  return root.back();
}

torch::Tensor train_alone(gsdm::TrainingOptions options, uint64_t data_seed = 11) {
  sudoku::TrainedModel model = tiny_sudoku(), ema = tiny_sudoku();
  gsdm::train(model.model, ema.model, model.schedule, sudoku_problem(), options, data_seed);
  return outputs_of(model);
}

void expect_close(const torch::Tensor& a, const torch::Tensor& b) {
  EXPECT_TRUE(torch::allclose(a, b, 1e-4, 1e-5))
      << "largest difference " << (a - b).abs().max().item<double>() << " where |a| is "
      << a.abs().max().item<double>();
}

TEST(DataParallel, TwoRanksWithHalfTheBatchEachEqualOneProcessWithAllOfIt) {
  const torch::Tensor alone = train_alone(options_for(6));
  expect_close(alone, train_on_ranks(2, options_for(6)));
  // The check can fail: the same training on other data computes something else.
  EXPECT_FALSE(torch::allclose(alone, train_alone(options_for(6), /*data_seed=*/12), 1e-4, 1e-5));
}

TEST(DataParallel, ACheckpointOfTwoRanksResumesOnOne) {
  TemporaryDirectory scratch;
  gsdm::TrainingOptions first = options_for(4);
  first.loop.checkpoint_path = scratch.file("run.pt");
  train_on_ranks(2, first);
  gsdm::TrainingOptions rest = options_for(8);
  rest.loop.checkpoint_path = first.loop.checkpoint_path;
  rest.loop.resume = true;
  expect_close(train_alone(options_for(8)), train_alone(rest));
}

TEST(DataParallel, ABatchThatDoesNotSplitEvenlyIsRefused) {
  gsdm::TrainingOptions options = options_for(2);
  options.batch = 7;
  EXPECT_THROW_WITH(train_on_ranks(2, options), std::invalid_argument,
                    "--batch 7 does not split evenly over 2 ranks");
}

// Rank 1 trains 2 steps, rank 0 is asked for 6: after rank 1 has gone, rank 0's next collective
// fails with a message naming itself, within the timeout.
TEST(DataParallel, ARankThatStopsMakesTheOthersFailInsteadOfHanging) {
  const int port = train::free_loopback_port();
  auto rank_of = [port](int rank, int64_t steps) {
    return std::async(std::launch::async, [=] {
      at::set_num_threads(1);
      train::RankAddress address;
      address.port = port;
      address.rank = rank;
      address.world_size = 2;
      address.timeout = std::chrono::seconds(5);
      gsdm::TrainingOptions options = options_for(steps);
      options.loop.ranks = train::Ranks::connect(address);
      sudoku::TrainedModel model = tiny_sudoku(), ema = tiny_sudoku();
      gsdm::train(model.model, ema.model, model.schedule, sudoku_problem(), options, 11);
    });
  };
  const auto started = std::chrono::steady_clock::now();
  auto survivor = rank_of(0, 6);
  auto quitter = rank_of(1, 2);
  quitter.get();
  EXPECT_THROW_WITH(survivor.get(), std::runtime_error, "rank 0 of 2:");
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(60));
}

TEST(DataParallel, TheEnvironmentNamesWhatIsMissing) {
  ::setenv("WORLD_SIZE", "2", 1);
  ::unsetenv("RANK");
  EXPECT_THROW_WITH(train::Ranks::from_environment(std::chrono::seconds(1)), std::invalid_argument,
                    "RANK is not set (WORLD_SIZE is)");
  ::setenv("RANK", "x", 1);
  EXPECT_THROW_WITH(train::Ranks::from_environment(std::chrono::seconds(1)), std::invalid_argument,
                    "RANK='x' is not a whole number");
  ::setenv("WORLD_SIZE", "1", 1);
  EXPECT_EQ(train::Ranks::from_environment(std::chrono::seconds(1)), nullptr);
  ::unsetenv("WORLD_SIZE");
  ::unsetenv("RANK");
  EXPECT_EQ(train::Ranks::from_environment(std::chrono::seconds(1)), nullptr);
}

}  // namespace
}  // namespace structdiff
