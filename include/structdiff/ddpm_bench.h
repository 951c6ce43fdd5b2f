// The DDPM's training step timed as `structdiff bench ddpm` reports it.
#pragma once

#include <cstdint>

#include "structdiff/unet.h"

namespace structdiff::ddpm {

struct StepTiming {
  double ms = 0;       // the median step
  double peak_mb = 0;  // of the whole run: reached in the first step, which allocates AdamW's state
};

// Steps of the one training loop (forward, backward, clipping, AdamW, EMA) of a U-Net of `config`
// on one fixed random batch of `batch` images: a warm-up step, then at least `min_steps` more
// until `budget_seconds` have passed.
StepTiming training_step_timing(const unet::UNetConfig& config, int64_t batch, int min_steps,
                                double budget_seconds, uint64_t seed);

}  // namespace structdiff::ddpm
