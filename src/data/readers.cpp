// Dataset readers: IDX (MNIST, Fashion-MNIST) through zlib, and the plain-text Planetoid format.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>
#include <zlib.h>

#include "structdiff/datasets.h"
#include "structdiff/images.h"

namespace structdiff::data {
namespace {

std::runtime_error file_error(const std::string& path, const std::string& what) {
  return std::runtime_error(path + ": " + what);
}

// ---- IDX ---------------------------------------------------------------------------------------

// gzread reads plain files transparently, so one reader serves .gz and uncompressed files.
class GzipFile {
 public:
  explicit GzipFile(const std::string& path) : path_(path), file_(gzopen(path.c_str(), "rb")) {
    if (file_ == nullptr) throw file_error(path, "cannot open");
  }
  ~GzipFile() { gzclose(file_); }
  GzipFile(const GzipFile&) = delete;
  GzipFile& operator=(const GzipFile&) = delete;

  // Reads up to `count` bytes; fewer only at the end of the data.
  size_t read(uint8_t* buffer, size_t count) {
    size_t done = 0;
    while (done < count) {
      constexpr size_t kMaxChunk = size_t{1} << 30;  // gzread takes an unsigned int
      const int got = gzread(file_, buffer + done,
                             static_cast<unsigned>(std::min(count - done, kMaxChunk)));
      if (got < 0) {
        int code = 0;
        throw file_error(path_, std::string("corrupt gzip data (") + gzerror(file_, &code) + ")");
      }
      if (got == 0) {
        // gzread reports a gzip stream cut short as a plain end of file; only gzerror tells.
        int code = 0;
        gzerror(file_, &code);
        if (code == Z_BUF_ERROR) throw file_error(path_, "truncated gzip data");
        break;
      }
      done += static_cast<size_t>(got);
    }
    return done;
  }

 private:
  std::string path_;
  gzFile file_;
};

std::string hex_bytes(const uint8_t* bytes, size_t count) {
  std::string text = "0x";
  char digits[3];
  for (size_t i = 0; i < count; ++i) {
    std::snprintf(digits, sizeof digits, "%02x", bytes[i]);
    text += digits;
  }
  return text;
}

// ---- plain text --------------------------------------------------------------------------------

// Calls `handle(line_number, tokens)` for every line that is not blank or a '#' comment. The file
// may be gzip-compressed.
void for_each_record(const std::string& path,
                     const std::function<void(int64_t, const std::vector<std::string>&)>& handle) {
  std::istringstream in(read_possibly_compressed_text(path));
  int64_t line_number = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_number;
    std::istringstream fields(line);
    std::vector<std::string> tokens;
    for (std::string token; fields >> token;) tokens.push_back(token);
    if (tokens.empty() || tokens.front()[0] == '#') continue;
    handle(line_number, tokens);
  }
}

std::string at_line(const std::string& path, int64_t line) {
  return path + " line " + std::to_string(line);
}

double parse_number(const std::string& token, const std::string& where) {
  errno = 0;
  char* end = nullptr;
  const double value = std::strtod(token.c_str(), &end);
  if (end == token.c_str() || *end != '\0' || errno == ERANGE) {
    throw std::runtime_error(where + ": '" + token + "' is not a number");
  }
  // strtod reads "nan" and "inf"; a feature must be a finite number.
  if (!std::isfinite(value) || std::fabs(value) > 3.4e38) {
    throw std::runtime_error(where + ": '" + token + "' is not a finite float32 number");
  }
  return value;
}

int64_t parse_index(const std::string& token, const std::string& where) {
  errno = 0;
  char* end = nullptr;
  const long long value = std::strtoll(token.c_str(), &end, 10);
  if (end == token.c_str() || *end != '\0' || errno == ERANGE || value < 0) {
    throw std::runtime_error(where + ": '" + token + "' is not a non-negative integer");
  }
  return value;
}

}  // namespace

std::string read_possibly_compressed_text(const std::string& path) {
  constexpr size_t kMaxTextBytes = size_t{1} << 30;
  if (std::filesystem::is_directory(path)) throw file_error(path, "is a directory, not a file");
  GzipFile file(path);
  std::string text;
  for (size_t got = 1; got > 0;) {
    const size_t at = text.size();
    text.resize(at + (size_t{1} << 20));
    got = file.read(reinterpret_cast<uint8_t*>(text.data() + at), text.size() - at);
    text.resize(at + got);
    if (text.size() > kMaxTextBytes) {
      throw file_error(path, "more than " + std::to_string(kMaxTextBytes >> 20) + " MiB of text");
    }
  }
  return text;
}

torch::Tensor read_idx(const std::string& path) {
  GzipFile file(path);
  uint8_t magic[4];
  if (file.read(magic, 4) < 4) throw file_error(path, "truncated: no 4-byte magic number");
  if (magic[0] != 0 || magic[1] != 0 || magic[3] == 0) {
    throw file_error(path, "bad magic number " + hex_bytes(magic, 4) +
                               " (IDX: two zero bytes, a type byte, a non-zero dimension count)");
  }
  if (magic[2] != 0x08) {
    throw file_error(path, "unsupported element type " + hex_bytes(magic + 2, 1) +
                               " (only unsigned bytes, 0x08)");
  }
  const int dims = magic[3];
  std::vector<uint8_t> header(4 * static_cast<size_t>(dims));
  if (file.read(header.data(), header.size()) < header.size()) {
    throw file_error(path, "truncated: the sizes of the " + std::to_string(dims) +
                               " dimensions are incomplete");
  }
  std::vector<int64_t> sizes;
  int64_t total = 1;
  for (int d = 0; d < dims; ++d) {
    const uint8_t* b = header.data() + 4 * d;
    const int64_t size =
        (int64_t{b[0]} << 24) | (int64_t{b[1]} << 16) | (int64_t{b[2]} << 8) | b[3];
    if (size == 0) throw file_error(path, "dimension " + std::to_string(d) + " has size 0");
    sizes.push_back(size);
    total *= size;
    if (total > (int64_t{1} << 40)) throw file_error(path, "implausibly large dimensions");
  }
  // Read in chunks so a corrupt header cannot make us allocate before the data is seen.
  std::vector<uint8_t> data;
  constexpr size_t kChunk = size_t{1} << 24;
  while (static_cast<int64_t>(data.size()) < total) {
    const size_t want = std::min(kChunk, static_cast<size_t>(total) - data.size());
    const size_t before = data.size();
    data.resize(before + want);
    const size_t got = file.read(data.data() + before, want);
    data.resize(before + got);
    if (got < want) break;
  }
  if (static_cast<int64_t>(data.size()) < total) {
    throw file_error(path, "truncated: expected " + std::to_string(total) + " data bytes, found " +
                               std::to_string(data.size()));
  }
  uint8_t extra;
  if (file.read(&extra, 1) > 0) throw file_error(path, "unexpected bytes after the data");
  return torch::from_blob(data.data(), sizes, torch::kUInt8).clone();
}

NodeDataset load_fashion_mnist(const std::string& directory, int64_t pool_size, uint64_t seed) {
  constexpr int64_t kClasses = 10;
  if (pool_size <= 0 || pool_size % kClasses != 0) {
    throw std::invalid_argument(
        "load_fashion_mnist: the pool size must be a positive multiple of 10, got " +
        std::to_string(pool_size));
  }
  const ImageDataset training = load_image_dataset("fashion-mnist", ImageSplit::train, directory);
  const torch::Tensor& images = training.images;
  const torch::Tensor& labels = training.labels;
  // A balanced pool: the first pool_size / 10 images of each class in a seeded random order.
  const torch::Tensor order =
      torch::randperm(images.size(0), at::make_generator<at::CPUGeneratorImpl>(seed), torch::kLong);
  const int64_t per_class = pool_size / kClasses;
  std::vector<int64_t> taken(kClasses, 0), pool;
  const auto label = labels.accessor<int64_t, 1>();
  const auto candidate = order.accessor<int64_t, 1>();
  for (int64_t i = 0; i < order.size(0) && static_cast<int64_t>(pool.size()) < pool_size; ++i) {
    const int64_t image = candidate[i];
    if (taken[label[image]] < per_class) {
      ++taken[label[image]];
      pool.push_back(image);
    }
  }
  if (static_cast<int64_t>(pool.size()) < pool_size) {
    throw std::invalid_argument("load_fashion_mnist: the pool size " + std::to_string(pool_size) +
                                " exceeds 10 x the smallest class");
  }
  const torch::Tensor chosen = torch::tensor(pool, torch::kLong);
  const torch::Tensor features = images.index_select(0, chosen).reshape({pool_size, -1});
  return NodeDataset{"fashion-mnist", features, labels.index_select(0, chosen), kClasses,
                     patterns::from_edges(pool_size, {})};
}

NodeDataset read_planetoid_directory(const std::string& directory) {
  // Features, the bulk of a dataset, may be gzip-compressed.
  const std::string plain_features = directory + "/features.txt";
  const std::string features_path =
      std::filesystem::exists(plain_features) ? plain_features : plain_features + ".gz";
  const std::string labels_path = directory + "/labels.txt";
  const std::string edges_path = directory + "/edges.txt";

  std::vector<float> values;
  int64_t width = -1, first_line = 0;
  for_each_record(features_path, [&](int64_t line, const std::vector<std::string>& tokens) {
    if (width < 0) {
      width = static_cast<int64_t>(tokens.size());
      first_line = line;
    } else if (static_cast<int64_t>(tokens.size()) != width) {
      throw std::runtime_error(at_line(features_path, line) + ": " + std::to_string(tokens.size()) +
                               " values, but line " + std::to_string(first_line) + " has " +
                               std::to_string(width));
    }
    for (const auto& token : tokens) {
      values.push_back(static_cast<float>(parse_number(token, at_line(features_path, line))));
    }
  });
  if (width < 0) throw file_error(features_path, "no nodes");
  const int64_t n = static_cast<int64_t>(values.size()) / width;

  std::vector<int64_t> labels;
  for_each_record(labels_path, [&](int64_t line, const std::vector<std::string>& tokens) {
    if (tokens.size() != 1) {
      throw std::runtime_error(at_line(labels_path, line) + ": expected one class index, got " +
                               std::to_string(tokens.size()) + " values");
    }
    labels.push_back(parse_index(tokens[0], at_line(labels_path, line)));
  });
  if (static_cast<int64_t>(labels.size()) != n) {
    throw file_error(labels_path, std::to_string(labels.size()) + " labels for " +
                                      std::to_string(n) + " nodes in " + features_path);
  }

  std::vector<std::pair<int64_t, int64_t>> edges;
  for_each_record(edges_path, [&](int64_t line, const std::vector<std::string>& tokens) {
    if (tokens.size() != 2) {
      throw std::runtime_error(at_line(edges_path, line) + ": expected two node indices, got " +
                               std::to_string(tokens.size()) + " values");
    }
    const int64_t a = parse_index(tokens[0], at_line(edges_path, line));
    const int64_t b = parse_index(tokens[1], at_line(edges_path, line));
    for (int64_t node : {a, b}) {
      if (node >= n) {
        throw std::runtime_error(at_line(edges_path, line) + ": node " + std::to_string(node) +
                                 " out of range [0, " + std::to_string(n) + ")");
      }
    }
    if (a != b) edges.emplace_back(a, b);
  });

  patterns::EdgeOptions symmetric;
  symmetric.symmetrize = true;
  const int64_t num_classes = *std::max_element(labels.begin(), labels.end()) + 1;
  return NodeDataset{directory, torch::tensor(values, torch::kFloat).view({n, width}),
                     torch::tensor(labels, torch::kLong), num_classes,
                     patterns::from_edges(n, edges, symmetric)};
}

}  // namespace structdiff::data
