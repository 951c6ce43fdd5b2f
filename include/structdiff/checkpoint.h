// A training run's full state in one file, written atomically and resumed exactly.
#pragma once

#include <cstdint>
#include <string>

#include <ATen/core/Generator.h>
#include <nlohmann/json.hpp>
#include <torch/nn/module.h>

namespace torch::optim {
class Optimizer;
}

namespace structdiff::train {

class Ema;

// What a model file holds. `metadata` carries the model's kind ("kind") and configuration, so a
// file can be loaded without its command line. Every file also records the provenance of the run
// that wrote it (see provenance()) and the model's parameter count.
struct CheckpointParts {
  torch::nn::Module* model = nullptr;
  torch::optim::Optimizer* optimizer = nullptr;  // optional
  Ema* ema = nullptr;                            // optional
  at::Generator* noise_generator = nullptr;      // optional: a training run's own torch generator
  torch::nn::Module* task_state = nullptr;       // optional: see LoopTask::state
  int64_t step = 0;
  nlohmann::json metadata;
};

// Writes model, optimizer, EMA, the run's generator state, step, metadata and provenance
// to `path` atomically (temporary file in the same directory, then rename).
void save_checkpoint(const std::string& path, const CheckpointParts& parts);
// Reads the metadata only (to build the model before loading the weights).
nlohmann::json read_checkpoint_metadata(const std::string& path);
// Restores what `parts` points at and parts.step / parts.metadata.
// Throws std::runtime_error naming the path and the missing or mismatched part.
void load_checkpoint(const std::string& path, CheckpointParts& parts);

}  // namespace structdiff::train
