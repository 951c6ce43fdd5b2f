// Training utilities shared by every model: EMA weights, atomic and exactly resumable
// checkpoints, a progress bar and a JSONL metrics log.
#pragma once

#include <chrono>
#include <cstdint>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>
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

// What a checkpoint holds. `metadata` carries the model/run configuration so a checkpoint can
// be loaded without its command line.
struct CheckpointParts {
  torch::nn::Module* model = nullptr;
  torch::optim::Optimizer* optimizer = nullptr;  // optional
  Ema* ema = nullptr;                            // optional
  int64_t step = 0;
  nlohmann::json metadata;
};

// Writes model, optimizer, EMA, the default CPU generator's state, step and metadata to
// `path` atomically (temporary file in the same directory, then rename).
void save_checkpoint(const std::string& path, const CheckpointParts& parts);
// Reads the metadata only (to build the model before loading the weights).
nlohmann::json read_checkpoint_metadata(const std::string& path);
// Restores what `parts` points at, the generator state and parts.step / parts.metadata.
// Throws std::runtime_error naming the path and the missing or mismatched part.
void load_checkpoint(const std::string& path, CheckpointParts& parts);

// A one-line progress display on stderr: step/total, named values, steps/s and ETA.
// Redraws in place at most 10 times a second on a terminal; elsewhere prints a line every
// `log_seconds`.
class ProgressBar {
 public:
  ProgressBar(std::string label, int64_t total, int64_t start = 0, double log_seconds = 10.0);
  void update(int64_t step, const std::map<std::string, double>& values = {});
  void finish();  // final line with totals
  double steps_per_second() const;

 private:
  std::string label_;
  int64_t total_, start_, step_;
  double log_seconds_;
  bool terminal_;
  std::chrono::steady_clock::time_point started_, last_print_;
  std::map<std::string, double> values_;
  void print(bool final_line);
};

// A short human-readable duration: "42s", "18m34s", "2h05m".
std::string format_duration(double seconds);

// Appends one JSON object per line; flushed after each record.
class JsonlLog {
 public:
  explicit JsonlLog(const std::string& path, bool append = true);
  void write(const nlohmann::json& record);

 private:
  std::ofstream out_;
};

}  // namespace structdiff::train
