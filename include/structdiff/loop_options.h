// What a training run is asked to do (steps, learning rate and its schedule, clipping, EMA,
// validation, checkpoints, log) and what it reports; no torch here, so a model's option struct
// can hold them cheaply.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace structdiff::train {

class Ranks;

enum class LearningRateDecay { constant, cosine };
LearningRateDecay parse_learning_rate_decay(const std::string& name);  // "constant" | "cosine"
std::vector<std::string> learning_rate_decay_names();
std::string learning_rate_decay_name(LearningRateDecay decay);
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

// Loop settings whose defaults depend on another choice of the same request (a task, a dataset):
// each one left empty takes the default of the choice it depends on.
struct LoopChoices {
  std::optional<int64_t> steps;
  std::optional<double> learning_rate;
  std::optional<double> clip_norm;
  std::optional<int64_t> validate_every;
};

// `options` with the choices that were made in place of its fields.
LoopOptions with_choices(LoopOptions options, const LoopChoices& choices);

struct LoopResult {
  int64_t steps_done = 0;      // total, including steps before a resume
  int64_t steps_this_run = 0;  // steps taken by this call (after the resumed step)
  double seconds = 0;      // this run's wall-clock time
  double final_loss = 0;   // mean loss over the last 100 steps
  double communication_seconds = 0;  // in collectives with the other ranks (data-parallel runs)
};

}  // namespace structdiff::train
