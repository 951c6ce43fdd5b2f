// Fashion-MNIST and MNIST as labelled image tensors, read from their IDX files.
#include <filesystem>
#include <stdexcept>
#include <string>

#include <torch/torch.h>

#include "structdiff/datasets.h"
#include "structdiff/images.h"
#include "util/text.h"

namespace structdiff::data {
namespace {

constexpr int64_t kSide = 28;
constexpr int64_t kClasses = 10;

std::string how_to_get(const std::string& dataset) {
  if (dataset == "fashion-mnist") {
    return "Fashion-MNIST comes with the Debian package dataset-fashion-mnist, which "
           "scripts/setup.sh installs";
  }
  return "MNIST is committed in data/mnist/ of the repository: run from the repository root, and "
         "restore a damaged copy with git checkout data/mnist";
}


}  // namespace

std::string default_image_directory(const std::string& dataset) {
  if (dataset == "fashion-mnist") return kFashionMnistDirectory;
  if (dataset == "mnist") return "data/mnist";
  throw std::invalid_argument("unknown image dataset '" + dataset +
                              "': the choices are fashion-mnist and mnist");
}

ImageDataset load_image_dataset(const std::string& dataset, ImageSplit split,
                                const std::string& directory) {
  const std::string default_directory = default_image_directory(dataset);  // checks the name
  const std::string prefix = (directory.empty() ? default_directory : directory) + "/" +
                             (split == ImageSplit::train ? "train" : "t10k");
  const std::string images_path = prefix + "-images-idx3-ubyte.gz";
  const std::string labels_path = prefix + "-labels-idx1-ubyte.gz";
  const auto fail = [&](const std::string& path, const std::string& what) {
    return std::runtime_error(path + ": " + what + " (" + how_to_get(dataset) + ")");
  };

  for (const std::string& path : {images_path, labels_path}) {
    if (!std::filesystem::exists(path)) throw fail(path, "not found");
  }
  torch::Tensor images, labels;
  try {
    images = read_idx(images_path);
    labels = read_idx(labels_path);
  } catch (const std::runtime_error& error) {  // already names the file
    throw std::runtime_error(std::string(error.what()) + " (" + how_to_get(dataset) + ")");
  }
  if (images.dim() != 3 || images.size(1) != kSide || images.size(2) != kSide) {
    throw fail(images_path,
               "expected (N, 28, 28) images, got an array of shape " + shape_text(images.sizes()));
  }
  if (labels.dim() != 1) {
    throw fail(labels_path,
               "expected a list of labels, got an array of shape " + shape_text(labels.sizes()));
  }
  if (labels.size(0) != images.size(0)) {
    throw fail(labels_path, std::to_string(labels.size(0)) + " labels for the " +
                                std::to_string(images.size(0)) + " images of " + images_path);
  }
  labels = labels.to(torch::kLong);
  const torch::Tensor out_of_range = (labels >= kClasses).nonzero();
  if (out_of_range.size(0) > 0) {
    const int64_t index = out_of_range[0][0].item<int64_t>();
    throw fail(labels_path, "label " + std::to_string(labels[index].item<int64_t>()) +
                                " at index " + std::to_string(index) + " is not below 10");
  }
  return ImageDataset{dataset, images.unsqueeze(1).to(torch::kFloat).div_(255.0), labels, kClasses};
}

}  // namespace structdiff::data
