// Training a GSDM on data generated on the fly, through the shared training loop (train.h).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "structdiff/diffusion.h"
#include "structdiff/gsdm.h"
#include "structdiff/training_loop.h"

namespace structdiff::gsdm {

struct TrainingBatch {
  torch::Tensor x0;        // (batch, width)
  torch::Tensor observed;  // (batch, nodes) bool
  // The graph the examples are of, where batches vary in size (GsdmImpl::structure_for); null:
  // the model's own.
  std::shared_ptr<GsdmStructure> structure = nullptr;
};

struct TrainingOptions {
  train::LoopOptions loop = default_loop();
  int64_t batch = 32;
  static train::LoopOptions default_loop();  // the GSDM paper's rate, 2e-5
};

struct TrainingProblem {
  std::function<TrainingBatch(int64_t batch, std::mt19937_64& rng)> make_batch;
  // Metrics of the EMA model, e.g. accuracy on held-out examples; may be empty.
  std::function<nlohmann::json(Gsdm ema_model)> validate;
  // Optional early stopping on the validation metrics (train::LoopTask::stop_after).
  std::function<bool(const nlohmann::json& metrics)> stop_after;
  nlohmann::json metadata;  // stored in checkpoints: what is needed to rebuild the model
  // Where batches vary in size: the largest structure, which sizes the memory check.
  std::shared_ptr<GsdmStructure> largest_structure;
};

using TrainingResult = train::LoopResult;

// The training loop's parts of one step (train::LoopTask::loss_parts): part i is training_loss
// over the rows parts[i] names, weighted by their number, `whole` the batch's training_example.
// `schedule` must outlive them.
std::vector<train::LossPart> loss_parts(Gsdm model, const diffusion::NoiseSchedule& schedule,
                                        const torch::Tensor& x0, const torch::Tensor& observed,
                                        const diffusion::TrainingExample& whole,
                                        const std::vector<train::Shard>& parts);

// What the backward pass keeps per example on a graph of `nodes` variables whose attention
// covers `attended_pairs` query-key pairs: every block's activations (block_activation_bytes).
double activation_bytes_per_example(const GsdmConfig& config, double nodes, double attended_pairs);
// The memory one training step of `batch` examples on `structure` needs beyond the weights: what
// the backward pass keeps, the gradients, the optimiser's two moments and its update's temporary.
double training_memory_bytes(const Gsdm& model, const GsdmStructure& structure, int64_t batch);

// Trains `model` in place; `ema_model` (same architecture) receives the EMA weights at the end
// and before each validation.
TrainingResult train(Gsdm model, Gsdm ema_model, const diffusion::NoiseSchedule& schedule,
                     const TrainingProblem& problem, const TrainingOptions& options,
                     uint64_t data_seed);

}  // namespace structdiff::gsdm
