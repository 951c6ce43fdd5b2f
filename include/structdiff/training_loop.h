// The one training loop every model trains through: AdamW, clipping, EMA, validation, atomic
// checkpoints that resume exactly, a JSONL log, a progress bar, data-parallel ranks.
#pragma once

#include <cstdint>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <ATen/core/Generator.h>
#include <nlohmann/json.hpp>
#include <torch/nn/module.h>

#include "structdiff/loop_options.h"
#include "structdiff/ranks.h"

namespace structdiff::train {

// Training stopped before its last step: the loss or gradient became non-finite (exit code 1) or
// a SIGINT/SIGTERM arrived (exit code 128 + signal). The checkpoint holds the last good step.
class TrainingStopped : public std::runtime_error {
 public:
  TrainingStopped(const std::string& message, int exit_code)
      : std::runtime_error(message), exit_code_(exit_code) {}
  int exit_code() const { return exit_code_; }

 private:
  int exit_code_;
};

// One part of a step's batch: its mean loss (the graph is built when called, possibly on another
// thread than the one that drew the batch) and what that mean is over (rows, or hidden tokens for a
// loss averaged over tokens), which weighs the parts into the batch's mean. A part over nothing
// (weight 0) is skipped.
struct LossPart {
  double weight = 0;
  std::function<torch::Tensor()> mean_loss;
};

// One generator per part for what the parts' forward passes draw (dropout masks): `noise` itself
// for one part, so a one-thread step draws what it always drew; otherwise generators seeded from
// `noise` in part order.
std::vector<at::Generator> part_generators(at::Generator& noise, size_t parts);

struct LoopTask {
  torch::nn::Module* model = nullptr;      // trained in place
  torch::nn::Module* ema_model = nullptr;  // same architecture; receives the EMA weights
  // The loss of 0-based step `step` on one freshly drawn batch: examples from `data`, diffusion
  // steps and noise from `noise`. The loop owns both generators and saves them in checkpoints.
  // Epoch-based tasks find their place in the epoch from `step` (see epoch_order).
  std::function<torch::Tensor(int64_t step, std::mt19937_64& data, at::Generator& noise)> loss;
  // Instead of `loss`, for tasks whose batch splits by rows: draws the step's whole batch (the
  // same streams on every rank, so that the ranks together train on what one process would) and
  // returns one LossPart per entry of `parts`, over the rows of the batch that part names (together
  // this process's shard; one process's shard is the whole batch), or a single one over them all
  // where the forward pass cannot run on several threads at once. The loop runs the parts at
  // once, one per CPU thread, each forward and backward pass single-threaded: at the sizes these
  // models train on, that beats one pass whose every operation is split across the threads. A
  // forward pass that draws (dropout) must draw from its part's own generator (part_generators),
  // so that the numbers do not depend on which thread draws first. Tasks with `loss` only train
  // on one process, in one part.
  std::function<std::vector<LossPart>(int64_t step, std::mt19937_64& data, at::Generator& noise,
                                      const std::vector<Shard>& parts)>
      loss_parts;
  // Metrics of ema_model (already in eval mode); may be empty.
  std::function<nlohmann::json()> validate;
  // Optional early stopping: given each validation's metrics, whether the run ends at that step.
  std::function<bool(const nlohmann::json& metrics)> stop_after;
  // Optional: what the task itself keeps from step to step (e.g. the best validation weights so
  // far), as parameters or buffers of a module; checkpoints save and restore it.
  torch::nn::Module* state = nullptr;
  // Optional: called after each step with its number (1-based) and wall time (loss, backward,
  // clipping, update, EMA); returning false ends the run there, as its last step would.
  std::function<bool(int64_t step, double seconds)> on_step;
  nlohmann::json metadata;  // stored in checkpoints: what is needed to rebuild the model
};

// Epoch `epoch`'s shuffle of `count` examples: a function of (seed, epoch) alone, so a run
// resumed in the middle of an epoch sees the same order as an uninterrupted one.
torch::Tensor epoch_order(int64_t count, uint64_t seed, int64_t epoch);


// AdamW (decay on matrices only) with gradient clipping, EMA, progress bar, JSONL log (loss,
// grad_norm, lr, seconds trained (counted on across resumes); validation metrics), atomic
// checkpoints (model, optimizer, EMA, generators, step) that resume exactly. Resuming refuses a
// checkpoint whose metadata differs from task.metadata, naming the field and both values. A
// non-finite loss or gradient, or SIGINT/SIGTERM, stops with TrainingStopped (after
// checkpointing the last finished step on a signal). ema_model holds the EMA weights, in eval
// mode, on return.
LoopResult run_training(const LoopTask& task, const LoopOptions& options, uint64_t data_seed);

}  // namespace structdiff::train
