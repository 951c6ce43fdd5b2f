#include <stdexcept>
#include <string>
#include <utility>

#include <ATen/CPUGeneratorImpl.h>

#include "structdiff/attention.h"

namespace structdiff {
namespace {

const std::pair<Mechanism, const char*> kNames[] = {
    {Mechanism::dense, "dense"},
    {Mechanism::sparse, "sparse"},
    {Mechanism::gather, "gather"},
    {Mechanism::favor_softmax, "favor-softmax"},
    {Mechanism::favor_relu, "favor-relu"},
    {Mechanism::linear, "linear"},
    {Mechanism::diffusivity_simple, "diffusivity-simple"},
    {Mechanism::diffusivity_sigmoid, "diffusivity-sigmoid"},
};

bool is_favor(Mechanism m) { return m == Mechanism::favor_softmax || m == Mechanism::favor_relu; }

}  // namespace

std::vector<std::string> mechanism_names() {
  std::vector<std::string> names;
  for (const auto& entry : kNames) names.emplace_back(entry.second);
  return names;
}

Mechanism parse_mechanism(const std::string& name) {
  for (const auto& entry : kNames) {
    if (name == entry.second) return entry.first;
  }
  std::string known;
  for (const auto& entry : kNames) known += std::string(known.empty() ? "" : ", ") + entry.second;
  throw std::invalid_argument("unknown attention mechanism '" + name + "' (known: " + known + ")");
}

std::string mechanism_name(Mechanism mechanism) {
  for (const auto& entry : kNames) {
    if (entry.first == mechanism) return entry.second;
  }
  throw std::invalid_argument("mechanism_name: invalid enum value");
}

AttentionImpl::AttentionImpl(AttentionConfig config) : config_(std::move(config)) {
  if (config_.head_dim < 1) {
    throw std::invalid_argument("Attention: head_dim must be >= 1, got " +
                                std::to_string(config_.head_dim));
  }
  if (config_.eps < 0) throw std::invalid_argument("Attention: eps must be >= 0");
  if (config_.redraw_interval < 0) {
    throw std::invalid_argument("Attention: redraw_interval must be >= 0");
  }
  if (is_favor(config_.mechanism)) {
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
  if (!is_favor(config_.mechanism)) return;
  torch::NoGradGuard no_grad;
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>();
  generator.set_state(generator_state_);
  projection_.copy_(favor_projection(config_.num_features, config_.head_dim,
                                     config_.orthogonal_features, generator,
                                     projection_.scalar_type()));
  generator_state_.copy_(generator.get_state());
  calls_since_redraw_.zero_();
}

torch::Tensor AttentionImpl::forward(const torch::Tensor& q, const torch::Tensor& k,
                                     const torch::Tensor& v, const PatternBatch* pattern) {
  const Mechanism m = config_.mechanism;
  const bool takes_pattern = m == Mechanism::dense || m == Mechanism::sparse ||
                             m == Mechanism::gather || m == Mechanism::diffusivity_sigmoid;
  if (pattern != nullptr && !takes_pattern) {
    throw std::invalid_argument("attention mechanism '" + mechanism_name(m) +
                                "' cannot be restricted to a pattern");
  }
  if (pattern == nullptr && (m == Mechanism::sparse || m == Mechanism::gather)) {
    throw std::invalid_argument("attention mechanism '" + mechanism_name(m) +
                                "' needs a pattern");
  }
  if (q.defined() && q.dim() == 4 && q.size(3) != config_.head_dim) {
    throw std::invalid_argument("Attention configured for head_dim " +
                                std::to_string(config_.head_dim) + " got inputs with head_dim " +
                                std::to_string(q.size(3)));
  }
  switch (m) {
    case Mechanism::dense: return dense_attention(q, k, v, config_.scaling, pattern);
    case Mechanism::sparse: return sparse_attention(q, k, v, *pattern, config_.scaling);
    case Mechanism::gather: return gather_attention(q, k, v, *pattern, config_.scaling);
    case Mechanism::favor_softmax:
    case Mechanism::favor_relu: {
      if (is_training() && config_.redraw_interval > 0 &&
          calls_since_redraw() >= config_.redraw_interval) {
        redraw_features();
      }
      if (is_training()) calls_since_redraw_.add_(1);
      const FavorKernel kernel =
          m == Mechanism::favor_softmax ? FavorKernel::softmax : FavorKernel::relu;
      torch::Tensor projection = projection_.to(q.device(), q.scalar_type());
      return config_.eps > 0 ? favor_attention(q, k, v, projection, kernel, config_.eps)
                             : favor_attention(q, k, v, projection, kernel);
    }
    case Mechanism::linear:
      return config_.eps > 0 ? linear_attention(q, k, v, config_.eps) : linear_attention(q, k, v);
    case Mechanism::diffusivity_simple: return diffusivity_simple(q, k, v, config_.diffusivity_norm);
    case Mechanism::diffusivity_sigmoid: return diffusivity_sigmoid(q, k, v, pattern);
  }
  throw std::invalid_argument("Attention: invalid mechanism");
}

}  // namespace structdiff
