// Image diffusion (Ho et al., 2020) on the shared diffusion module: a U-Net noise predictor,
// linear betas 1e-4 -> 0.02 over T = 1000, epsilon-prediction MSE, ancestral sampling with the
// posterior variance and x0 clipped to [-1, 1], or DDIM with fewer steps.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>
#include <torch/types.h>

#include "structdiff/diffusion.h"
#include "structdiff/loop_options.h"
#include "structdiff/unet.h"

namespace structdiff::ddpm {

// The DDPM paper's schedule.
diffusion::ScheduleConfig default_schedule();

struct Model {
  unet::UNet net{nullptr};
  diffusion::NoiseSchedule schedule{default_schedule()};
  nlohmann::json metadata;  // {"config": {"unet": ..., "schedule": ...}, plus what the trainer adds}
};
// A fresh model; `metadata`'s "config" needs "unet" and "schedule" (see model_metadata).
Model build_model(const nlohmann::json& metadata);
nlohmann::json model_metadata(const unet::UNetConfig& unet, const diffusion::ScheduleConfig& schedule);

// Pixels in [0, 1] <-> the model's [-1, 1].
torch::Tensor to_model_space(const torch::Tensor& images);
torch::Tensor to_image_space(const torch::Tensor& x);

// Per-pixel mean squared error of the predicted noise, for a batch of images in [-1, 1]; t and
// the noise, and the dropout masks, come from `generator`.
torch::Tensor training_loss(Model& model, const torch::Tensor& x0, at::Generator generator);
// The same loss over rows [begin, end) of the batch only (a part of a step split across threads
// or ranks): `whole` holds t and the noise drawn for the whole batch
// (diffusion::make_training_example, t not antithetic), the dropout masks come from `dropout`.
torch::Tensor training_loss(Model& model, const torch::Tensor& x0,
                            const diffusion::TrainingExample& whole, at::Generator dropout,
                            int64_t begin, int64_t end);

// A fixed held-out batch: steps spread evenly over [0, T) and noise drawn once from `seed`, so
// losses under different weights compare, and computing one draws nothing from the global
// generator (training stays exactly resumable).
struct HeldOutBatch {
  torch::Tensor x0, noise, t;
};
HeldOutBatch make_held_out_batch(const Model& model, const torch::Tensor& images, uint64_t seed);
double held_out_loss(Model& model, const HeldOutBatch& batch);  // eval mode, no gradients

struct SampleOptions {
  int64_t count = 16;
  int64_t ddim_steps = 0;   // 0: the full ancestral chain
  double ddim_eta = 0;      // DDIM noise in [0, 1] (diffusion::SamplerOptions); DDIM only
  int64_t batch = 64;       // images denoised at once
  uint64_t seed = 0;
  diffusion::ProgressFn progress;  // (0, total) before the first batch, (finished, total) after each
};
// Images in [0, 1], (count, channels, size, size), float32; deterministic given the seed.
torch::Tensor sample(Model& model, const SampleOptions& options);
// "ancestral (1000 steps)" or "DDIM 50 steps, eta 0".
std::string sampler_description(const SampleOptions& options);

// The model (its EMA weights, when trained) and metadata; written atomically.
void save_model(const std::string& path, Model& model);
Model load_model(const std::string& path);

struct TrainingOptions {
  train::LoopOptions loop;  // its `ranks` too (null: one process)
  int64_t batch = 64;
};
// Trains on `images` ((N, C, H, W) in [0, 1]); each batch is drawn uniformly at random from the
// set (so the data generator alone is the data state a checkpoint needs). `averaged` (same
// architecture) receives the EMA weights. With `held_out`, each validation logs the EMA model's
// loss on it as "valid_loss".
train::LoopResult train(Model& model, Model& averaged, const torch::Tensor& images,
                        const TrainingOptions& options, uint64_t data_seed,
                        const HeldOutBatch* held_out = nullptr);

// Writes images (N, C, H, W) in [0, 1] with C = 1 or 3 as one PNG grid, `columns` wide (0: about
// square), with a one-pixel gap between tiles.
void write_image_grid(const std::string& path, const torch::Tensor& images, int64_t columns);

}  // namespace structdiff::ddpm
