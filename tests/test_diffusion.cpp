// Diffusion machinery: schedule tables, the forward process against its closed form and its
// moments, the posterior against hand-computed formulas, the two parameterisations, the training
// example and loss, both samplers against step-by-step reconstructions, hooks, and validation.
#include <cmath>
#include <utility>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <c10/util/MathConstants.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "structdiff/diffusion.h"
#include "support/gradcheck.h"

namespace structdiff::diffusion {
namespace {

const auto kFloat64 = torch::TensorOptions().dtype(torch::kDouble);

at::Generator seeded_generator(uint64_t seed) {
  return at::make_generator<at::CPUGeneratorImpl>(seed);
}

ScheduleConfig linear_config(int64_t steps, double beta_start, double beta_end) {
  ScheduleConfig config;
  config.steps = steps;
  config.beta_start = beta_start;
  config.beta_end = beta_end;
  return config;
}

torch::Tensor steps_tensor(std::vector<int64_t> values) {
  return torch::tensor(values, torch::TensorOptions().dtype(torch::kLong));
}

double at(const torch::Tensor& table, int64_t t) { return table[t].item<double>(); }

// abar_t as a plain running product of (1 - beta), independent of the schedule's cumprod.
std::vector<double> hand_alphas_cumprod(const NoiseSchedule& schedule) {
  std::vector<double> abar;
  double product = 1;
  for (int64_t t = 0; t < schedule.steps(); ++t) {
    product *= 1 - at(schedule.betas(), t);
    abar.push_back(product);
  }
  return abar;
}

// Ho et al. (2020), eq. 7, written out for one step.
struct HandPosterior {
  double x0_weight, x_t_weight, variance;
};
HandPosterior hand_posterior(const NoiseSchedule& schedule, int64_t t) {
  const std::vector<double> abar = hand_alphas_cumprod(schedule);
  const double beta = at(schedule.betas(), t);
  const double abar_prev = t == 0 ? 1.0 : abar[t - 1];
  return {beta * std::sqrt(abar_prev) / (1 - abar[t]),
          (1 - abar_prev) * std::sqrt(1 - beta) / (1 - abar[t]),
          beta * (1 - abar_prev) / (1 - abar[t])};
}

// Per-sample moments along dim 0 equal `mean` and `variance` within five standard errors.
void expect_moments(const torch::Tensor& samples, const torch::Tensor& mean, double variance) {
  const double count = static_cast<double>(samples.size(0));
  const double mean_tolerance = 5 * std::sqrt(variance / count);
  const double variance_tolerance = 5 * variance * std::sqrt(2 / count);
  EXPECT_LT((samples.mean(0) - mean).abs().max().item<double>(), mean_tolerance);
  EXPECT_LT((samples.var(0) - variance).abs().max().item<double>(), variance_tolerance);
}

TEST(Schedule, ParsesNames) {
  EXPECT_EQ(parse_schedule("linear"), ScheduleKind::linear);
  EXPECT_EQ(parse_schedule("cosine"), ScheduleKind::cosine);
  EXPECT_THROW_WITH(parse_schedule("quadratic"), std::invalid_argument,
                    "unknown noise schedule 'quadratic' (choose linear or cosine)");
}

TEST(Schedule, LinearTables) {
  const NoiseSchedule gsdm{ScheduleConfig{}};
  const torch::Tensor& betas = gsdm.betas();
  ASSERT_EQ(betas.scalar_type(), torch::kDouble);
  ASSERT_EQ(gsdm.alphas_cumprod().scalar_type(), torch::kDouble);
  ASSERT_EQ(betas.size(0), 1000);
  EXPECT_DOUBLE_EQ(at(betas, 0), 1e-4);
  EXPECT_DOUBLE_EQ(at(betas, 999), 0.005);
  EXPECT_NEAR(at(betas, 1) - at(betas, 0), (0.005 - 1e-4) / 999, 1e-15);
  const torch::Tensor abar = gsdm.alphas_cumprod();
  EXPECT_TRUE((abar.slice(0, 1) < abar.slice(0, 0, -1)).all().item<bool>());
  EXPECT_DOUBLE_EQ(at(abar, 0), 1 - 1e-4);
  EXPECT_NEAR(std::sqrt(at(abar, 999)), 0.28, 0.005);  // GSDM's x_T keeps some signal

  const NoiseSchedule ddpm{linear_config(1000, 1e-4, 0.02)};
  EXPECT_LT(std::sqrt(at(ddpm.alphas_cumprod(), 999)), 0.01);
}

TEST(Schedule, CosineTables) {
  ScheduleConfig config;
  config.kind = ScheduleKind::cosine;
  const NoiseSchedule schedule{config};
  const torch::Tensor& betas = schedule.betas();
  const torch::Tensor& abar = schedule.alphas_cumprod();
  ASSERT_EQ(betas.size(0), 1000);
  ASSERT_EQ(betas.scalar_type(), torch::kDouble);
  EXPECT_TRUE((betas > 0).all().item<bool>());
  EXPECT_LE(betas.max().item<double>(), 0.999);
  EXPECT_DOUBLE_EQ(at(betas, 999), 0.999);  // clipped: abar(T) is ~0
  EXPECT_TRUE((abar.slice(0, 1) < abar.slice(0, 0, -1)).all().item<bool>());
  // Away from the clipped end, abar_t = f(t + 1) / f(0).
  const auto f = [&](double u) {
    const double s = config.cosine_offset;
    return std::pow(std::cos((u / 1000 + s) / (1 + s) * c10::pi<double> / 2), 2);
  };
  for (int64_t t : {0, 1, 250, 500, 900}) {
    EXPECT_NEAR(at(abar, t), f(t + 1) / f(0), 1e-12) << "t = " << t;
  }
  EXPECT_LT(at(abar, 999), 1e-6);
}

TEST(Schedule, RejectsInvalidConfigs) {
  EXPECT_THROW_WITH(NoiseSchedule(linear_config(0, 1e-4, 0.02)), std::invalid_argument,
                    "steps must be >= 1, got 0");
  EXPECT_THROW_WITH(NoiseSchedule(linear_config(10, 0, 0.02)), std::invalid_argument,
                    "beta_start must be in (0, 1), got 0");
  EXPECT_THROW_WITH(NoiseSchedule(linear_config(10, -0.5, 0.02)), std::invalid_argument,
                    "beta_start must be in (0, 1), got -0.5");
  EXPECT_THROW_WITH(NoiseSchedule(linear_config(10, std::nan(""), 0.02)), std::invalid_argument,
                    "beta_start must be in (0, 1), got nan");
  EXPECT_THROW_WITH(NoiseSchedule(linear_config(10, 0.1, 0.05)), std::invalid_argument,
                    "beta_end must be in [beta_start = 0.1, 1), got 0.05");
  EXPECT_THROW_WITH(NoiseSchedule(linear_config(10, 0.1, 1)), std::invalid_argument,
                    "beta_end must be in [beta_start = 0.1, 1), got 1");
  ScheduleConfig cosine;
  cosine.kind = ScheduleKind::cosine;
  cosine.cosine_offset = -0.01;
  EXPECT_THROW_WITH(NoiseSchedule{cosine}, std::invalid_argument,
                    "cosine_offset must be >= 0, got -0.01");
  // One step is a valid schedule.
  EXPECT_EQ(NoiseSchedule(linear_config(1, 0.3, 0.3)).betas().size(0), 1);
}

TEST(ForwardProcess, AddNoiseMatchesClosedForm) {
  const NoiseSchedule schedule{ScheduleConfig{}};
  torch::manual_seed(0);
  for (const auto dtype : {torch::kFloat, torch::kDouble}) {
    const torch::Tensor x0 = torch::randn({3, 2, 4}, torch::TensorOptions().dtype(dtype));
    const torch::Tensor noise = torch::randn_like(x0);
    const std::vector<int64_t> steps = {0, 500, 999};
    const torch::Tensor x_t = schedule.add_noise(x0, noise, steps_tensor(steps));
    ASSERT_EQ(x_t.scalar_type(), dtype);
    ASSERT_EQ(x_t.sizes(), x0.sizes());
    for (size_t i = 0; i < steps.size(); ++i) {
      const double abar = at(schedule.alphas_cumprod(), steps[i]);
      const torch::Tensor expected = std::sqrt(abar) * x0[i] + std::sqrt(1 - abar) * noise[i];
      EXPECT_TRUE(torch::allclose(x_t[i], expected, 1e-6, 1e-6)) << "t = " << steps[i];
    }
  }
}

TEST(ForwardProcess, AddNoiseMomentsMatchMarginal) {
  const NoiseSchedule schedule{ScheduleConfig{}};
  constexpr int64_t kSamples = 100000, kStep = 300;
  const torch::Tensor point = torch::tensor({-1.0, 0.5, 2.0}, kFloat64);
  const torch::Tensor x0 = point.expand({kSamples, 3});
  torch::manual_seed(1);
  const torch::Tensor x_t = schedule.add_noise(
      x0, torch::randn({kSamples, 3}, kFloat64),
      torch::full({kSamples}, kStep, torch::TensorOptions().dtype(torch::kLong)));
  const double abar = at(schedule.alphas_cumprod(), kStep);
  expect_moments(x_t, std::sqrt(abar) * point, 1 - abar);
}

TEST(ForwardProcess, StepByStepNoisingMatchesClosedForm) {
  // Large betas so that a few steps move the distribution visibly.
  const NoiseSchedule schedule{linear_config(4, 0.05, 0.3)};
  constexpr int64_t kSamples = 100000;
  const torch::Tensor point = torch::tensor({-1.0, 0.5, 2.0}, kFloat64);
  torch::manual_seed(2);
  torch::Tensor x = point.expand({kSamples, 3}).clone();
  for (int64_t t = 0; t < schedule.steps(); ++t) {
    const double beta = at(schedule.betas(), t);
    x = std::sqrt(1 - beta) * x + std::sqrt(beta) * torch::randn_like(x);  // q(x_t | x_{t-1})
    const double abar = at(schedule.alphas_cumprod(), t);
    SCOPED_TRACE("t = " + std::to_string(t));
    expect_moments(x, std::sqrt(abar) * point, 1 - abar);
    const torch::Tensor closed_form =
        schedule.add_noise(point.expand({kSamples, 3}), torch::randn_like(x),
                           torch::full({kSamples}, t, torch::TensorOptions().dtype(torch::kLong)));
    expect_moments(closed_form, std::sqrt(abar) * point, 1 - abar);
  }
}

TEST(Posterior, MatchesHandComputedFormulas) {
  const NoiseSchedule schedule{ScheduleConfig{}};
  torch::manual_seed(3);
  const std::vector<int64_t> steps = {0, 1, 10, 500, 999};
  const int64_t batch = static_cast<int64_t>(steps.size());
  const torch::Tensor x0 = torch::randn({batch, 5}, kFloat64);
  const torch::Tensor x_t = torch::randn({batch, 5}, kFloat64);
  const torch::Tensor mean = schedule.posterior_mean(x0, x_t, steps_tensor(steps));
  const torch::Tensor variance = schedule.posterior_variance(steps_tensor(steps));
  ASSERT_EQ(variance.sizes(), torch::IntArrayRef({batch}));
  for (int64_t i = 0; i < batch; ++i) {
    const HandPosterior hand = hand_posterior(schedule, steps[i]);
    EXPECT_TRUE(
        torch::allclose(mean[i], hand.x0_weight * x0[i] + hand.x_t_weight * x_t[i], 1e-10, 1e-12))
        << "t = " << steps[i];
    EXPECT_NEAR(at(variance, i), hand.variance, 1e-12 * hand.variance) << "t = " << steps[i];
  }
  // At t = 0 the posterior is the point mass at x0.
  EXPECT_TRUE(torch::allclose(mean[0], x0[0], 0, 1e-12));
  EXPECT_EQ(at(variance, 0), 0);
}

TEST(Posterior, KeepsDtypeOfX) {
  const NoiseSchedule schedule{ScheduleConfig{}};
  const torch::Tensor x = torch::randn({2, 3});
  EXPECT_EQ(schedule.posterior_mean(x, x, steps_tensor({4, 7})).scalar_type(), torch::kFloat);
}

TEST(Parameterisation, ConversionsRoundTrip) {
  const NoiseSchedule schedule{ScheduleConfig{}};
  torch::manual_seed(4);
  const torch::Tensor x0 = torch::randn({3, 2, 2}, kFloat64);
  const torch::Tensor noise = torch::randn_like(x0);
  const torch::Tensor t = steps_tensor({0, 400, 999});
  const torch::Tensor x_t = schedule.add_noise(x0, noise, t);
  EXPECT_TRUE(torch::equal(predicted_x0(schedule, Prediction::x0, x0, x_t, t), x0));
  EXPECT_TRUE(torch::equal(predicted_noise(schedule, Prediction::epsilon, noise, x_t, t), noise));
  EXPECT_TRUE(
      torch::allclose(predicted_x0(schedule, Prediction::epsilon, noise, x_t, t), x0, 1e-9, 1e-9));
  EXPECT_TRUE(
      torch::allclose(predicted_noise(schedule, Prediction::x0, x0, x_t, t), noise, 1e-9, 1e-9));
  // x0 -> noise -> x0 for an arbitrary output, not just the true one.
  const torch::Tensor guess = torch::randn_like(x0);
  const torch::Tensor as_noise = predicted_noise(schedule, Prediction::x0, guess, x_t, t);
  EXPECT_TRUE(torch::allclose(predicted_x0(schedule, Prediction::epsilon, as_noise, x_t, t), guess,
                              1e-9, 1e-9));
}

TEST(Training, AntitheticStepsPairUp) {
  const NoiseSchedule schedule{ScheduleConfig{}};
  torch::manual_seed(5);
  const torch::Tensor x0 = torch::randn({7, 3});
  const TrainingExample example = make_training_example(schedule, x0, /*antithetic=*/true, at::make_generator<at::CPUGeneratorImpl>(0));
  ASSERT_EQ(example.t.scalar_type(), torch::kLong);
  ASSERT_EQ(example.t.sizes(), torch::IntArrayRef({7}));
  // The first ceil(7/2) = 4 steps are drawn; the other 3 mirror the first 3.
  EXPECT_TRUE(torch::equal(example.t.slice(0, 0, 3) + example.t.slice(0, 4),
                           torch::full({3}, 999, torch::kLong)));
  EXPECT_TRUE(torch::equal(example.x_t, schedule.add_noise(x0, example.noise, example.t)));
  EXPECT_EQ(example.noise.sizes(), x0.sizes());
  EXPECT_EQ(example.noise.scalar_type(), x0.scalar_type());
}

TEST(Training, StepsAreUniformAndNoiseStandardNormal) {
  const NoiseSchedule schedule{linear_config(10, 1e-4, 0.02)};
  torch::manual_seed(6);
  const torch::Tensor x0 = torch::zeros({20000, 2}, kFloat64);
  const TrainingExample example = make_training_example(schedule, x0, /*antithetic=*/false, at::make_generator<at::CPUGeneratorImpl>(0));
  const torch::Tensor counts = torch::bincount(example.t, {}, 10).to(torch::kDouble);
  EXPECT_EQ(counts.size(0), 10);
  EXPECT_LT((counts / 20000 - 0.1).abs().max().item<double>(), 0.01);
  expect_moments(example.noise, torch::zeros({2}, kFloat64), 1.0);
}

TEST(Training, LossUsesTargetAndWeight) {
  const NoiseSchedule schedule{ScheduleConfig{}};
  torch::manual_seed(7);
  const torch::Tensor x0 = torch::randn({4, 3, 2}, kFloat64);
  const TrainingExample example = make_training_example(schedule, x0, /*antithetic=*/true, at::make_generator<at::CPUGeneratorImpl>(0));
  const torch::Tensor error = torch::randn_like(x0);
  const double expected = error.pow(2).sum().item<double>() / 4;
  EXPECT_NEAR(diffusion_loss(schedule, Prediction::x0, x0 + error, example, x0).item<double>(),
              expected, 1e-12);
  EXPECT_NEAR(diffusion_loss(schedule, Prediction::epsilon, example.noise + error, example, x0)
                  .item<double>(),
              expected, 1e-12);
  // Entries with weight zero (e.g. observed variables) carry no loss, however wrong they are;
  // the weight broadcasts over the batch.
  torch::Tensor weight = torch::ones({1, 3, 2}, kFloat64);
  weight.index_put_({0, 1}, 0);
  torch::Tensor output = x0 + error;
  output.select(1, 1).add_(1e6);
  const double kept =
      error.pow(2).sum().item<double>() - error.select(1, 1).pow(2).sum().item<double>();
  EXPECT_NEAR(diffusion_loss(schedule, Prediction::x0, output, example, x0, weight).item<double>(),
              kept / 4, 1e-12);
}

// A model whose output depends on both x_t and t, recording every call.
struct RecordingModel {
  std::vector<torch::Tensor> inputs;
  std::vector<int64_t> steps;
  torch::Tensor operator()(const torch::Tensor& x_t, const torch::Tensor& t) {
    inputs.push_back(x_t.clone());
    steps.push_back(t[0].item<int64_t>());
    return output(x_t, t[0].item<int64_t>());
  }
  static torch::Tensor output(const torch::Tensor& x_t, int64_t t) {
    return 0.7 * x_t + 0.01 * static_cast<double>(t) - 0.2;
  }
};

ModelFn as_model(RecordingModel& model) {
  return [&model](const torch::Tensor& x_t, const torch::Tensor& t) { return model(x_t, t); };
}

TEST(Ancestral, StepMatchesPosteriorWithReproducedNoise) {
  const NoiseSchedule schedule{linear_config(6, 0.02, 0.3)};
  constexpr int64_t kLast = 5;
  for (const auto variance_kind : {AncestralVariance::beta, AncestralVariance::posterior}) {
    RecordingModel model;
    SamplerOptions options;
    options.variance = variance_kind;
    options.generator = seeded_generator(11);
    const torch::Tensor x_T = torch::randn({3, 4}, kFloat64);
    const torch::Tensor sample = sample_ancestral(as_model(model), schedule, x_T, options);
    ASSERT_EQ(model.inputs.size(), 6u);

    // First step (t = T-1) by hand, with the same noise drawn from a generator seeded alike.
    const HandPosterior hand = hand_posterior(schedule, kLast);
    const double variance =
        variance_kind == AncestralVariance::beta ? at(schedule.betas(), kLast) : hand.variance;
    const torch::Tensor x0_hat = RecordingModel::output(x_T, kLast);
    const torch::Tensor noise = torch::randn({3, 4}, seeded_generator(11), kFloat64);
    const torch::Tensor expected =
        hand.x0_weight * x0_hat + hand.x_t_weight * x_T + std::sqrt(variance) * noise;
    EXPECT_TRUE(torch::allclose(model.inputs[1], expected, 1e-12, 1e-12));
    // No noise at the last step: the sample is the model's x0 estimate at t = 0.
    EXPECT_TRUE(
        torch::allclose(sample, RecordingModel::output(model.inputs.back(), 0), 1e-12, 1e-12));
    EXPECT_EQ(model.steps, (std::vector<int64_t>{5, 4, 3, 2, 1, 0}));
  }
}

TEST(Ancestral, SameGeneratorSeedGivesSameSample) {
  const NoiseSchedule schedule{ScheduleConfig{}};
  const ModelFn model = [](const torch::Tensor& x_t, const torch::Tensor&) { return 0.5 * x_t; };
  const torch::Tensor x_T = torch::randn({2, 3});
  const auto sample = [&](uint64_t seed) {
    SamplerOptions options;
    options.generator = seeded_generator(seed);
    return sample_ancestral(model, schedule, x_T, options);
  };
  EXPECT_TRUE(torch::equal(sample(1), sample(1)));
  EXPECT_FALSE(torch::equal(sample(1), sample(2)));
  // Without a generator the default one is used.
  const SamplerOptions default_generator;
  torch::manual_seed(9);
  const torch::Tensor first = sample_ancestral(model, schedule, x_T, default_generator);
  torch::manual_seed(9);
  EXPECT_TRUE(torch::equal(first, sample_ancestral(model, schedule, x_T, default_generator)));
}

TEST(Ancestral, EpsilonModelWithClippingUsesClippedEstimate) {
  const NoiseSchedule schedule{linear_config(3, 0.1, 0.3)};
  // This noise estimate implies an x0 far outside [-1, 1], so clipping decides the result.
  const ModelFn model = [](const torch::Tensor& x_t, const torch::Tensor&) {
    return -10 * torch::ones_like(x_t);
  };
  SamplerOptions options;
  options.prediction = Prediction::epsilon;
  options.clip_x0 = 1;
  const torch::Tensor sample = sample_ancestral(model, schedule, torch::zeros({2, 2}), options);
  EXPECT_TRUE(torch::allclose(sample, torch::ones({2, 2})));
}

TEST(Ddim, VisitsEvenlySpacedSteps) {
  const NoiseSchedule schedule{linear_config(9, 0.01, 0.2)};
  const auto visited = [&](int64_t num_steps) {
    RecordingModel model;
    sample_ddim(as_model(model), schedule, torch::zeros({1, 1}, kFloat64), num_steps, {});
    return model.steps;
  };
  EXPECT_EQ(visited(9), (std::vector<int64_t>{8, 7, 6, 5, 4, 3, 2, 1, 0}));
  EXPECT_EQ(visited(5), (std::vector<int64_t>{8, 6, 4, 2, 0}));
  EXPECT_EQ(visited(4), (std::vector<int64_t>{8, 5, 3, 0}));
  EXPECT_EQ(visited(2), (std::vector<int64_t>{8, 0}));
  EXPECT_EQ(visited(1), (std::vector<int64_t>{8}));
}

TEST(Ddim, MatchesDeterministicUpdate) {
  const NoiseSchedule schedule{linear_config(50, 1e-3, 0.1)};
  constexpr int64_t kNumSteps = 7;
  for (const auto prediction : {Prediction::x0, Prediction::epsilon}) {
    RecordingModel model;
    SamplerOptions options;
    options.prediction = prediction;
    const torch::Tensor x_T = torch::randn({2, 3}, kFloat64);
    const torch::Tensor sample = sample_ddim(as_model(model), schedule, x_T, kNumSteps, options);

    // Song et al. (2021), eq. 12 with sigma = 0, on the steps the sampler visited.
    const std::vector<double> abar = hand_alphas_cumprod(schedule);
    torch::Tensor x = x_T;
    for (size_t i = 0; i < model.steps.size(); ++i) {
      const int64_t t = model.steps[i];
      const torch::Tensor output = RecordingModel::output(x, t);
      const torch::Tensor x0_hat = prediction == Prediction::x0
                                       ? output
                                       : (x - std::sqrt(1 - abar[t]) * output) / std::sqrt(abar[t]);
      const torch::Tensor noise_hat = (x - std::sqrt(abar[t]) * x0_hat) / std::sqrt(1 - abar[t]);
      const double abar_next = i + 1 < model.steps.size() ? abar[model.steps[i + 1]] : 1.0;
      x = std::sqrt(abar_next) * x0_hat + std::sqrt(1 - abar_next) * noise_hat;
    }
    EXPECT_TRUE(torch::allclose(sample, x, 1e-9, 1e-9));
  }
}

TEST(Ddim, FullEtaOverEveryStepIsAncestralWithPosteriorVariance) {
  const NoiseSchedule schedule{linear_config(6, 0.02, 0.3)};
  const torch::Tensor x_T = torch::randn({3, 4}, kFloat64);
  RecordingModel ddim_model, ancestral_model;
  SamplerOptions ddim;
  ddim.ddim_eta = 1;
  ddim.generator = seeded_generator(5);
  const torch::Tensor ddim_sample = sample_ddim(as_model(ddim_model), schedule, x_T, 6, ddim);
  SamplerOptions ancestral;
  ancestral.variance = AncestralVariance::posterior;
  ancestral.generator = seeded_generator(5);
  const torch::Tensor ancestral_sample =
      sample_ancestral(as_model(ancestral_model), schedule, x_T, ancestral);
  EXPECT_TRUE(torch::allclose(ddim_sample, ancestral_sample, 1e-12, 1e-12));
  // Part-way eta is stochastic: another seed gives another sample.
  ddim.ddim_eta = 0.5;
  const torch::Tensor half = sample_ddim(as_model(ddim_model), schedule, x_T, 3, ddim);
  ddim.generator = seeded_generator(6);
  EXPECT_FALSE(torch::allclose(half, sample_ddim(as_model(ddim_model), schedule, x_T, 3, ddim)));
}

TEST(Ddim, NoiseOracleStaysOnTheForwardPathAndRecoversX0) {
  const NoiseSchedule schedule{ScheduleConfig{}};
  const torch::Tensor x0 = torch::randn({2, 5}, kFloat64);
  const torch::Tensor noise = torch::randn({2, 5}, kFloat64);
  std::vector<torch::Tensor> inputs;
  std::vector<int64_t> steps;
  const ModelFn noise_oracle = [&](const torch::Tensor& x_t, const torch::Tensor& t) {
    inputs.push_back(x_t);
    steps.push_back(t[0].item<int64_t>());
    return noise;
  };
  SamplerOptions options;
  options.prediction = Prediction::epsilon;
  const torch::Tensor x_T = schedule.add_noise(x0, noise, steps_tensor({999, 999}));
  const torch::Tensor sample = sample_ddim(noise_oracle, schedule, x_T, 1000, options);
  EXPECT_TRUE(torch::allclose(sample, x0, 1e-8, 1e-8));
  for (size_t i = 0; i < steps.size(); i += 111) {
    const torch::Tensor on_path =
        schedule.add_noise(x0, noise, torch::full({2}, steps[i], torch::kLong));
    EXPECT_TRUE(torch::allclose(inputs[i], on_path, 1e-8, 1e-8)) << "t = " << steps[i];
  }
}

TEST(Ddim, DataOracleGivesExactlyItsX0) {
  const NoiseSchedule schedule{ScheduleConfig{}};
  const torch::Tensor x0 = torch::randn({3, 4});
  const ModelFn x0_oracle = [&](const torch::Tensor&, const torch::Tensor&) { return x0; };
  for (int64_t num_steps : {1, 10, 1000}) {
    EXPECT_TRUE(
        torch::equal(sample_ddim(x0_oracle, schedule, torch::randn({3, 4}), num_steps, {}), x0))
        << num_steps << " steps";
  }
}

TEST(Samplers, ClampAndProgressRunAfterEveryStep) {
  const NoiseSchedule schedule{linear_config(20, 1e-3, 0.1)};
  for (const bool ddim : {false, true}) {
    SCOPED_TRACE(ddim ? "ddim" : "ancestral");
    const int64_t total = ddim ? 8 : 20;
    RecordingModel model;
    int64_t clamp_calls = 0;
    std::vector<std::pair<int64_t, int64_t>> progress;
    SamplerOptions options;
    // Re-insert an "observed" first column after every step.
    options.clamp = [&](const torch::Tensor& x) {
      ++clamp_calls;
      torch::Tensor clamped = x.clone();
      clamped.select(1, 0).fill_(0.25);
      return clamped;
    };
    options.progress = [&](int64_t done, int64_t of) { progress.emplace_back(done, of); };
    const torch::Tensor x_T = torch::randn({2, 3}, kFloat64);
    const torch::Tensor sample = ddim ? sample_ddim(as_model(model), schedule, x_T, total, options)
                                      : sample_ancestral(as_model(model), schedule, x_T, options);
    EXPECT_EQ(clamp_calls, total);
    ASSERT_EQ(static_cast<int64_t>(progress.size()), total);
    for (int64_t i = 0; i < total; ++i) EXPECT_EQ(progress[i], std::make_pair(i + 1, total));
    // The model sees clamped inputs after the first step, and the sample is clamped too.
    for (size_t i = 1; i < model.inputs.size(); ++i) {
      EXPECT_TRUE((model.inputs[i].select(1, 0) == 0.25).all().item<bool>()) << "call " << i;
    }
    EXPECT_TRUE((sample.select(1, 0) == 0.25).all().item<bool>());
  }
}

TEST(Samplers, RunWithoutGradients) {
  const NoiseSchedule schedule{linear_config(3, 0.1, 0.3)};
  const torch::Tensor weight = torch::ones({1}, torch::requires_grad());
  const ModelFn model = [&](const torch::Tensor& x_t, const torch::Tensor&) {
    return weight * x_t;
  };
  EXPECT_FALSE(sample_ancestral(model, schedule, torch::randn({2, 1}), {}).requires_grad());
  EXPECT_FALSE(sample_ddim(model, schedule, torch::randn({2, 1}), 2, {}).requires_grad());
}

TEST(Validation, RejectsBadTimesteps) {
  const NoiseSchedule schedule{ScheduleConfig{}};
  const torch::Tensor x = torch::zeros({2, 3});
  EXPECT_THROW_WITH(schedule.add_noise(x, x, steps_tensor({0, 1000})), std::invalid_argument,
                    "add_noise: t must be in [0, 1000), got 1000");
  EXPECT_THROW_WITH(schedule.add_noise(x, x, steps_tensor({-3, 5})), std::invalid_argument,
                    "add_noise: t must be in [0, 1000), got -3");
  EXPECT_THROW_WITH(schedule.add_noise(x, x, torch::zeros({2})), std::invalid_argument,
                    "add_noise: t must be an int64 vector (batch,), got Float of shape [2]");
  EXPECT_THROW_WITH(schedule.add_noise(x, x, torch::zeros({2, 1}, torch::kLong)),
                    std::invalid_argument, "got Long of shape [2, 1]");
  EXPECT_THROW_WITH(schedule.add_noise(x, x, steps_tensor({1, 2, 3})), std::invalid_argument,
                    "add_noise: t has 3 entries but x has shape [2, 3]");
  EXPECT_THROW_WITH(schedule.posterior_variance(steps_tensor({1000})), std::invalid_argument,
                    "posterior_variance: t must be in [0, 1000), got 1000");
  EXPECT_THROW_WITH(schedule.posterior_mean(x, x, steps_tensor({0, 1000})), std::invalid_argument,
                    "posterior_mean: t must be in [0, 1000), got 1000");
  EXPECT_THROW_WITH(predicted_x0(schedule, Prediction::x0, x, x, steps_tensor({0, 1000})),
                    std::invalid_argument, "predicted_x0: t must be in [0, 1000), got 1000");
  EXPECT_THROW_WITH(predicted_noise(schedule, Prediction::epsilon, x, x, steps_tensor({-1, 0})),
                    std::invalid_argument, "predicted_noise: t must be in [0, 1000), got -1");
}

TEST(Validation, RejectsMismatchedShapes) {
  const NoiseSchedule schedule{ScheduleConfig{}};
  const torch::Tensor x = torch::zeros({2, 3});
  const torch::Tensor other = torch::zeros({2, 4});
  const torch::Tensor t = steps_tensor({0, 1});
  EXPECT_THROW_WITH(schedule.add_noise(x, other, t), std::invalid_argument,
                    "add_noise: noise has shape [2, 4] but x0 has shape [2, 3]");
  EXPECT_THROW_WITH(schedule.posterior_mean(x, other, t), std::invalid_argument,
                    "posterior_mean: x0 has shape [2, 3] but x_t has shape [2, 4]");
  EXPECT_THROW_WITH(predicted_x0(schedule, Prediction::epsilon, other, x, t), std::invalid_argument,
                    "predicted_x0: output has shape [2, 4] but x_t has shape [2, 3]");
  EXPECT_THROW_WITH(predicted_noise(schedule, Prediction::x0, other, x, t), std::invalid_argument,
                    "predicted_noise: output has shape [2, 4] but x_t has shape [2, 3]");
  const TrainingExample example = make_training_example(schedule, x, false, at::make_generator<at::CPUGeneratorImpl>(0));
  EXPECT_THROW_WITH(diffusion_loss(schedule, Prediction::x0, other, example, x),
                    std::invalid_argument,
                    "diffusion_loss: output has shape [2, 4] but x0 has shape [2, 3]");
  EXPECT_THROW_WITH(diffusion_loss(schedule, Prediction::epsilon, other, example, x),
                    std::invalid_argument,
                    "diffusion_loss: output has shape [2, 4] but noise has shape [2, 3]");
  EXPECT_THROW_WITH(make_training_example(schedule, torch::zeros({}), true, at::make_generator<at::CPUGeneratorImpl>(0)), std::invalid_argument,
                    "make_training_example: x0 needs a batch dimension");
}

TEST(Validation, RejectsBadSamplerArguments) {
  const NoiseSchedule schedule{linear_config(10, 0.01, 0.1)};
  const ModelFn model = [](const torch::Tensor& x_t, const torch::Tensor&) { return x_t; };
  const torch::Tensor x_T = torch::zeros({2, 3});
  EXPECT_THROW_WITH(sample_ddim(model, schedule, x_T, 0, {}), std::invalid_argument,
                    "sample_ddim: num_steps must be in [1, 10], got 0");
  EXPECT_THROW_WITH(sample_ddim(model, schedule, x_T, 11, {}), std::invalid_argument,
                    "sample_ddim: num_steps must be in [1, 10], got 11");
  SamplerOptions bad_eta;
  bad_eta.ddim_eta = -0.5;
  EXPECT_THROW_WITH(sample_ddim(model, schedule, x_T, 5, bad_eta), std::invalid_argument,
                    "sample_ddim: ddim_eta must be in [0, 1], got -0.5");
  bad_eta.ddim_eta = 1.5;
  EXPECT_THROW_WITH(sample_ddim(model, schedule, x_T, 5, bad_eta), std::invalid_argument,
                    "sample_ddim: ddim_eta must be in [0, 1], got 1.5");
  SamplerOptions negative_clip;
  negative_clip.clip_x0 = -1;
  EXPECT_THROW_WITH(sample_ancestral(model, schedule, x_T, negative_clip), std::invalid_argument,
                    "sample_ancestral: clip_x0 must be >= 0 (0 disables clipping), got -1");
  EXPECT_THROW_WITH(sample_ddim(model, schedule, torch::zeros({}), 5, {}), std::invalid_argument,
                    "sample_ddim: x_T needs a batch dimension");
  const ModelFn wrong_shape = [](const torch::Tensor&, const torch::Tensor&) {
    return torch::zeros({2, 1});
  };
  EXPECT_THROW_WITH(sample_ancestral(wrong_shape, schedule, x_T, {}), std::invalid_argument,
                    "predicted_x0: output has shape [2, 1] but x_t has shape [2, 3]");
}

}  // namespace
}  // namespace structdiff::diffusion
