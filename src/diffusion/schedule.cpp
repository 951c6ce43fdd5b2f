// Noise schedules: float64 tables of beta_t and alpha_bar_t, the forward process q(x_t | x_0) and
// the posterior q(x_{t-1} | x_t, x_0).
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <c10/util/MathConstants.h>
#include <torch/torch.h>

#include "diffusion/detail.h"
#include "structdiff/diffusion.h"
#include "structdiff/enum_names.h"

namespace structdiff::diffusion {
namespace {

constexpr double kMaxCosineBeta = 0.999;

template <typename... Parts>
std::string text(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}

void validate(const ScheduleConfig& config) {
  if (config.steps < 1) {
    throw std::invalid_argument(text("NoiseSchedule: steps must be >= 1, got ", config.steps));
  }
  switch (config.kind) {
    case ScheduleKind::linear:
      // Written as !(good) so that NaN is rejected too.
      if (!(config.beta_start > 0 && config.beta_start < 1)) {
        throw std::invalid_argument(
            text("NoiseSchedule: beta_start must be in (0, 1), got ", config.beta_start));
      }
      if (!(config.beta_end >= config.beta_start && config.beta_end < 1)) {
        throw std::invalid_argument(text("NoiseSchedule: beta_end must be in [beta_start = ",
                                         config.beta_start, ", 1), got ", config.beta_end));
      }
      break;
    case ScheduleKind::cosine:
      if (!(config.cosine_offset >= 0)) {
        throw std::invalid_argument(
            text("NoiseSchedule: cosine_offset must be >= 0, got ", config.cosine_offset));
      }
      break;
  }
}

torch::Tensor linear_betas(const ScheduleConfig& config) {
  return torch::linspace(config.beta_start, config.beta_end, config.steps,
                         torch::TensorOptions().dtype(torch::kDouble));
}

// Nichol & Dhariwal (2021): abar(u) = f(u) / f(0) with f(u) = cos^2((u/T + s) / (1 + s) * pi/2),
// beta_t = 1 - abar(t+1) / abar(t), clipped because abar(T) is ~0 and beta_T would be ~1.
torch::Tensor cosine_betas(const ScheduleConfig& config) {
  const double offset = config.cosine_offset;
  const torch::Tensor fraction =
      torch::arange(config.steps + 1, torch::TensorOptions().dtype(torch::kDouble)) / config.steps;
  const torch::Tensor f =
      torch::cos((fraction + offset) / (1 + offset) * (c10::pi<double> / 2)).pow(2);
  const torch::Tensor ratio = f.slice(0, 1) / f.slice(0, 0, config.steps);
  return (1 - ratio).clamp_max(kMaxCosineBeta);
}

// Checks t and returns it on the CPU, where the tables live, ready for index_select.
torch::Tensor timestep_indices(const torch::Tensor& t, int64_t steps, const std::string& caller) {
  if (!t.defined() || t.scalar_type() != torch::kLong || t.dim() != 1) {
    throw std::invalid_argument(text(caller, ": t must be an int64 vector (batch,), got ",
                                     t.defined() ? text(t.scalar_type(), " of shape ", t.sizes())
                                                 : std::string("an undefined tensor")));
  }
  const torch::Tensor indices = t.cpu();
  if (indices.numel() > 0) {
    const int64_t lowest = indices.min().item<int64_t>();
    const int64_t highest = indices.max().item<int64_t>();
    if (lowest < 0 || highest >= steps) {
      throw std::invalid_argument(
          text(caller, ": t must be in [0, ", steps, "), got ", lowest < 0 ? lowest : highest));
    }
  }
  return indices;
}

// Per-sample float64 coefficients (batch,) as x's dtype and device, shaped (batch, 1, ..., 1).
torch::Tensor per_sample(const torch::Tensor& coefficients, const torch::Tensor& x,
                         const std::string& caller) {
  if (!x.defined() || x.dim() < 1 || x.size(0) != coefficients.size(0)) {
    throw std::invalid_argument(text(caller, ": t has ", coefficients.size(0),
                                     " entries but x has shape ",
                                     x.defined() ? text(x.sizes()) : std::string("undefined")));
  }
  std::vector<int64_t> shape(x.dim(), 1);
  shape[0] = x.size(0);
  return coefficients.reshape(shape).to(x.options());
}

}  // namespace

namespace {
const auto kScheduleNames = enum_names<ScheduleKind>("noise schedule", {
    {ScheduleKind::linear, "linear"},
    {ScheduleKind::cosine, "cosine"},
});
}  // namespace

ScheduleKind parse_schedule(const std::string& name) { return kScheduleNames.parse(name); }

std::vector<std::string> schedule_names() { return kScheduleNames.choices(); }

NoiseSchedule::NoiseSchedule(ScheduleConfig config) : config_(config) {
  validate(config_);
  betas_ = config_.kind == ScheduleKind::linear ? linear_betas(config_) : cosine_betas(config_);
  alphas_cumprod_ = torch::cumprod(1 - betas_, 0);
  // abar_{-1} = 1: before the first step x is the data itself.
  alphas_cumprod_prev_ =
      torch::cat({torch::ones({1}, betas_.options()), alphas_cumprod_.slice(0, 0, -1)});
}

torch::Tensor NoiseSchedule::add_noise(const torch::Tensor& x0, const torch::Tensor& noise,
                                       const torch::Tensor& t) const {
  detail::check_same_shape(noise, "noise", x0, "x0", "add_noise");
  const detail::NoiseScales scales = detail::noise_scales(*this, t, x0, "add_noise");
  return scales.signal * x0 + scales.noise * noise;
}

torch::Tensor NoiseSchedule::posterior_mean(const torch::Tensor& x0, const torch::Tensor& x_t,
                                            const torch::Tensor& t) const {
  detail::check_same_shape(x0, "x0", x_t, "x_t", "posterior_mean");
  const torch::Tensor indices = timestep_indices(t, steps(), "posterior_mean");
  const torch::Tensor beta = betas_.index_select(0, indices);
  const torch::Tensor abar = alphas_cumprod_.index_select(0, indices);
  const torch::Tensor abar_prev = alphas_cumprod_prev_.index_select(0, indices);
  // Ho et al. (2020), eq. 7.
  const torch::Tensor x0_weight = beta * abar_prev.sqrt() / (1 - abar);
  const torch::Tensor x_t_weight = (1 - abar_prev) * (1 - beta).sqrt() / (1 - abar);
  return per_sample(x0_weight, x0, "posterior_mean") * x0 +
         per_sample(x_t_weight, x_t, "posterior_mean") * x_t;
}

torch::Tensor NoiseSchedule::posterior_variance(const torch::Tensor& t) const {
  const torch::Tensor indices = timestep_indices(t, steps(), "posterior_variance");
  const torch::Tensor abar = alphas_cumprod_.index_select(0, indices);
  const torch::Tensor abar_prev = alphas_cumprod_prev_.index_select(0, indices);
  return betas_.index_select(0, indices) * (1 - abar_prev) / (1 - abar);
}

namespace detail {

NoiseScales noise_scales(const NoiseSchedule& schedule, const torch::Tensor& t,
                         const torch::Tensor& x, const std::string& caller) {
  const torch::Tensor abar =
      schedule.alphas_cumprod().index_select(0, timestep_indices(t, schedule.steps(), caller));
  return {per_sample(abar.sqrt(), x, caller), per_sample((1 - abar).sqrt(), x, caller)};
}

void check_same_shape(const torch::Tensor& a, const std::string& a_name, const torch::Tensor& b,
                      const std::string& b_name, const std::string& caller) {
  if (!a.defined() || !b.defined() || a.sizes() != b.sizes()) {
    const auto shape = [](const torch::Tensor& x) {
      return x.defined() ? text(x.sizes()) : std::string("undefined");
    };
    throw std::invalid_argument(text(caller, ": ", a_name, " has shape ", shape(a), " but ", b_name,
                                     " has shape ", shape(b)));
  }
}

}  // namespace detail
}  // namespace structdiff::diffusion
