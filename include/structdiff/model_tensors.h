// A model file's weights by name, for use outside structdiff (structdiff export, the Python
// package): the module's parameters and buffers with their dotted names, on the CPU, in name
// order, and the file's metadata (kind, configuration, what the run recorded).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/nn/module.h>
#include <torch/types.h>

namespace structdiff::train {

struct ModelTensors {
  nlohmann::json metadata;
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
};
// Throws std::runtime_error naming the path for a file that is not a structdiff model file.
ModelTensors read_model_tensors(const std::string& path);

// The number of values in `module`'s parameters (buffers not counted), as model files record it.
int64_t parameter_count(const torch::nn::Module& module);

}  // namespace structdiff::train
