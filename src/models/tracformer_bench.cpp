#include "structdiff/tracformer_bench.h"

#include <algorithm>
#include <random>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "structdiff/random.h"
#include "structdiff/timing.h"
#include "structdiff/step_timing.h"
#include "structdiff/tracformer_training.h"

namespace structdiff::tracformer {

double encoder_pass_ms(const Config& config, int64_t length, uint64_t seed, double budget_seconds) {
  torch::nn::ModuleList blocks;
  std::vector<PatternBatch> patterns;
  for (int64_t l = 1; l <= config.layers; ++l) {
    blocks->push_back(Block(config, true, false));
    patterns.emplace_back(patterns::tracformer_encoder(length, l, config.n_max, patterns::Direction::prefix));
  }
  const torch::Tensor input = random::normal({1, length, config.d_model},
                                             at::make_generator<at::CPUGeneratorImpl>(seed), torch::kFloat);
  return median_ms(
      [&] {
        BlockImpl::Context context;
        context.query_positions = torch::arange(length, torch::kLong);
        torch::Tensor x = input;
        for (int64_t l = 0; l < config.layers; ++l) {
          context.self_pattern = &patterns[l];
          x = blocks[l]->as<Block>()->forward(x, context);
        }
        x.sum().backward();
      },
      2, budget_seconds);
}

TrainingStepTiming training_step(const Config& config, int64_t batch, int64_t steps, uint64_t seed) {
  const torch::Tensor text =
      random::integers(0, 62, {200000}, at::make_generator<at::CPUGeneratorImpl>(seed), torch::kLong);
  Tracformer model(config), averaged(config);
  train::LoopTask task;
  task.model = model.ptr().get();
  task.ema_model = averaged.ptr().get();
  const data::SpanMasking spans;
  const Masking masking = config.architecture == Architecture::ar ? Masking::all : Masking::spans;
  task.loss_parts = [&](int64_t, std::mt19937_64& rng, at::Generator& noise,
                        const std::vector<train::Shard>& parts) {
    return loss_parts(model, random_batch(text, batch, config.block_size, masking, spans, rng), noise,
                      parts);
  };
  train::LoopOptions loop;
  loop.ema_decay = 0;
  train::StepTimingBudget budget;  // the first step builds the patterns
  budget.min_steps = steps;
  return {train::median_step_seconds(task, loop, budget, seed), model->non_embedding_parameters()};
}

double infill_ms(Tracformer& model, int64_t sequences, bool cache, uint64_t seed, double budget_seconds) {
  const int64_t T = model->config().block_size;
  const torch::Tensor tokens = random::integers(0, 62, {sequences, T},
                                                at::make_generator<at::CPUGeneratorImpl>(seed), torch::kLong);
  torch::Tensor given = torch::ones({sequences, T}, torch::kBool);
  given.narrow(1, T / 4, T / 2).fill_(false);
  SamplingOptions options;
  options.cache = cache;
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  return median_ms([&] { infill(model, {tokens, given}, options, generator); }, 1, budget_seconds);
}

}  // namespace structdiff::tracformer
