// What the network predicts (x0 or epsilon), the conversions between the two, and the training
// objective.
#include <stdexcept>

#include <torch/torch.h>

#include "diffusion/detail.h"
#include "structdiff/diffusion.h"
#include "structdiff/random.h"

namespace structdiff::diffusion {

// Both conversions invert x_t = signal * x0 + noise * eps for the unknown that was not predicted.
torch::Tensor predicted_x0(const NoiseSchedule& schedule, Prediction prediction,
                           const torch::Tensor& output, const torch::Tensor& x_t,
                           const torch::Tensor& t) {
  detail::check_same_shape(output, "output", x_t, "x_t", "predicted_x0");
  // Validates t even when the output is returned as it is.
  const detail::NoiseScales scales = detail::noise_scales(schedule, t, x_t, "predicted_x0");
  if (prediction == Prediction::x0) return output;
  return (x_t - scales.noise * output) / scales.signal;
}

torch::Tensor predicted_noise(const NoiseSchedule& schedule, Prediction prediction,
                              const torch::Tensor& output, const torch::Tensor& x_t,
                              const torch::Tensor& t) {
  detail::check_same_shape(output, "output", x_t, "x_t", "predicted_noise");
  // Validates t even when the output is returned as it is.
  const detail::NoiseScales scales = detail::noise_scales(schedule, t, x_t, "predicted_noise");
  if (prediction == Prediction::epsilon) return output;
  return (x_t - scales.signal * output) / scales.noise;
}

TrainingExample make_training_example(const NoiseSchedule& schedule, const torch::Tensor& x0,
                                      bool antithetic, at::Generator generator) {
  if (!x0.defined() || x0.dim() < 1) {
    throw std::invalid_argument("make_training_example: x0 needs a batch dimension");
  }
  if (!generator.defined()) throw std::invalid_argument("make_training_example: needs a generator");
  const int64_t batch = x0.size(0);
  const int64_t steps = schedule.steps();
  const auto step_options = torch::TensorOptions().dtype(torch::kLong).device(x0.device());
  torch::Tensor t;
  if (antithetic) {
    // Pairs (t, T-1-t) cover early and late steps together, lowering the loss variance.
    const int64_t drawn = (batch + 1) / 2;
    const torch::Tensor first = random::integers(0, steps, {drawn}, generator, step_options);
    t = torch::cat({first, steps - 1 - first.slice(0, 0, batch - drawn)});
  } else {
    t = random::integers(0, steps, {batch}, generator, step_options);
  }
  const torch::Tensor noise = random::normal(x0.sizes(), generator, x0.options());
  return {schedule.add_noise(x0, noise, t), t, noise};
}

TrainingExample example_rows(const TrainingExample& whole, int64_t begin, int64_t end) {
  const int64_t batch = whole.x_t.size(0);
  if (begin < 0 || end <= begin || end > batch) {
    throw std::invalid_argument("example_rows: rows " + std::to_string(begin) + ".." +
                                std::to_string(end) + " of a batch of " + std::to_string(batch));
  }
  const auto rows = [&](const torch::Tensor& t) { return t.narrow(0, begin, end - begin); };
  return {rows(whole.x_t), rows(whole.t), rows(whole.noise)};
}

// The weight is uniform over t, so the schedule is not needed here.
torch::Tensor diffusion_loss(const NoiseSchedule& /*schedule*/, Prediction prediction,
                             const torch::Tensor& output, const TrainingExample& example,
                             const torch::Tensor& x0, const torch::Tensor& weight) {
  const bool targets_x0 = prediction == Prediction::x0;
  const torch::Tensor& target = targets_x0 ? x0 : example.noise;
  detail::check_same_shape(output, "output", target, targets_x0 ? "x0" : "noise", "diffusion_loss");
  torch::Tensor squared_error = (output - target).pow(2);
  if (weight.defined()) squared_error = squared_error * weight;
  return squared_error.reshape({squared_error.size(0), -1}).sum(1).mean();
}

}  // namespace structdiff::diffusion
