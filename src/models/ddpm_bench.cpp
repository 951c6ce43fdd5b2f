#include "structdiff/ddpm_bench.h"

#include <algorithm>
#include <limits>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "structdiff/ddpm.h"
#include "structdiff/random.h"
#include "structdiff/runtime.h"
#include "structdiff/training_loop.h"

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
  std::vector<double> step_ms;
  double measured_seconds = 0;
  train::LoopTask task;
  task.model = model.net.ptr().get();
  task.ema_model = averaged.net.ptr().get();
  task.loss = [&](int64_t, std::mt19937_64&, at::Generator& noise) {
    return training_loss(model, images, noise);
  };
  task.on_step = [&](int64_t step, double seconds) {
    if (step == 1) return true;
    step_ms.push_back(1e3 * seconds);
    measured_seconds += seconds;
    return static_cast<int>(step_ms.size()) < std::max(min_steps, 1) || measured_seconds < budget_seconds;
  };
  train::LoopOptions loop;
  loop.steps = std::numeric_limits<int64_t>::max();
  loop.show_progress = false;
  StepTiming timing;
  {
    PeakMemoryTracker tracker;
    train::run_training(task, loop, seed);
    timing.peak_mb = static_cast<double>(tracker.peak_bytes()) / (1024.0 * 1024.0);
  }
  std::sort(step_ms.begin(), step_ms.end());
  timing.ms = step_ms[step_ms.size() / 2];
  return timing;
}

}  // namespace structdiff::ddpm
