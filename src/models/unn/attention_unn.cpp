// Undirected self-attention on the engine: the graph, the partly clamped token rows, the tied
// read-out, training on the one loop with the best development accuracy kept, and the model file.
#include "structdiff/attention_unn.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <cmath>
#include <stdexcept>

#include "structdiff/best_weights.h"
#include "structdiff/model_file.h"
#include "structdiff/runtime.h"
#include "structdiff/sinusoidal.h"

namespace structdiff::unn {
namespace {

void require(bool condition, const std::string& message) {
  if (!condition) throw std::invalid_argument(message);
}

constexpr int64_t kLength = data::kSequenceLength;

Graph build_graph(const AttentionUnnConfig& config, at::Generator& generator) {
  const int64_t d = config.d_model;
  const torch::Tensor positions =
      sinusoidal_embedding(torch::arange(kLength, torch::kFloat), d, FrequencySpacing::transformer);
  Graph graph;
  for (const char* name : {"X", "Q", "K", "V"}) {
    graph->add_variable({name, {kLength, d}, Activation::identity, 1.0, {}}, generator);
  }
  graph->add_variable({"S", {kLength, kLength}, Activation::softmax, std::sqrt(double(d)), {}},
                      generator);
  graph->add_variable({"H", {kLength, d}, Activation::identity, 1.0, {}}, generator);
  for (const char* name : {"Q", "K", "V"}) {
    graph->add_factor(LinearFactor("X", name, d, d, generator, positions, /*rows=*/true));
  }
  graph->add_factor(AttentionScoreFactor("S", "Q", "K"));
  graph->add_factor(AttentionValueFactor("H", "S", "V"));
  return graph;
}

}  // namespace

void check_config(const AttentionUnnConfig& c) {
  require(c.d_model >= 2 && c.d_model % 2 == 0 && c.d_model <= 4096,
          "d_model must be even and in 2..4096, got " + std::to_string(c.d_model));
  require(c.iterations >= 1 && c.iterations <= 64,
          "iterations must be in 1..64, got " + std::to_string(c.iterations));
  require(c.schedule != Schedule::explicit_order,
          "undirected attention takes forward, forward-backward, random or jacobi schedules");
}

void to_json(nlohmann::json& out, const AttentionUnnConfig& c) {
  out = {{"d_model", c.d_model},
         {"iterations", c.iterations},
         {"schedule", schedule_name(c.schedule)},
         {"random_iterations", c.random_iterations},
         {"init_seed", c.init_seed}};
}

void from_json(const nlohmann::json& in, AttentionUnnConfig& c) {
  c.d_model = in.at("d_model").get<int64_t>();
  c.iterations = in.at("iterations").get<int64_t>();
  c.schedule = parse_schedule(in.at("schedule").get<std::string>());
  c.random_iterations = in.at("random_iterations").get<bool>();
  c.init_seed = in.at("init_seed").get<uint64_t>();
}

AttentionUnnImpl::AttentionUnnImpl(AttentionUnnConfig config) : config_(std::move(config)) {
  check_config(config_);
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(config_.init_seed);
  embedding = register_parameter(
      "embedding",
      torch::empty({data::kSequenceVocabulary, config_.d_model}).normal_(0, 1, generator));
  network_ = register_module("network",
                             Network([&](int64_t) { return build_graph(config_, generator); }, 1));
}

InferenceResult AttentionUnnImpl::infer(const torch::Tensor& tokens, int64_t iterations,
                                        Schedule schedule, at::Generator* generator,
                                        bool record_energy) {
  require(tokens.dim() == 2 && tokens.size(1) == kLength && tokens.size(0) > 0,
          "token batches must be (batch, " + std::to_string(kLength) + ")");
  const torch::Tensor ids = tokens.to(torch::kLong);
  require(ids.min().item<int64_t>() >= 0 && ids.max().item<int64_t>() < data::kSequenceVocabulary,
          "tokens must be ids in 0.." + std::to_string(data::kSequenceVocabulary - 1));
  const int64_t batch = ids.size(0), d = config_.d_model;
  const torch::Tensor masked = ids.eq(data::kSequenceMask), pad = ids.eq(data::kSequencePad);
  InferenceOptions options;
  options.iterations = iterations;
  options.schedule = schedule;
  // Given rows hold their embeddings (padding included, as the authors do); masked rows are free.
  options.initial["X"] =
      torch::where(masked.unsqueeze(2), torch::zeros({}, embedding.options()),
                   embedding.index_select(0, ids.view(-1)).view({batch, kLength, d}));
  options.clamp["X"] = masked.logical_not().unsqueeze(2).expand({batch, kLength, d});
  const torch::Tensor real = pad.logical_not();
  options.support["S"] = real.unsqueeze(2).logical_and(real.unsqueeze(1));
  options.then = {"X"};
  if (schedule == Schedule::forward_backward) {
    options.schedule = Schedule::explicit_order;
    options.order = {"Q", "K", "V", "S", "H", "S", "V", "K", "Q"};
  } else if (schedule == Schedule::forward) {
    options.schedule = Schedule::explicit_order;
    options.order = {"Q", "K", "V", "S", "H"};
  }
  at::Generator fixed = at::make_generator<at::CPUGeneratorImpl>(0);
  options.generator = generator != nullptr ? generator : &fixed;
  options.record_energy = record_energy;
  return network_->infer(options);
}

torch::Tensor AttentionUnnImpl::logits(const torch::Tensor& tokens, int64_t iterations,
                                       Schedule schedule, at::Generator* generator) {
  return torch::matmul(infer(tokens, iterations, schedule, generator).state.at("X"), embedding.t());
}

double masked_token_accuracy(AttentionUnn& model, const data::NumberSequences& data,
                             int64_t iterations, Schedule schedule) {
  torch::NoGradGuard no_grad;
  model->eval();
  const int64_t n = data.tokens.size(0);
  require(n > 0, "no sequences to score");
  int64_t correct = 0, total = 0;
  for (int64_t first = 0; first < n; first += 1024) {
    const int64_t count = std::min<int64_t>(1024, n - first);
    const torch::Tensor targets = data.targets.narrow(0, first, count).to(torch::kLong);
    const torch::Tensor predicted =
        model->logits(data.tokens.narrow(0, first, count), iterations, schedule).argmax(2);
    const torch::Tensor scored = targets.ge(0);
    correct += predicted.eq(targets).logical_and(scored).sum().item<int64_t>();
    total += scored.sum().item<int64_t>();
  }
  return static_cast<double>(correct) / static_cast<double>(std::max<int64_t>(total, 1));
}

namespace {

// The k a model is evaluated with: its own, or 3 for a model trained with random k.
int64_t evaluation_iterations(const AttentionUnnConfig& config) {
  return config.random_iterations ? 3 : config.iterations;
}

}  // namespace

AttentionUnnTrainingResult train_attention_unn(AttentionUnn& model,
                                               const data::NumberSequences& all,
                                               const AttentionUnnTraining& options) {
  const AttentionUnnConfig& config = model->config();
  const int64_t total = all.tokens.size(0);
  require(options.batch_size >= 1, "batch size must be >= 1");
  require(options.dev_size >= 1 && options.dev_size < total,
          "the development split needs 1.." + std::to_string(total - 1) + " sequences, got " +
              std::to_string(options.dev_size));
  const torch::Tensor order = train::epoch_order(total, 42, 0);
  const data::NumberSequences dev =
      data::select_number_sequences(all, order.narrow(0, 0, options.dev_size));
  const data::NumberSequences train = data::select_number_sequences(
      all, order.narrow(0, options.dev_size, total - options.dev_size));
  const int64_t n = train.tokens.size(0);
  const int64_t batches = (n + options.batch_size - 1) / options.batch_size;

  AttentionUnn evaluated{nullptr};
  train::BestWeights best{nullptr};
  {
    DefaultGeneratorGuard guard;
    evaluated = AttentionUnn(config);
    best = train::BestWeights(AttentionUnn(config).ptr());
  }
  train::LoopTask task;
  task.model = model.ptr().get();
  task.ema_model = evaluated.ptr().get();
  nlohmann::json config_json = config;
  task.metadata = {{"kind", "unn-attention-run"},
                   {"config", config_json},
                   {"batch_size", options.batch_size},
                   {"dev_size", options.dev_size}};
  task.loss = [&](int64_t step, std::mt19937_64& draws, at::Generator& noise) {
    const int64_t first = (step % batches) * options.batch_size;
    const torch::Tensor index = train::epoch_order(n, options.seed, step / batches)
                                    .narrow(0, first, std::min(options.batch_size, n - first));
    const torch::Tensor tokens = train.tokens.index_select(0, index);
    const torch::Tensor targets = train.targets.index_select(0, index);
    const int64_t k = config.random_iterations ? std::uniform_int_distribution<int64_t>(1, 5)(draws)
                                               : config.iterations;
    const torch::Tensor logits = model->logits(tokens, k, config.schedule, &noise);
    return torch::cross_entropy_loss(logits.view({-1, logits.size(2)}), targets.view(-1), {},
                                     at::Reduction::Mean, data::kSequenceNoTarget);
  };
  train::LoopOptions loop = options.loop;
  if (loop.validate_every == 0) loop.validate_every = 1000;
  const train::LoopResult trained = train::run_training_keeping_best(
      task, loop, options.seed,
      [&] {
        return masked_token_accuracy(evaluated, dev, evaluation_iterations(config),
                                     config.schedule);
      },
      "accuracy", best);
  AttentionUnnTrainingResult result;
  result.steps = trained.steps_done;
  result.seconds = trained.seconds;
  result.best_step = best->step();
  result.best_dev_accuracy = best->score();
  return result;
}

void save_attention_unn(const std::string& path, AttentionUnn& model, nlohmann::json metadata) {
  train::save_configured_model(path, "unn-attention", model, std::move(metadata));
}

AttentionUnn load_attention_unn(const std::string& path, nlohmann::json* metadata) {
  return train::load_configured_model<AttentionUnn>(path, "unn-attention", metadata);
}

}  // namespace structdiff::unn
