// Where models run: device names, random draws that are the same on every device, and, on a
// machine with a GPU, GSDM and Tracformer on it giving what they give on the CPU, with model files
// written there loading on the CPU (the GPU cases skip, and say so, without one).
#include <random>
#include <string>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "structdiff/device.h"
#include "structdiff/gsdm.h"
#include "structdiff/gsdm_training.h"
#include "structdiff/random.h"
#include "structdiff/runtime.h"
#include "structdiff/sudoku_model.h"
#include "structdiff/tracformer.h"
#include "structdiff/tracformer_training.h"
#include "structdiff/checkpoint.h"
#include "support/expect_throw.h"
#include "support/gpu.h"
#include "support/modules.h"
#include "support/temporary_files.h"

namespace structdiff {
namespace {

at::Generator seeded(uint64_t seed) { return at::make_generator<at::CPUGeneratorImpl>(seed); }

TEST(Devices, ParseDeviceAcceptsCpuAndNamesWhatItAccepts) {
  EXPECT_EQ(parse_device("cpu"), torch::Device(torch::kCPU));
  for (const char* name : {"gpu", "cuda:", "cuda:-1", "cuda0", "cuda:1x", "CPU"}) {
    EXPECT_THROW_WITH(parse_device(name), std::invalid_argument,
                      "unknown device '" + std::string(name) + "' (cpu, cuda or cuda:N)");
  }
  if (!torch::cuda::is_available()) {
    EXPECT_THROW_WITH(parse_device("cuda"), std::invalid_argument, "this libtorch sees no GPU");
  } else {
    EXPECT_EQ(parse_device("cuda"), torch::Device(torch::kCUDA, 0));
    EXPECT_THROW_WITH(parse_device("cuda:99"), std::invalid_argument, "(cuda:0..cuda:");
  }
}

TEST(Devices, DeviceOfAModuleIsItsFirstTensorsAndTheCpuWithoutTensors) {
  torch::nn::Sequential empty;
  EXPECT_EQ(device_of(*empty), torch::Device(torch::kCPU));
  torch::nn::Linear linear(2, 3);
  EXPECT_EQ(device_of(*linear), torch::Device(torch::kCPU));
}

// The helpers draw on the CPU generator, whatever device the result goes to: on the CPU they are
// libtorch's own draws, and on a GPU the same numbers.
TEST(Random, DrawsAreLibtorchsOnTheCpuAndTheSameOnAGpu) {
  const auto float32 = torch::TensorOptions().dtype(torch::kFloat);
  EXPECT_TRUE(torch::equal(random::normal({5, 3}, seeded(1), float32),
                           torch::randn({5, 3}, seeded(1), float32)));
  EXPECT_TRUE(torch::equal(random::uniform({7}, seeded(2), float32),
                           torch::rand({7}, seeded(2), float32)));
  EXPECT_TRUE(torch::equal(random::integers(0, 9, {11}, seeded(3), torch::kLong),
                           torch::randint(0, 9, {11}, seeded(3), torch::kLong)));
  EXPECT_TRUE(torch::equal(random::bernoulli({4, 4}, 0.3, seeded(4), float32),
                           at::bernoulli(torch::empty({4, 4}, float32), 0.3, seeded(4))));
  const torch::Tensor probabilities = torch::softmax(torch::randn({6, 5}, seeded(5)), -1);
  EXPECT_TRUE(torch::equal(random::categorical(probabilities, seeded(6)),
                           at::multinomial(probabilities, 1, false, seeded(6)).squeeze(1)));
  if (!torch::cuda::is_available()) return;
  const auto on_gpu = float32.device(torch::kCUDA);
  const torch::Tensor drawn = random::normal({5, 3}, seeded(1), on_gpu);
  EXPECT_TRUE(drawn.is_cuda());
  EXPECT_TRUE(torch::equal(drawn.cpu(), torch::randn({5, 3}, seeded(1), float32)));
  EXPECT_TRUE(torch::equal(random::categorical(probabilities.cuda(), seeded(6)).cpu(),
                           at::multinomial(probabilities, 1, false, seeded(6)).squeeze(1)));
}

// A temperature far below the logits' scale gives the most probable values all the mass (where
// dividing first made inf / inf, and in float32 a temperature under 1e-38 made 0 / 0), a huge one
// the uniform distribution, and 1 the softmax.
TEST(Random, TemperedSoftmaxIsADistributionAtEveryTemperature) {
  for (const auto dtype : {torch::kFloat, torch::kDouble}) {
    const torch::Tensor logits = torch::tensor({1.0, 3.0, 2.0, 5.0, 5.0, -1.0}, dtype).view({2, 3});
    EXPECT_TRUE(torch::allclose(random::tempered_softmax(logits, 1.0), torch::softmax(logits, -1)));
    const torch::Tensor sharpest = torch::tensor({0.0, 1.0, 0.0, 0.5, 0.5, 0.0}, dtype).view({2, 3});
    for (const double temperature : {1e-4, 1e-30, 1e-300, 4.9e-324}) {
      EXPECT_TRUE(torch::equal(random::tempered_softmax(logits, temperature), sharpest)) << temperature;
    }
    EXPECT_TRUE(torch::allclose(random::tempered_softmax(logits, 1e300),
                                torch::full({2, 3}, 1.0 / 3, dtype)));
  }
}

// ---- GSDM on a GPU -----------------------------------------------------------------------------

sudoku::TrainedModel tiny_sudoku(gsdm::GsdmConfig config = {}) {
  config.dim = 32;
  config.blocks = 2;
  config.heads = 4;
  DefaultGeneratorGuard weights(7);
  return sudoku::build_model(sudoku::model_metadata(2, sudoku::GridFamily::broad, config,
                                                    diffusion::ScheduleConfig{}));
}

class GsdmOnGpu : public ::testing::TestWithParam<Mechanism> {};

TEST_P(GsdmOnGpu, LossGradientsAndSamplesMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  gsdm::GsdmConfig config;
  config.attention = GetParam();
  sudoku::TrainedModel cpu = tiny_sudoku(config), gpu = tiny_sudoku(config);
  gpu.model->to(torch::kCUDA);
  std::mt19937_64 rng(3);
  const sudoku::Batch batch = sudoku::make_training_batch(2, 8, rng);

  const torch::Tensor cpu_loss =
      gsdm::training_loss(cpu.model, cpu.schedule, batch.x0, batch.observed, seeded(9));
  const torch::Tensor gpu_loss =
      gsdm::training_loss(gpu.model, gpu.schedule, batch.x0, batch.observed, seeded(9));
  EXPECT_TRUE(gpu_loss.is_cuda());
  EXPECT_NEAR(gpu_loss.item<double>(), cpu_loss.item<double>(),
              1e-4 * std::abs(cpu_loss.item<double>()));
  cpu_loss.backward();
  gpu_loss.backward();
  const auto cpu_parameters = cpu.model->named_parameters();
  for (const auto& item : gpu.model->named_parameters()) {
    const torch::Tensor expected = cpu_parameters[item.key()].grad();
    EXPECT_TRUE(torch::allclose(item.value().grad().cpu(), expected, 1e-3, 1e-4))
        << item.key() << ": largest difference "
        << (item.value().grad().cpu() - expected).abs().max().item<double>();
  }

  // Sampling: the same draws (CPU generators) and the result back on the inputs' device.
  gsdm::SampleOptions options;
  options.ddim_steps = 10;
  options.generator = seeded(11);
  const torch::Tensor on_cpu = gsdm::sample(cpu.model, cpu.schedule, batch.observed, batch.x0, options);
  options.generator = seeded(11);
  const torch::Tensor from_gpu =
      gsdm::sample(gpu.model, gpu.schedule, batch.observed, batch.x0, options);
  EXPECT_TRUE(from_gpu.device().is_cpu());
  EXPECT_LT((from_gpu - on_cpu).abs().max().item<double>(), 1e-3);
}

INSTANTIATE_TEST_SUITE_P(Mechanisms, GsdmOnGpu,
                         ::testing::Values(Mechanism::sparse, Mechanism::dense, Mechanism::gather),
                         [](const auto& info) { return mechanism_name(info.param); });

// Trained on the GPU through the one loop, checkpointed there, and resumed: the file loads onto a
// CPU model with the GPU model's weights, and onto a GPU model to continue.
TEST(GsdmOnGpuTraining, CheckpointsWrittenOnTheGpuLoadOnTheCpuAndResume) {
  SKIP_WITHOUT_GPU();
  TemporaryDirectory directory;
  sudoku::TrainedModel trained = tiny_sudoku(), averaged = tiny_sudoku();
  trained.model->to(torch::kCUDA);
  averaged.model->to(torch::kCUDA);
  gsdm::TrainingProblem problem;
  problem.metadata = {{"test", "gpu"}};
  problem.make_batch = [](int64_t batch, std::mt19937_64& rng) {
    const sudoku::Batch b = sudoku::make_training_batch(2, batch, rng);
    return gsdm::TrainingBatch{b.x0, b.observed};
  };
  gsdm::TrainingOptions options;
  options.batch = 8;
  options.loop.steps = 6;
  options.loop.show_progress = false;
  options.loop.checkpoint_path = directory.file("run.pt");
  gsdm::train(trained.model, averaged.model, trained.schedule, problem, options, 5);

  sudoku::TrainedModel on_cpu = tiny_sudoku();
  train::CheckpointParts parts;
  parts.model = on_cpu.model.get();
  train::load_checkpoint(options.loop.checkpoint_path, parts);
  EXPECT_EQ(parts.step, 6);
  for (const auto& item : trained.model->named_parameters()) {
    EXPECT_TRUE(on_cpu.model->named_parameters()[item.key()].device().is_cpu());
    EXPECT_TRUE(torch::equal(item.value().cpu(), on_cpu.model->named_parameters()[item.key()]))
        << item.key();
  }

  options.loop.steps = 8;
  options.loop.resume = true;
  const auto result =
      gsdm::train(trained.model, averaged.model, trained.schedule, problem, options, 5);
  EXPECT_EQ(result.steps_this_run, 2);
  EXPECT_TRUE(device_of(*trained.model).is_cuda());
}

// ---- Tracformer on a GPU -----------------------------------------------------------------------

tracformer::Config tiny_tracformer() {
  tracformer::Config config;
  config.characters = U"abcdefgh";
  config.d_model = 16;
  config.heads = 2;
  config.layers = 3;
  config.n_max = 3;
  config.block_size = 16;
  config.dropout = 0.1;
  config.init_seed = 3;
  return config;
}

TEST(TracformerOnGpu, LossScoresAndCachedDecodingMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  tracformer::Tracformer cpu(tiny_tracformer()), gpu(tiny_tracformer());
  gpu->to(torch::kCUDA);
  const torch::Tensor tokens = torch::randint(8, {3, 16}, seeded(1), torch::kLong);
  const torch::Tensor given = torch::rand({3, 16}, seeded(2)) < 0.5;
  const tracformer::Batch batch{tokens, given, torch::Tensor()};

  at::Generator cpu_dropout = seeded(4), gpu_dropout = seeded(4);
  const torch::Tensor cpu_loss = tracformer::masked_nll(cpu, batch, &cpu_dropout);
  const torch::Tensor gpu_loss = tracformer::masked_nll(gpu, batch, &gpu_dropout);
  EXPECT_TRUE(gpu_loss.is_cuda());
  EXPECT_NEAR(gpu_loss.item<double>(), cpu_loss.item<double>(), 1e-4);

  const tracformer::Scores cpu_scores = tracformer::score(cpu, batch, tracformer::Mode::car);
  const tracformer::Scores gpu_scores = tracformer::score(gpu, batch, tracformer::Mode::car);
  EXPECT_TRUE(gpu_scores.log_probs.device().is_cpu());
  EXPECT_TRUE(torch::allclose(gpu_scores.log_probs, cpu_scores.log_probs, 1e-4, 1e-4));

  // The KV cache on the GPU draws what re-encoding draws, and what the CPU draws.
  tracformer::SamplingOptions cached, reencoded;
  reencoded.cache = false;
  at::Generator g1 = seeded(8), g2 = seeded(8), g3 = seeded(8);
  const torch::Tensor with_cache = tracformer::infill(gpu, batch, cached, g1);
  EXPECT_TRUE(with_cache.device().is_cpu());
  EXPECT_TRUE(torch::equal(with_cache, tracformer::infill(gpu, batch, reencoded, g2)));
  EXPECT_TRUE(torch::equal(with_cache, tracformer::infill(cpu, batch, cached, g3)));
}

}  // namespace
}  // namespace structdiff
