// Exponential moving average of a model's weights, saved in checkpoints.
#pragma once

#include <string>
#include <vector>

#include <torch/nn/module.h>
#include <torch/serialize/archive.h>

namespace structdiff::train {

// Exponential moving average of a module's parameters (buffers are copied as they are).
class Ema {
 public:
  Ema(const torch::nn::Module& module, double decay);
  double decay() const { return decay_; }
  // shadow = decay * shadow + (1 - decay) * parameter
  void update(const torch::nn::Module& module);
  // Writes the averaged weights into `module` (same architecture).
  void copy_to(torch::nn::Module& module) const;
  void save(torch::serialize::OutputArchive& archive) const;
  void load(torch::serialize::InputArchive& archive);

 private:
  double decay_;
  std::vector<std::string> names_;
  std::vector<torch::Tensor> shadow_;  // parameters then buffers, in names_ order
};

}  // namespace structdiff::train
