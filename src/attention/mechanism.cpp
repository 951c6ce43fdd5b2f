// The Attention module: one interface over every registered mechanism (see
// mechanism_registry.h), with FAVOR+'s random features and their redraws.
#include <stdexcept>
#include <string>
#include <utility>

#include <ATen/CPUGeneratorImpl.h>

#include "structdiff/attention.h"
#include "structdiff/mechanism_registry.h"

namespace structdiff {

AttentionImpl::AttentionImpl(AttentionConfig config) : config_(std::move(config)) {
  if (config_.head_dim < 1) {
    throw std::invalid_argument("Attention: head_dim must be >= 1, got " +
                                std::to_string(config_.head_dim));
  }
  if (config_.eps < 0) throw std::invalid_argument("Attention: eps must be >= 0");
  if (config_.redraw_interval < 0) {
    throw std::invalid_argument("Attention: redraw_interval must be >= 0");
  }
  if (mechanism_info(config_.mechanism).uses_features) {
    if (config_.num_features == 0) config_.num_features = default_favor_features(config_.head_dim);
    if (config_.num_features < 1) {
      throw std::invalid_argument("Attention: num_features must be >= 1, got " +
                                  std::to_string(config_.num_features));
    }
    at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(config_.seed);
    projection_ = register_buffer(
        "projection", favor_projection(config_.num_features, config_.head_dim,
                                       config_.orthogonal_features, generator));
    generator_state_ = register_buffer("generator_state", generator.get_state());
    calls_since_redraw_ = register_buffer("calls_since_redraw", torch::zeros({}, torch::kLong));
  }
}

void AttentionImpl::redraw_features() {
  if (!mechanism_info(config_.mechanism).uses_features) return;
  torch::NoGradGuard no_grad;
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>();
  generator.set_state(generator_state_.cpu());  // the buffer moves with the model
  projection_.copy_(favor_projection(config_.num_features, config_.head_dim,
                                     config_.orthogonal_features, generator,
                                     projection_.scalar_type()));
  generator_state_.copy_(generator.get_state());
  calls_since_redraw_.zero_();
}

MechanismArguments AttentionImpl::arguments(const PatternBatch* pattern) const {
  MechanismArguments arguments;
  arguments.pattern = pattern;
  arguments.scaling = config_.scaling;
  if (config_.eps > 0) arguments.eps = config_.eps;  // 0 asks for the mechanism's default
  arguments.diffusivity_norm = config_.diffusivity_norm;
  arguments.projection = projection_;
  return arguments;
}

torch::Tensor AttentionImpl::forward(const torch::Tensor& q, const torch::Tensor& k,
                                     const torch::Tensor& v, const PatternBatch* pattern) {
  const MechanismInfo& mechanism = mechanism_info(config_.mechanism);
  // The computations ignore a pattern they cannot use, and refuse to run without one they need.
  if (pattern != nullptr && mechanism.pattern_use == PatternUse::none) {
    throw std::invalid_argument(std::string("attention mechanism '") + mechanism.name +
                                "' cannot be restricted to a pattern");
  }
  if (q.defined() && q.dim() == 4 && q.size(3) != config_.head_dim) {
    throw std::invalid_argument("Attention configured for head_dim " +
                                std::to_string(config_.head_dim) + " got inputs with head_dim " +
                                std::to_string(q.size(3)));
  }
  if (mechanism.uses_features) {
    if (is_training() && config_.redraw_interval > 0 &&
        calls_since_redraw() >= config_.redraw_interval) {
      redraw_features();
    }
    if (is_training()) calls_since_redraw_.add_(1);
  }
  MechanismArguments arguments = this->arguments(pattern);
  if (arguments.projection.defined()) {
    arguments.projection = arguments.projection.to(q.device(), q.scalar_type());
  }
  return mechanism.compute(q, k, v, arguments);
}

}  // namespace structdiff
