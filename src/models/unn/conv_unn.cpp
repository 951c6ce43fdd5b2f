// The convolutional UNN on 28x28 images: its graph, both directions, training on the one loop with
// the best development epoch kept, and its model file.
#include "structdiff/conv_unn.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <limits>
#include <stdexcept>

#include "structdiff/best_weights.h"
#include "structdiff/model_file.h"
#include "structdiff/runtime.h"

namespace structdiff::unn {
namespace {

constexpr int64_t kClasses = 10;
constexpr int64_t kHidden1 = 32;

void require(bool condition, const std::string& message) {
  if (!condition) throw std::invalid_argument(message);
}

Graph build_graph(const ConvUnnConfig& config, at::Generator& generator) {
  const int64_t h2 = config.hidden2_channels();
  Graph graph;
  graph->add_variable({"X", {1, 28, 28}, Activation::tanh, 1.0, {}}, generator);
  graph->add_variable({"H1", {kHidden1, 12, 12}, Activation::tanh, 1.0, {kHidden1, 1, 1}},
                      generator, 1 * 6 * 6);
  graph->add_variable({"H2", {h2, 5, 5}, Activation::tanh, 1.0, {h2, 1, 1}}, generator,
                      kHidden1 * 4 * 4);
  graph->add_variable({"y", {kClasses}, Activation::softmax, 1.0, {kClasses}}, generator,
                      h2 * 5 * 5);
  graph->add_factor(Conv2dFactor("X", "H1", 1, kHidden1, 6, 2, generator));
  graph->add_factor(Conv2dFactor("H1", "H2", kHidden1, h2, 4, 2, generator));
  graph->add_factor(LinearFactor("H2", "y", h2 * 5 * 5, kClasses, generator));
  return graph;
}

}  // namespace

void check_config(const ConvUnnConfig& c) {
  require(c.dataset == "mnist" || c.dataset == "fashion-mnist",
          "dataset must be mnist or fashion-mnist, got '" + c.dataset + "'");
  require(c.iterations >= 1 && c.iterations <= 64,
          "iterations must be in 1..64, got " + std::to_string(c.iterations));
  require(c.gamma >= 0 && std::isfinite(c.gamma),
          "gamma must be >= 0, got " + std::to_string(c.gamma));
  require(c.dropout >= 0 && c.dropout < 1,
          "dropout must be in [0, 1), got " + std::to_string(c.dropout));
  require(c.classify_schedule != Schedule::explicit_order &&
              c.generate_schedule != Schedule::explicit_order,
          "the conv UNN takes forward, forward-backward, random or jacobi schedules");
}

void to_json(nlohmann::json& out, const ConvUnnConfig& c) {
  out = {{"dataset", c.dataset},
         {"iterations", c.iterations},
         {"tied", c.tied},
         {"classify_schedule", schedule_name(c.classify_schedule)},
         {"generate_schedule", schedule_name(c.generate_schedule)},
         {"gamma", c.gamma},
         {"dropout", c.dropout},
         {"init_seed", c.init_seed}};
}

void from_json(const nlohmann::json& in, ConvUnnConfig& c) {
  c.dataset = in.at("dataset").get<std::string>();
  c.iterations = in.at("iterations").get<int64_t>();
  c.tied = in.at("tied").get<bool>();
  c.classify_schedule = parse_schedule(in.at("classify_schedule").get<std::string>());
  c.generate_schedule = parse_schedule(in.at("generate_schedule").get<std::string>());
  c.gamma = in.at("gamma").get<double>();
  c.dropout = in.at("dropout").get<double>();
  c.init_seed = in.at("init_seed").get<uint64_t>();
}

ConvUnnImpl::ConvUnnImpl(ConvUnnConfig config) : config_(std::move(config)) {
  check_config(config_);
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(config_.init_seed);
  network_ =
      register_module("network", Network([&](int64_t) { return build_graph(config_, generator); },
                                         config_.tied ? 1 : config_.iterations));
}

InferenceResult ConvUnnImpl::classify(const torch::Tensor& images, int64_t iterations,
                                      Schedule schedule, at::Generator* dropout,
                                      bool record_energy) {
  require(images.dim() == 4 && images.size(1) == 1 && images.size(2) == 28 && images.size(3) == 28,
          "conv UNN images must be (batch, 1, 28, 28)");
  InferenceOptions options;
  options.iterations = iterations;
  options.schedule = schedule;
  options.observed["X"] = images * 2 - 1;
  if (dropout != nullptr && config_.dropout > 0) {
    options.dropout = {{"H1", config_.dropout}, {"H2", config_.dropout}};
    options.generator = dropout;
  }
  // Without a training generator, random orders come from a fixed stream, so that a result can
  // be reproduced.
  at::Generator order = at::make_generator<at::CPUGeneratorImpl>(0);
  if (schedule == Schedule::random && options.generator == nullptr) options.generator = &order;
  options.record_energy = record_energy;
  return network_->infer(options);
}

InferenceResult ConvUnnImpl::generate(const torch::Tensor& labels, int64_t iterations,
                                      Schedule schedule, bool record_energy) {
  require(labels.dim() == 1 && labels.numel() > 0, "labels must be a non-empty 1-D tensor");
  require(labels.min().item<int64_t>() >= 0 && labels.max().item<int64_t>() < kClasses,
          "class labels must be in 0..9");
  InferenceOptions options;
  options.iterations = iterations;
  options.schedule = schedule;
  const torch::Tensor parameter = network_->parameters().front();
  options.observed["y"] = torch::one_hot(labels, kClasses).to(parameter.options());
  at::Generator order = at::make_generator<at::CPUGeneratorImpl>(0);
  if (schedule == Schedule::random) options.generator = &order;
  options.record_energy = record_energy;
  return network_->infer(options, {"X"});
}

ImageSplits split_off_dev(const data::ImageDataset& train, int64_t dev_size, uint64_t seed) {
  const int64_t n = train.images.size(0);
  require(dev_size >= 1 && dev_size < n, "the development split needs 1.." + std::to_string(n - 1) +
                                             " images, got " + std::to_string(dev_size));
  const torch::Tensor order = train::epoch_order(n, seed, 0);
  const torch::Tensor dev = order.narrow(0, 0, dev_size),
                      rest = order.narrow(0, dev_size, n - dev_size);
  ImageSplits splits;
  splits.train = {train.name, train.images.index_select(0, rest),
                  train.labels.index_select(0, rest), train.num_classes};
  splits.dev = {train.name, train.images.index_select(0, dev), train.labels.index_select(0, dev),
                train.num_classes};
  return splits;
}

double conv_unn_accuracy(ConvUnn& model, const data::ImageDataset& data, int64_t iterations,
                         Schedule schedule) {
  torch::NoGradGuard no_grad;
  model->eval();
  const int64_t n = data.images.size(0);
  require(n > 0, "no images to score");
  int64_t correct = 0;
  for (int64_t first = 0; first < n; first += 500) {
    const int64_t count = std::min<int64_t>(500, n - first);
    const torch::Tensor logits =
        model->classify(data.images.narrow(0, first, count), iterations, schedule)
            .preactivation.at("y");
    correct += logits.argmax(1).eq(data.labels.narrow(0, first, count)).sum().item<int64_t>();
  }
  return static_cast<double>(correct) / static_cast<double>(n);
}

ConvUnnTrainingResult train_conv_unn(ConvUnn& model, const ImageSplits& data,
                                     const ConvUnnTraining& options) {
  const ConvUnnConfig& config = model->config();
  const int64_t n = data.train.images.size(0);
  require(options.batch_size >= 1,
          "batch size must be >= 1, got " + std::to_string(options.batch_size));
  require(n > 0 && data.dev.images.size(0) > 0, "training needs training and development images");
  const int64_t batches = (n + options.batch_size - 1) / options.batch_size;

  ConvUnn evaluated{nullptr};
  train::BestWeights best{nullptr};
  {
    DefaultGeneratorGuard guard;
    evaluated = ConvUnn(config);
    best = train::BestWeights(ConvUnn(config).ptr());
  }
  train::LoopTask task;
  task.model = model.ptr().get();
  task.ema_model = evaluated.ptr().get();
  nlohmann::json config_json = config;
  task.metadata = {
      {"kind", "unn-conv-run"}, {"config", config_json}, {"batch_size", options.batch_size}};
  const torch::Tensor images = data.train.images, labels = data.train.labels;
  task.loss = [&](int64_t step, std::mt19937_64&, at::Generator& noise) {
    const int64_t first = (step % batches) * options.batch_size;
    const torch::Tensor index = train::epoch_order(n, options.seed, step / batches)
                                    .narrow(0, first, std::min(options.batch_size, n - first));
    const torch::Tensor x = images.index_select(0, index), y = labels.index_select(0, index);
    const torch::Tensor logits =
        model->classify(x, config.iterations, config.classify_schedule, &noise)
            .preactivation.at("y");
    torch::Tensor loss = torch::cross_entropy_loss(logits, y);
    if (config.gamma > 0) {
      const torch::Tensor image_logits =
          model->generate(y, config.iterations, config.generate_schedule).preactivation.at("X");
      loss = loss + config.gamma * torch::binary_cross_entropy_with_logits(
                                       image_logits, (x > 0.5).to(image_logits.dtype()));
    }
    return loss;
  };
  train::LoopOptions loop = options.loop;
  if (loop.validate_every == 0) loop.validate_every = batches;
  const train::LoopResult trained = train::run_training_keeping_best(
      task, loop, options.seed,
      [&] {
        return conv_unn_accuracy(evaluated, data.dev, config.iterations, config.classify_schedule);
      },
      "accuracy", best);
  ConvUnnTrainingResult result;
  result.steps = trained.steps_done;
  result.seconds = trained.seconds;
  result.best_step = best->step();
  result.best_dev_accuracy = best->score();
  return result;
}

void save_conv_unn(const std::string& path, ConvUnn& model, nlohmann::json metadata) {
  train::save_configured_model(path, "unn-conv", model, std::move(metadata));
}

ConvUnn load_conv_unn(const std::string& path, nlohmann::json* metadata) {
  return train::load_configured_model<ConvUnn>(path, "unn-conv", metadata);
}

}  // namespace structdiff::unn
