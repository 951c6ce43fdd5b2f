// Sample-quality metrics for generated 28x28 images: a small LeNet-style classifier trained on the
// real data, whose test accuracy says how recognisable images are and whose penultimate
// features give a Fréchet distance between generated and real images (FID computed with a
// domain classifier instead of Inception), plus the histogram of predicted classes.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>
#include <torch/nn/module.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include "structdiff/images.h"

namespace structdiff::eval {

// LeNet-5 with ReLU and max pooling: conv 5x5 (1 -> 6, padding 2) - ReLU - max-pool 2 -
// conv 5x5 (6 -> 16) - ReLU - max-pool 2 - linear 400 -> 120 - ReLU - linear 120 -> 84 - ReLU
// (the features) - linear 84 -> 10. About 62k parameters.
class ClassifierImpl : public torch::nn::Module {
 public:
  static constexpr int64_t kFeatures = 84;
  static constexpr int64_t kClasses = 10;

  ClassifierImpl();
  // (N, 1, 28, 28) images in [0, 1] -> logits (N, 10). Throws std::invalid_argument for
  // another shape.
  torch::Tensor forward(const torch::Tensor& images);
  // The penultimate activations (N, kFeatures), after their ReLU.
  torch::Tensor features(const torch::Tensor& images);

 private:
  torch::nn::Conv2d conv1_{nullptr}, conv2_{nullptr};
  torch::nn::Linear fc1_{nullptr}, fc2_{nullptr}, fc3_{nullptr};
};
TORCH_MODULE(Classifier);

struct ClassifierTraining {
  int64_t epochs = 5;
  int64_t batch_size = 128;
  double learning_rate = 1e-3;  // AdamW without decay, i.e. Adam
  uint64_t seed = 0;            // initial weights and batch order
  bool progress = true;         // progress bar on stderr
  // The loop's checkpoint (every epoch when given) and exact resume; stop_after_steps > 0 stops
  // (checkpointed) after that many steps in all, as an interruption would.
  std::string checkpoint_path;
  bool resume = false;
  int64_t stop_after_steps = 0;
};

// Trains a fresh classifier on the one training loop (AdamW without decay or clipping, i.e.
// Adam) with cross-entropy on mini-batches shuffled every epoch. Deterministic
// for a given seed and thread count; leaves libtorch's default generator as it found it.
// Returns the model in eval mode.
Classifier train_classifier(const data::ImageDataset& train, const ClassifierTraining& options);

// The following put the model in eval mode and run without gradients, in batches.

// The fraction of `test` images whose most likely class is their label.
double classifier_accuracy(Classifier& model, const data::ImageDataset& test);
// Penultimate features of (N, 1, 28, 28) images in [0, 1]: float64 (N, kFeatures).
torch::Tensor classifier_features(Classifier& model, const torch::Tensor& images);
// How many of the images the model assigns to each class: int64 (10).
torch::Tensor predicted_class_histogram(Classifier& model, const torch::Tensor& images);

// The Fréchet distance between the Gaussians fitted to two feature sets (N_a, F) and (N_b, F)
// (means, covariances with N - 1): |mu_a - mu_b|^2 + tr(S_a + S_b - 2 (S_a^1/2 S_b S_a^1/2)^1/2),
// in float64 through symmetric eigendecompositions, with round-off negatives (eigenvalues, and
// the distance itself) clamped to 0. Throws std::invalid_argument unless both are 2-D with the
// same F and at least 2 rows.
double frechet_distance(const torch::Tensor& features_a, const torch::Tensor& features_b);

// Saves the weights with `metadata` (a JSON object, e.g. the dataset and test accuracy) through
// train::save_checkpoint, atomically; its "config" is {"architecture": "lenet5"}.
void save_classifier(const std::string& path, Classifier& model, const nlohmann::json& metadata);
// Loads a classifier saved by save_classifier, in eval mode, leaving libtorch's default
// generator as it was. Throws std::runtime_error naming the path when the file is missing,
// damaged or not a classifier, and std::invalid_argument when `images` is not empty and the
// classifier was trained on another dataset than the images it is to score ("mnist",
// "fashion-mnist"; files that do not say are taken at their word). `metadata`, if given, receives
// the file's.
Classifier load_classifier(const std::string& path, const std::string& images = "",
                           nlohmann::json* metadata = nullptr);

}  // namespace structdiff::eval
