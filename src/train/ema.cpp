#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "structdiff/ema.h"

namespace structdiff::train {
namespace {

struct NamedTensors {
  std::vector<std::string> names;
  std::vector<torch::Tensor> tensors;
  size_t parameter_count = 0;  // parameters come first, then buffers
};

NamedTensors named_state(const torch::nn::Module& module) {
  NamedTensors state;
  for (const auto& item : module.named_parameters(/*recurse=*/true)) {
    state.names.push_back(item.key());
    state.tensors.push_back(item.value());
  }
  state.parameter_count = state.names.size();
  for (const auto& item : module.named_buffers(/*recurse=*/true)) {
    state.names.push_back(item.key());
    state.tensors.push_back(item.value());
  }
  return state;
}

// The module's tensors in the EMA's order; throws if the architectures differ.
NamedTensors matching_state(const torch::nn::Module& module, const std::vector<std::string>& names,
                            const std::vector<torch::Tensor>& shadow) {
  NamedTensors state = named_state(module);
  const size_t common = std::min(names.size(), state.names.size());
  for (size_t i = 0; i < common; ++i) {
    if (state.names[i] != names[i]) {
      throw std::invalid_argument("EMA tensor '" + names[i] + "' does not match module tensor '" +
                                  state.names[i] + "'");
    }
    if (!state.tensors[i].sizes().equals(shadow[i].sizes())) {
      throw std::invalid_argument("EMA tensor '" + names[i] + "' has shape " +
                                  c10::str(shadow[i].sizes()) + " but the module's has shape " +
                                  c10::str(state.tensors[i].sizes()));
    }
  }
  if (names.size() > common) {
    throw std::invalid_argument("module has no tensor '" + names[common] + "' (kept by the EMA)");
  }
  if (state.names.size() > common) {
    throw std::invalid_argument("EMA has no tensor '" + state.names[common] + "'");
  }
  return state;
}

const std::string kTensorPrefix = "ema/";
const std::string kDecayKey = "decay";  // cannot collide: tensor keys carry the prefix

}  // namespace

Ema::Ema(const torch::nn::Module& module, double decay) : decay_(decay) {
  if (!(decay >= 0.0 && decay <= 1.0)) {
    throw std::invalid_argument("EMA decay must lie in [0, 1], got " + std::to_string(decay));
  }
  NamedTensors state = named_state(module);
  names_ = std::move(state.names);
  for (const auto& tensor : state.tensors) shadow_.push_back(tensor.detach().clone());
}

void Ema::update(const torch::nn::Module& module) {
  torch::NoGradGuard no_grad;
  const NamedTensors state = matching_state(module, names_, shadow_);
  for (size_t i = 0; i < shadow_.size(); ++i) {
    if (i < state.parameter_count) {
      shadow_[i].mul_(decay_).add_(state.tensors[i], 1.0 - decay_);
    } else {
      shadow_[i].copy_(state.tensors[i]);  // running statistics and counters are not averaged
    }
  }
}

void Ema::copy_to(torch::nn::Module& module) const {
  torch::NoGradGuard no_grad;
  NamedTensors state = matching_state(module, names_, shadow_);
  for (size_t i = 0; i < shadow_.size(); ++i) state.tensors[i].copy_(shadow_[i]);
}

void Ema::save(torch::serialize::OutputArchive& archive) const {
  archive.write(kDecayKey, torch::tensor(decay_, torch::kDouble));
  for (size_t i = 0; i < shadow_.size(); ++i) archive.write(kTensorPrefix + names_[i], shadow_[i]);
}

void Ema::load(torch::serialize::InputArchive& archive) {
  torch::Tensor saved_decay;
  if (!archive.try_read(kDecayKey, saved_decay)) {
    throw std::invalid_argument("EMA archive has no decay");
  }
  // Read everything before assigning, so a mismatch leaves this EMA unchanged.
  std::vector<torch::Tensor> loaded(shadow_.size());
  for (size_t i = 0; i < shadow_.size(); ++i) {
    if (!archive.try_read(kTensorPrefix + names_[i], loaded[i])) {
      throw std::invalid_argument("EMA archive has no tensor '" + names_[i] + "'");
    }
    if (!loaded[i].sizes().equals(shadow_[i].sizes()) ||
        loaded[i].scalar_type() != shadow_[i].scalar_type()) {
      throw std::invalid_argument("EMA archive tensor '" + names_[i] + "' has shape " +
                                  c10::str(loaded[i].sizes()) + ", expected " +
                                  c10::str(shadow_[i].sizes()));
    }
  }
  for (const auto& key : archive.keys()) {
    const bool is_tensor_key = key.rfind(kTensorPrefix, 0) == 0;
    if (is_tensor_key &&
        std::find(names_.begin(), names_.end(), key.substr(kTensorPrefix.size())) == names_.end()) {
      throw std::invalid_argument("EMA archive has tensor '" + key.substr(kTensorPrefix.size()) +
                                  "' that the module lacks");
    }
  }
  decay_ = saved_decay.item<double>();
  shadow_ = std::move(loaded);
}

}  // namespace structdiff::train
