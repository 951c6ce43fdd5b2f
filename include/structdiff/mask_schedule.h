// Masked (absorbing-state) discrete diffusion's schedule (MDLM, Sahoo et al. 2024; MD4, Shi et al.
// 2024): at time t in [0, 1] each latent discrete variable still shows its value with
// probability alpha(t) and is the mask token otherwise; alpha(0) = 1, alpha(1) = 0.
#pragma once

#include <string>
#include <vector>

#include <torch/types.h>

namespace structdiff::diffusion {

enum class MaskScheduleKind { linear, cosine };  // alpha = 1 - t | alpha = cos(pi t / 2)
MaskScheduleKind parse_mask_schedule(const std::string& name);  // "linear" | "cosine"
std::vector<std::string> mask_schedule_names();
std::string mask_schedule_name(MaskScheduleKind kind);

// alpha(t), elementwise; t in [0, 1].
torch::Tensor mask_alpha(MaskScheduleKind kind, const torch::Tensor& t);
// The continuous-time ELBO's weight on each masked variable's cross-entropy, -alpha'(t) / (1 -
// alpha(t)), elementwise; t in (0, 1] (it grows as 1/t towards 0).
torch::Tensor mask_elbo_weight(MaskScheduleKind kind, const torch::Tensor& t);
// The t at which alpha(t) = alpha, elementwise: what a sampler that unmasks in its own order
// tells the network when a fraction 1 - alpha of the latent variables is still masked.
torch::Tensor mask_time_of_alpha(MaskScheduleKind kind, const torch::Tensor& alpha);

}  // namespace structdiff::diffusion
