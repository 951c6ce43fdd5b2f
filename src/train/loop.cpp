#include <csignal>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "structdiff/checkpoint.h"
#include "structdiff/ema.h"
#include "structdiff/optimizer.h"
#include "structdiff/progress.h"
#include "structdiff/jsonl_log.h"
#include "structdiff/training_loop.h"
#include "train/step_parts.h"

namespace structdiff::train {
namespace {

std::string rng_state(const std::mt19937_64& rng) {
  std::ostringstream out;
  out << rng;
  return out.str();
}

void restore_rng(std::mt19937_64& rng, const std::string& state) {
  std::istringstream in(state);
  in >> rng;
  if (!in) throw std::runtime_error("checkpoint holds an unreadable data generator state");
}

// Metadata keys the loop itself writes; they are state, not configuration.
const std::set<std::string> kLoopStateKeys = {"data_rng", "seconds_trained"};

// The first field in which a checkpoint's metadata and this run's differ, as
// "model.heads is 4 in the checkpoint but 8 in this run"; "" if they agree.
std::string first_difference(const nlohmann::json& saved, const nlohmann::json& current,
                             const std::string& path) {
  if (saved.is_object() && current.is_object()) {
    std::set<std::string> keys;
    for (const auto& item : saved.items()) keys.insert(item.key());
    for (const auto& item : current.items()) keys.insert(item.key());
    for (const std::string& key : keys) {
      if (path.empty() && kLoopStateKeys.count(key)) continue;
      const std::string field = path.empty() ? key : path + "." + key;
      if (!saved.contains(key)) return field + " is absent in the checkpoint but " + current[key].dump() + " in this run";
      if (!current.contains(key)) return field + " is " + saved[key].dump() + " in the checkpoint but absent in this run";
      if (auto difference = first_difference(saved[key], current[key], field); !difference.empty()) {
        return difference;
      }
    }
    return "";
  }
  if (saved == current) return "";
  return (path.empty() ? std::string("the configuration") : path) + " is " + saved.dump() +
         " in the checkpoint but " + current.dump() + " in this run";
}

// SIGINT/SIGTERM during training only set this; the loop checkpoints and stops after the step.
volatile std::sig_atomic_t g_pending_signal = 0;

extern "C" void note_signal(int signal_number) { g_pending_signal = signal_number; }

// Routes SIGINT/SIGTERM to note_signal while alive. SA_RESETHAND: a second signal acts as usual,
// so a user can still stop a process that does not reach the end of its step.
class SignalCatcher {
 public:
  SignalCatcher() {
    g_pending_signal = 0;
    struct sigaction action {};
    action.sa_handler = note_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESETHAND;
    sigaction(SIGINT, &action, &previous_interrupt_);
    sigaction(SIGTERM, &action, &previous_terminate_);
  }
  ~SignalCatcher() {
    sigaction(SIGINT, &previous_interrupt_, nullptr);
    sigaction(SIGTERM, &previous_terminate_, nullptr);
  }
  SignalCatcher(const SignalCatcher&) = delete;
  SignalCatcher& operator=(const SignalCatcher&) = delete;
  int pending() const { return g_pending_signal; }

 private:
  struct sigaction previous_interrupt_ {}, previous_terminate_ {};
};

// Decay on matrices (weights of linear and convolution layers, embeddings) only: decaying biases
// and norm gains pulls them towards zero for no regularising benefit.
FusedAdamW make_optimizer(torch::nn::Module& model, const LoopOptions& options) {
  std::vector<torch::Tensor> matrices, others;
  for (const torch::Tensor& parameter : model.parameters()) {
    (parameter.dim() >= 2 ? matrices : others).push_back(parameter);
  }
  std::vector<torch::optim::OptimizerParamGroup> groups;
  auto group = [&](std::vector<torch::Tensor> parameters, double decay) {
    if (parameters.empty()) return;
    groups.emplace_back(std::move(parameters),
                        std::make_unique<torch::optim::AdamWOptions>(
                            torch::optim::AdamWOptions(options.learning_rate)
                                .betas({0.9, 0.999})
                                .weight_decay(decay)));
  };
  group(std::move(matrices), options.weight_decay);
  group(std::move(others), 0.0);
  return FusedAdamW(std::move(groups),
                    torch::optim::AdamWOptions(options.learning_rate).weight_decay(0.0));
}

std::string checkpoint_clause(const LoopOptions& options, int64_t step) {
  if (options.checkpoint_path.empty()) return "no --checkpoint was given, so nothing is kept";
  if (!std::filesystem::exists(options.checkpoint_path)) {
    return "no checkpoint had been written yet";
  }
  return "the checkpoint " + options.checkpoint_path + " holds step " + std::to_string(step);
}

}  // namespace

torch::Tensor epoch_order(int64_t count, uint64_t seed, int64_t epoch) {
  // splitmix64 of (seed, epoch): neighbouring epochs and seeds get unrelated streams.
  uint64_t mixed = seed + 0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(epoch + 1);
  mixed = (mixed ^ (mixed >> 30)) * 0xbf58476d1ce4e5b9ULL;
  mixed = (mixed ^ (mixed >> 27)) * 0x94d049bb133111ebULL;
  mixed ^= mixed >> 31;
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(mixed);
  return torch::randperm(count, generator, torch::kLong);
}

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

const LoopTask& checked_task(const LoopTask& task, const LoopOptions& options) {
  if (task.model == nullptr || task.ema_model == nullptr || (!task.loss && !task.loss_parts)) {
    throw std::invalid_argument("run_training needs a model, an EMA model and a loss");
  }
  check_loop_options(options);
  if (options.ranks && options.ranks->size() > 1 && !task.loss_parts) {
    throw std::invalid_argument("this model trains on one process only so far, not on " +
                                std::to_string(options.ranks->size()) + " ranks");
  }
  return task;
}

// What one optimiser step did.
struct StepOutcome {
  double loss = 0, grad_norm = 0, learning_rate = 0;
  bool keep_going = true;  // the task's on_step hook may end the run
};

// One run of the loop, read top to bottom in run(): restore, then for each step take it, record
// it (progress, log, validation, checkpoint) and agree whether to go on; then finish. On several
// ranks every decision is taken alike on all of them (see agree_to_go_on), so that no rank waits
// for others that have stopped; rank 0 alone writes.
class TrainingRun {
 public:
  TrainingRun(const LoopTask& task, const LoopOptions& options, uint64_t data_seed)
      : task_(checked_task(task, options)),
        options_(options),
        ranks_(options.ranks && options.ranks->size() > 1 ? options.ranks.get() : nullptr),
        root_(ranks_ == nullptr || ranks_->is_root()),
        model_(*task.model),
        optimizer_(make_optimizer(model_, options)),
        ema_(model_, options.ema_decay),
        rng_(data_seed),
        noise_(at::make_generator<at::CPUGeneratorImpl>(data_seed)) {}

  LoopResult run() {
    restore();
    open_outputs();
    const SignalCatcher signals;
    model_.train();
    while (step_ < options_.steps) {
      StepOutcome outcome = take_step();
      record(outcome);
      if (!agree_to_go_on(outcome.keep_going, signals.pending())) break;
    }
    return finish();
  }

 private:
  // Resumes from the checkpoint when asked and one exists, and gives every rank the same weights.
  void restore() {
    resuming_ = options_.resume && std::filesystem::exists(options_.checkpoint_path);
    if (resuming_) {
      const nlohmann::json saved = read_checkpoint_metadata(options_.checkpoint_path);
      if (const auto difference = first_difference(saved, task_.metadata, ""); !difference.empty()) {
        throw std::invalid_argument("cannot resume from " + options_.checkpoint_path + ": " + difference);
      }
      CheckpointParts parts{&model_, &optimizer_, &ema_, &noise_, task_.state, 0, {}};
      load_checkpoint(options_.checkpoint_path, parts);
      step_ = parts.step;
      restore_rng(rng_, parts.metadata.at("data_rng").get<std::string>());
      // Checkpoints written before the loop kept it start the count again at 0.
      seconds_before_ = parts.metadata.value("seconds_trained", 0.0);
    }
    if (ranks_ != nullptr) {
      // The same initial (or resumed) weights everywhere, whatever each rank built.
      std::vector<torch::Tensor> state = model_.parameters();
      for (const torch::Tensor& buffer : model_.buffers()) state.push_back(buffer);
      ranks_->broadcast(state);
    }
    first_step_ = saved_step_ = step_;
  }

  void open_outputs() {
    if (!options_.log_path.empty() && root_) {
      if (resuming_) truncate_log_after_step(options_.log_path, step_);
      log_.emplace(options_.log_path, /*append=*/resuming_);
    }
    if (options_.show_progress && root_) {
      bar_.emplace(options_.progress_label, options_.steps, step_);
      if (options_.max_seconds > 0) bar_->set_time_limit(options_.max_seconds);
    }
    started_ = Clock::now();
  }

  // Draws the batch, takes the gradient (averaged over the ranks), clips it and steps the
  // optimiser and the EMA.
  StepOutcome take_step() {
    const auto step_started = Clock::now();
    StepOutcome outcome;
    outcome.learning_rate = learning_rate_at(options_.learning_rate, options_.decay,
                                             options_.warmup_steps, step_, options_.steps);
    for (auto& group : optimizer_.param_groups()) {
      static_cast<torch::optim::AdamWOptions&>(group.options()).lr(outcome.learning_rate);
    }
    optimizer_.zero_grad();
    if (task_.loss_parts) {
      const std::vector<Shard> parts =
          step_parts(model_, ranks_ ? Shard{ranks_->rank(), ranks_->size()} : Shard{});
      outcome.loss = forward_backward(task_.loss_parts(step_, rng_, noise_, parts), model_);
    } else {
      const torch::Tensor loss = task_.loss(step_, rng_, noise_);
      outcome.loss = loss.item<double>();
      stop_unless_finite("loss", outcome.loss);
      loss.backward();
    }
    // On several ranks the shards' mean losses and gradients are averaged: the whole batch's (a
    // non-finite one on any rank makes both non-finite everywhere, so all stop together).
    if (ranks_ != nullptr) outcome.loss = average_over_ranks(outcome.loss);
    stop_unless_finite("loss", outcome.loss);
    outcome.grad_norm = clip_gradient_norm(model_.parameters(), options_.clip_norm);
    stop_unless_finite("gradient norm", outcome.grad_norm);
    optimizer_.step();
    ema_.update(model_);
    ++step_;
    outcome.keep_going = !task_.on_step || task_.on_step(step_, seconds_since(step_started));
    return outcome;
  }

  double average_over_ranks(double loss) {
    std::vector<torch::Tensor> gradients;
    for (const torch::Tensor& parameter : model_.parameters()) {
      if (parameter.grad().defined()) gradients.push_back(parameter.grad());
    }
    const auto started = Clock::now();
    ranks_->average(gradients);
    loss = ranks_->sum({loss})[0] / ranks_->size();
    communication_ += seconds_since(started);
    return loss;
  }

  // The progress bar, the log, the validation every validate_every steps (whose stop_after may end
  // the run) and the checkpoint every checkpoint_every steps.
  void record(StepOutcome& outcome) {
    recent_.push_back(outcome.loss);
    if (recent_.size() > 100) recent_.pop_front();
    shown_["loss"] = outcome.loss;
    if (bar_) bar_->update(step_, shown_);
    if (log_) {
      log_->write({{"step", step_}, {"loss", outcome.loss}, {"grad_norm", outcome.grad_norm},
                   {"lr", outcome.learning_rate}, {"seconds", seconds_trained()}});
    }
    if (options_.validate_every > 0 && step_ % options_.validate_every == 0 && task_.validate && root_) {
      copy_ema();
      nlohmann::json metrics = task_.validate();
      model_.train();
      for (const auto& item : metrics.items()) {
        if (item.value().is_number()) shown_[item.key()] = item.value().get<double>();
      }
      if (task_.stop_after && task_.stop_after(metrics)) outcome.keep_going = false;
      metrics["step"] = step_;
      metrics["seconds"] = seconds_trained();
      if (log_) log_->write(metrics);
    }
    if (options_.checkpoint_every > 0 && step_ % options_.checkpoint_every == 0) {
      save();
      saved_step_ = step_;
    }
  }

  // False when the run should end here: the task asked, or time is up. A signal saves the
  // checkpoint and throws. On several ranks one vote each: a signal on any rank, or rank 0's
  // validation or clock, stops them all.
  bool agree_to_go_on(bool keep_going, int signal_number) {
    bool out_of_time = options_.max_seconds > 0 && seconds_since(started_) >= options_.max_seconds;
    if (ranks_ != nullptr) {
      const auto started = Clock::now();
      const std::vector<double> votes =
          ranks_->sum({signal_number == SIGINT ? 1.0 : 0.0, signal_number == SIGTERM ? 1.0 : 0.0,
                       keep_going ? 0.0 : 1.0, root_ && out_of_time ? 1.0 : 0.0});
      signal_number = votes[0] > 0 ? SIGINT : votes[1] > 0 ? SIGTERM : 0;
      keep_going = votes[2] == 0;
      out_of_time = votes[3] > 0;
      communication_ += seconds_since(started);
    }
    if (signal_number != 0) {
      if (bar_) bar_->finish();
      save();
      const std::string name = signal_number == SIGINT ? "SIGINT" : "SIGTERM";
      throw TrainingStopped("interrupted by " + name + " after step " + std::to_string(step_) + "; " +
                                (options_.checkpoint_path.empty()
                                     ? "no --checkpoint was given, so nothing is kept"
                                     : "the checkpoint " + options_.checkpoint_path +
                                           " holds it (continue with --resume)"),
                            128 + signal_number);
    }
    return keep_going && !out_of_time;
  }

  LoopResult finish() {
    if (bar_) bar_->finish();
    save();
    copy_ema();
    LoopResult result;
    result.steps_done = step_;
    result.steps_this_run = step_ - first_step_;
    result.seconds = seconds_since(started_);
    result.communication_seconds = communication_;
    result.final_loss = recent_.empty() ? 0.0
                                        : std::accumulate(recent_.begin(), recent_.end(), 0.0) /
                                              static_cast<double>(recent_.size());
    return result;
  }

  void save() {
    if (options_.checkpoint_path.empty() || !root_) return;
    nlohmann::json metadata = task_.metadata;
    metadata["data_rng"] = rng_state(rng_);
    metadata["seconds_trained"] = seconds_trained();
    CheckpointParts parts{&model_, &optimizer_, &ema_, &noise_, task_.state, step_, metadata};
    save_checkpoint(options_.checkpoint_path, parts);
  }

  // The log's clock: this run's time plus the runs before it that this one resumes, so that a
  // learning curve against wall-clock reads across resumes.
  double seconds_trained() const { return seconds_before_ + seconds_since(started_); }

  void copy_ema() {
    ema_.copy_to(*task_.ema_model);
    task_.ema_model->eval();
  }

  void stop_unless_finite(const char* what, double value) {
    if (std::isfinite(value)) return;
    if (bar_) bar_->finish();
    std::ostringstream text;
    text << "training stopped: the " << what << " at step " << step_ + 1 << " is " << value << "; "
         << checkpoint_clause(options_, saved_step_) << " and no model was written";
    throw TrainingStopped(text.str(), 1);
  }

  const LoopTask& task_;
  const LoopOptions& options_;
  Ranks* const ranks_;
  const bool root_;
  torch::nn::Module& model_;
  FusedAdamW optimizer_;
  Ema ema_;
  std::mt19937_64 rng_;
  at::Generator noise_;
  int64_t step_ = 0, first_step_ = 0, saved_step_ = 0;
  bool resuming_ = false;
  std::optional<JsonlLog> log_;
  std::optional<ProgressBar> bar_;
  Clock::time_point started_;
  double seconds_before_ = 0;
  double communication_ = 0;
  std::deque<double> recent_;
  std::map<std::string, double> shown_;  // the bar's values: the loss, the last validation's numbers
};

}  // namespace

LoopResult run_training(const LoopTask& task, const LoopOptions& options, uint64_t data_seed) {
  return TrainingRun(task, options, data_seed).run();
}

}  // namespace structdiff::train
