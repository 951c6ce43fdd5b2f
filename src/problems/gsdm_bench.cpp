#include "structdiff/gsdm_bench.h"

#include <random>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "structdiff/gsdm_training.h"
#include "structdiff/runtime.h"
#include "structdiff/step_timing.h"

namespace structdiff::gsdm {

double median_training_step_ms(ProblemModel& trained, ProblemModel& averaged, int64_t batch,
                               int64_t steps, uint64_t seed) {
  // Through the size gate before the batches are made: they are all made before the clock starts
  // (a state and an observed mask per example), then one step's memory.
  const double batches_bytes = 8.0 * static_cast<double>(trained.model->layout().width) *
                               static_cast<double>(batch) * static_cast<double>(steps + 2);
  require_memory(
      batches_bytes + training_memory_bytes(trained.model, *trained.model->structure(), batch),
      "--batch " + std::to_string(batch) + " with --train-steps " + std::to_string(steps));
  std::mt19937_64 rng(seed);
  std::vector<TrainingBatch> batches;
  for (int64_t i = 0; i < steps + 2; ++i) {
    batches.push_back(trained.problem->make_examples(trained.graph, trained.options, batch, rng));
  }
  train::LoopTask task;
  task.model = trained.model.get();
  task.ema_model = averaged.model.get();
  task.loss_parts = [&](int64_t step, std::mt19937_64&, at::Generator& noise,
                        const std::vector<train::Shard>& parts) {
    const TrainingBatch& examples = batches[step];
    return loss_parts(trained.model, trained.schedule, examples.x0, examples.observed,
                      training_example(trained.model, trained.schedule, examples.x0, noise), parts);
  };
  train::LoopOptions loop;
  loop.learning_rate = 2e-5;
  train::StepTimingBudget budget;
  budget.warmup_steps = 2;
  budget.min_steps = steps;
  return 1e3 * train::median_step_seconds(task, loop, budget, seed);
}

double sampling_seconds_per_example(ProblemModel& trained, Sampler sampler, int64_t examples,
                                    int64_t ddim_steps, uint64_t seed) {
  require_sampling_memory(trained, examples, examples,
                          "--sample-examples " + std::to_string(examples));
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
