// Tracformer's parts timed as `structdiff bench tracformer` reports them.
#pragma once

#include <cstdint>

#include "structdiff/tracformer.h"

namespace structdiff::tracformer {

// Median milliseconds of forward and backward through `config.layers` encoder blocks over prefix
// patterns of `length` tokens (batch 1), as the model runs them; at least two runs, more while
// they fit in `budget_seconds`.
double encoder_pass_ms(const Config& config, int64_t length, uint64_t seed, double budget_seconds);

struct TrainingStepTiming {
  double seconds = 0;  // median over the timed steps
  int64_t non_embedding_parameters = 0;
};
// Training steps (forward, backward, clipping, AdamW) through the one loop on random text, crops
// of config.block_size, spans hidden (all for ar): the median of `steps` steps after a first one,
// which builds the patterns.
TrainingStepTiming training_step(const Config& config, int64_t batch, int64_t steps, uint64_t seed);

// Median milliseconds of `model` CAR-filling the middle half of `sequences` random sequences of
// its block size at once, with the KV cache or by re-encoding.
double infill_ms(Tracformer& model, int64_t sequences, bool cache, uint64_t seed, double budget_seconds);

}  // namespace structdiff::tracformer
