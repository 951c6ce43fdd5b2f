// A small 4x4 Sudoku GSDM learns, within CI time, to solve most puzzles with half the cells given.
#include <gtest/gtest.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "structdiff/gsdm_training.h"
#include "structdiff/sudoku_model.h"

namespace structdiff {
namespace {

TEST(GsdmLearning, Small4x4ModelSolvesMostPuzzles) {
  at::set_num_threads(2);
  torch::manual_seed(1);
  gsdm::GsdmConfig config;
  config.dim = 64;
  config.blocks = 3;
  config.heads = 4;
  const nlohmann::json metadata =
      sudoku::model_metadata(2, sudoku::GridFamily::broad, config, diffusion::ScheduleConfig{});
  sudoku::TrainedModel trained = sudoku::build_model(metadata);
  sudoku::TrainedModel averaged = sudoku::build_model(metadata);
  gsdm::TrainingProblem problem;
  problem.metadata = metadata;
  problem.make_batch = [](int64_t batch, std::mt19937_64& rng) {
    sudoku::Batch b = sudoku::make_training_batch(2, batch, rng);
    return gsdm::TrainingBatch{b.x0, b.observed};
  };
  gsdm::TrainingOptions options;
  options.loop.steps = 1000;
  options.batch = 64;
  options.loop.learning_rate = 1e-3;
  options.loop.ema_decay = 0.99;
  options.loop.show_progress = false;
  gsdm::train(trained.model, averaged.model, trained.schedule, problem, options, /*data_seed=*/1);

  std::mt19937_64 rng(99);
  std::vector<sudoku::Grid> puzzles;
  for (int i = 0; i < 64; ++i) {
    puzzles.push_back(sudoku::observe_random_cells(sudoku::generate_solution(2, rng), 8, rng));
  }
  averaged.schedule = trained.schedule;
  sudoku::SolveOptions solve;
  solve.generator = at::make_generator<at::CPUGeneratorImpl>(0);
  solve.ddim_steps = 20;
  const sudoku::Accuracy accuracy = sudoku::evaluate(averaged, puzzles, solve);
  RecordProperty("valid_fraction", std::to_string(accuracy.valid_fraction()));
  // An untrained model solves almost none (random digits break ~30% of constrained pairs).
  EXPECT_GE(accuracy.valid_fraction(), 0.8) << "violated pair fraction " << accuracy.violated_fraction;
}

}  // namespace
}  // namespace structdiff
