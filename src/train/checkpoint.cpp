#include <unistd.h>

#include <openssl/evp.h>

#include <algorithm>
#include <ctime>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <set>
#include <stdexcept>
#include <string>

#include <torch/torch.h>
#include <torch/version.h>

#include "structdiff/device.h"
#include "structdiff/model_tensors.h"
#include "structdiff/runtime.h"
#include "structdiff/train.h"
#include "util/text.h"
#include "util/build_info.h"

namespace structdiff::train {
namespace {

constexpr int64_t kFormatVersion = 1;
const std::string kVersionKey = "structdiff_checkpoint_version";
const std::string kModelKey = "model";
const std::string kOptimizerKey = "optimizer";
const std::string kEmaKey = "ema";
const std::string kTaskStateKey = "task_state";
const std::string kNoiseGeneratorKey = "noise_generator_state";
const std::string kStepKey = "step";
const std::string kMetadataKey = "metadata";
const std::string kProvenanceKey = "provenance";
const std::string kParameterCountKey = "parameter_count";

struct RunDescription {
  std::string command_line;
  uint64_t seed = 0;
};
RunDescription& run_description() {
  static RunDescription description;
  return description;
}

// Strings go in as uint8 tensors: archives store IValue strings differently across libtorch
// versions, tensors the same way everywhere.
torch::Tensor bytes_of(const std::string& text) {
  return torch::from_blob(const_cast<char*>(text.data()), {static_cast<int64_t>(text.size())},
                          torch::kUInt8)
      .clone();
}

std::string string_of(const torch::Tensor& bytes) {
  const torch::Tensor contiguous = bytes.contiguous();
  return std::string(reinterpret_cast<const char*>(contiguous.data_ptr<uint8_t>()),
                     static_cast<size_t>(contiguous.numel()));
}

// The rename only makes the replacement atomic; the data must reach the disk before it, or a
// crash could leave a renamed but empty file.
// Tensors are read onto `device` whatever device wrote them, so a file written by a GPU run loads
// on a machine without one.
torch::serialize::InputArchive open_checkpoint(const std::string& path,
                                               torch::Device device = torch::kCPU) {
  std::error_code ignored;
  if (!std::filesystem::exists(path, ignored)) {
    throw std::runtime_error("checkpoint " + path + " does not exist");
  }
  torch::serialize::InputArchive archive;
  try {
    archive.load_from(path, device);
  } catch (const std::exception&) {
    // libtorch's reason (miniz internals, enforce lines) means nothing to a user; what does:
    throw std::runtime_error("checkpoint " + path +
                             " is not a valid archive: it is truncated, damaged, or not a file "
                             "structdiff wrote");
  }
  torch::Tensor version;
  if (!archive.try_read(kVersionKey, version)) {
    throw std::runtime_error("checkpoint " + path + " is not a structdiff checkpoint");
  }
  if (version.item<int64_t>() != kFormatVersion) {
    throw std::runtime_error("checkpoint " + path + " has format version " +
                             std::to_string(version.item<int64_t>()) + ", expected " +
                             std::to_string(kFormatVersion));
  }
  return archive;
}

torch::serialize::InputArchive read_part(torch::serialize::InputArchive& archive,
                                         const std::string& key, const std::string& path,
                                         const std::string& description) {
  torch::serialize::InputArchive part;
  if (!archive.try_read(key, part)) {
    throw std::runtime_error("checkpoint " + path + " has no " + description);
  }
  return part;
}

torch::Tensor read_tensor(torch::serialize::InputArchive& archive, const std::string& key,
                          const std::string& path) {
  torch::Tensor tensor;
  if (!archive.try_read(key, tensor)) {
    throw std::runtime_error("checkpoint " + path + " has no " + key);
  }
  return tensor;
}

nlohmann::json parse_metadata(torch::serialize::InputArchive& archive, const std::string& path) {
  try {
    return nlohmann::json::parse(string_of(read_tensor(archive, kMetadataKey, path)));
  } catch (const nlohmann::json::exception& error) {
    throw std::runtime_error("checkpoint " + path + " has malformed metadata: " + error.what());
  }
}

// Module::load assigns each tensor with set_(), which silently adopts a saved tensor of another
// shape and ignores saved tensors the module lacks; compare the layouts first so a different
// architecture fails with a clear message instead. Returns the mismatch, or "" if none.
std::string module_mismatch(const torch::nn::Module& module,
                            torch::serialize::InputArchive& archive, const std::string& prefix) {
  std::set<std::string> expected_keys;
  auto check_tensor = [&](const std::string& name, const torch::Tensor& expected,
                          bool is_buffer) -> std::string {
    expected_keys.insert(name);
    torch::Tensor saved;
    if (!archive.try_read(name, saved, is_buffer)) {
      return "the checkpoint has no tensor '" + prefix + name + "'";
    }
    if (!saved.sizes().equals(expected.sizes()) || saved.scalar_type() != expected.scalar_type()) {
      return "tensor '" + prefix + name + "' is " +
             std::string(c10::toString(saved.scalar_type())) + c10::str(saved.sizes()) +
             " in the checkpoint but " + c10::toString(expected.scalar_type()) +
             c10::str(expected.sizes()) + " in the model";
    }
    return "";
  };
  for (const auto& item : module.named_parameters(/*recurse=*/false)) {
    if (auto mismatch = check_tensor(item.key(), item.value(), false); !mismatch.empty()) {
      return mismatch;
    }
  }
  for (const auto& item : module.named_buffers(/*recurse=*/false)) {
    if (auto mismatch = check_tensor(item.key(), item.value(), true); !mismatch.empty()) {
      return mismatch;
    }
  }
  for (const auto& child : module.named_children()) {
    if (!child.value()->is_serializable()) continue;
    expected_keys.insert(child.key());
    torch::serialize::InputArchive child_archive;
    if (!archive.try_read(child.key(), child_archive)) {
      return "the checkpoint has no submodule '" + prefix + child.key() + "'";
    }
    if (auto mismatch = module_mismatch(*child.value(), child_archive, prefix + child.key() + ".");
        !mismatch.empty()) {
      return mismatch;
    }
  }
  for (const auto& key : archive.keys()) {
    if (expected_keys.count(key) > 0) continue;
    // A submodule without tensors (e.g. a dropout layer of older files) holds nothing to load.
    torch::serialize::InputArchive extra;
    if (archive.try_read(key, extra) && extra.keys().empty()) continue;
    return "the checkpoint has '" + prefix + key + "', which the model lacks";
  }
  return "";
}

}  // namespace

void save_checkpoint(const std::string& path, const CheckpointParts& parts) {
  if (parts.model == nullptr) {
    throw std::invalid_argument("save_checkpoint(" + path + "): no model given");
  }
  const std::string temporary = path + ".tmp." + std::to_string(::getpid());
  try {
    torch::serialize::OutputArchive archive;
    archive.write(kVersionKey, torch::tensor(kFormatVersion, torch::kLong));
    archive.write(kParameterCountKey, torch::tensor(parameter_count(*parts.model), torch::kLong));
    archive.write(kProvenanceKey, bytes_of(provenance().dump()));
    torch::serialize::OutputArchive model_archive;
    parts.model->save(model_archive);
    archive.write(kModelKey, model_archive);
    if (parts.optimizer != nullptr) {
      torch::serialize::OutputArchive optimizer_archive;
      parts.optimizer->save(optimizer_archive);
      archive.write(kOptimizerKey, optimizer_archive);
    }
    if (parts.ema != nullptr) {
      torch::serialize::OutputArchive ema_archive;
      parts.ema->save(ema_archive);
      archive.write(kEmaKey, ema_archive);
    }
    if (parts.task_state != nullptr) {
      torch::serialize::OutputArchive state_archive;
      parts.task_state->save(state_archive);
      archive.write(kTaskStateKey, state_archive);
    }
    if (parts.noise_generator != nullptr) {
      archive.write(kNoiseGeneratorKey, parts.noise_generator->get_state());
    }
    archive.write(kStepKey, torch::tensor(parts.step, torch::kLong));
    archive.write(kMetadataKey, bytes_of(parts.metadata.dump()));
    archive.save_to(temporary);
    replace_file(temporary, path);
  } catch (const std::exception& error) {
    std::error_code ignored;
    std::filesystem::remove(temporary, ignored);
    throw std::runtime_error("cannot write checkpoint " + path + ": " + message_of(error));
  }
}

nlohmann::json read_checkpoint_metadata(const std::string& path) {
  torch::serialize::InputArchive archive = open_checkpoint(path);
  return parse_metadata(archive, path);
}

void load_checkpoint(const std::string& path, CheckpointParts& parts) {
  // Onto the model's device: reading a tensor from another device would move the model's.
  torch::serialize::InputArchive archive = open_checkpoint(
      path, parts.model != nullptr ? device_of(*parts.model) : torch::Device(torch::kCPU));
  // Gather and check everything first, so a checkpoint lacking a requested part or holding
  // another architecture leaves the objects untouched.
  torch::serialize::InputArchive model_archive, optimizer_archive, ema_archive, state_archive;
  if (parts.model != nullptr) {
    model_archive = read_part(archive, kModelKey, path, "model");
    if (const auto mismatch = module_mismatch(*parts.model, model_archive, ""); !mismatch.empty()) {
      throw std::runtime_error("checkpoint " + path + " does not fit the model: " + mismatch);
    }
  }
  if (parts.optimizer != nullptr) {
    optimizer_archive = read_part(archive, kOptimizerKey, path, "optimizer state");
  }
  if (parts.ema != nullptr) ema_archive = read_part(archive, kEmaKey, path, "EMA weights");
  if (parts.task_state != nullptr) {
    state_archive = read_part(archive, kTaskStateKey, path, "training state");
    if (const auto mismatch = module_mismatch(*parts.task_state, state_archive, ""); !mismatch.empty()) {
      throw std::runtime_error("checkpoint " + path + ": training state does not fit: " + mismatch);
    }
  }
  const torch::Tensor noise_generator_state =
      parts.noise_generator != nullptr ? read_tensor(archive, kNoiseGeneratorKey, path) : torch::Tensor();
  const int64_t step = read_tensor(archive, kStepKey, path).item<int64_t>();
  nlohmann::json metadata = parse_metadata(archive, path);

  try {
    if (parts.model != nullptr) parts.model->load(model_archive);
  } catch (const std::exception& error) {
    throw std::runtime_error("checkpoint " + path +
                             ": cannot load the model: " + message_of(error));
  }
  try {
    if (parts.optimizer != nullptr) parts.optimizer->load(optimizer_archive);
  } catch (const std::exception& error) {
    throw std::runtime_error("checkpoint " + path +
                             ": optimizer state does not fit: " + message_of(error));
  }
  try {
    if (parts.ema != nullptr) parts.ema->load(ema_archive);
  } catch (const std::exception& error) {
    throw std::runtime_error("checkpoint " + path +
                             ": EMA weights do not fit: " + message_of(error));
  }
  if (parts.task_state != nullptr) parts.task_state->load(state_archive);
  if (parts.noise_generator != nullptr) {
    parts.noise_generator->set_state(noise_generator_state.cpu());
  }
  parts.step = step;
  parts.metadata = std::move(metadata);
}

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
