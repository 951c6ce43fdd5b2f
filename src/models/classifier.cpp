// The LeNet-style image classifier behind the sample-quality metrics: architecture, training,
// checkpoints.
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "structdiff/image_metrics.h"
#include "structdiff/train.h"

namespace structdiff::eval {
namespace {

const char* const kArchitecture = "lenet5";

// Restores libtorch's default CPU generator on destruction, so that drawing initial weights does
// not disturb the caller's stream.
class DefaultGeneratorRestorer {
 public:
  DefaultGeneratorRestorer() : state_(generator_state()) {}
  ~DefaultGeneratorRestorer() {
    at::Generator generator = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(generator.mutex());
    generator.set_state(state_);
  }
  DefaultGeneratorRestorer(const DefaultGeneratorRestorer&) = delete;
  DefaultGeneratorRestorer& operator=(const DefaultGeneratorRestorer&) = delete;

 private:
  static torch::Tensor generator_state() {
    at::Generator generator = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(generator.mutex());
    return generator.get_state();
  }
  torch::Tensor state_;
};

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
    DefaultGeneratorRestorer restorer;
    torch::manual_seed(options.seed);
    return Classifier();
  }();
  model->train();
  torch::optim::Adam optimizer(model->parameters(),
                               torch::optim::AdamOptions(options.learning_rate));
  at::Generator order_generator = at::make_generator<at::CPUGeneratorImpl>(options.seed);
  const int64_t batches = (n + options.batch_size - 1) / options.batch_size;
  std::optional<train::ProgressBar> progress;
  if (options.progress) progress.emplace("classifier " + train_set.name, options.epochs * batches);

  int64_t step = 0;
  for (int64_t epoch = 0; epoch < options.epochs; ++epoch) {
    const torch::Tensor order = torch::randperm(n, order_generator, torch::kLong);
    double loss_sum = 0.0;
    for (const torch::Tensor& batch : order.split(options.batch_size)) {
      const torch::Tensor loss =
          torch::cross_entropy_loss(model->forward(train_set.images.index_select(0, batch)),
                                    train_set.labels.index_select(0, batch));
      optimizer.zero_grad();
      loss.backward();
      optimizer.step();
      loss_sum += loss.item<double>();
      ++step;
      if (progress) {
        progress->update(step, {{"epoch", static_cast<double>(epoch + 1)},
                                {"loss", loss_sum / static_cast<double>(step - epoch * batches)}});
      }
    }
  }
  if (progress) progress->finish();
  model->eval();
  return model;
}

void save_classifier(const std::string& path, Classifier& model, const nlohmann::json& metadata) {
  nlohmann::json stored = metadata;
  stored["kind"] = "classifier";
  stored["architecture"] = kArchitecture;
  train::CheckpointParts parts;
  parts.model = model.get();
  parts.metadata = stored;
  train::save_checkpoint(path, parts);
}

Classifier load_classifier(const std::string& path) {
  train::require_model_kind(train::read_checkpoint_metadata(path), "classifier", path);
  Classifier model = [] {
    DefaultGeneratorRestorer restorer;  // the initial weights draw from it
    return Classifier();
  }();
  train::CheckpointParts parts;
  parts.model = model.get();
  parts.restore_generator = false;
  train::load_checkpoint(path, parts);
  model->eval();
  return model;
}

}  // namespace structdiff::eval
