// One DIFFormerConv layer timed as `structdiff bench difformer` reports it.
#pragma once

#include <cstdint>

#include "structdiff/difformer.h"

namespace structdiff::difformer {

struct ConvTiming {
  double ms = 0;       // the median forward + backward
  double peak_mb = 0;  // of one forward + backward after a warm-up one
};

// Forward and backward of one DIFFormerConv layer (heads 1, no graph) of width `dim` over `nodes`
// random instances: a warm-up pass, one measured for memory, then the median of at least
// `min_runs` runs and more while they fit in `budget_seconds`.
ConvTiming conv_timing(Diffusivity diffusivity, int64_t nodes, int64_t dim, int min_runs,
                       double budget_seconds, uint64_t seed);

}  // namespace structdiff::difformer
