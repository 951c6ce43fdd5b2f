// The fused AdamW and gradient clipping against libtorch's, EMA arithmetic, exactly resumable
// checkpoints and their error messages, the metrics log and the progress line.
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "structdiff/checkpoint.h"
#include "structdiff/ema.h"
#include "structdiff/enum_names.h"
#include "structdiff/jsonl_log.h"
#include "structdiff/loop_options.h"
#include "structdiff/optimizer.h"
#include "structdiff/progress.h"
#include "support/expect_throw.h"
#include "support/gradcheck.h"
#include "support/temporary_files.h"

namespace structdiff::train {
namespace {

namespace fs = std::filesystem;

// A fresh, empty directory per test, so listings see only what the test wrote.
std::string test_directory() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  static const TemporaryDirectory scratch;  // this process's own, removed at exit
  const fs::path directory =
      fs::path(scratch.path()) / (std::string(info->test_suite_name()) + "_" + info->name());
  fs::remove_all(directory);
  fs::create_directories(directory);
  return directory.string();
}

// Nested layers and buffers (batch-norm statistics), so both are exercised.
torch::nn::Sequential make_model(int64_t hidden = 4) {
  return torch::nn::Sequential(torch::nn::Linear(3, hidden), torch::nn::BatchNorm1d(hidden),
                               torch::nn::ReLU(), torch::nn::Linear(hidden, 2));
}

torch::optim::Adam make_optimizer(torch::nn::Sequential& model) {
  return torch::optim::Adam(model->parameters(), torch::optim::AdamOptions(1e-2));
}

CheckpointParts parts_for(torch::nn::Sequential& model, int64_t step = 0) {
  CheckpointParts parts;
  parts.model = model.ptr().get();
  parts.step = step;
  return parts;
}

void train_step(torch::nn::Sequential& model, torch::optim::Optimizer& optimizer) {
  const torch::Tensor input = torch::linspace(-1.0, 1.0, 15).reshape({5, 3});
  const torch::Tensor target = torch::linspace(0.5, -0.5, 10).reshape({5, 2});
  optimizer.zero_grad();
  torch::mse_loss(model->forward(input), target).backward();
  optimizer.step();
}

void expect_same_tensors(const torch::nn::Module& expected, const torch::nn::Module& actual) {
  const auto expected_parameters = expected.named_parameters();
  const auto actual_parameters = actual.named_parameters();
  ASSERT_EQ(expected_parameters.size(), actual_parameters.size());
  for (const auto& item : expected_parameters) {
    EXPECT_TRUE(torch::equal(item.value(), actual_parameters[item.key()])) << item.key();
  }
  const auto expected_buffers = expected.named_buffers();
  const auto actual_buffers = actual.named_buffers();
  ASSERT_EQ(expected_buffers.size(), actual_buffers.size());
  for (const auto& item : expected_buffers) {
    EXPECT_TRUE(torch::equal(item.value(), actual_buffers[item.key()])) << item.key();
  }
}

std::vector<torch::Tensor> snapshot(const torch::nn::Module& module) {
  std::vector<torch::Tensor> copies;
  for (const auto& parameter : module.parameters()) copies.push_back(parameter.detach().clone());
  return copies;
}

void expect_unchanged(const std::vector<torch::Tensor>& before, const torch::nn::Module& module) {
  const auto parameters = module.parameters();
  ASSERT_EQ(before.size(), parameters.size());
  for (size_t i = 0; i < before.size(); ++i) EXPECT_TRUE(torch::equal(before[i], parameters[i]));
}

// Without batch norm: the bias before one has no gradient but rounding noise, which Adam's
// normalisation turns into full-size steps, so two correct optimizers would part there.
torch::nn::Sequential smooth_model() {
  return torch::nn::Sequential(torch::nn::Linear(3, 6), torch::nn::Tanh(), torch::nn::Linear(6, 2));
}

// Two parameter groups (matrices with weight decay, the rest without), as the loop makes them.
template <typename Optimizer>
Optimizer grouped_adamw(torch::nn::Sequential& model, double learning_rate) {
  std::vector<torch::Tensor> matrices, others;
  for (const torch::Tensor& p : model->parameters()) {
    (p.dim() >= 2 ? matrices : others).push_back(p);
  }
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(matrices, std::make_unique<torch::optim::AdamWOptions>(
                                    torch::optim::AdamWOptions(learning_rate)
                                        .betas({0.9, 0.95})
                                        .weight_decay(0.1)));
  groups.emplace_back(others, std::make_unique<torch::optim::AdamWOptions>(
                                  torch::optim::AdamWOptions(learning_rate).weight_decay(0.0)));
  return Optimizer(std::move(groups), torch::optim::AdamWOptions(learning_rate));
}

void expect_parameters_near(torch::nn::Sequential& a, torch::nn::Sequential& b, double tolerance) {
  const auto pa = a->parameters(), pb = b->parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i) {
    EXPECT_TRUE(torch::allclose(pa[i], pb[i], tolerance, tolerance))
        << "parameter " << i << " differs by " << (pa[i] - pb[i]).abs().max().item<double>();
  }
}

TEST(FusedAdamW, MatchesLibtorchAdamWWithWeightDecayGroups) {
  for (const auto dtype : {torch::kDouble, torch::kFloat}) {
    torch::manual_seed(3);
    torch::nn::Sequential fused_model = smooth_model(), reference_model = smooth_model();
    fused_model->to(dtype);
    reference_model->to(dtype);
    {
      torch::NoGradGuard no_grad;
      const auto from = fused_model->parameters(), to = reference_model->parameters();
      for (size_t i = 0; i < from.size(); ++i) to[i].copy_(from[i]);
    }
    FusedAdamW fused = grouped_adamw<FusedAdamW>(fused_model, 0.05);
    torch::optim::AdamW reference = grouped_adamw<torch::optim::AdamW>(reference_model, 0.05);
    const auto step_of = [&](torch::nn::Sequential& model, torch::optim::Optimizer& optimizer) {
      optimizer.zero_grad();
      const torch::Tensor input = torch::linspace(-1.0, 1.0, 15, dtype).reshape({5, 3});
      torch::mse_loss(model->forward(input), torch::ones({5, 2}, dtype)).backward();
      optimizer.step();
    };
    for (int step = 0; step < 20; ++step) {
      step_of(fused_model, fused);
      step_of(reference_model, reference);
    }
    // Twenty steps of 0.05 move the weights by about 1: a wrong decay, moment or bias correction
    // shows far above float rounding.
    expect_parameters_near(fused_model, reference_model, dtype == torch::kDouble ? 1e-12 : 1e-5);
  }
}

TEST(FusedAdamW, StateIsLibtorchsAdamWState) {
  torch::manual_seed(4);
  torch::nn::Sequential model = smooth_model(), twin = smooth_model();
  {
    torch::NoGradGuard no_grad;
    const auto from = model->parameters(), to = twin->parameters();
    for (size_t i = 0; i < from.size(); ++i) to[i].copy_(from[i]);
  }
  FusedAdamW fused = grouped_adamw<FusedAdamW>(model, 0.01);
  torch::optim::AdamW reference = grouped_adamw<torch::optim::AdamW>(twin, 0.01);
  for (int step = 0; step < 3; ++step) {
    train_step(model, fused);
    train_step(twin, reference);
  }
  // A checkpoint's optimizer state written by one loads into the other and both go on alike.
  torch::serialize::OutputArchive written;
  fused.save(written);
  std::stringstream bytes;
  written.save_to(bytes);
  torch::serialize::InputArchive read;
  read.load_from(bytes);
  torch::optim::AdamW restored = grouped_adamw<torch::optim::AdamW>(model, 0.01);
  restored.load(read);
  train_step(model, restored);
  train_step(twin, reference);
  expect_parameters_near(model, twin, 1e-6);
}

TEST(FusedAdamW, CountsItsUpdateAsAnInPlaceChange) {
  torch::nn::Linear layer(2, 1);
  FusedAdamW optimizer(layer->parameters(), torch::optim::AdamWOptions(0.1));
  const torch::Tensor weight = layer->weight;
  const torch::Tensor saved = (weight * weight).sum();  // keeps the weight for its backward
  weight.sum().backward();
  optimizer.step();
  try {
    saved.backward();
    FAIL() << "a graph that saved the old weight ran backward after the update";
  } catch (const c10::Error& error) {
    EXPECT_NE(std::string(error.what()).find("modified by an inplace operation"), std::string::npos)
        << error.what();
  }
}

TEST(ClipGradientNorm, MatchesLibtorchAndReturnsTheNormBeforeScaling) {
  for (const double limit : {0.05, 1e6}) {
    torch::manual_seed(5);
    torch::nn::Sequential model = make_model(), twin = make_model();
    {
      torch::NoGradGuard no_grad;
      const auto from = model->parameters(), to = twin->parameters();
      for (size_t i = 0; i < from.size(); ++i) to[i].copy_(from[i]);
    }
    for (torch::nn::Sequential* m : {&model, &twin}) {
      torch::mse_loss((*m)->forward(torch::linspace(-1.0, 1.0, 15).reshape({5, 3})),
                      torch::ones({5, 2}))
          .backward();
    }
    const double norm = clip_gradient_norm(model->parameters(), limit);
    const double expected = torch::nn::utils::clip_grad_norm_(twin->parameters(), limit);
    EXPECT_NEAR(norm, expected, 1e-6 * expected);
    EXPECT_GT(norm, 0.05);  // so the small limit does clip
    const auto clipped = model->parameters(), reference = twin->parameters();
    for (size_t i = 0; i < clipped.size(); ++i) {
      EXPECT_TRUE(torch::allclose(clipped[i].grad(), reference[i].grad(), 1e-6, 1e-7)) << i;
    }
  }
}

TEST(Ema, TwoUpdatesMatchHandComputation) {
  torch::nn::Linear layer(2, 3);
  const torch::Tensor weight0 = layer->weight.detach().clone();
  Ema ema(*layer, 0.9);

  torch::NoGradGuard no_grad;
  layer->weight.add_(1.0);
  const torch::Tensor weight1 = layer->weight.detach().clone();
  ema.update(*layer);
  layer->weight.mul_(-2.0);
  const torch::Tensor weight2 = layer->weight.detach().clone();
  ema.update(*layer);

  torch::nn::Linear averaged(2, 3);
  ema.copy_to(*averaged);
  const torch::Tensor expected = 0.9 * (0.9 * weight0 + 0.1 * weight1) + 0.1 * weight2;
  EXPECT_TRUE(torch::allclose(averaged->weight, expected, 1e-6, 1e-7));
}

TEST(Ema, CopyToAveragesParametersAndCopiesBuffers) {
  torch::nn::Sequential model = make_model();
  const torch::Tensor initial_bias = model[3]->as<torch::nn::Linear>()->bias.detach().clone();
  Ema ema(*model, 0.5);
  {
    torch::NoGradGuard no_grad;
    for (auto& parameter : model->parameters()) parameter.fill_(2.0);
    model[1]->as<torch::nn::BatchNorm1d>()->running_mean.fill_(7.0);
  }
  ema.update(*model);

  torch::nn::Sequential target = make_model();
  ema.copy_to(*target);
  EXPECT_TRUE(torch::allclose(target[3]->as<torch::nn::Linear>()->bias, 0.5 * initial_bias + 1.0));
  EXPECT_TRUE(
      torch::equal(target[1]->as<torch::nn::BatchNorm1d>()->running_mean, torch::full({4}, 7.0)));
}

TEST(Ema, CopyToRejectsAnotherArchitecture) {
  torch::nn::Sequential model = make_model(4);
  Ema ema(*model, 0.9);
  torch::nn::Sequential wider = make_model(5);
  EXPECT_THROW_WITH(ema.copy_to(*wider), std::invalid_argument, "EMA tensor '0.weight' has shape");
  torch::nn::Linear layer(3, 4);
  EXPECT_THROW_WITH(ema.copy_to(*layer), std::invalid_argument,
                    "EMA tensor '0.weight' does not match module tensor 'weight'");
}

TEST(Checkpoint, RoundTripResumesExactly) {
  const std::string path = test_directory() + "/run.ckpt";
  torch::manual_seed(1);
  torch::nn::Sequential model = make_model();
  torch::optim::Adam optimizer = make_optimizer(model);
  Ema ema(*model, 0.9);
  for (int step = 0; step < 2; ++step) {
    train_step(model, optimizer);
    ema.update(*model);
  }
  const nlohmann::json metadata = {{"hidden", 4}, {"name", "tiny"}};
  CheckpointParts saved = parts_for(model, 2);
  saved.optimizer = &optimizer;
  saved.ema = &ema;
  saved.metadata = metadata;
  save_checkpoint(path, saved);
  EXPECT_EQ(read_checkpoint_metadata(path), metadata);

  torch::manual_seed(2);  // different initial weights, so the load has to overwrite them
  torch::nn::Sequential restored = make_model();
  torch::optim::Adam restored_optimizer = make_optimizer(restored);
  Ema restored_ema(*restored, 0.5);
  CheckpointParts parts = parts_for(restored);
  parts.optimizer = &restored_optimizer;
  parts.ema = &restored_ema;
  load_checkpoint(path, parts);

  EXPECT_EQ(parts.step, 2);
  EXPECT_EQ(parts.metadata, metadata);
  expect_same_tensors(*model, *restored);
  EXPECT_EQ(restored_ema.decay(), 0.9);
  torch::nn::Sequential averaged = make_model(), restored_averaged = make_model();
  ema.copy_to(*averaged);
  restored_ema.copy_to(*restored_averaged);
  expect_same_tensors(*averaged, *restored_averaged);
  // Adam's moments and step count only show in the next update.
  train_step(model, optimizer);
  train_step(restored, restored_optimizer);
  expect_same_tensors(*model, *restored);
}

// The run's own generator comes back mid-stream; libtorch's default generator is neither saved
// nor touched by loading.
TEST(Checkpoint, RestoresTheRunsGeneratorAndLeavesTheDefaultOneAlone) {
  const std::string path = test_directory() + "/run.ckpt";
  torch::nn::Sequential model = make_model();
  at::Generator noise = at::make_generator<at::CPUGeneratorImpl>(5);
  torch::randn({3}, noise);  // leave the generator mid-stream, with a cached normal sample
  CheckpointParts saved = parts_for(model);
  saved.noise_generator = &noise;
  save_checkpoint(path, saved);
  const torch::Tensor small = torch::randn({3}, noise);
  const torch::Tensor large = torch::randn({40}, noise);  // vectorised path for 16 or more samples

  at::Generator restored = at::make_generator<at::CPUGeneratorImpl>(6);
  torch::manual_seed(7);
  const torch::Tensor expected_default = torch::randn({3});
  torch::manual_seed(7);
  CheckpointParts parts = parts_for(model);
  parts.noise_generator = &restored;
  load_checkpoint(path, parts);
  EXPECT_TRUE(torch::equal(torch::randn({3}, restored), small));
  EXPECT_TRUE(torch::equal(torch::randn({40}, restored), large));
  EXPECT_TRUE(torch::equal(torch::randn({3}), expected_default));
}

TEST(Checkpoint, ReplacesExistingFileAndLeavesNoTemporary) {
  const std::string directory = test_directory();
  const std::string path = directory + "/run.ckpt";
  torch::nn::Sequential model = make_model();
  save_checkpoint(path, parts_for(model, 1));
  save_checkpoint(path, parts_for(model, 2));

  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(directory)) {
    files.push_back(entry.path().filename().string());
  }
  EXPECT_EQ(files, std::vector<std::string>{"run.ckpt"});
  CheckpointParts parts = parts_for(model);
  load_checkpoint(path, parts);
  EXPECT_EQ(parts.step, 2);
}

TEST(Checkpoint, FailedSaveKeepsPreviousCheckpoint) {
  const std::string path = test_directory() + "/run.ckpt";
  torch::nn::Sequential model = make_model();
  save_checkpoint(path, parts_for(model, 1));
  // A directory where the temporary file should go makes the write fail.
  fs::create_directory(path + ".tmp." + std::to_string(::getpid()));

  EXPECT_THROW_WITH(save_checkpoint(path, parts_for(model, 2)), std::runtime_error,
                    "cannot write " + path + ": Is a directory");
  CheckpointParts parts = parts_for(model);
  load_checkpoint(path, parts);
  EXPECT_EQ(parts.step, 1);
}

TEST(Checkpoint, SaveIntoMissingDirectoryNamesPath) {
  const std::string path = test_directory() + "/absent/run.ckpt";
  torch::nn::Sequential model = make_model();
  EXPECT_THROW_WITH(save_checkpoint(path, parts_for(model)), std::runtime_error,
                    "cannot write " + path + ": No such file or directory");
}

TEST(Checkpoint, MissingFile) {
  const std::string path = test_directory() + "/absent.ckpt";
  torch::nn::Sequential model = make_model();
  CheckpointParts parts = parts_for(model);
  EXPECT_THROW_WITH(load_checkpoint(path, parts), std::runtime_error,
                    "checkpoint " + path + " does not exist");
  EXPECT_THROW_WITH(read_checkpoint_metadata(path), std::runtime_error,
                    "checkpoint " + path + " does not exist");
}

TEST(Checkpoint, GarbageFile) {
  const std::string path = test_directory() + "/garbage.ckpt";
  std::ofstream(path) << "this is not a checkpoint";
  EXPECT_THROW_WITH(read_checkpoint_metadata(path), std::runtime_error,
                    "checkpoint " + path + " is not a valid archive: it is truncated, damaged, "
                    "or not a file structdiff wrote");
  // A zip that is not a libtorch archive, and a real model file cut short: the same words, none
  // of libtorch's (PytorchStreamReader, enforce fail).
  {
    const std::string truncated = test_directory() + "/truncated.ckpt";
    torch::nn::Sequential model = make_model(4);
    save_checkpoint(truncated, parts_for(model));
    std::filesystem::resize_file(truncated, std::filesystem::file_size(truncated) / 2);
    try {
      read_checkpoint_metadata(truncated);
      ADD_FAILURE() << "a truncated file was read";
    } catch (const std::runtime_error& error) {
      const std::string message = error.what();
      EXPECT_NE(message.find("is not a valid archive: it is truncated"), std::string::npos) << message;
      EXPECT_EQ(message.find("PytorchStreamReader"), std::string::npos) << message;
    }
  }
}

TEST(Checkpoint, WrongArchitectureNamesTensorAndLeavesModelUntouched) {
  const std::string path = test_directory() + "/run.ckpt";
  torch::nn::Sequential model = make_model(4);
  save_checkpoint(path, parts_for(model));

  torch::nn::Sequential wider = make_model(5);
  const auto before = snapshot(*wider);
  CheckpointParts parts = parts_for(wider);
  EXPECT_THROW_WITH(load_checkpoint(path, parts), std::runtime_error,
                    "checkpoint " + path + " does not fit the model: tensor '0.weight' is " +
                        "Float[4, 3] in the checkpoint but Float[5, 3] in the model");
  expect_unchanged(before, *wider);

  torch::nn::Sequential shorter(torch::nn::Linear(3, 4), torch::nn::BatchNorm1d(4),
                                torch::nn::ReLU());
  CheckpointParts shorter_parts = parts_for(shorter);
  EXPECT_THROW_WITH(load_checkpoint(path, shorter_parts), std::runtime_error,
                    "the checkpoint has '3', which the model lacks");
}

// Files written while a model still registered a tensor-free layer (the U-Net's and DIFFormer's
// dropout modules) load into the model without it; a layer with tensors still may not.
TEST(Checkpoint, SubmodulesWithoutTensorsInTheFileAreIgnored) {
  const std::string path = test_directory() + "/old.ckpt";
  torch::nn::Sequential old_model = make_model();
  old_model->register_module("dropout", torch::nn::Dropout(0.1));
  save_checkpoint(path, parts_for(old_model));
  torch::nn::Sequential model = make_model();
  CheckpointParts parts = parts_for(model);
  load_checkpoint(path, parts);
  EXPECT_TRUE(torch::equal(model->parameters()[0], old_model->parameters()[0]));
  old_model->register_module("extra", torch::nn::Linear(1, 1));
  save_checkpoint(path, parts_for(old_model));
  EXPECT_THROW_WITH(load_checkpoint(path, parts), std::runtime_error,
                    "the checkpoint has 'extra', which the model lacks");
}

TEST(Checkpoint, MissingOptimizerStateLeavesModelUntouched) {
  const std::string path = test_directory() + "/run.ckpt";
  torch::manual_seed(1);
  torch::nn::Sequential model = make_model();
  save_checkpoint(path, parts_for(model));

  torch::manual_seed(2);
  torch::nn::Sequential restored = make_model();
  torch::optim::Adam optimizer = make_optimizer(restored);
  const auto before = snapshot(*restored);
  CheckpointParts parts = parts_for(restored);
  parts.optimizer = &optimizer;
  EXPECT_THROW_WITH(load_checkpoint(path, parts), std::runtime_error,
                    "checkpoint " + path + " has no optimizer state");
  expect_unchanged(before, *restored);
}

TEST(JsonlLog, WritesOneParseableObjectPerLine) {
  const std::string path = test_directory() + "/metrics.jsonl";
  JsonlLog(path, /*append=*/false).write({{"step", 0}});
  {
    JsonlLog log(path, /*append=*/true);
    log.write({{"step", 1}, {"loss", 0.25}});
    log.write({{"step", 2}, {"loss", 0.125}});
  }
  std::ifstream in(path);
  std::vector<nlohmann::json> records;
  for (std::string line; std::getline(in, line);) records.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[2]["loss"], 0.125);

  JsonlLog(path, /*append=*/false).write({{"step", 9}});
  std::ifstream truncated(path);
  std::string only;
  std::getline(truncated, only);
  EXPECT_EQ(nlohmann::json::parse(only)["step"], 9);
  EXPECT_FALSE(std::getline(truncated, only));
}

TEST(JsonlLog, UnopenablePathIsNamed) {
  const std::string path = test_directory() + "/absent/metrics.jsonl";
  EXPECT_THROW_WITH(JsonlLog log(path), std::runtime_error, "cannot open metrics log " + path);
}

TEST(ProgressBar, LogLineShowsValuesRateAndEta) {
  ::testing::internal::CaptureStderr();  // stderr is then a file: the bar logs whole lines
  ProgressBar bar("train", 100, 0, /*log_seconds=*/0.0);
  bar.update(10, {{"loss", 0.0312}, {"lr", 2e-5}});
  bar.finish();
  const std::string output = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(output.find("train [##..................] 10/100 loss 0.0312 lr 2e-05 | "),
            std::string::npos)
      << output;
  EXPECT_NE(output.find(" steps/s | ETA "), std::string::npos) << output;
  EXPECT_NE(output.find(" total\n"), std::string::npos) << output;
  EXPECT_EQ(output.find('\r'), std::string::npos) << "no in-place redraw outside a terminal";
}

TEST(ProgressBar, RateCountsOnlyStepsSinceStart) {
  ::testing::internal::CaptureStderr();
  ProgressBar bar("train", 1000, /*start=*/900, /*log_seconds=*/3600.0);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  bar.update(910);
  const double rate = bar.steps_per_second();
  ::testing::internal::GetCapturedStderr();
  EXPECT_GT(rate, 0.0);
  EXPECT_LE(rate, 10 / 0.05);
}

TEST(ProgressBar, FormatsDurations) {
  EXPECT_EQ(format_duration(0.4), "0s");
  EXPECT_EQ(format_duration(42), "42s");
  EXPECT_EQ(format_duration(18 * 60 + 34), "18m34s");
  EXPECT_EQ(format_duration(2 * 3600 + 5 * 60 + 59), "2h05m");
  EXPECT_EQ(format_duration(-1), "--");
}

// Every enum's names come from one table: parse and name are inverse, and a name outside the
// table gets the one wording, printable on one line.
TEST(EnumNames, ParseNameChoicesAndTheOneWording) {
  EXPECT_EQ(parse_learning_rate_decay("constant"), LearningRateDecay::constant);
  EXPECT_EQ(parse_learning_rate_decay("cosine"), LearningRateDecay::cosine);
  EXPECT_EQ(learning_rate_decay_name(LearningRateDecay::cosine), "cosine");
  enum class Colour { red, green, blue };
  const auto names = enum_names<Colour>(
      "colour", {{Colour::red, "red"}, {Colour::green, "green"}, {Colour::blue, "blue"}});
  EXPECT_EQ(names.parse("green"), Colour::green);
  EXPECT_STREQ(names.name(Colour::blue), "blue");
  EXPECT_EQ(names.choices(), (std::vector<std::string>{"red", "green", "blue"}));
  EXPECT_THROW_WITH(names.parse("Red"), std::invalid_argument,
                    "unknown colour 'Red' (choose red, green or blue)");
  EXPECT_THROW_WITH(names.parse("a\nb"), std::invalid_argument, "unknown colour 'a\\x0Ab'");
  EXPECT_THROW_WITH(parse_learning_rate_decay("linear"), std::invalid_argument,
                    "unknown learning-rate decay 'linear' (choose constant or cosine)");
}

}  // namespace
}  // namespace structdiff::train

