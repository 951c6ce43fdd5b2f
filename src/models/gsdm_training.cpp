#include "structdiff/gsdm_training.h"

#include <torch/torch.h>

namespace structdiff::gsdm {

TrainingResult train(Gsdm model, Gsdm ema_model, const diffusion::NoiseSchedule& schedule,
                     const TrainingProblem& problem, const TrainingOptions& options,
                     uint64_t data_seed) {
  train::LoopTask task;
  task.model = model.get();
  task.ema_model = ema_model.get();
  task.loss = [&](std::mt19937_64& rng) {
    TrainingBatch batch = problem.make_batch(options.batch, rng);
    return training_loss(model, schedule, batch.x0, batch.observed);
  };
  if (problem.validate) task.validate = [&] { return problem.validate(ema_model); };
  task.metadata = problem.metadata;
  return train::run_training(task, options, data_seed);
}

}  // namespace structdiff::gsdm
