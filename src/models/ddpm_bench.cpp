#include "structdiff/ddpm_bench.h"

#include <algorithm>

#include <ATen/CPUGeneratorImpl.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "structdiff/ddpm.h"
#include "structdiff/random.h"
#include "structdiff/runtime.h"
#include "structdiff/step_timing.h"

namespace structdiff::ddpm {

StepTiming training_step_timing(const unet::UNetConfig& config, int64_t batch, int min_steps,
                                double budget_seconds, uint64_t seed) {
  const nlohmann::json metadata = model_metadata(config, default_schedule());
  const auto build = [&] {
    DefaultGeneratorGuard seeded(seed);  // the bench's initial weights
    return build_model(metadata);
  };
  Model model = build(), averaged = build();
  const torch::Tensor images = to_model_space(
      random::uniform({batch, config.image_channels, config.image_size, config.image_size},
                      at::make_generator<at::CPUGeneratorImpl>(seed), torch::kFloat));
  train::LoopTask task;
  task.model = model.net.ptr().get();
  task.ema_model = averaged.net.ptr().get();
  task.loss = [&](int64_t, std::mt19937_64&, at::Generator& noise) {
    return training_loss(model, images, noise);
  };
  train::StepTimingBudget budget;
  budget.min_steps = std::max(min_steps, 1);
  budget.budget_seconds = budget_seconds;
  StepTiming timing;
  PeakMemoryTracker tracker;
  timing.ms = 1e3 * train::median_step_seconds(task, {}, budget, seed);
  timing.peak_mb = static_cast<double>(tracker.peak_bytes()) / (1024.0 * 1024.0);
  return timing;
}

}  // namespace structdiff::ddpm
