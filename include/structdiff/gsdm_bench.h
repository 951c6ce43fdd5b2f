// A GSDM's training step and sampling timed as `structdiff bench gsdm` reports them.
#pragma once

#include <cstdint>

#include "structdiff/gsdm_problems.h"

namespace structdiff::gsdm {

// Median milliseconds of the one training loop's step (forward, backward, clipping, AdamW, EMA)
// over `steps` steps after two warm-up steps, on batches of `batch` examples of the problem made
// before the clock starts.
double median_training_step_ms(ProblemModel& trained, ProblemModel& averaged, int64_t batch,
                               int64_t steps, uint64_t seed);

// Seconds per example of sampling `examples` held-out examples together with `sampler` (DDIM
// with `ddim_steps`).
double sampling_seconds_per_example(ProblemModel& trained, Sampler sampler, int64_t examples,
                                    int64_t ddim_steps, uint64_t seed);

}  // namespace structdiff::gsdm
