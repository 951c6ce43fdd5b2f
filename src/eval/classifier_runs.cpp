#include "structdiff/classifier_runs.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>

namespace structdiff::eval {
namespace {

// Train images whose features stand for the real data in the Fréchet floor: as many as the test
// split of Fashion-MNIST, and all of MNIST's 8,000.
constexpr int64_t kFloorTrainImages = 10000;

}  // namespace

ClassifierTrainReport train_classifier_run(const ClassifierTrainRequest& request) {
  const data::ImageDataset train_set =
      data::load_image_dataset(request.dataset, data::ImageSplit::train, request.directory);
  const data::ImageDataset test_set =
      data::load_image_dataset(request.dataset, data::ImageSplit::test, request.directory);
  ClassifierTrainReport report;
  report.train_images = train_set.images.size(0);
  report.test_images = test_set.images.size(0);
  if (request.on_data) request.on_data(report.train_images, report.test_images);
  const auto started = std::chrono::steady_clock::now();
  report.model = train_classifier(train_set, request.training);
  report.train_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  report.test_accuracy = classifier_accuracy(report.model, test_set);
  const ClassifierTraining& t = request.training;
  report.metadata = {{"dataset", request.dataset},
                     {"test_accuracy", report.test_accuracy},
                     {"test_images", report.test_images},
                     {"train_images", report.train_images},
                     {"epochs", t.epochs},
                     {"batch", t.batch_size},
                     {"lr", t.learning_rate},
                     {"seed", t.seed},
                     {"train_seconds", report.train_seconds}};
  return report;
}

ClassifierEvalReport evaluate_classifier_file(const ClassifierEvalRequest& request) {
  nlohmann::json metadata;
  Classifier model = load_classifier(request.model_path, "", &metadata);
  ClassifierEvalReport report;
  report.model_path = request.model_path;
  report.trained_on = metadata.value("dataset", std::string());
  report.dataset = request.dataset.value_or(report.trained_on);
  if (report.dataset.empty()) {
    throw std::invalid_argument(request.model_path +
                                " does not record its dataset: give --dataset");
  }
  const data::ImageDataset train_set =
      data::load_image_dataset(report.dataset, data::ImageSplit::train, request.directory);
  const data::ImageDataset test_set =
      data::load_image_dataset(report.dataset, data::ImageSplit::test, request.directory);
  report.test_accuracy = classifier_accuracy(model, test_set);
  report.test_images = test_set.images.size(0);
  report.floor_train_images = std::min(kFloorTrainImages, train_set.images.size(0));
  report.frechet_floor = frechet_distance(
      classifier_features(model, train_set.images.slice(0, 0, report.floor_train_images)),
      classifier_features(model, test_set.images));
  return report;
}

nlohmann::json ClassifierEvalReport::json() const {
  return {{"model", model_path},
          {"trained_on", trained_on},
          {"dataset", dataset},
          {"test_accuracy", test_accuracy},
          {"test_images", test_images},
          {"frechet_train_vs_test", frechet_floor},
          {"frechet_train_images", floor_train_images}};
}

}  // namespace structdiff::eval
