#include <openssl/evp.h>

#include <algorithm>
#include <ctime>
#include <cstdio>
#include <functional>
#include <stdexcept>
#include <string>

#include <torch/torch.h>
#include <torch/version.h>

#include "structdiff/checkpoint.h"
#include "structdiff/model_file.h"
#include "structdiff/model_tensors.h"
#include "structdiff/runtime.h"
#include "train/checkpoint_format.h"
#include "util/build_info.h"

namespace structdiff::train {
namespace {

struct RunDescription {
  std::string command_line;
  uint64_t seed = 0;
};
RunDescription& run_description() {
  static RunDescription description;
  return description;
}

}  // namespace

void save_model_file(const std::string& path, const std::string& kind, torch::nn::Module& model,
                     nlohmann::json metadata) {
  metadata["kind"] = kind;
  CheckpointParts parts;
  parts.model = &model;
  parts.metadata = std::move(metadata);
  save_checkpoint(path, parts);
}

nlohmann::json load_model_file(const std::string& path, const std::string& kind,
                               const std::function<torch::nn::Module&(const nlohmann::json&)>& build) {
  const nlohmann::json metadata = read_checkpoint_metadata(path);
  require_model_kind(metadata, kind, path);
  CheckpointParts parts;
  {
    DefaultGeneratorGuard guard;
    parts.model = &build(metadata);
  }
  load_checkpoint(path, parts);
  parts.model->eval();
  return parts.metadata;
}

void set_run_description(const std::string& command_line, uint64_t seed) {
  run_description() = {command_line, seed};
}

nlohmann::json provenance() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return {{"git_commit", git_commit()},
          {"command_line", run_description().command_line},
          {"seed", run_description().seed},
          {"threads", torch::get_num_threads()},
          {"libtorch", TORCH_VERSION},
          {"date", date}};
}

std::string model_kind(const nlohmann::json& metadata) {
  if (!metadata.is_object()) return "unknown";
  if (metadata.contains("kind") && metadata["kind"].is_string()) return metadata["kind"];
  // Files written before the kind was recorded.
  if (metadata.value("problem", "") == "sudoku") return "sudoku";
  if (metadata.value("architecture", "") == "lenet5") return "classifier";
  if (metadata.contains("unet")) return "ddpm";
  return "unknown";
}

void require_model_kind(const nlohmann::json& metadata, const std::string& kind,
                        const std::string& path) {
  const std::string actual = model_kind(metadata);
  if (actual != kind) {
    throw std::runtime_error(path + " holds a model of kind '" + actual + "', not '" + kind + "'");
  }
}

namespace {

// Calls `visit` with every tensor below `archive` and its dotted name, in name order, so that
// equal weights are visited alike whatever order the file stores them in.
void for_each_tensor(torch::serialize::InputArchive& archive, const std::string& prefix,
                     const std::function<void(const std::string&, const torch::Tensor&)>& visit) {
  std::vector<std::string> keys = archive.keys();
  std::sort(keys.begin(), keys.end());
  for (const std::string& key : keys) {
    torch::Tensor tensor;
    torch::serialize::InputArchive child;
    if (archive.try_read(key, tensor)) {
      visit(prefix + key, tensor);
    } else if (archive.try_read(key, child)) {
      for_each_tensor(child, prefix + key + ".", visit);
    }
  }
}

// Each tensor's dotted name, dtype, shape and bytes.
void hash_tensors(torch::serialize::InputArchive& archive, EVP_MD_CTX* digest) {
  for_each_tensor(archive, "", [digest](const std::string& name, const torch::Tensor& tensor) {
    const torch::Tensor contiguous = tensor.contiguous();
    const std::string header = name + '\0' + c10::toString(contiguous.scalar_type()) +
                               c10::str(contiguous.sizes()) + '\0';
    EVP_DigestUpdate(digest, header.data(), header.size());
    EVP_DigestUpdate(digest, contiguous.data_ptr(), contiguous.nbytes());
  });
}

}  // namespace

int64_t parameter_count(const torch::nn::Module& module) {
  int64_t count = 0;
  for (const auto& parameter : module.parameters()) count += parameter.numel();
  return count;
}

ModelTensors read_model_tensors(const std::string& path) {
  torch::serialize::InputArchive archive = open_checkpoint(path);
  ModelTensors model;
  model.metadata = parse_metadata(archive, path);
  // Files written before kinds were recorded are recognised by their configuration, as everywhere.
  if (model.metadata.is_object() && !model.metadata.contains("kind")) {
    model.metadata["kind"] = model_kind(model.metadata);
  }
  torch::serialize::InputArchive weights = read_part(archive, kModelKey, path, "model");
  for_each_tensor(weights, "", [&model](const std::string& name, const torch::Tensor& tensor) {
    model.tensors.emplace_back(name, tensor);
  });
  return model;
}

nlohmann::json model_info(const std::string& path) {
  torch::serialize::InputArchive archive = open_checkpoint(path);
  nlohmann::json metadata = parse_metadata(archive, path);
  if (metadata.is_object()) metadata.erase("data_rng");
  torch::serialize::InputArchive model_archive = read_part(archive, kModelKey, path, "model");
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> digest(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (!digest || EVP_DigestInit_ex(digest.get(), EVP_sha256(), nullptr) != 1) {
    throw std::runtime_error("cannot start a SHA-256 digest");
  }
  hash_tensors(model_archive, digest.get());
  unsigned char hash[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_DigestFinal_ex(digest.get(), hash, &length);
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) {
    char byte[3];
    std::snprintf(byte, sizeof byte, "%02x", hash[i]);
    hex += byte;
  }
  nlohmann::json info{{"path", path},
                      {"kind", model_kind(metadata)},
                      {"step", read_tensor(archive, kStepKey, path).item<int64_t>()},
                      {"config", metadata},
                      {"weights_sha256", hex}};
  torch::Tensor count;
  info["parameters"] = archive.try_read(kParameterCountKey, count) ? nlohmann::json(count.item<int64_t>())
                                                                 : nlohmann::json(nullptr);
  torch::Tensor recorded;
  info["provenance"] = archive.try_read(kProvenanceKey, recorded)
                           ? nlohmann::json::parse(string_of(recorded))
                           : nlohmann::json(nullptr);
  const std::vector<std::string> keys = archive.keys();
  auto holds = [&](const std::string& key) { return std::find(keys.begin(), keys.end(), key) != keys.end(); };
  // A checkpoint for --resume holds the optimizer and EMA state; a model file only the weights.
  info["resumable"] = holds(kOptimizerKey) && holds(kEmaKey);
  return info;
}

}  // namespace structdiff::train
