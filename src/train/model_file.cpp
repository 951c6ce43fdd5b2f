#include <openssl/evp.h>

#include <algorithm>
#include <ctime>
#include <cstdio>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

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
  if (!metadata.contains("config")) {
    throw std::logic_error("save_model_file(" + path + "): the metadata holds no \"config\"");
  }
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

namespace {

// The model kinds whose files have been written with their configuration elsewhere than under
// "config", and how older files without a "kind" are recognised. Each older file is read as if
// written today, so that every reader sees one layout.
struct OlderLayout {
  const char* kind;
  // Keys whose values built the model, moved under "config" (or, for `whole_config`, the one key
  // whose value was the configuration itself).
  std::vector<const char*> config_keys;
  const char* whole_config;
  // Files written before "kind" was recorded: the key and value (empty: any) that identify it.
  const char* identifying_key;
  const char* identifying_value;
};

const std::vector<OlderLayout>& older_layouts() {
  static const std::vector<OlderLayout> layouts = {
      {"ddpm", {"unet", "schedule"}, nullptr, "unet", ""},
      {"gsdm", {"problem", "problem_options", "model", "schedule"}, nullptr, nullptr, nullptr},
      // `sudoku train`'s files, before Sudoku became a GSDM problem: the block side "n", "grids".
      {"sudoku", {"problem", "n", "grids", "model", "schedule"}, nullptr, "problem", "sudoku"},
      {"difformer", {}, "model", nullptr, nullptr},
      {"classifier", {"architecture"}, nullptr, "architecture", "lenet5"},
  };
  return layouts;
}

}  // namespace

nlohmann::json current_model_layout(nlohmann::json metadata) {
  if (!metadata.is_object() || metadata.contains("config")) return metadata;
  const auto& layouts = older_layouts();
  auto layout = layouts.end();
  if (metadata.contains("kind")) {
    layout = std::find_if(layouts.begin(), layouts.end(),
                          [&](const OlderLayout& l) { return metadata["kind"] == l.kind; });
  } else {
    layout = std::find_if(layouts.begin(), layouts.end(), [&](const OlderLayout& l) {
      if (l.identifying_key == nullptr || !metadata.contains(l.identifying_key)) return false;
      return *l.identifying_value == '\0' || metadata[l.identifying_key] == l.identifying_value;
    });
    if (layout != layouts.end()) metadata["kind"] = layout->kind;
  }
  if (layout == layouts.end()) return metadata;
  nlohmann::json config = nlohmann::json::object();
  if (layout->whole_config != nullptr && metadata.contains(layout->whole_config)) {
    config = metadata[layout->whole_config];
    metadata.erase(layout->whole_config);
  }
  for (const char* key : layout->config_keys) {
    if (!metadata.contains(key)) continue;
    config[key] = metadata[key];
    metadata.erase(key);
  }
  metadata["config"] = std::move(config);
  return metadata;
}

std::string model_kind(const nlohmann::json& metadata) {
  const auto kind = metadata.is_object() ? metadata.find("kind") : metadata.end();
  return kind != metadata.end() && kind->is_string() ? kind->get<std::string>() : "unknown";
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
  torch::serialize::InputArchive weights = read_part(archive, kModelKey, path, "model");
  for_each_tensor(weights, "", [&model](const std::string& name, const torch::Tensor& tensor) {
    model.tensors.emplace_back(name, tensor);
  });
  return model;
}

nlohmann::json model_info(const std::string& path) {
  torch::serialize::InputArchive archive = open_checkpoint(path);
  nlohmann::json recorded = parse_metadata(archive, path);
  nlohmann::json config = nullptr;
  std::string kind = model_kind(recorded);
  if (recorded.is_object()) {
    if (recorded.contains("config")) config = recorded["config"];
    for (const char* key : {"kind", "config", "data_rng"}) recorded.erase(key);
  }
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
                      {"kind", kind},
                      {"step", read_tensor(archive, kStepKey, path).item<int64_t>()},
                      {"config", config},
                      {"recorded", recorded},
                      {"weights_sha256", hex}};
  torch::Tensor count;
  info["parameters"] = archive.try_read(kParameterCountKey, count) ? nlohmann::json(count.item<int64_t>())
                                                                 : nlohmann::json(nullptr);
  torch::Tensor provenance_bytes;
  info["provenance"] = archive.try_read(kProvenanceKey, provenance_bytes)
                           ? nlohmann::json::parse(string_of(provenance_bytes))
                           : nlohmann::json(nullptr);
  const std::vector<std::string> keys = archive.keys();
  auto holds = [&](const std::string& key) { return std::find(keys.begin(), keys.end(), key) != keys.end(); };
  // A checkpoint for --resume holds the optimizer and EMA state; a model file only the weights.
  info["resumable"] = holds(kOptimizerKey) && holds(kEmaKey);
  // A model file's archive step is always 0: the step is the one its trainer recorded, if any.
  if (!info["resumable"].get<bool>()) {
    info["step"] = recorded.is_object() ? recorded.value("trained_steps", nlohmann::json(nullptr))
                                        : nlohmann::json(nullptr);
  }
  return info;
}

}  // namespace structdiff::train
