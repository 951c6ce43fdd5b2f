#include "structdiff/ddpm.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "structdiff/model_file.h"
#include "structdiff/runtime.h"
#include "structdiff/training_loop.h"
#include "util/png.h"

namespace structdiff::ddpm {

diffusion::ScheduleConfig default_schedule() {
  diffusion::ScheduleConfig schedule;
  schedule.beta_start = 1e-4;
  schedule.beta_end = 0.02;
  schedule.steps = 1000;
  return schedule;
}

nlohmann::json model_metadata(const unet::UNetConfig& unet, const diffusion::ScheduleConfig& schedule) {
  return {{"kind", "ddpm"}, {"config", {{"unet", unet}, {"schedule", schedule}}}};
}

Model build_model(const nlohmann::json& metadata) {
  const nlohmann::json config = metadata.value("config", nlohmann::json::object());
  if (!config.contains("unet") || !config.contains("schedule")) {
    throw std::invalid_argument("not a DDPM model: its config lacks \"unet\" or \"schedule\"");
  }
  Model model;
  model.net = unet::UNet(config.at("unet").get<unet::UNetConfig>());
  model.schedule = diffusion::NoiseSchedule(config.at("schedule").get<diffusion::ScheduleConfig>());
  model.metadata = metadata;
  return model;
}

torch::Tensor to_model_space(const torch::Tensor& images) { return images * 2.0 - 1.0; }
torch::Tensor to_image_space(const torch::Tensor& x) { return ((x + 1.0) * 0.5).clamp(0.0, 1.0); }

torch::Tensor training_loss(Model& model, const torch::Tensor& x0, at::Generator generator) {
  const diffusion::TrainingExample whole =
      diffusion::make_training_example(model.schedule, x0, /*antithetic=*/false, generator);
  return training_loss(model, x0, whole, std::move(generator), 0, x0.size(0));
}

torch::Tensor training_loss(Model& model, const torch::Tensor& x0_in,
                            const diffusion::TrainingExample& whole, at::Generator dropout,
                            int64_t begin, int64_t end) {
  const diffusion::TrainingExample example = diffusion::example_rows(whole, begin, end);
  const torch::Tensor x0 = x0_in.narrow(0, begin, end - begin);
  const torch::Tensor output = model.net(example.x_t, example.t, &dropout);
  // diffusion_loss sums over each image; per pixel keeps the scale independent of image size.
  const double pixels = static_cast<double>(x0[0].numel());
  return diffusion::diffusion_loss(model.schedule, diffusion::Prediction::epsilon, output, example,
                                   x0) / pixels;
}

HeldOutBatch make_held_out_batch(const Model& model, const torch::Tensor& images, uint64_t seed) {
  if (images.dim() != 4 || images.size(0) < 1) {
    throw std::invalid_argument("make_held_out_batch: images must be a non-empty (N, C, H, W) tensor");
  }
  HeldOutBatch batch;
  batch.x0 = to_model_space(images.to(torch::kFloat));
  const int64_t count = batch.x0.size(0);
  batch.t = (torch::arange(count, torch::kLong) * model.schedule.steps()).div(count, "floor");
  batch.noise = torch::randn(batch.x0.sizes(), at::make_generator<at::CPUGeneratorImpl>(seed));
  return batch;
}

double held_out_loss(Model& model, const HeldOutBatch& batch) {
  torch::NoGradGuard no_grad;
  const bool was_training = model.net->is_training();
  model.net->eval();
  const torch::Tensor x_t = model.schedule.add_noise(batch.x0, batch.noise, batch.t);
  const double loss = (model.net(x_t, batch.t) - batch.noise).square().mean().item<double>();
  model.net->train(was_training);
  return loss;
}

torch::Tensor sample(Model& model, const SampleOptions& options) {
  if (options.count < 1) throw std::invalid_argument("sample: count must be >= 1");
  if (options.batch < 1) throw std::invalid_argument("sample: batch must be >= 1");
  if (options.ddim_steps < 0 || options.ddim_steps > model.schedule.steps()) {
    throw std::invalid_argument("sample: DDIM steps must be in [1, " +
                                std::to_string(model.schedule.steps()) +
                                "], or 0 for the ancestral chain; got " +
                                std::to_string(options.ddim_steps));
  }
  if (options.ddim_eta != 0 && options.ddim_steps == 0) {
    throw std::invalid_argument("sample: eta applies to DDIM; the ancestral chain (0 DDIM steps) takes none");
  }
  const unet::UNetConfig& config = model.net->config();
  // The finished images stay in memory, and a batch in flight holds about 40 full-resolution maps
  // of base_channels per image.
  const double pixels = static_cast<double>(config.image_size * config.image_size);
  require_memory(4.0 * pixels *
                     (static_cast<double>(options.count * config.image_channels) +
                      40.0 * static_cast<double>(std::min(options.batch, options.count) * config.base_channels)),
                 std::to_string(options.count) + " images in batches of " + std::to_string(options.batch));
  torch::NoGradGuard no_grad;
  model.net->eval();
  diffusion::SamplerOptions sampler;
  sampler.prediction = diffusion::Prediction::epsilon;
  sampler.variance = diffusion::AncestralVariance::posterior;
  sampler.clip_x0 = 1.0;
  sampler.ddim_eta = options.ddim_eta;
  sampler.generator = at::make_generator<at::CPUGeneratorImpl>(options.seed);
  const diffusion::ModelFn net = [&](const torch::Tensor& x, const torch::Tensor& t) {
    return model.net(x, t);
  };
  std::vector<torch::Tensor> images;
  if (options.progress) options.progress(0, options.count);
  for (int64_t first = 0; first < options.count; first += options.batch) {
    const int64_t size = std::min(options.batch, options.count - first);
    torch::Tensor x_T = torch::randn({size, config.image_channels, config.image_size, config.image_size},
                                     sampler.generator);
    torch::Tensor x0 = options.ddim_steps == 0
                           ? diffusion::sample_ancestral(net, model.schedule, x_T, sampler)
                           : diffusion::sample_ddim(net, model.schedule, x_T, options.ddim_steps, sampler);
    images.push_back(to_image_space(x0));
    if (options.progress) options.progress(first + size, options.count);
  }
  return torch::cat(images, 0);
}

std::string sampler_description(const SampleOptions& options) {
  if (options.ddim_steps == 0) return "ancestral (1000 steps)";
  char eta[32];
  std::snprintf(eta, sizeof eta, "%g", options.ddim_eta);
  return "DDIM " + std::to_string(options.ddim_steps) + " steps, eta " + eta;
}

void save_model(const std::string& path, Model& model) {
  train::save_model_file(path, "ddpm", *model.net, model.metadata);
}

Model load_model(const std::string& path) {
  Model model;
  model.metadata =
      train::load_model_file(path, "ddpm", [&](const nlohmann::json& metadata) -> torch::nn::Module& {
        model = build_model(metadata);
        return *model.net;
      });
  return model;
}

train::LoopResult train(Model& model, Model& averaged, const torch::Tensor& images,
                        const TrainingOptions& options, uint64_t data_seed,
                        const HeldOutBatch* held_out) {
  if (images.dim() != 4 || images.size(0) < 1) {
    throw std::invalid_argument("ddpm::train: images must be a non-empty (N, C, H, W) tensor");
  }
  if (options.batch < 1) throw std::invalid_argument("--batch must be >= 1, got " + std::to_string(options.batch));
  // What one step keeps for the backward pass: roughly 40 full-resolution maps of
  // base_channels per image, 4 bytes each.
  const unet::UNetConfig& config = model.net->config();
  require_memory(4.0 * 40.0 * static_cast<double>(config.base_channels * images.size(2) * images.size(3)) *
                     static_cast<double>(options.batch),
                 "a training batch of " + std::to_string(options.batch));
  const torch::Tensor data = to_model_space(images.to(torch::kFloat));
  const int64_t count = data.size(0);
  train::LoopTask task;
  task.model = model.net.ptr().get();
  task.ema_model = averaged.net.ptr().get();
  task.metadata = model.metadata;
  auto draw_batch = [&](std::mt19937_64& rng) {
    std::uniform_int_distribution<int64_t> pick(0, count - 1);
    std::vector<int64_t> indices(options.batch);
    for (int64_t& index : indices) index = pick(rng);
    return data.index_select(0, torch::tensor(indices));
  };
  train::check_even_split(options.batch, options.loop.ranks);
  // One part for the whole shard: FAVOR+ attention counts its training calls to redraw its
  // features, state that parts on several threads would race on. The dropout masks are drawn for
  // the shard's rows: with dropout, ranks train on other masks than one process would (without
  // it, on the same numbers).
  task.loss_parts = [&](int64_t, std::mt19937_64& rng, at::Generator& noise,
                        const std::vector<train::Shard>& parts) {
    const torch::Tensor batch = draw_batch(rng);
    const diffusion::TrainingExample whole =
        diffusion::make_training_example(model.schedule, batch, /*antithetic=*/false, noise);
    const int64_t begin = parts.front().begin(options.batch), end = parts.back().end(options.batch);
    const auto mean_loss = [&, batch, whole, begin, end] {
      return training_loss(model, batch, whole, noise, begin, end);
    };
    return std::vector<train::LossPart>{{static_cast<double>(end - begin), mean_loss}};
  };
  if (held_out != nullptr) {
    task.validate = [&averaged, held_out] {
      return nlohmann::json{{"valid_loss", held_out_loss(averaged, *held_out)}};
    };
  }
  return train::run_training(task, options.loop, data_seed);
}

void write_image_grid(const std::string& path, const torch::Tensor& images, int64_t columns) {
  if (images.dim() != 4 || images.size(0) < 1 || (images.size(1) != 1 && images.size(1) != 3)) {
    throw std::invalid_argument("write_image_grid: images must be (N >= 1, 1 or 3, H, W)");
  }
  if (columns < 0) throw std::invalid_argument("write_image_grid: columns must be >= 0");
  const int64_t count = images.size(0), channels = images.size(1);
  if (columns == 0) columns = static_cast<int64_t>(std::ceil(std::sqrt(static_cast<double>(count))));
  const int64_t height = images.size(2), width = images.size(3);
  const int64_t cols = std::min(columns, count), rows = (count + cols - 1) / cols;
  const int64_t grid_width = cols * (width + 1) - 1, grid_height = rows * (height + 1) - 1;
  const torch::Tensor bytes = (images.to(torch::kFloat).clamp(0, 1) * 255.0)
                                  .round()
                                  .to(torch::kUInt8)
                                  .permute({0, 2, 3, 1})
                                  .contiguous();
  const uint8_t* source = bytes.data_ptr<uint8_t>();
  std::vector<uint8_t> pixels(grid_width * grid_height * channels, 255);  // white gaps
  for (int64_t n = 0; n < count; ++n) {
    const int64_t top = (n / cols) * (height + 1), left = (n % cols) * (width + 1);
    for (int64_t y = 0; y < height; ++y) {
      std::copy_n(source + ((n * height + y) * width) * channels, width * channels,
                  pixels.begin() + ((top + y) * grid_width + left) * channels);
    }
  }
  write_png_file(path, grid_width, grid_height, static_cast<int>(channels), pixels);
}

}  // namespace structdiff::ddpm
