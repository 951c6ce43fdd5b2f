// Training steps of the one loop timed for benchmarks: the median step after a warm-up.
#pragma once

#include <cstdint>

#include "structdiff/training_loop.h"

namespace structdiff::train {

struct StepTimingBudget {
  int64_t warmup_steps = 1;   // untimed first steps: they allocate the optimiser state, build patterns
  int64_t min_steps = 1;      // timed steps at least
  double budget_seconds = 0;  // and more while the timed steps total less than this
};

// Runs `task` through the loop with `loop`'s options (its step count and progress bar are the
// budget's: no bar) and returns the median wall time of the timed steps, in seconds. The task's
// own on_step hook is replaced.
double median_step_seconds(LoopTask task, LoopOptions loop, const StepTimingBudget& budget, uint64_t seed);

}  // namespace structdiff::train
