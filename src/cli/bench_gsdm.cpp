// `structdiff bench gsdm`: training step time and sampling time per solved puzzle of a Sudoku
// GSDM on the reference configuration (D = 128, 6 ResNet+attention pairs, 8 heads).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "cli/command.h"
#include "structdiff/runtime.h"
#include "structdiff/sudoku_model.h"
#include "structdiff/train.h"

namespace structdiff::cli {
namespace {

struct BenchGsdmOptions {
  std::string problem = "sudoku";
  int size = 9;
  int64_t batch = 32;
  std::vector<std::string> attention = {"sparse", "dense"};
  int64_t train_steps = 10;
  int64_t sample_puzzles = 8;
  bool ancestral = true;
  int64_t sample_steps = 50;
  std::string json_path;
};

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

void run(const BenchGsdmOptions& o, const GlobalOptions& global) {
  int n = 2;
  while (n * n < o.size) ++n;
  if (n * n != o.size || n > 5) throw std::invalid_argument("--size takes 4, 9, 16 or 25");
  nlohmann::json rows = nlohmann::json::array();
  std::printf("structdiff bench gsdm: Sudoku %dx%d, batch %ld, D=128, 6 blocks, 8 heads, on %s, %d "
              "threads\n",
              o.size, o.size, static_cast<long>(o.batch), global.device.str().c_str(),
              global.threads);
  for (const std::string& attention : o.attention) {
    gsdm::GsdmConfig config;
    config.attention = parse_mechanism(attention);
    const nlohmann::json metadata =
        sudoku::model_metadata(n, sudoku::GridFamily::broad, config, diffusion::ScheduleConfig{});
    DefaultGeneratorGuard seeded(global.seed);  // the bench's weights
    sudoku::TrainedModel trained = sudoku::build_model(metadata);
    sudoku::TrainedModel averaged = sudoku::build_model(metadata);
    trained.model->to(global.device);
    averaged.model->to(global.device);
    std::mt19937_64 rng(global.seed);
    // Data generation is excluded: the step is the one training loop's forward, backward,
    // clipping, AdamW update and EMA, after two warm-up steps.
    std::vector<sudoku::Batch> batches;
    for (int64_t i = 0; i < o.train_steps + 2; ++i) batches.push_back(sudoku::make_training_batch(n, o.batch, rng));
    std::vector<double> step_ms;
    train::LoopTask task;
    task.model = trained.model.get();
    task.ema_model = averaged.model.get();
    task.loss = [&](int64_t step, std::mt19937_64&, at::Generator& noise) {
      const sudoku::Batch& batch = batches[step];
      return gsdm::training_loss(trained.model, trained.schedule, batch.x0, batch.observed, noise);
    };
    task.on_step = [&](int64_t step, double seconds) {
      if (step > 2) step_ms.push_back(1e3 * seconds);
      return true;
    };
    train::LoopOptions loop;
    loop.steps = o.train_steps + 2;
    loop.learning_rate = 2e-5;
    loop.show_progress = false;
    train::run_training(task, loop, global.seed);
    std::sort(step_ms.begin(), step_ms.end());
    const double median_step_ms = step_ms[step_ms.size() / 2];
    std::printf("%-7s training step %8.1f ms/step (median of %ld)\n", attention.c_str(), median_step_ms,
                static_cast<long>(o.train_steps));
    nlohmann::json row = {{"problem", o.problem}, {"size", o.size}, {"attention", attention},
                          {"batch", o.batch}, {"threads", global.threads},
                          {"device", global.device.str()}, {"train_step_ms", median_step_ms}};

    trained.model->eval();
    std::vector<sudoku::Grid> puzzles;
    for (int64_t i = 0; i < o.sample_puzzles; ++i) {
      const sudoku::Grid solution = sudoku::generate_solution(n, rng);
      puzzles.push_back(sudoku::observe_random_cells(solution, solution.size() / 2, rng));
    }
    auto time_sampler = [&](sudoku::Sampler sampler) {
      sudoku::SolveOptions options;
      options.generator = at::make_generator<at::CPUGeneratorImpl>(global.seed);
      options.sampler = sampler;
      options.ddim_steps = o.sample_steps;
      const auto start = Clock::now();
      sudoku::solve(trained.model, trained.schedule, puzzles, options);
      return seconds_since(start) / static_cast<double>(puzzles.size());
    };
    const double ddim = time_sampler(sudoku::Sampler::ddim);
    std::printf("%-7s DDIM (%ld steps)        %8.3f s/puzzle (batch of %ld)\n", attention.c_str(),
                static_cast<long>(o.sample_steps), ddim, static_cast<long>(o.sample_puzzles));
    row["sample_steps"] = o.sample_steps;
    row["ddim_seconds_per_puzzle"] = ddim;
    if (o.ancestral) {
      const double ancestral = time_sampler(sudoku::Sampler::ancestral);
      std::printf("%-7s ancestral (%ld steps)  %8.3f s/puzzle (batch of %ld)\n", attention.c_str(),
                  static_cast<long>(trained.schedule.steps()), ancestral,
                  static_cast<long>(o.sample_puzzles));
      row["ancestral_seconds_per_puzzle"] = ancestral;
    }
    row["sample_batch"] = o.sample_puzzles;
    rows.push_back(row);
  }
  if (!o.json_path.empty()) write_json_file(o.json_path, rows);
}

}  // namespace

void register_bench_gsdm(CLI::App& bench, const GlobalOptions& global, Action& action) {
  auto o = std::make_shared<BenchGsdmOptions>();
  CLI::App* cmd = bench.add_subcommand("gsdm", "GSDM training step and sampling time (Sudoku)");
  cmd->add_option("--problem", o->problem, "Problem")->check(CLI::IsMember({"sudoku"}))->capture_default_str();
  cmd->add_option("--size", o->size, "Sudoku side")->check(CLI::IsMember({4, 9, 16, 25}))->capture_default_str();
  cmd->add_option("--batch", o->batch, "Training batch")->check(positive())->capture_default_str();
  cmd->add_option("--attention", o->attention, "Mechanisms to compare")
      ->check(CLI::IsMember({"sparse", "gather", "dense"}))
      ->capture_default_str();
  cmd->add_option("--train-steps", o->train_steps, "Timed training steps")->check(positive())->capture_default_str();
  cmd->add_option("--sample-puzzles", o->sample_puzzles, "Puzzles sampled together")
      ->check(positive())
      ->capture_default_str();
  cmd->add_option("--sample-steps", o->sample_steps, "DDIM steps")->check(positive())->capture_default_str();
  cmd->add_flag("--ancestral,!--no-ancestral", o->ancestral, "Also time the 1000-step ancestral sampler")
      ->capture_default_str();
  cmd->add_option("--json", o->json_path, "Write one JSON row per attention mechanism")
      ->check(writable_file());
  cmd->callback([o, &global, &action] { action = [o, &global] { run(*o, global); }; });
}

}  // namespace structdiff::cli
