// DDPM on images: U-Net shapes for every attention kind at several resolutions and its config
// errors; the DDPM schedule's forward process against its closed form; one ancestral step against
// the report's eq. 12 (epsilon form); DDIM over all steps against the deterministic update; the
// held-out loss, sampling, model files, exact resume and image grids; a tiny model's loss falls.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "structdiff/datasets.h"
#include "structdiff/ddpm_runs.h"
#include "structdiff/loop_options.h"
#include "structdiff/unet.h"
#include "support/data.h"
#include "support/expect_throw.h"
#include "support/temporary_files.h"
#include "support/modules.h"

namespace structdiff::ddpm {
namespace {

const auto kFloat64 = torch::TensorOptions().dtype(torch::kDouble);

unet::UNetConfig tiny_config(int64_t size = 8, std::vector<int64_t> multipliers = {1, 2}) {
  unet::UNetConfig config;
  config.image_size = size;
  config.base_channels = 8;
  config.channel_multipliers = std::move(multipliers);
  config.attention_resolutions = {size};
  config.groups = 4;
  config.heads = 2;
  config.head_dim = 4;
  config.dropout = 0.0;
  return config;
}

Model tiny_model(unet::UNetConfig config = tiny_config()) {
  return build_model(model_metadata(config, default_schedule()));
}

// Ones on the left half: a data set a tiny model can learn.
torch::Tensor striped_images(int64_t count, int64_t size) {
  torch::Tensor images = torch::zeros({count, 1, size, size});
  images.narrow(3, 0, size / 2).fill_(1.0);
  return images;
}

TEST(UNet, OutputMatchesInputShapeForEveryAttentionAndResolution) {
  struct Case {
    int64_t size;
    std::vector<int64_t> multipliers;
  };
  for (const Case& c : {Case{28, {1, 2, 4}}, Case{16, {1, 2, 2, 2}}, Case{12, {1}}}) {
    for (const std::string& kind : unet::attention_names()) {
      unet::UNetConfig config = tiny_config(c.size, c.multipliers);
      config.attention_resolutions = config.resolutions();
      config.attention = unet::parse_attention(kind);
      config.bottleneck_attention = config.attention;
      unet::UNet net(config);
      // The output layer starts at zero; random weights make the output depend on x and t.
      {
        torch::NoGradGuard no_grad;
        for (auto& parameter : net->parameters()) parameter.normal_(0.0, 0.05);
      }
      const torch::Tensor x = torch::randn({3, 1, c.size, c.size});
      const torch::Tensor out = net(x, torch::tensor({0, 500, 999}));
      EXPECT_EQ(out.sizes(), x.sizes()) << kind << " at " << c.size;
      EXPECT_TRUE(torch::isfinite(out).all().item<bool>()) << kind << " at " << c.size;
      EXPECT_GT(out.abs().max().item<double>(), 0.0) << kind << " at " << c.size;
      const torch::Tensor other_time = net(x, torch::tensor({999, 500, 0}));
      EXPECT_FALSE(torch::allclose(out[0], other_time[0])) << kind << ": the step is ignored";
      const torch::Tensor other_image = net(x.flip(0), torch::tensor({0, 500, 999}));
      EXPECT_FALSE(torch::allclose(out[0], other_image[0])) << kind << ": the image is ignored";
    }
  }
}

TEST(UNet, AttentionOnlyAtChosenResolutions) {
  unet::UNetConfig config = tiny_config(16, {1, 2, 2});
  config.attention_resolutions = {};
  const int64_t without = unet::UNet(config)->parameters().size();
  config.attention_resolutions = {8};  // one encoder block + two decoder blocks at side 8
  const int64_t with = unet::UNet(config)->parameters().size();
  // Each attention block holds GroupNorm (2), to_qkv (2) and to_out (2) parameters.
  EXPECT_EQ(with - without, 3 * 6);
}

TEST(UNet, ConfigErrorsNameTheField) {
  unet::UNetConfig config = tiny_config(28, {1, 2, 4});
  config.image_size = 30;
  EXPECT_THROW_WITH(unet::UNet{config}, std::invalid_argument,
                    "image_size 30 must be divisible by 2^2 for 3 levels");
  config = tiny_config(28, {1, 2, 4});
  config.attention_resolutions = {5};
  EXPECT_THROW_WITH(unet::UNet{config}, std::invalid_argument,
                    "attention resolution 5 is not a level of this U-Net (28, 14, 7)");
  config = tiny_config();
  config.base_channels = 6;
  EXPECT_THROW_WITH(unet::UNet{config}, std::invalid_argument,
                    "base_channels 6 must be divisible by groups 4");
  EXPECT_THROW_WITH(unet::parse_attention("performer"), std::invalid_argument,
                    "unknown attention 'performer' (choose dense, favor-softmax, favor-relu, linear)");
  EXPECT_THROW_WITH(unet::parse_attention("sparse"), std::invalid_argument,
                    "unknown attention 'sparse' (choose dense, favor-softmax, favor-relu, linear)");
  EXPECT_EQ(unet::parse_attention("exact"), Mechanism::dense);  // the name in older model files
  unet::UNet net(tiny_config());
  EXPECT_THROW_WITH(net(torch::zeros({2, 1, 9, 9}), torch::zeros({2}, torch::kLong)),
                    std::invalid_argument, "U-Net: input must be (batch, 1, 8, 8)");
}

TEST(UNet, ConfigRoundTripsThroughJson) {
  unet::UNetConfig config = tiny_config();
  config.attention = Mechanism::favor_relu;
  config.favor_features = 3;
  const unet::UNetConfig back = nlohmann::json(config).get<unet::UNetConfig>();
  EXPECT_EQ(nlohmann::json(back), nlohmann::json(config));
}

// A linear schedule's tables computed by hand, independent of NoiseSchedule:
// beta_t linear from `start` to `end`, abar_t = prod_{s <= t} (1 - beta_s).
struct HandSchedule {
  std::vector<double> beta, abar;
};
HandSchedule hand_schedule(int64_t steps, double start, double end) {
  HandSchedule hand;
  double product = 1;
  for (int64_t t = 0; t < steps; ++t) {
    hand.beta.push_back(start + (end - start) * static_cast<double>(t) / static_cast<double>(steps - 1));
    product *= 1 - hand.beta.back();
    hand.abar.push_back(product);
  }
  return hand;
}

diffusion::ScheduleConfig linear_schedule(int64_t steps, double start, double end) {
  diffusion::ScheduleConfig config = default_schedule();
  config.steps = steps;
  config.beta_start = start;
  config.beta_end = end;
  return config;
}

TEST(Schedule, ForwardProcessMatchesClosedForm) {
  const diffusion::NoiseSchedule schedule{default_schedule()};
  // Ho et al.: beta_t linear from 1e-4 to 0.02 over 1000 steps.
  const std::vector<double> hand = hand_schedule(1000, 1e-4, 0.02).abar;
  const torch::Tensor x0 = torch::rand({4, 1, 3, 3}, kFloat64) * 2 - 1;
  const torch::Tensor noise = torch::randn({4, 1, 3, 3}, kFloat64);
  const std::vector<int64_t> steps = {0, 1, 500, 999};
  const torch::Tensor x_t = schedule.add_noise(x0, noise, torch::tensor(steps));
  for (size_t i = 0; i < steps.size(); ++i) {
    const double a = hand[steps[i]];
    const torch::Tensor expected = std::sqrt(a) * x0[i] + std::sqrt(1 - a) * noise[i];
    EXPECT_TRUE(torch::allclose(x_t[i], expected, 1e-12, 1e-12)) << "t = " << steps[i];
  }
  EXPECT_LT(hand[999], 1e-4);  // x_T is essentially pure noise
}

// The noise predictor the sampler tests use: a fixed function of x_t and t.
torch::Tensor fake_noise(const torch::Tensor& x_t, const torch::Tensor& t) {
  return 0.3 * x_t + 1e-3 * t.to(x_t.scalar_type()).view({-1, 1});
}

TEST(Sampling, AncestralStepIsTheReportsEquation12) {
  const diffusion::NoiseSchedule schedule{linear_schedule(4, 0.05, 0.4)};
  std::vector<torch::Tensor> inputs;
  const diffusion::ModelFn model = [&](const torch::Tensor& x, const torch::Tensor& t) {
    inputs.push_back(x);
    return fake_noise(x, t);
  };
  diffusion::SamplerOptions options;
  options.prediction = diffusion::Prediction::epsilon;
  options.variance = diffusion::AncestralVariance::posterior;
  options.generator = at::make_generator<at::CPUGeneratorImpl>(5);
  const torch::Tensor x_T = torch::randn({2, 6}, kFloat64);
  diffusion::sample_ancestral(model, schedule, x_T, options);

  // x_{t-1} = (x_t - (1 - alpha_t) / sqrt(1 - abar_t) eps(x_t, t)) / sqrt(alpha_t) + sigma_t z,
  // sigma_t^2 = beta_t (1 - abar_{t-1}) / (1 - abar_t), at the first step t = T.
  const auto [beta, abar] = hand_schedule(4, 0.05, 0.4);
  const double sigma = std::sqrt(beta[3] * (1 - abar[2]) / (1 - abar[3]));
  const torch::Tensor eps = fake_noise(x_T, torch::full({2}, 3, torch::kLong));
  const torch::Tensor z = torch::randn({2, 6}, at::make_generator<at::CPUGeneratorImpl>(5), kFloat64);
  const torch::Tensor expected =
      (x_T - beta[3] / std::sqrt(1 - abar[3]) * eps) / std::sqrt(1 - beta[3]) + sigma * z;
  ASSERT_EQ(inputs.size(), 4u);
  EXPECT_TRUE(torch::allclose(inputs[1], expected, 1e-10, 1e-12));
}

TEST(Sampling, DdimOverAllStepsIsTheDeterministicUpdate) {
  const diffusion::NoiseSchedule schedule{linear_schedule(5, 0.05, 0.3)};
  const diffusion::ModelFn model = fake_noise;
  diffusion::SamplerOptions options;
  options.prediction = diffusion::Prediction::epsilon;
  const torch::Tensor x_T = torch::randn({3, 2}, kFloat64);
  const torch::Tensor sample = diffusion::sample_ddim(model, schedule, x_T, 5, options);

  // x0_hat = (x_t - sqrt(1 - abar_t) eps) / sqrt(abar_t);
  // x_{t-1} = sqrt(abar_{t-1}) x0_hat + sqrt(1 - abar_{t-1}) eps, and x0_hat at the end.
  const std::vector<double> abar = hand_schedule(5, 0.05, 0.3).abar;
  torch::Tensor x = x_T;
  for (int64_t t = 4; t >= 0; --t) {
    const torch::Tensor eps = fake_noise(x, torch::full({3}, t, torch::kLong));
    const torch::Tensor x0_hat = (x - std::sqrt(1 - abar[t]) * eps) / std::sqrt(abar[t]);
    x = t == 0 ? x0_hat : std::sqrt(abar[t - 1]) * x0_hat + std::sqrt(1 - abar[t - 1]) * eps;
  }
  EXPECT_TRUE(torch::allclose(sample, x, 1e-10, 1e-12));
}

TEST(Sampling, DeterministicImagesInUnitRangeAndErrors) {
  torch::manual_seed(0);
  Model model = tiny_model();
  SampleOptions options;
  options.count = 5;
  options.batch = 2;
  options.ddim_steps = 3;
  options.seed = 9;
  std::vector<int64_t> reported;
  options.progress = [&](int64_t done, int64_t) { reported.push_back(done); };
  const torch::Tensor a = sample(model, options);
  const torch::Tensor b = sample(model, options);
  EXPECT_EQ(a.sizes(), (std::vector<int64_t>{5, 1, 8, 8}));
  EXPECT_TRUE(torch::equal(a, b));
  // The first batch is DDIM from noise of the seeded generator, mapped from [-1, 1] to [0, 1].
  {
    torch::NoGradGuard no_grad;
    diffusion::SamplerOptions sampler;
    sampler.prediction = diffusion::Prediction::epsilon;
    sampler.clip_x0 = 1.0;
    sampler.generator = at::make_generator<at::CPUGeneratorImpl>(9);
    const torch::Tensor x_T = torch::randn({2, 1, 8, 8}, sampler.generator);
    const diffusion::ModelFn net = [&](const torch::Tensor& x, const torch::Tensor& t) { return model.net(x, t); };
    const torch::Tensor x0 = diffusion::sample_ddim(net, model.schedule, x_T, 3, sampler);
    EXPECT_TRUE(torch::allclose(a.narrow(0, 0, 2), ((x0 + 1) / 2).clamp(0, 1), 1e-6, 1e-6));
  }
  EXPECT_EQ(reported, (std::vector<int64_t>{0, 2, 4, 5, 0, 2, 4, 5}));  // 0: sampling starts
  options.ddim_steps = 1001;
  EXPECT_THROW_WITH(sample(model, options), std::invalid_argument,
                    "DDIM steps must be in [1, 1000], or 0 for the ancestral chain; got 1001");
}

TEST(Sampling, StochasticDdimIsSeededAndDiffersFromDeterministic) {
  torch::manual_seed(0);
  Model model = tiny_model();
  SampleOptions options;
  options.count = 2;
  options.ddim_steps = 3;
  options.seed = 9;
  const torch::Tensor deterministic = sample(model, options);
  options.ddim_eta = 1.0;
  const torch::Tensor stochastic = sample(model, options);
  EXPECT_TRUE(torch::equal(stochastic, sample(model, options)));
  EXPECT_GT((stochastic - deterministic).abs().max().item<double>(), 1e-3);
  options.ddim_eta = 1.5;
  EXPECT_THROW_WITH(sample(model, options), std::invalid_argument, "ddim_eta must be in [0, 1], got 1.5");
  options.ddim_eta = 0.5;
  options.ddim_steps = 0;
  EXPECT_THROW_WITH(sample(model, options), std::invalid_argument,
                    "eta applies to DDIM; the ancestral chain (0 DDIM steps) takes none");
}

TEST(Training, HeldOutLossIsFixedAndDrawsNothingGlobal) {
  torch::manual_seed(1);
  Model model = tiny_model();
  const HeldOutBatch batch = make_held_out_batch(model, striped_images(4, 8), 3);
  EXPECT_EQ(batch.t.sizes(), (std::vector<int64_t>{4}));
  EXPECT_EQ(batch.t[3].item<int64_t>(), 750);
  torch::manual_seed(2);
  const torch::Tensor before = torch::rand({1});
  torch::manual_seed(2);
  const double first = held_out_loss(model, batch);
  const torch::Tensor after = torch::rand({1});
  EXPECT_TRUE(torch::equal(before, after));
  EXPECT_EQ(held_out_loss(model, batch), first);
  // The output layer starts at zero, so the untrained loss is the noise's mean square.
  EXPECT_NEAR(first, batch.noise.square().mean().item<double>(), 1e-6);
}

TEST(Training, TinyModelLossFalls) {
  torch::manual_seed(0);
  Model model = tiny_model();
  Model averaged = tiny_model();
  const torch::Tensor images = striped_images(64, 8);
  const HeldOutBatch held_out = make_held_out_batch(model, images.narrow(0, 0, 16), 0);
  const double initial = held_out_loss(model, held_out);
  TrainingOptions options;
  options.loop.steps = 150;
  options.batch = 16;
  options.loop.learning_rate = 3e-3;
  options.loop.ema_decay = 0.0;  // the averaged model is the trained one
  options.loop.show_progress = false;
  train(model, averaged, images, options, 0);
  const double trained = held_out_loss(averaged, held_out);
  EXPECT_LT(trained, 0.5 * initial) << "initial " << initial << ", trained " << trained;
}

std::string temp_path(const std::string& name) {
  static const TemporaryDirectory directory;
  return directory.file(name);
}

TEST(Training, ResumeContinuesTheSameTrajectory) {
  const torch::Tensor images = torch::rand({32, 1, 8, 8});
  auto run = [&](const std::string& checkpoint, int64_t first_leg) {
    std::filesystem::remove(checkpoint);
    torch::manual_seed(4);
    Model model = tiny_model();
    Model averaged = tiny_model();
    TrainingOptions options;
    options.batch = 4;
    options.loop.learning_rate = 1e-3;
    options.loop.checkpoint_path = checkpoint;
    options.loop.resume = true;
    options.loop.show_progress = false;
    if (first_leg > 0) {
      options.loop.steps = first_leg;
      train(model, averaged, images, options, 7);
      torch::manual_seed(999);  // training draws nothing from the global generator
      model = tiny_model();
    }
    options.loop.steps = 4;
    const train::LoopResult result = train(model, averaged, images, options, 7);
    EXPECT_EQ(result.steps_done, 4);
    EXPECT_EQ(result.steps_this_run, 4 - first_leg);
    return model;
  };
  Model straight = run(temp_path("straight.pt"), 0);
  Model split = run(temp_path("split.pt"), 2);
  const auto a = straight.net->parameters(), b = split.net->parameters();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i], b[i])) << "parameter " << i;
}

TEST(ModelFile, RoundTripGivesIdenticalOutputs) {
  unet::UNetConfig config = tiny_config();
  config.attention = Mechanism::favor_softmax;
  torch::manual_seed(3);
  Model model = tiny_model(config);
  {
    torch::NoGradGuard no_grad;
    for (auto& p : model.net->parameters()) p.add_(0.01 * torch::randn(p.sizes()));
  }
  const std::string path = temp_path("model.pt");
  save_model(path, model);
  Model loaded = load_model(path);
  model.net->eval();
  const torch::Tensor x = torch::randn({2, 1, 8, 8});
  const torch::Tensor t = torch::tensor({3, 700});
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(torch::equal(model.net(x, t), loaded.net(x, t)));
  EXPECT_EQ(loaded.metadata.at("config").at("unet").at("attention"), "favor-softmax");
  EXPECT_THROW_WITH(build_model({{"kind", "sudoku"}}), std::invalid_argument, "not a DDPM model");
}

TEST(ImageGrid, WritesAPngOfTheGridSize) {
  const std::string path = temp_path("grid.png");
  write_image_grid(path, torch::rand({5, 1, 4, 6}), 2);
  std::ifstream in(path, std::ios::binary);
  std::vector<unsigned char> header(24);
  in.read(reinterpret_cast<char*>(header.data()), 24);
  ASSERT_TRUE(in);
  auto be32 = [&](int offset) {
    return (header[offset] << 24) | (header[offset + 1] << 16) | (header[offset + 2] << 8) | header[offset + 3];
  };
  EXPECT_EQ(be32(16), 2 * 7 - 1);  // width: 2 tiles of 6 with a 1-pixel gap
  EXPECT_EQ(be32(20), 3 * 5 - 1);  // height: 3 rows of 4
  write_image_grid(path, torch::rand({5, 1, 4, 6}), 0);  // about square: 3 columns, 2 rows
  in = std::ifstream(path, std::ios::binary);
  in.read(reinterpret_cast<char*>(header.data()), 24);
  EXPECT_EQ(be32(16), 3 * 7 - 1);
  EXPECT_EQ(be32(20), 2 * 5 - 1);
  EXPECT_THROW_WITH(write_image_grid(path, torch::rand({2, 2, 4, 4}), 2), std::invalid_argument,
                    "images must be (N >= 1, 1 or 3, H, W)");
}

// Dropout masks come from the loop's generator: the default generator's state does not matter.
TEST(DdpmTraining, DropoutDrawsNothingFromTheDefaultGenerator) {
  unet::UNetConfig config = tiny_config();
  config.dropout = 0.5;
  const torch::Tensor images = striped_images(16, 8);
  auto run = [&](uint64_t default_seed) {
    torch::manual_seed(4);
    auto models = std::make_shared<std::pair<Model, Model>>(tiny_model(config), tiny_model(config));
    torch::manual_seed(default_seed);
    TrainingOptions options;
    options.loop.steps = 3;
    options.batch = 4;
    options.loop.show_progress = false;
    train(models->first, models->second, images, options, /*data_seed=*/2);
    return models;
  };
  expect_identical(*run(1)->first.net, *run(2)->first.net);
}

// FAVOR+ with a redraw every 2 calls and dropout: resuming must restore the redraw generator and
// counter (buffers) and the loop's generator (dropout), whatever the default generator holds.
TEST(DdpmTraining, HalfThenResumeEqualsStraightRunBitForBitWithFavorRedraws) {
  TemporaryDirectory directory;
  unet::UNetConfig config = tiny_config();
  config.attention = unet::parse_attention("favor-softmax");
  config.redraw_interval = 2;
  config.dropout = 0.1;
  const torch::Tensor images = striped_images(16, 8);
  auto run = [&](int64_t steps, bool resume) {
    torch::manual_seed(4);
    auto models = std::make_shared<std::pair<Model, Model>>(tiny_model(config), tiny_model(config));
    if (resume) torch::manual_seed(99);
    TrainingOptions options;
    options.loop.steps = steps;
    options.batch = 4;
    options.loop.show_progress = false;
    options.loop.checkpoint_path = directory.file(resume || steps == 3 ? "split.ckpt" : "straight.ckpt");
    options.loop.resume = resume;
    train(models->first, models->second, images, options, /*data_seed=*/2);
    return models;
  };
  const auto straight = run(6, false);
  run(3, false);
  const auto resumed = run(6, true);
  expect_identical(*straight->first.net, *resumed->first.net);
  expect_identical(*straight->second.net, *resumed->second.net);
}

// The library's runs check what they can before the costly part: a classifier of another dataset
// before any image is sampled, a held-out set that leaves nothing to train on before a model is
// built.
TEST(DdpmRuns, RefuseBadRequestsBeforeWork) {
  SKIP_WITHOUT_DATA(std::string(data::kFashionMnistDirectory));
  const std::string models = std::string(STRUCTDIFF_SOURCE_DIR) + "/models/";
  EvalRequest eval;
  eval.model_path = models + "ddpm-fashion-mnist.pt";
  eval.classifier_path = models + "classifier-mnist.pt";
  bool sampled = false;
  eval.sampling.progress = [&sampled](int64_t, int64_t) { sampled = true; };
  EXPECT_THROW_WITH(evaluate(eval), std::invalid_argument,
                    "classifies mnist images; these are fashion-mnist");
  EXPECT_FALSE(sampled);
  TrainRequest train;
  train.validation_images = 60000;
  EXPECT_THROW_WITH(train_model(train), std::invalid_argument,
                    "--validation-images 60000 leaves no training images: fashion-mnist has 60000");
}

}  // namespace
}  // namespace structdiff::ddpm
