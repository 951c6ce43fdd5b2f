// Internals shared by the schedule and the parameterisations (not part of the public interface).
#pragma once

#include <torch/types.h>

#include <string>

#include "structdiff/diffusion.h"

namespace structdiff::diffusion::detail {

// sqrt(abar_t) and sqrt(1 - abar_t) for each sample, in x's dtype and device, shaped
// (batch, 1, ..., 1) to broadcast over x: x_t = signal * x0 + noise * eps.
struct NoiseScales {
  torch::Tensor signal, noise;
};
// Validates t (int64, one step in [0, steps) per sample of x); `caller` prefixes error messages.
NoiseScales noise_scales(const NoiseSchedule& schedule, const torch::Tensor& t,
                         const torch::Tensor& x, const std::string& caller);

void check_same_shape(const torch::Tensor& a, const std::string& a_name, const torch::Tensor& b,
                      const std::string& b_name, const std::string& caller);

}  // namespace structdiff::diffusion::detail
