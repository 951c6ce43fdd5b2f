// The image classifier's runs as library calls (what `structdiff classifier train|eval` print):
// train on a dataset and score it on the test split; score a classifier file and measure the
// Fréchet floor that generated samples are compared against. Request in, report out.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "structdiff/image_metrics.h"

namespace structdiff::eval {

struct ClassifierTrainRequest {
  std::string dataset;    // "fashion-mnist" or "mnist"
  std::string directory;  // IDX files; empty: the dataset's default
  ClassifierTraining training;
  // Called once the data is loaded, before training (for printing as the run goes).
  std::function<void(int64_t train_images, int64_t test_images)> on_data;
};

struct ClassifierTrainReport {
  Classifier model{nullptr};
  double test_accuracy = 0;
  int64_t train_images = 0, test_images = 0;
  double train_seconds = 0;
  nlohmann::json metadata;  // what the model file records about the run
};

ClassifierTrainReport train_classifier_run(const ClassifierTrainRequest& request);

struct ClassifierEvalRequest {
  std::string model_path;
  std::optional<std::string> dataset;  // empty: the one the classifier was trained on
  std::string directory;
};

struct ClassifierEvalReport {
  std::string model_path, trained_on, dataset;
  double test_accuracy = 0;
  int64_t test_images = 0;
  // The Fréchet distance between the features of the first training images and the test split's:
  // the floor for generated samples.
  double frechet_floor = 0;
  int64_t floor_train_images = 0;
  nlohmann::json json() const;  // what --json writes
};

// Throws std::invalid_argument when the file does not record its dataset and none is given.
ClassifierEvalReport evaluate_classifier_file(const ClassifierEvalRequest& request);

}  // namespace structdiff::eval
