// The LeNet-style image classifier behind the sample-quality metrics: architecture, training,
// checkpoints.
#include <limits>
#include <stdexcept>
#include <string>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "structdiff/image_metrics.h"
#include "structdiff/runtime.h"
#include "structdiff/model_file.h"
#include "structdiff/training_loop.h"

namespace structdiff::eval {
namespace {

const char* const kArchitecture = "lenet5";

}  // namespace

ClassifierImpl::ClassifierImpl() {
  conv1_ =
      register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 6, 5).padding(2)));
  conv2_ = register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(6, 16, 5)));
  fc1_ = register_module("fc1", torch::nn::Linear(16 * 5 * 5, 120));
  fc2_ = register_module("fc2", torch::nn::Linear(120, kFeatures));
  fc3_ = register_module("fc3", torch::nn::Linear(kFeatures, kClasses));
}

torch::Tensor ClassifierImpl::features(const torch::Tensor& images) {
  if (images.dim() != 4 || images.size(1) != 1 || images.size(2) != 28 || images.size(3) != 28) {
    throw std::invalid_argument("Classifier: expected (N, 1, 28, 28) images, got " +
                                c10::str(images.sizes()));
  }
  torch::Tensor x = torch::max_pool2d(torch::relu(conv1_(images)), 2);  // (N, 6, 14, 14)
  x = torch::max_pool2d(torch::relu(conv2_(x)), 2);                     // (N, 16, 5, 5)
  x = torch::relu(fc1_(x.flatten(1)));
  return torch::relu(fc2_(x));
}

torch::Tensor ClassifierImpl::forward(const torch::Tensor& images) {
  return fc3_(features(images));
}

Classifier train_classifier(const data::ImageDataset& train_set,
                            const ClassifierTraining& options) {
  if (options.epochs < 1 || options.batch_size < 1 || !(options.learning_rate > 0)) {
    throw std::invalid_argument(
        "train_classifier: need epochs >= 1, batch_size >= 1 and a positive learning rate");
  }
  const int64_t n = train_set.images.size(0);
  if (n == 0 || train_set.labels.size(0) != n) {
    throw std::invalid_argument("train_classifier: " + train_set.name +
                                " needs images and one label for each");
  }
  Classifier model = [&] {
    DefaultGeneratorGuard initial_weights(options.seed);
    return Classifier();
  }();
  // The loop evaluates an EMA copy; none is used here (decay 0), nor clipping.
  Classifier copy = [] {
    DefaultGeneratorGuard guard;
    return Classifier();
  }();
  const int64_t batches = (n + options.batch_size - 1) / options.batch_size;
  train::LoopTask task;
  task.model = model.ptr().get();
  task.ema_model = copy.ptr().get();
  task.metadata = {{"kind", "classifier-run"},
                   {"dataset", train_set.name},
                   {"epochs", options.epochs},
                   {"batch_size", options.batch_size},
                   {"learning_rate", options.learning_rate}};
  task.loss = [&](int64_t step, std::mt19937_64&, at::Generator&) {
    const int64_t first = (step % batches) * options.batch_size;
    const torch::Tensor indices = train::epoch_order(n, options.seed, step / batches)
                                      .narrow(0, first, std::min(options.batch_size, n - first));
    return torch::cross_entropy_loss(model->forward(train_set.images.index_select(0, indices)),
                                     train_set.labels.index_select(0, indices));
  };
  if (options.stop_after_steps > 0) {
    task.on_step = [&](int64_t step, double) { return step < options.stop_after_steps; };
  }
  train::LoopOptions loop;
  loop.steps = options.epochs * batches;
  loop.learning_rate = options.learning_rate;
  loop.clip_norm = std::numeric_limits<double>::infinity();
  loop.ema_decay = 0;
  loop.checkpoint_path = options.checkpoint_path;
  if (!options.checkpoint_path.empty()) loop.checkpoint_every = batches;
  loop.resume = options.resume;
  loop.show_progress = options.progress;
  loop.progress_label = "classifier " + train_set.name;
  train::run_training(task, loop, options.seed);
  model->eval();
  return model;
}

void save_classifier(const std::string& path, Classifier& model, const nlohmann::json& metadata) {
  nlohmann::json stored = metadata;
  stored["config"] = {{"architecture", kArchitecture}};
  train::save_model_file(path, "classifier", *model, stored);
}

Classifier load_classifier(const std::string& path, const std::string& images,
                           nlohmann::json* metadata) {
  Classifier model{nullptr};
  nlohmann::json read = train::load_model_file(path, "classifier", [&](const nlohmann::json& metadata) -> torch::nn::Module& {
    const std::string trained_on = metadata.value("dataset", std::string());
    if (!images.empty() && !trained_on.empty() && trained_on != images) {
      throw std::invalid_argument(path + " classifies " + trained_on + " images; these are " +
                                  images + " (use a classifier trained on " + images + ")");
    }
    model = Classifier();
    return *model;
  });
  if (metadata != nullptr) *metadata = std::move(read);
  return model;
}

}  // namespace structdiff::eval
