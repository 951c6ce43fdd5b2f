#include "structdiff/ddpm_runs.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include <ATen/Parallel.h>

#include "structdiff/image_metrics.h"
#include "structdiff/images.h"
#include "structdiff/model_tensors.h"
#include "structdiff/ranks.h"
#include "structdiff/runtime.h"

namespace structdiff::ddpm {

TrainReport train_model(const TrainRequest& request) {
  const data::ImageDataset train_set =
      data::load_image_dataset(request.dataset, data::ImageSplit::train, request.data_dir);
  // The held-out batch is the training split's last images, never trained on: the test split is
  // for `evaluate`, and choosing how long to train on it would select on it.
  const int64_t train_count = train_set.images.size(0);
  if (request.validation_images >= train_count) {
    throw std::invalid_argument("--validation-images " + std::to_string(request.validation_images) +
                                " leaves no training images: " + request.dataset + " has " +
                                std::to_string(train_count));
  }
  const int64_t kept = train_count - request.validation_images;
  const torch::Tensor training_images = train_set.images.narrow(0, 0, kept);
  const torch::Tensor held_out_images = train_set.images.narrow(0, kept, request.validation_images);
  unet::UNetConfig config = request.unet;
  config.image_channels = train_set.images.size(1);
  config.image_size = train_set.images.size(2);
  config.seed = request.seed;
  nlohmann::json metadata = model_metadata(config, default_schedule());
  metadata["dataset"] = request.dataset;
  Model model = [&] {
    DefaultGeneratorGuard initial_weights(request.seed);
    return build_model(metadata);
  }();
  TrainReport report{{}, build_model(metadata)};  // `averaged` receives the EMA weights

  const HeldOutBatch held_out = make_held_out_batch(model, held_out_images, /*seed=*/0);
  const auto& ranks = request.training.loop.ranks;
  if (!ranks || ranks->is_root()) {
    std::fprintf(stderr, "training a DDPM on %s (%ld images): %ld parameters, %s attention "
                 "(bottleneck %s), %d threads%s\n",
                 request.dataset.c_str(), static_cast<long>(kept),
                 static_cast<long>(train::parameter_count(*model.net)),
                 mechanism_name(config.attention).c_str(),
                 mechanism_name(config.bottleneck_attention).c_str(),
                 at::get_num_threads(), ranks ? (", " + std::to_string(ranks->size()) + " ranks").c_str() : "");
  }
  report.result = train(model, report.averaged, training_images, request.training, request.seed, &held_out);
  report.averaged.metadata["trained_steps"] = report.result.steps_done;
  return report;
}

EvalReport evaluate(const EvalRequest& request) {
  EvalReport report;
  report.model = load_model(request.model_path);
  report.dataset = !request.dataset.empty()
                       ? request.dataset
                       : report.model.metadata.value("dataset", std::string("fashion-mnist"));
  eval::Classifier classifier = eval::load_classifier(request.classifier_path, report.dataset);
  const data::ImageDataset train_set =
      data::load_image_dataset(report.dataset, data::ImageSplit::train, request.data_dir);
  const data::ImageDataset test_set =
      data::load_image_dataset(report.dataset, data::ImageSplit::test, request.data_dir);

  const auto started = std::chrono::steady_clock::now();
  report.samples = sample(report.model, request.sampling);
  report.sampling_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();

  const int64_t count = request.sampling.count;
  const torch::Tensor test_features = eval::classifier_features(classifier, test_set.images);
  report.floor_images = std::min<int64_t>(count, train_set.images.size(0));
  report.frechet_distance =
      eval::frechet_distance(eval::classifier_features(classifier, report.samples), test_features);
  report.frechet_floor = eval::frechet_distance(
      eval::classifier_features(classifier, train_set.images.narrow(0, 0, report.floor_images)),
      test_features);
  const torch::Tensor histogram = eval::predicted_class_histogram(classifier, report.samples);
  report.class_histogram.assign(histogram.data_ptr<int64_t>(),
                                histogram.data_ptr<int64_t>() + histogram.numel());
  // 0 when every class is generated equally often.
  const double classes = static_cast<double>(report.class_histogram.size());
  for (int64_t n : report.class_histogram) {
    report.class_total_variation += 0.5 * std::abs(static_cast<double>(n) / static_cast<double>(count) - 1.0 / classes);
  }
  return report;
}

nlohmann::json eval_record(const EvalRequest& request, const EvalReport& report) {
  return {{"model", request.model_path},
          {"classifier", request.classifier_path},
          {"dataset", report.dataset},
          {"attention", report.model.metadata.at("config").at("unet").at("attention")},
          {"trained_steps", report.model.metadata.value("trained_steps", int64_t{0})},
          {"samples", request.sampling.count},
          {"ddim_steps", request.sampling.ddim_steps},
          {"ddim_eta", request.sampling.ddim_eta},
          {"seed", request.sampling.seed},
          {"sampling_seconds", report.sampling_seconds},
          {"frechet_distance", report.frechet_distance},
          {"frechet_floor_train_vs_test", report.frechet_floor},
          {"floor_train_images", report.floor_images},
          {"class_histogram", report.class_histogram},
          {"class_total_variation", report.class_total_variation},
          {"threads", at::get_num_threads()}};
}

}  // namespace structdiff::ddpm
