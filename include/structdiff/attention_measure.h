// Attention mechanisms measured as `structdiff bench attention` reports them: forward + backward
// time over a workload's patterns, FLOP and byte rates from the mechanism registry's counts, CPU
// peak memory, the error against the float64 reference, and what the machine itself reaches.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include "structdiff/mechanism_registry.h"
#include "structdiff/pattern.h"

namespace structdiff {

struct AttentionWorkload {
  std::string name;
  std::string description;
  int64_t batch = 0, heads = 0, head_dim = 0;
  // One attention call per pattern, e.g. one per layer of an encoder stack.
  std::vector<AttentionPattern> patterns;
};

// How long each timing runs: at least `min_reps` runs, more while they fit in `min_seconds`.
struct TimingBudget {
  double min_seconds = 1.0;
  int min_reps = 3;
};

struct AttentionMeasurement {
  bool restricted = false;  // ran on the workload's patterns rather than every token
  double ms = 0, flops = 0, bytes = 0, peak_mb = 0, max_abs_error = 0;  // peak_mb: NaN off the CPU
  double gflops_per_second() const { return flops / (ms * 1e6); }
  double gbytes_per_second() const { return bytes / (ms * 1e6); }
};

// What the machine itself reaches on `device`: a square matrix product (GFLOP/s) and a large
// copy (GB/s, bytes read plus written). A shared VM's speed drifts within minutes, so measure it
// right before what it is compared with.
struct MachineLimits {
  double matmul_gflops = 0, copy_gbytes_per_second = 0;
};
MachineLimits measure_machine(c10::ScalarType dtype, c10::Device device, const TimingBudget& budget);

// Forward + backward of `mechanism` over every pattern of `w` (mechanisms that take no pattern
// attend to every token, once per pattern as the others), inputs drawn from `seed`.
AttentionMeasurement measure_attention(const AttentionWorkload& w, const MechanismInfo& mechanism,
                                       c10::ScalarType dtype, c10::Device device,
                                       const TimingBudget& budget, uint64_t seed);

}  // namespace structdiff
