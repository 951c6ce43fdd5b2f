#include "structdiff/gsdm_bench.h"

#include <algorithm>
#include <random>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "structdiff/training_loop.h"

namespace structdiff::gsdm {

double median_training_step_ms(ProblemModel& trained, ProblemModel& averaged, int64_t batch,
                               int64_t steps, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<TrainingBatch> batches;
  for (int64_t i = 0; i < steps + 2; ++i) {
    batches.push_back(trained.problem->make_examples(trained.graph, trained.options, batch, rng));
  }
  std::vector<double> step_ms;
  train::LoopTask task;
  task.model = trained.model.get();
  task.ema_model = averaged.model.get();
  task.loss_parts = [&](int64_t step, std::mt19937_64&, at::Generator& noise,
                        const std::vector<train::Shard>& parts) {
    const TrainingBatch& examples = batches[step];
    return loss_parts(trained.model, trained.schedule, examples.x0, examples.observed,
                      training_example(trained.model, trained.schedule, examples.x0, noise), parts);
  };
  task.on_step = [&](int64_t step, double seconds) {
    if (step > 2) step_ms.push_back(1e3 * seconds);
    return true;
  };
  train::LoopOptions loop;
  loop.steps = steps + 2;
  loop.learning_rate = 2e-5;
  loop.show_progress = false;
  train::run_training(task, loop, seed);
  std::sort(step_ms.begin(), step_ms.end());
  return step_ms[step_ms.size() / 2];
}

double sampling_seconds_per_example(ProblemModel& trained, Sampler sampler, int64_t examples,
                                    int64_t ddim_steps, uint64_t seed) {
  std::mt19937_64 rng(seed + 1);
  const auto& make = trained.problem->make_test_examples ? trained.problem->make_test_examples
                                                         : trained.problem->make_examples;
  const TrainingBatch held_out = make(trained.graph, trained.options, examples, rng);
  SampleOptions options;
  options.generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  options.sampler = sampler;
  options.ddim_steps = ddim_steps;
  trained.model->eval();
  const nlohmann::json metrics = evaluate(trained, held_out, options, examples);
  return metrics["seconds"].get<double>() / static_cast<double>(examples);
}

}  // namespace structdiff::gsdm
