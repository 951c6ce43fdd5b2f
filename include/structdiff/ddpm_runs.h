// The DDPM's two runs as library calls: train a model on an image dataset, and score a model's
// samples with a classifier. Each takes a plain request and returns a report; `structdiff ddpm`
// binds options to the requests and prints the reports.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <torch/types.h>

#include "structdiff/ddpm.h"
#include "structdiff/loop_options.h"
#include "structdiff/unet.h"

namespace structdiff::ddpm {

struct TrainRequest {
  std::string dataset = "fashion-mnist";  // "fashion-mnist" | "mnist"
  std::string data_dir;                   // "": the dataset's
  // The architecture; its image channels and size come from the dataset, its seed from `seed`.
  unet::UNetConfig unet;
  TrainingOptions training;
  // The training split's last images, never trained on, whose loss each validation logs.
  int64_t validation_images = 256;
  uint64_t seed = 0;
};

struct TrainReport {
  train::LoopResult result;
  Model averaged;  // the EMA model to save; metadata["trained_steps"], ["dataset"]
};

// Loads the data, builds the model, says on stderr what it trains (rank 0) and trains it. Throws
// std::invalid_argument naming --validation-images when it leaves no images to train on.
TrainReport train_model(const TrainRequest& request);

struct EvalRequest {
  std::string model_path, classifier_path;
  std::string dataset;   // "": the model's
  std::string data_dir;  // "": the dataset's
  SampleOptions sampling;
};

struct EvalReport {
  std::string dataset;
  Model model;
  torch::Tensor samples;  // (count, C, H, W) in [0, 1]
  double sampling_seconds = 0;
  double frechet_distance = 0;
  // The floor: as many real training images as samples (at most the split), against the same
  // test set.
  double frechet_floor = 0;
  int64_t floor_images = 0;
  std::vector<int64_t> class_histogram;  // predicted classes of the samples
  double class_total_variation = 0;      // from the uniform distribution of the balanced sets
};

// Samples from the model and scores the samples against the dataset's test split with the
// classifier's features. Throws std::invalid_argument when the classifier was trained on another
// dataset, before sampling.
EvalReport evaluate(const EvalRequest& request);
// The report as `ddpm eval --json` writes it: the request, the sampler and the scores.
nlohmann::json eval_record(const EvalRequest& request, const EvalReport& report);

}  // namespace structdiff::ddpm
