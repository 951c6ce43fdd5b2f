// Model selection: train, keeping the weights of the best validation.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include "structdiff/training_loop.h"

namespace structdiff::train {

// The best validation score so far, its step and a copy of the weights that scored it, in a module
// so that checkpoints carry them (pass it as LoopTask::state).
class BestWeightsImpl : public torch::nn::Module {
 public:
  // `copy`: a model of the same architecture, to hold the weights.
  explicit BestWeightsImpl(std::shared_ptr<torch::nn::Module> copy);
  double score() const;  // -infinity before the first validation
  int64_t step() const;
  // Keeps `model`'s parameters and buffers when `score` beats the best so far.
  void offer(const torch::nn::Module& model, double score, int64_t step);
  // Writes the kept weights into `model`.
  void copy_to(torch::nn::Module& model) const;

 private:
  std::shared_ptr<torch::nn::Module> weights_;
  torch::Tensor score_, step_;
};
TORCH_MODULE(BestWeights);

// run_training with model selection: every validation scores ema_model with `score` (logged as
// "dev_<score_name>" and "best_dev_<score_name>") and offers it to `best`; a run that stops between
// validations (--max-minutes) is scored once more at its end. task.validate, if set, runs right
// after `score` and adds its metrics to the log (e.g. more of the same evaluation); task.on_step
// is honoured; task.state must be unset. On return `model` holds the best weights, in eval mode.
LoopResult run_training_keeping_best(LoopTask task, const LoopOptions& options,
                                     uint64_t data_seed, const std::function<double()>& score,
                                     const std::string& score_name, BestWeights& best);

}  // namespace structdiff::train
