#include "structdiff/gsdm_training.h"

#include <string>
#include <vector>

#include <torch/torch.h>

#include "structdiff/model_tensors.h"
#include "structdiff/runtime.h"
#include "structdiff/training_loop.h"

namespace structdiff::gsdm {

std::vector<train::LossPart> loss_parts(Gsdm model, const diffusion::NoiseSchedule& schedule,
                                        const torch::Tensor& x0, const torch::Tensor& observed,
                                        const diffusion::TrainingExample& whole,
                                        const std::vector<train::Shard>& parts) {
  const int64_t batch = x0.size(0);
  std::vector<train::LossPart> losses;
  for (const train::Shard& part : parts) {
    const int64_t begin = part.begin(batch), end = part.end(batch);
    losses.push_back({static_cast<double>(end - begin), [=, &schedule] {
                        return training_loss(model, schedule, x0, observed, whole, begin, end);
                      }});
  }
  return losses;
}

train::LoopOptions TrainingOptions::default_loop() {
  train::LoopOptions loop;
  loop.learning_rate = 2e-5;
  return loop;
}

double activation_bytes_per_example(const GsdmConfig& config, double nodes, double attended_pairs) {
  return static_cast<double>(config.blocks) *
         block_activation_bytes(config, nodes, attended_pairs, /*floats_per_node=*/16.0);
}

double training_memory_bytes(const Gsdm& model, const GsdmStructure& structure, int64_t batch) {
  // Per weight a gradient, two moments and the update's temporary, 4 bytes each.
  const double per_example = activation_bytes_per_example(
      model->config(), static_cast<double>(structure.num_nodes), structure.attended_pairs());
  return per_example * static_cast<double>(batch) +
         4.0 * 4.0 * static_cast<double>(train::parameter_count(*model));
}

TrainingResult train(Gsdm model, Gsdm ema_model, const diffusion::NoiseSchedule& schedule,
                     const TrainingProblem& problem, const TrainingOptions& options,
                     uint64_t data_seed) {
  if (options.batch < 1) {
    throw std::invalid_argument("--batch must be >= 1, got " + std::to_string(options.batch));
  }
  const GsdmStructure& largest =
      problem.largest_structure ? *problem.largest_structure : *model->home_structure();
  require_memory(training_memory_bytes(model, largest, options.batch),
                 "a training batch of " + std::to_string(options.batch));
  train::LoopTask task;
  task.model = model.get();
  task.ema_model = ema_model.get();
  train::check_even_split(options.batch, options.loop.ranks);
  task.loss_parts = [&](int64_t, std::mt19937_64& rng, at::Generator& noise,
                        const std::vector<train::Shard>& parts) {
    const TrainingBatch batch = problem.make_batch(options.batch, rng);
    model->use_structure(batch.structure ? batch.structure : model->home_structure());
    const diffusion::TrainingExample whole = training_example(model, schedule, batch.x0, noise);
    return loss_parts(model, schedule, batch.x0, batch.observed, whole, parts);
  };
  if (problem.validate) task.validate = [&] { return problem.validate(ema_model); };
  task.stop_after = problem.stop_after;
  task.metadata = problem.metadata;
  TrainingResult result = train::run_training(task, options.loop, data_seed);
  model->use_structure(model->home_structure());
  return result;
}

}  // namespace structdiff::gsdm
