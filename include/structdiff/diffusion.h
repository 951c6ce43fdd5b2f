// Diffusion machinery shared by every model: noise schedules, model parameterisations and
// samplers are three separate, swappable pieces. Time steps are 0-based: t = 0 is the first
// noising step (beta_1 in the papers), t = steps - 1 the last.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/types.h>

namespace structdiff::diffusion {

enum class ScheduleKind { linear, cosine };
ScheduleKind parse_schedule(const std::string& name);  // "linear" | "cosine"
std::vector<std::string> schedule_names();

struct ScheduleConfig {
  ScheduleKind kind = ScheduleKind::linear;
  int64_t steps = 1000;
  double beta_start = 1e-4;  // linear
  double beta_end = 0.005;   // linear; GSDM's default (DDPM uses 0.02)
  double cosine_offset = 0.008;  // cosine (Nichol & Dhariwal), betas clipped at 0.999
};

// As every configuration: `nlohmann::json(config)` and `j.get<ScheduleConfig>()`.
void to_json(nlohmann::json& j, const ScheduleConfig& config);
void from_json(const nlohmann::json& j, ScheduleConfig& config);

// Precomputed float64 tables, indexed by 0-based t.
class NoiseSchedule {
 public:
  explicit NoiseSchedule(ScheduleConfig config);
  const ScheduleConfig& config() const { return config_; }
  int64_t steps() const { return config_.steps; }
  const torch::Tensor& betas() const { return betas_; }
  const torch::Tensor& alphas_cumprod() const { return alphas_cumprod_; }
  // q(x_t | x_0) = N(sqrt(abar_t) x_0, (1 - abar_t) I): returns sqrt(abar_t) x0 + sqrt(1-abar_t) eps.
  // t: int64 (batch,) — broadcast over the remaining dimensions of x0.
  torch::Tensor add_noise(const torch::Tensor& x0, const torch::Tensor& noise,
                          const torch::Tensor& t) const;
  // Mean and variance of the posterior q(x_{t-1} | x_t, x_0) (for t = 0 the mean is x_0 and
  // the variance 0).
  torch::Tensor posterior_mean(const torch::Tensor& x0, const torch::Tensor& x_t,
                               const torch::Tensor& t) const;
  torch::Tensor posterior_variance(const torch::Tensor& t) const;  // (batch,)

 private:
  ScheduleConfig config_;
  torch::Tensor betas_, alphas_cumprod_, alphas_cumprod_prev_;
};

// What the network predicts.
enum class Prediction { x0, epsilon };
// Estimates of x_0 and of the noise from the network output for input x_t at step t.
torch::Tensor predicted_x0(const NoiseSchedule& schedule, Prediction prediction,
                           const torch::Tensor& output, const torch::Tensor& x_t,
                           const torch::Tensor& t);
torch::Tensor predicted_noise(const NoiseSchedule& schedule, Prediction prediction,
                              const torch::Tensor& output, const torch::Tensor& x_t,
                              const torch::Tensor& t);

// Training: uniform-weight squared error on the prediction target, summed over every non-batch
// dimension and averaged over the batch. `weight` (broadcastable to x0, optional) zeroes
// entries that carry no loss, e.g. observed variables.
struct TrainingExample {
  torch::Tensor x_t, t, noise;
};
// Draws t (antithetic when `antithetic`: the second half of the batch uses T-1-t of the first)
// and noise from `generator`, and returns the noised input.
TrainingExample make_training_example(const NoiseSchedule& schedule, const torch::Tensor& x0,
                                      bool antithetic, at::Generator generator);
// Rows [begin, end) of an example drawn for a whole batch: one rank's share in data-parallel
// training, each row with the t and noise a whole-batch step gives it. Throws
// std::invalid_argument for rows outside the batch.
TrainingExample example_rows(const TrainingExample& whole, int64_t begin, int64_t end);
torch::Tensor diffusion_loss(const NoiseSchedule& schedule, Prediction prediction,
                             const torch::Tensor& output, const TrainingExample& example,
                             const torch::Tensor& x0, const torch::Tensor& weight = {});

// The network as the samplers see it: raw output for input x_t at steps t (int64, (batch,)).
using ModelFn = std::function<torch::Tensor(const torch::Tensor& x_t, const torch::Tensor& t)>;
// Called after every sampler step with (steps done, total steps).
using ProgressFn = std::function<void(int64_t done, int64_t total)>;

enum class AncestralVariance { beta, posterior };  // "fixedlarge" / "fixedsmall"

struct SamplerOptions {
  Prediction prediction = Prediction::x0;
  AncestralVariance variance = AncestralVariance::beta;
  // Clip predicted x0 to [-clip, clip]; 0 disables (DDPM images use 1).
  double clip_x0 = 0.0;
  // DDIM only, in [0, 1] (Song et al. 2021, eq. 16): 0 is deterministic; 1 injects the posterior
  // variance at every step, which over all T steps is ancestral sampling with that variance.
  double ddim_eta = 0.0;
  // Applied to x after each step and to the final sample, e.g. to re-insert observed values.
  std::function<torch::Tensor(const torch::Tensor&)> clamp;
  ProgressFn progress;
  at::Generator generator;  // undefined: the default generator
};

// Ancestral DDPM sampling over all steps from x_T (given, e.g. standard normal noise); no noise
// is added at the last step. Returns x_0.
torch::Tensor sample_ancestral(const ModelFn& model, const NoiseSchedule& schedule,
                               torch::Tensor x_T, const SamplerOptions& options);
// DDIM over `num_steps` evenly spaced steps from T-1 down to 0 (deterministic unless
// options.ddim_eta > 0); num_steps == schedule.steps() visits every step.
torch::Tensor sample_ddim(const ModelFn& model, const NoiseSchedule& schedule, torch::Tensor x_T,
                          int64_t num_steps, const SamplerOptions& options);
// DDIM's `count` steps out of `steps`, from steps - 1 down to 0, evenly spaced.
std::vector<int64_t> ddim_timesteps(int64_t steps, int64_t count);
// One DDIM step from x at `step` (t: that step per sample) to `next_step`, given the x0 estimate;
// eta as SamplerOptions::ddim_eta, its noise from `generator`.
torch::Tensor ddim_step(const NoiseSchedule& schedule, const torch::Tensor& x0_hat,
                        const torch::Tensor& x, const torch::Tensor& t, int64_t step,
                        int64_t next_step, double eta, const at::Generator& generator);

}  // namespace structdiff::diffusion
