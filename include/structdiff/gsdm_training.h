// Training a GSDM: Adam, gradient clipping, EMA weights for evaluation, data generated on the fly,
// periodic validation, progress bar, JSONL metrics, atomic checkpoints that resume exactly.
#pragma once

#include <cstdint>
#include <functional>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "structdiff/diffusion.h"
#include "structdiff/gsdm.h"

namespace structdiff::gsdm {

struct TrainingBatch {
  torch::Tensor x0;        // (batch, width)
  torch::Tensor observed;  // (batch, nodes) bool
};

struct TrainingOptions {
  int64_t steps = 1000;      // total steps (a resumed run continues up to this)
  int64_t batch = 32;
  double learning_rate = 2e-5;
  double clip_norm = 1.0;
  double ema_decay = 0.999;
  int64_t validate_every = 0;    // 0: never
  int64_t checkpoint_every = 0;  // 0: only at the end
  double max_seconds = 0;        // 0: no limit; otherwise stop (and checkpoint) after this long
  std::string checkpoint_path;   // full state, for resuming; empty: none
  std::string log_path;          // JSONL metrics; empty: none
  bool resume = false;           // continue from checkpoint_path if it exists
  bool show_progress = true;
};

struct TrainingProblem {
  std::function<TrainingBatch(int64_t batch, std::mt19937_64& rng)> make_batch;
  // Metrics of the EMA model, e.g. accuracy on held-out examples; may be empty.
  std::function<nlohmann::json(Gsdm ema_model)> validate;
  nlohmann::json metadata;  // stored in checkpoints: what is needed to rebuild the model
};

struct TrainingResult {
  int64_t steps_done = 0;  // total, including steps before a resume
  double seconds = 0;      // this run's wall-clock time
  double final_loss = 0;   // mean loss over the last 100 steps
};

// Trains `model` in place; `ema_model` (same architecture) receives the EMA weights at the end
// and before each validation.
TrainingResult train(Gsdm model, Gsdm ema_model, const diffusion::NoiseSchedule& schedule,
                     const TrainingProblem& problem, const TrainingOptions& options,
                     uint64_t data_seed);

}  // namespace structdiff::gsdm
