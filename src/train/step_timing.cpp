#include "structdiff/step_timing.h"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <vector>

namespace structdiff::train {

double median_step_seconds(LoopTask task, LoopOptions loop, const StepTimingBudget& budget, uint64_t seed) {
  if (budget.warmup_steps < 0 || budget.min_steps < 1) {
    throw std::invalid_argument("step timing needs at least one timed step after a non-negative warm-up");
  }
  std::vector<double> seconds;
  double timed_seconds = 0;
  task.on_step = [&](int64_t step, double step_seconds) {
    if (step <= budget.warmup_steps) return true;
    seconds.push_back(step_seconds);
    timed_seconds += step_seconds;
    return static_cast<int64_t>(seconds.size()) < budget.min_steps || timed_seconds < budget.budget_seconds;
  };
  loop.steps = std::numeric_limits<int64_t>::max();
  loop.show_progress = false;
  run_training(task, loop, seed);
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2];
}

}  // namespace structdiff::train
