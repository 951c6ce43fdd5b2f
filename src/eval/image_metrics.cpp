// Sample-quality metrics on top of the image classifier: accuracy, features, predicted-class
// histogram, and the Fréchet distance between feature sets.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "structdiff/image_metrics.h"

namespace structdiff::eval {
namespace {

constexpr int64_t kBatch = 1000;  // bounds the activations' memory (~40 MB at 1000 images)

// `compute` applied to each batch of images in eval mode without gradients, results concatenated.
template <typename Compute>
torch::Tensor batched(Classifier& model, const torch::Tensor& images, Compute compute) {
  model->eval();
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> parts;
  for (const torch::Tensor& batch : images.split(kBatch)) parts.push_back(compute(batch));
  if (parts.empty()) return compute(images);  // no images: keeps the result's shape and type
  return torch::cat(parts);
}

// The symmetric square root of a symmetric positive semi-definite matrix.
torch::Tensor symmetric_sqrt(const torch::Tensor& matrix) {
  const auto [values, vectors] = torch::linalg_eigh(matrix, "L");
  return vectors.matmul(torch::diag(values.clamp_min(0).sqrt())).matmul(vectors.transpose(0, 1));
}

torch::Tensor covariance(const torch::Tensor& centred) {
  return centred.transpose(0, 1).matmul(centred) / static_cast<double>(centred.size(0) - 1);
}

}  // namespace

double classifier_accuracy(Classifier& model, const data::ImageDataset& test) {
  if (test.images.size(0) == 0 || test.labels.size(0) != test.images.size(0)) {
    throw std::invalid_argument("classifier_accuracy: " + test.name +
                                " needs images and one label for each");
  }
  const torch::Tensor predicted = batched(model, test.images, [&](const torch::Tensor& batch) {
    return model->forward(batch).argmax(1);
  });
  return predicted.eq(test.labels).to(torch::kDouble).mean().item<double>();
}

torch::Tensor classifier_features(Classifier& model, const torch::Tensor& images) {
  return batched(model, images, [&](const torch::Tensor& batch) {
    return model->features(batch).to(torch::kDouble);
  });
}

torch::Tensor predicted_class_histogram(Classifier& model, const torch::Tensor& images) {
  const torch::Tensor predicted = batched(
      model, images, [&](const torch::Tensor& batch) { return model->forward(batch).argmax(1); });
  return torch::bincount(predicted, {}, ClassifierImpl::kClasses);
}

double frechet_distance(const torch::Tensor& features_a, const torch::Tensor& features_b) {
  if (features_a.dim() != 2 || features_b.dim() != 2 || features_a.size(1) != features_b.size(1)) {
    throw std::invalid_argument(
        "frechet_distance: expected two (N, F) feature sets with the same F, "
        "got " +
        c10::str(features_a.sizes()) + " and " + c10::str(features_b.sizes()));
  }
  if (features_a.size(0) < 2 || features_b.size(0) < 2) {
    throw std::invalid_argument("frechet_distance: a covariance needs at least 2 rows, got " +
                                std::to_string(features_a.size(0)) + " and " +
                                std::to_string(features_b.size(0)));
  }
  const torch::Tensor a = features_a.to(torch::kDouble);
  const torch::Tensor b = features_b.to(torch::kDouble);
  const torch::Tensor mean_a = a.mean(0), mean_b = b.mean(0);
  const torch::Tensor cov_a = covariance(a - mean_a), cov_b = covariance(b - mean_b);
  // tr((S_a S_b)^1/2) = tr((S_a^1/2 S_b S_a^1/2)^1/2), the latter symmetric, so eigh applies.
  const torch::Tensor sqrt_a = symmetric_sqrt(cov_a);
  torch::Tensor product = sqrt_a.matmul(cov_b).matmul(sqrt_a);
  product = (product + product.transpose(0, 1)) / 2;  // exactly symmetric despite round-off
  const torch::Tensor product_eigenvalues = torch::linalg_eigvalsh(product, "L");
  const double trace_sqrt = product_eigenvalues.clamp_min(0).sqrt().sum().item<double>();
  const double distance = (mean_a - mean_b).square().sum().item<double>() +
                          cov_a.trace().item<double>() + cov_b.trace().item<double>() -
                          2.0 * trace_sqrt;
  return std::max(distance, 0.0);
}

}  // namespace structdiff::eval
