// The convolutional undirected network of the UNN paper (Sec. 3, App. C, D, F) on 28x28 images,
// built on the engine of unn.h: variables X (1, 28, 28, tanh, no bias), H1 (32, 12, 12, tanh),
// H2 (64, 5, 5, tanh), y (10, softmax) joined by conv2d X-H1 (6x6, stride 2), conv2d H1-H2 (4x4,
// stride 2) and a linear H2-y factor: 50,026 parameters. Classification clamps X and reads y's
// logits; generation clamps y to a one-hot class and reads X's logits. Training sums both
// directions' losses: cross-entropy + gamma * binary cross-entropy on the binarised image.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Generator.h>
#include <nlohmann/json_fwd.hpp>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include "structdiff/images.h"
#include "structdiff/loop_options.h"
#include "structdiff/unn.h"

namespace structdiff::unn {

struct ConvUnnConfig {
  std::string dataset = "mnist";  // what it was trained on: "mnist" or "fashion-mnist"
  int64_t iterations = 1;         // k: sweeps in training, and the default in use
  // false: one weight copy per iteration, H2 with 64 / k channels so the parameter count stays
  // about the tied one (the paper's Table 3).
  bool tied = true;
  Schedule classify_schedule = Schedule::forward;           // X observed
  Schedule generate_schedule = Schedule::forward_backward;  // y observed
  double gamma = 0.0;    // weight of the generation loss; 0 trains the classifier only
  double dropout = 0.3;  // on H1 and H2 when classifying in training
  uint64_t init_seed = 0;

  int64_t hidden2_channels() const { return tied ? 64 : 64 / iterations; }
};
// Throws std::invalid_argument naming the field and value.
void check_config(const ConvUnnConfig& config);
void to_json(nlohmann::json& out, const ConvUnnConfig& config);
void from_json(const nlohmann::json& in, ConvUnnConfig& config);

class ConvUnnImpl : public torch::nn::Module {
 public:
  explicit ConvUnnImpl(ConvUnnConfig config);
  const ConvUnnConfig& config() const { return config_; }
  Network& network() { return network_; }
  // Images (B, 1, 28, 28) in [0, 1] (mapped to [-1, 1] for X) -> inference whose
  // preactivation["y"] holds the logits. `dropout` (training) draws masks for H1 and H2.
  InferenceResult classify(const torch::Tensor& images, int64_t iterations, Schedule schedule,
                           at::Generator* dropout = nullptr, bool record_energy = false);
  // Class labels (B) -> inference with y clamped to one-hot; preactivation["X"] holds the image
  // logits (the prototype is their tanh) and trace["X"] X after every iteration.
  InferenceResult generate(const torch::Tensor& labels, int64_t iterations, Schedule schedule,
                           bool record_energy = false);

 private:
  ConvUnnConfig config_;
  Network network_{nullptr};
};
TORCH_MODULE(ConvUnn);

// The split of a training set into training and development images: a fixed shuffle (seed 42,
// as the authors' code) holds out `dev_size` images.
struct ImageSplits {
  data::ImageDataset train, dev;
};
ImageSplits split_off_dev(const data::ImageDataset& train, int64_t dev_size, uint64_t seed = 42);

struct ConvUnnTraining {
  int64_t batch_size = 128;
  // The shared loop's options; validation runs every `validate_every` steps (default: every
  // epoch) and the weights with the best development accuracy are kept.
  train::LoopOptions loop;
  uint64_t seed = 0;  // batch order and dropout
};
struct ConvUnnTrainingResult {
  int64_t steps = 0;
  double seconds = 0;
  int64_t best_step = 0;
  double best_dev_accuracy = 0;
};
// Trains `model` in place on the one training loop; on return it holds the weights of the
// validation with the best development accuracy, in eval mode.
ConvUnnTrainingResult train_conv_unn(ConvUnn& model, const ImageSplits& data,
                                     const ConvUnnTraining& options);

// The fraction of images classified as their label, in batches without gradients.
double conv_unn_accuracy(ConvUnn& model, const data::ImageDataset& data, int64_t iterations,
                         Schedule schedule);

void save_conv_unn(const std::string& path, ConvUnn& model, nlohmann::json metadata);
// Throws std::runtime_error naming the path for a missing, damaged or other-kind file.
ConvUnn load_conv_unn(const std::string& path, nlohmann::json* metadata = nullptr);

}  // namespace structdiff::unn
