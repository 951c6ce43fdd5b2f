// Samplers: ancestral DDPM (Ho et al., 2020) and DDIM (Song et al., 2021).
#include <cmath>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "structdiff/diffusion.h"
#include "structdiff/random.h"

namespace structdiff::diffusion {
namespace {

void check_sampler_inputs(const torch::Tensor& x_T, const SamplerOptions& options,
                          const std::string& caller) {
  if (!x_T.defined() || x_T.dim() < 1) {
    throw std::invalid_argument(caller + ": x_T needs a batch dimension");
  }
  if (!(options.clip_x0 >= 0)) {
    std::ostringstream message;
    message << caller << ": clip_x0 must be >= 0 (0 disables clipping), got " << options.clip_x0;
    throw std::invalid_argument(message.str());
  }
}

// The same step for the whole batch, as the model and the schedule expect it.
torch::Tensor batch_steps(int64_t step, const torch::Tensor& x) {
  return torch::full({x.size(0)}, step,
                     torch::TensorOptions().dtype(torch::kLong).device(x.device()));
}

torch::Tensor estimate_x0(const ModelFn& model, const NoiseSchedule& schedule,
                          const SamplerOptions& options, const torch::Tensor& x_t,
                          const torch::Tensor& t) {
  const torch::Tensor x0_hat = predicted_x0(schedule, options.prediction, model(x_t, t), x_t, t);
  return options.clip_x0 > 0 ? x0_hat.clamp(-options.clip_x0, options.clip_x0) : x0_hat;
}

// Common end of every step: the clamp hook (e.g. re-inserting observed values), then progress.
torch::Tensor finish_step(torch::Tensor x, const SamplerOptions& options, int64_t done,
                          int64_t total) {
  if (options.clamp) x = options.clamp(x);
  if (options.progress) options.progress(done, total);
  return x;
}

}  // namespace

// Rounded to the nearest step; distinct because the spacing (T-1)/(count-1) is at least one step
// when count <= T.
std::vector<int64_t> ddim_timesteps(int64_t steps, int64_t count) {
  if (count == 1) return {steps - 1};
  std::vector<int64_t> timesteps(count);
  for (int64_t i = 0; i < count; ++i) {
    const int64_t numerator = (steps - 1) * (count - 1 - i);
    timesteps[i] = (2 * numerator + count - 1) / (2 * (count - 1));  // round half up
  }
  return timesteps;
}

torch::Tensor ddim_step(const NoiseSchedule& schedule, const torch::Tensor& x0_hat,
                        const torch::Tensor& x, const torch::Tensor& t, int64_t step,
                        int64_t next_step, double eta, const at::Generator& generator) {
  // The noise consistent with the (possibly clipped) x0_hat, re-scaled to the next step.
  const torch::Tensor noise_hat = predicted_noise(schedule, Prediction::x0, x0_hat, x, t);
  const double abar = schedule.alphas_cumprod()[step].item<double>();
  const double abar_next = schedule.alphas_cumprod()[next_step].item<double>();
  const double sigma = eta * std::sqrt((1 - abar_next) / (1 - abar) * (1 - abar / abar_next));
  torch::Tensor next = std::sqrt(abar_next) * x0_hat + std::sqrt(1 - abar_next - sigma * sigma) * noise_hat;
  if (sigma > 0) next = next + sigma * random::normal(x.sizes(), generator, x.options());
  return next;
}

torch::Tensor sample_ancestral(const ModelFn& model, const NoiseSchedule& schedule,
                               torch::Tensor x_T, const SamplerOptions& options) {
  check_sampler_inputs(x_T, options, "sample_ancestral");
  torch::NoGradGuard no_grad;
  const int64_t total = schedule.steps();
  torch::Tensor x = std::move(x_T);
  for (int64_t step = total - 1; step >= 0; --step) {
    const torch::Tensor t = batch_steps(step, x);
    const torch::Tensor x0_hat = estimate_x0(model, schedule, options, x, t);
    // At step 0 the posterior mean is x0_hat itself and no noise is added.
    torch::Tensor next = schedule.posterior_mean(x0_hat, x, t);
    if (step > 0) {
      const double variance = options.variance == AncestralVariance::beta
                                  ? schedule.betas()[step].item<double>()
                                  : schedule.posterior_variance(t)[0].item<double>();
      next = next + std::sqrt(variance) * random::normal(x.sizes(), options.generator, x.options());
    }
    x = finish_step(std::move(next), options, total - step, total);
  }
  return x;
}

torch::Tensor sample_ddim(const ModelFn& model, const NoiseSchedule& schedule, torch::Tensor x_T,
                          int64_t num_steps, const SamplerOptions& options) {
  check_sampler_inputs(x_T, options, "sample_ddim");
  if (num_steps < 1 || num_steps > schedule.steps()) {
    throw std::invalid_argument("sample_ddim: num_steps must be in [1, " +
                                std::to_string(schedule.steps()) + "], got " +
                                std::to_string(num_steps));
  }
  if (!(options.ddim_eta >= 0 && options.ddim_eta <= 1)) {
    std::ostringstream message;
    message << "sample_ddim: ddim_eta must be in [0, 1], got " << options.ddim_eta;
    throw std::invalid_argument(message.str());
  }
  torch::NoGradGuard no_grad;
  const std::vector<int64_t> timesteps = ddim_timesteps(schedule.steps(), num_steps);
  torch::Tensor x = std::move(x_T);
  for (size_t i = 0; i < timesteps.size(); ++i) {
    const torch::Tensor t = batch_steps(timesteps[i], x);
    const torch::Tensor x0_hat = estimate_x0(model, schedule, options, x, t);
    torch::Tensor next = x0_hat;  // after the last step: abar_prev = 1
    if (i + 1 < timesteps.size()) {
      next = ddim_step(schedule, x0_hat, x, t, timesteps[i], timesteps[i + 1], options.ddim_eta,
                       options.generator);
    }
    x = finish_step(std::move(next), options, static_cast<int64_t>(i) + 1, num_steps);
  }
  return x;
}

}  // namespace structdiff::diffusion
