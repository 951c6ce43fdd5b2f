// Sample-quality metrics: the Fréchet distance against closed forms, and the image classifier's
// shapes, learning on a Fashion-MNIST subset, determinism and checkpoints.
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "structdiff/classifier_runs.h"
#include "structdiff/datasets.h"
#include "structdiff/image_metrics.h"
#include "structdiff/images.h"
#include "structdiff/checkpoint.h"
#include "support/expect_throw.h"
#include "support/temporary_files.h"

namespace structdiff::eval {
namespace {

namespace fs = std::filesystem;

torch::Tensor random_features(int64_t rows, int64_t columns, uint64_t seed) {
  torch::manual_seed(seed);
  // Correlated columns, so the covariance is not diagonal.
  return torch::randn({rows, columns}, torch::kDouble)
      .matmul(torch::randn({columns, columns}, torch::kDouble));
}

// 2F points whose sample mean is exactly `mean` and whose sample covariance (N - 1) is exactly
// diag(stddev^2): mean +- c stddev_i e_i with c = sqrt((2F - 1) / 2).
torch::Tensor exact_diagonal_gaussian_sample(const std::vector<double>& mean,
                                             const std::vector<double>& stddev) {
  const int64_t f = static_cast<int64_t>(mean.size());
  const double c = std::sqrt((2.0 * f - 1.0) / 2.0);
  const torch::Tensor axes =
      torch::cat({torch::eye(f, torch::kDouble), -torch::eye(f, torch::kDouble)});
  return torch::tensor(mean, torch::kDouble) + c * axes * torch::tensor(stddev, torch::kDouble);
}

TEST(FrechetDistance, ZeroForASetWithItself) {
  const torch::Tensor features = random_features(500, 8, 1);
  EXPECT_NEAR(frechet_distance(features, features), 0.0, 1e-8);
  EXPECT_GE(frechet_distance(features, features), 0.0);
}

TEST(FrechetDistance, MatchesTheClosedFormForDiagonalGaussians) {
  // For diagonal covariances, FD = |mu_a - mu_b|^2 + sum_i (sigma_a,i - sigma_b,i)^2; by hand:
  // (1 + 0 + 4) + (1 + 0 + 4) = 10.
  const torch::Tensor a = exact_diagonal_gaussian_sample({0, 1, 2}, {1, 2, 3});
  const torch::Tensor b = exact_diagonal_gaussian_sample({1, 1, 0}, {2, 2, 1});
  EXPECT_NEAR(frechet_distance(a, b), 10.0, 1e-9);
  // A common rotation of both sets leaves the distance as it is but makes the covariances full.
  torch::manual_seed(2);
  const torch::Tensor rotation =
      std::get<0>(torch::linalg_qr(torch::randn({3, 3}, torch::kDouble)));
  EXPECT_NEAR(frechet_distance(a.matmul(rotation), b.matmul(rotation)), 10.0, 1e-9);
  // float32 inputs are promoted to float64.
  EXPECT_NEAR(frechet_distance(a.to(torch::kFloat), b.to(torch::kFloat)), 10.0, 1e-5);
}

TEST(FrechetDistance, Symmetric) {
  const torch::Tensor a = random_features(300, 6, 3);
  const torch::Tensor b = random_features(400, 6, 4) + 0.5;
  const double ab = frechet_distance(a, b);
  EXPECT_GT(ab, 1.0);
  EXPECT_NEAR(frechet_distance(b, a), ab, 1e-9 * ab);
}

TEST(FrechetDistance, RejectsMismatchedFeatureSets) {
  const torch::Tensor a = torch::zeros({5, 3}, torch::kDouble);
  EXPECT_THROW_WITH(frechet_distance(a, torch::zeros({5, 4}, torch::kDouble)),
                    std::invalid_argument, "the same F, got [5, 3] and [5, 4]");
  EXPECT_THROW_WITH(frechet_distance(a, torch::zeros({15}, torch::kDouble)), std::invalid_argument,
                    "expected two (N, F) feature sets");
  EXPECT_THROW_WITH(frechet_distance(a, torch::zeros({1, 3}, torch::kDouble)),
                    std::invalid_argument, "at least 2 rows, got 5 and 1");
}

TEST(Classifier, ShapesAndTypes) {
  Classifier model;
  const torch::Tensor images = torch::rand({5, 1, 28, 28});
  EXPECT_EQ(model->forward(images).sizes(), (std::vector<int64_t>{5, 10}));
  EXPECT_EQ(model->features(images).sizes(), (std::vector<int64_t>{5, ClassifierImpl::kFeatures}));
  const torch::Tensor features = classifier_features(model, images);
  EXPECT_EQ(features.scalar_type(), torch::kDouble);
  EXPECT_EQ(features.sizes(), (std::vector<int64_t>{5, ClassifierImpl::kFeatures}));
  EXPECT_FALSE(features.requires_grad());
  const torch::Tensor histogram = predicted_class_histogram(model, images);
  EXPECT_EQ(histogram.scalar_type(), torch::kLong);
  EXPECT_EQ(histogram.sizes(), (std::vector<int64_t>{10}));
  EXPECT_EQ(histogram.sum().item<int64_t>(), 5);
  EXPECT_THROW_WITH(model->forward(torch::rand({5, 784})), std::invalid_argument,
                    "expected (N, 1, 28, 28) images, got [5, 784]");
}

class FashionSubset : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!fs::exists(std::string(data::kFashionMnistDirectory) + "/t10k-images-idx3-ubyte.gz")) {
      return;
    }
    train_ = data::load_image_dataset("fashion-mnist", data::ImageSplit::train);
    test_ = data::load_image_dataset("fashion-mnist", data::ImageSplit::test);
    train_.images = train_.images.slice(0, 0, 2000);
    train_.labels = train_.labels.slice(0, 0, 2000);
  }
  void SetUp() override {
    if (!train_.images.defined()) {
      GTEST_SKIP() << "dataset-fashion-mnist is not installed (scripts/setup.sh installs it)";
    }
  }
  static data::ImageDataset subset(const data::ImageDataset& dataset, int64_t size) {
    return {dataset.name, dataset.images.slice(0, 0, size), dataset.labels.slice(0, 0, size), 10};
  }
  static inline data::ImageDataset train_, test_;
};

TEST_F(FashionSubset, LearnsWellAboveChanceInTwoEpochs) {
  ClassifierTraining options;
  options.epochs = 2;
  options.batch_size = 32;
  options.progress = false;
  Classifier model = train_classifier(train_, options);
  EXPECT_FALSE(model->is_training());
  // Chance is 10%; two passes over 2000 images reach about 68% (one pass: about 59%).
  EXPECT_GT(classifier_accuracy(model, test_), 0.5);
  // Predictions spread over the classes rather than collapsing onto a few.
  EXPECT_GE((predicted_class_histogram(model, test_.images) > 0).sum().item<int64_t>(), 8);
}

TEST_F(FashionSubset, DeterministicAndLeavesTheDefaultGeneratorAlone) {
  ClassifierTraining options;
  options.epochs = 1;
  options.seed = 7;
  options.progress = false;
  const data::ImageDataset small = subset(train_, 256);
  torch::manual_seed(11);
  const torch::Tensor expected = torch::rand({4});
  torch::manual_seed(11);
  Classifier first = train_classifier(small, options);
  EXPECT_TRUE(torch::rand({4}).equal(expected));
  Classifier second = train_classifier(small, options);
  const torch::Tensor probe = test_.images.slice(0, 0, 16);
  EXPECT_TRUE(first->forward(probe).equal(second->forward(probe)));
  options.seed = 8;
  EXPECT_FALSE(first->forward(probe).equal(train_classifier(small, options)->forward(probe)));
}

TEST_F(FashionSubset, HalfThenResumeEqualsStraightRunBitForBit) {
  ClassifierTraining options;
  options.epochs = 2;
  options.batch_size = 64;  // 4 steps an epoch
  options.progress = false;
  const data::ImageDataset small = subset(train_, 256);
  Classifier straight = train_classifier(small, options);

  TemporaryDirectory directory;
  options.checkpoint_path = directory.file("classifier.ckpt");
  options.stop_after_steps = 3;  // in the first epoch
  train_classifier(small, options);
  options.stop_after_steps = 0;
  options.resume = true;
  Classifier resumed = train_classifier(small, options);
  const auto expected = straight->parameters(), actual = resumed->parameters();
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_TRUE(torch::equal(expected[i], actual[i])) << "parameter " << i;
  }
}

// The evaluation of a classifier file scores the dataset it records (or the one asked for) and
// refuses a file that records none when none is asked for.
TEST_F(FashionSubset, EvaluatesAClassifierFileOnItsDataset) {
  const TemporaryDirectory directory;
  const std::string path = directory.file("classifier.pt");
  Classifier model;
  save_classifier(path, model, {{"dataset", "fashion-mnist"}});
  ClassifierEvalRequest request;
  request.model_path = path;
  const ClassifierEvalReport report = evaluate_classifier_file(request);
  EXPECT_EQ(report.trained_on, "fashion-mnist");
  EXPECT_EQ(report.dataset, "fashion-mnist");
  EXPECT_EQ(report.test_images, 10000);
  EXPECT_EQ(report.floor_train_images, 10000);
  EXPECT_NEAR(report.test_accuracy, classifier_accuracy(model, test_), 1e-12);
  EXPECT_GE(report.frechet_floor, 0);
  EXPECT_EQ(report.json()["frechet_train_vs_test"], report.frechet_floor);

  save_classifier(path, model, nlohmann::json::object());
  EXPECT_THROW_WITH(evaluate_classifier_file(request), std::invalid_argument,
                    path + " does not record its dataset: give --dataset");
}

TEST(Classifier, CheckpointRoundTrip) {
  const TemporaryDirectory directory;
  const std::string path = directory.file("classifier.pt");
  Classifier model;
  save_classifier(path, model, {{"dataset", "mnist"}, {"test_accuracy", 0.5}});
  const nlohmann::json metadata = train::read_checkpoint_metadata(path);
  EXPECT_EQ(metadata["dataset"], "mnist");
  EXPECT_EQ(metadata["config"]["architecture"], "lenet5");

  torch::manual_seed(3);
  const torch::Tensor expected = torch::rand({4});
  torch::manual_seed(3);
  Classifier loaded = load_classifier(path);
  EXPECT_TRUE(torch::rand({4}).equal(expected));  // loading does not rewind the generator
  EXPECT_FALSE(loaded->is_training());
  const torch::Tensor images = torch::rand({3, 1, 28, 28});
  EXPECT_TRUE(loaded->forward(images).equal(model->forward(images)));

  // A structdiff checkpoint of something else, and no checkpoint at all.
  torch::nn::Linear other(2, 2);
  train::CheckpointParts parts;
  parts.model = other.get();
  parts.metadata = {{"model", "linear"}};
  train::save_checkpoint(path, parts);
  EXPECT_THROW_WITH(load_classifier(path), std::runtime_error,
                    path + " holds a model of kind 'unknown', not 'classifier'");
  fs::remove(path);
  EXPECT_THROW_WITH(load_classifier(path), std::runtime_error, path + " does not exist");
}

}  // namespace
}  // namespace structdiff::eval
