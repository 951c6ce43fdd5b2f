// Model selection on the one training loop: the weights of the best validation, kept in a module
// that checkpoints carry.
#include <limits>
#include <stdexcept>

#include <torch/torch.h>

#include "structdiff/best_weights.h"

namespace structdiff::train {
namespace {

void copy_state(const torch::nn::Module& from, torch::nn::Module& to) {
  torch::NoGradGuard no_grad;
  const auto source = from.parameters(), target = to.parameters();
  for (size_t i = 0; i < source.size(); ++i) target[i].copy_(source[i]);
  const auto source_buffers = from.buffers(), target_buffers = to.buffers();
  for (size_t i = 0; i < source_buffers.size(); ++i) target_buffers[i].copy_(source_buffers[i]);
}

}  // namespace

BestWeightsImpl::BestWeightsImpl(std::shared_ptr<torch::nn::Module> copy)
    : weights_(register_module("weights", std::move(copy))) {
  score_ = register_buffer(
      "score", torch::full({}, -std::numeric_limits<double>::infinity(), torch::kDouble));
  step_ = register_buffer("step", torch::zeros({}, torch::kLong));
}

double BestWeightsImpl::score() const { return score_.item<double>(); }
int64_t BestWeightsImpl::step() const { return step_.item<int64_t>(); }

void BestWeightsImpl::offer(const torch::nn::Module& model, double score, int64_t step) {
  if (!(score > this->score())) return;
  score_.fill_(score);
  step_.fill_(step);
  copy_state(model, *weights_);
}

void BestWeightsImpl::copy_to(torch::nn::Module& model) const { copy_state(*weights_, model); }

LoopResult run_training_keeping_best(LoopTask task, const LoopOptions& options, uint64_t data_seed,
                                     const std::function<double()>& score,
                                     const std::string& score_name, BestWeights& best) {
  if (task.state != nullptr) {
    throw std::invalid_argument("run_training_keeping_best keeps its own state (the best weights)");
  }
  if (options.validate_every <= 0) {
    throw std::invalid_argument("model selection needs --validate-every > 0");
  }
  int64_t last_step = 0;
  task.state = best.ptr().get();
  task.on_step = [&last_step, on_step = std::move(task.on_step)](int64_t step, double seconds) {
    last_step = step;
    return on_step ? on_step(step, seconds) : true;
  };
  task.validate = [&, more = std::move(task.validate)]() -> nlohmann::json {
    const double value = score();
    best->offer(*task.ema_model, value, last_step);
    nlohmann::json metrics = more ? more() : nlohmann::json::object();
    metrics["dev_" + score_name] = value;
    metrics["best_dev_" + score_name] = best->score();
    return metrics;
  };
  const LoopResult result = run_training(task, options, data_seed);
  if (result.steps_done % options.validate_every != 0) {
    last_step = result.steps_done;
    task.validate();
  }
  best->copy_to(*task.model);
  task.model->eval();
  return result;
}

}  // namespace structdiff::train
