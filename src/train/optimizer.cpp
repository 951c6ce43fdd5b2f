#include <cmath>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include <torch/torch.h>

#include "structdiff/optimizer.h"
#include "train/adamw_kernel.h"

namespace structdiff::train {
namespace {

// What the fused passes take: CPU, contiguous, float or double (a GPU model or an odd layout
// takes libtorch's path).
bool fusable(const torch::Tensor& t) {
  return t.device().is_cpu() && t.layout() == torch::kStrided && t.is_contiguous() &&
         (t.scalar_type() == torch::kFloat || t.scalar_type() == torch::kDouble);
}

// A tensor the pass reads or writes beside `parameter`: fusable and of its type.
bool fusable_beside(const torch::Tensor& t, const torch::Tensor& parameter) {
  return fusable(t) && t.scalar_type() == parameter.scalar_type();
}

// libtorch keys its optimizer state by the parameter's TensorImpl: as a printed pointer in 1.x,
// as the pointer itself in 2.x.
template <typename Map>
typename Map::key_type state_key(const Map&, const torch::Tensor& parameter) {
  if constexpr (std::is_same_v<typename Map::key_type, std::string>) {
    std::ostringstream text;
    text << parameter.unsafeGetTensorImpl();
    return text.str();
  } else {
    return parameter.unsafeGetTensorImpl();
  }
}

}  // namespace

torch::Tensor FusedAdamW::step(LossClosure closure) {
  for (const auto& group : param_groups_) {
    const auto& options = static_cast<const torch::optim::AdamWOptions&>(group.options());
    for (const torch::Tensor& p : group.params()) {
      const bool plain = !p.grad().defined() || (fusable(p) && fusable_beside(p.grad(), p));
      if (options.amsgrad() || !plain) {
        return torch::optim::AdamW::step(std::move(closure));
      }
    }
  }
  torch::NoGradGuard no_grad;
  torch::Tensor loss;
  if (closure != nullptr) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  for (auto& group : param_groups_) {
    const auto& options = static_cast<const torch::optim::AdamWOptions&>(group.options());
    kernels::AdamWUpdate update;
    update.learning_rate = options.lr();
    update.weight_decay = options.weight_decay();
    update.beta1 = std::get<0>(options.betas());
    update.beta2 = std::get<1>(options.betas());
    update.eps = options.eps();
    for (torch::Tensor& p : group.params()) {
      if (!p.grad().defined()) continue;
      auto& slot = state_[state_key(state_, p)];
      if (!slot) {
        auto fresh = std::make_unique<torch::optim::AdamWParamState>();
        fresh->step(0);
        fresh->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        fresh->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        slot = std::move(fresh);
      }
      auto& state = static_cast<torch::optim::AdamWParamState&>(*slot);
      state.step(state.step() + 1);
      update.bias_correction1 = 1 - std::pow(update.beta1, state.step());
      update.bias_correction2 = 1 - std::pow(update.beta2, state.step());
      // A loaded checkpoint's moments may be strided; the pass needs them contiguous.
      if (!fusable_beside(state.exp_avg(), p)) {
        state.exp_avg(state.exp_avg().contiguous().to(p.dtype()));
      }
      if (!fusable_beside(state.exp_avg_sq(), p)) {
        state.exp_avg_sq(state.exp_avg_sq().contiguous().to(p.dtype()));
      }
      AT_DISPATCH_FLOATING_TYPES(p.scalar_type(), "fused_adamw", [&] {
        kernels::adamw_update<scalar_t>(update, p.numel(), p.data_ptr<scalar_t>(),
                                        p.grad().data_ptr<scalar_t>(),
                                        state.exp_avg().data_ptr<scalar_t>(),
                                        state.exp_avg_sq().data_ptr<scalar_t>());
      });
      // Written through its pointer: count the change as libtorch's in-place operations do, so
      // autograd still refuses a graph that saved the old values.
      p.unsafeGetTensorImpl()->bump_version();
    }
  }
  return loss;
}

double clip_gradient_norm(const std::vector<torch::Tensor>& parameters, double max_norm) {
  std::vector<torch::Tensor> gradients;
  for (const torch::Tensor& p : parameters) {
    if (!p.grad().defined()) continue;
    if (!fusable(p.grad())) return torch::nn::utils::clip_grad_norm_(parameters, max_norm);
    gradients.push_back(p.grad());
  }
  double squares = 0;
  for (const torch::Tensor& g : gradients) {
    AT_DISPATCH_FLOATING_TYPES(g.scalar_type(), "clip_gradient_norm", [&] {
      squares += kernels::sum_of_squares<scalar_t>(g.numel(), g.data_ptr<scalar_t>());
    });
  }
  const double norm = std::sqrt(squares);
  const double coefficient = max_norm / (norm + 1e-6);
  if (coefficient < 1) {
    torch::NoGradGuard no_grad;
    for (torch::Tensor& g : gradients) g.mul_(coefficient);
  }
  return norm;
}

}  // namespace structdiff::train
