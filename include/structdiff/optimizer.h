// The training loop's optimiser and gradient clipping.
#pragma once

#include <vector>

#include <torch/optim/adamw.h>

namespace structdiff::train {

// torch::optim::AdamW (same options, state and checkpoint format, same arithmetic) whose step
// updates each CPU parameter tensor in one pass instead of eight tensor operations; other devices
// and amsgrad take libtorch's step.
class FusedAdamW : public torch::optim::AdamW {
 public:
  using torch::optim::AdamW::AdamW;
  torch::Tensor step(LossClosure closure = nullptr) override;
};

// Scales the gradients of `parameters` so that their joint L2 norm is at most `max_norm`, as
// torch::nn::utils::clip_grad_norm_ does, and returns the norm before scaling; one pass per
// gradient to measure and, only when the norm exceeds the limit, one to scale.
double clip_gradient_norm(const std::vector<torch::Tensor>& parameters, double max_norm);

}  // namespace structdiff::train
