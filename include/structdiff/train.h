// Training utilities shared by every model: the one training loop, EMA weights, model files
// (atomic, exactly resumable, with provenance), a progress bar and a JSONL metrics log.
#pragma once

#include <chrono>
#include <cstdint>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <ATen/core/Generator.h>
#include <nlohmann/json.hpp>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>
#include <torch/optim/adamw.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize/archive.h>

#include "structdiff/ranks.h"

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

// torch::optim::AdamW (same options, state and checkpoint format, same arithmetic) whose step
// updates each CPU parameter tensor in one pass instead of eight tensor operations; other devices
// and amsgrad take libtorch's step.
class FusedAdamW : public torch::optim::AdamW {
 public:
  using torch::optim::AdamW::AdamW;
  torch::Tensor step(LossClosure closure = nullptr) override;
};

// Scales the gradients of `parameters` so that their joint L2 norm is at most `max_norm`, as
// torch::nn::utils::clip_grad_norm_ does, and returns the norm before scaling; one pass per
// gradient to measure and, only when the norm exceeds the limit, one to scale.
double clip_gradient_norm(const std::vector<torch::Tensor>& parameters, double max_norm);

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
// The model kind a file's metadata declares ("sudoku", "ddpm", "classifier", ...). Files written
// before kinds were recorded are recognised by their configuration keys.
std::string model_kind(const nlohmann::json& metadata);
// Throws std::runtime_error unless `metadata` (read from `path`) is of `kind`, naming both.
void require_model_kind(const nlohmann::json& metadata, const std::string& kind,
                        const std::string& path);

// Where a model file came from: git commit, command line, seed, threads, libtorch version and
// UTC date. The command line and seed are those given to set_run_description (empty and 0 for a
// program that never called it, e.g. a test).
nlohmann::json provenance();
void set_run_description(const std::string& command_line, uint64_t seed);

// What `structdiff model info` prints: kind, config (the metadata), provenance, step, parameter
// count and "weights_sha256", a SHA-256 over the model's tensors (names, dtypes, shapes, bytes),
// computed from the file alone.
nlohmann::json model_info(const std::string& path);
// ---- model files: what every model saves to be used later (weights, no training state) ------

// Writes `model`'s weights with `metadata` (its configuration and what the caller records, e.g.
// accuracies) plus "kind", atomically, in save_checkpoint's format.
void save_model_file(const std::string& path, const std::string& kind, torch::nn::Module& model,
                     nlohmann::json metadata);
// Builds a model with `build` from the metadata of the model file at `path` and loads its
// weights. Checks the kind first (std::runtime_error naming the path and both kinds), builds
// without disturbing libtorch's default generator (initial weights draw from it), and leaves the
// model in eval mode. Returns the metadata.
nlohmann::json load_model_file(const std::string& path, const std::string& kind,
                               const std::function<torch::nn::Module&(const nlohmann::json&)>& build);

// The pair above for a model built from its configuration alone (Tracformer, the UNN models): the
// file's metadata keeps config() under "config" beside what the caller records. `Holder` is the
// model's TORCH_MODULE holder; its configuration type converts to and from JSON.
template <typename Holder>
void save_configured_model(const std::string& path, const std::string& kind, Holder& model,
                           nlohmann::json metadata) {
  metadata["config"] = model->config();
  save_model_file(path, kind, *model, std::move(metadata));
}
// Throws std::runtime_error naming the path when the stored configuration is incomplete or
// malformed. `metadata`, if given, receives the file's.
template <typename Holder>
Holder load_configured_model(const std::string& path, const std::string& kind,
                             nlohmann::json* metadata = nullptr) {
  using Config = std::decay_t<decltype(std::declval<typename Holder::ContainedType&>().config())>;
  Holder model{nullptr};
  nlohmann::json read =
      load_model_file(path, kind, [&](const nlohmann::json& stored) -> torch::nn::Module& {
        try {
          model = Holder(stored.at("config").get<Config>());
        } catch (const nlohmann::json::exception& e) {
          throw std::runtime_error(path + ": the model's configuration is incomplete or malformed (" +
                                   std::string(e.what()) + ")");
        }
        return *model;
      });
  if (metadata != nullptr) *metadata = std::move(read);
  return model;
}

// Restores what `parts` points at and parts.step / parts.metadata.
// Throws std::runtime_error naming the path and the missing or mismatched part.
void load_checkpoint(const std::string& path, CheckpointParts& parts);

// A one-line progress display on stderr: step/total, named values, steps/s and ETA.
// Redraws in place at most 10 times a second on a terminal; elsewhere prints a line every
// `log_seconds`.
class ProgressBar {
 public:
  ProgressBar(std::string label, int64_t total, int64_t start = 0, double log_seconds = 10.0);
  void update(int64_t step, const std::map<std::string, double>& values = {});
  // A run that also stops after `seconds`: the ETA is the sooner of the two ends.
  void set_time_limit(double seconds) { time_limit_ = seconds; }
  void finish();  // final line with totals
  double steps_per_second() const;

 private:
  std::string label_;
  int64_t total_, start_, step_;
  double log_seconds_;
  double time_limit_ = 0;
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
// Drops the records of `path` whose "step" is past `step` (written by a run after its last
// checkpoint), so a resumed run's log holds each step once. A missing file is left missing.
void truncate_log_after_step(const std::string& path, int64_t step);

// ---- the training loop shared by every diffusion model ------------------------------------------

enum class LearningRateDecay { constant, cosine };
LearningRateDecay parse_learning_rate_decay(const std::string& name);  // "constant" | "cosine"
// The learning rate at 0-based `step` of `total_steps`: linear warm-up over `warmup_steps`, then
// constant or cosine decay to zero at `total_steps`. A function of the step alone, so a resumed
// run follows the same schedule.
double learning_rate_at(double base, LearningRateDecay decay, int64_t warmup_steps, int64_t step,
                        int64_t total_steps);

struct LoopOptions {
  int64_t steps = 1000;      // total steps (a resumed run continues up to this)
  double learning_rate = 2e-4;
  double weight_decay = 0.0;  // AdamW's decoupled decay, on matrices (dim >= 2) only
  LearningRateDecay decay = LearningRateDecay::constant;
  int64_t warmup_steps = 0;
  double clip_norm = 1.0;  // infinity: no clipping (the norm is still checked and logged)
  double ema_decay = 0.999;
  int64_t validate_every = 0;    // 0: never
  int64_t checkpoint_every = 0;  // 0: only at the end
  double max_seconds = 0;        // 0: no limit; otherwise stop (and checkpoint) after this long
  std::string checkpoint_path;   // full state, for resuming; empty: none
  std::string log_path;          // JSONL metrics; empty: none
  bool resume = false;           // continue from checkpoint_path if it exists
  bool show_progress = true;
  std::string progress_label = "train";
  // Data-parallel training: this process's rank among several (null: one process). Rank 0 writes
  // checkpoints, the log and the progress bar; every rank draws the same batches and trains on its
  // shard (LoopTask::loss_parts), gradients averaged over the ranks.
  std::shared_ptr<Ranks> ranks;
};
// Throws std::invalid_argument naming the command-line option (--clip, --lr, ...), the accepted
// range and the value, for options a run cannot use (e.g. --clip 0 would freeze training).
void check_loop_options(const LoopOptions& options);

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

struct LoopResult {
  int64_t steps_done = 0;      // total, including steps before a resume
  int64_t steps_this_run = 0;  // steps taken by this call (after the resumed step)
  double seconds = 0;      // this run's wall-clock time
  double final_loss = 0;   // mean loss over the last 100 steps
  double communication_seconds = 0;  // in collectives with the other ranks (data-parallel runs)
};

// AdamW (decay on matrices only) with gradient clipping, EMA, progress bar, JSONL log (loss,
// grad_norm, lr, seconds per step; validation metrics), atomic checkpoints (model, optimizer,
// EMA, generators, step) that resume exactly. Resuming refuses a checkpoint whose metadata
// differs from task.metadata, naming the field and both values. A non-finite loss or gradient,
// or SIGINT/SIGTERM, stops with TrainingStopped (after checkpointing the last finished step on a
// signal). ema_model holds the EMA weights, in eval mode, on return.
LoopResult run_training(const LoopTask& task, const LoopOptions& options, uint64_t data_seed);

// ---- model selection: the weights of the best validation --------------------------------------

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
