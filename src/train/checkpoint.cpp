#include <filesystem>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>

#include <torch/torch.h>

#include "structdiff/checkpoint.h"
#include "structdiff/device.h"
#include "structdiff/ema.h"
#include "structdiff/model_file.h"
#include "structdiff/model_tensors.h"
#include "structdiff/runtime.h"
#include "train/checkpoint_format.h"
#include "util/text.h"

namespace structdiff::train {

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

// Tensors are read onto `device` whatever device wrote them, so a file written by a GPU run loads
// on a machine without one.
torch::serialize::InputArchive open_checkpoint(const std::string& path,
                                               torch::Device device) {
  std::error_code ignored;
  if (!std::filesystem::exists(path, ignored)) {
    throw std::runtime_error("checkpoint " + path + " does not exist");
  }
  // libtorch's reader would wait for ever on a pipe without a writer; an archive needs seeking.
  if (!std::filesystem::is_regular_file(path, ignored)) {
    throw std::runtime_error("checkpoint " + path + " is not a regular file: a model file or checkpoint must be one");
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
    return current_model_layout(
        nlohmann::json::parse(string_of(read_tensor(archive, kMetadataKey, path))));
  } catch (const nlohmann::json::exception& error) {
    throw std::runtime_error("checkpoint " + path + " has malformed metadata: " + error.what());
  }
}

namespace {

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
  std::ostringstream bytes;
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
    archive.save_to(bytes);
  } catch (const std::exception& error) {
    throw std::runtime_error("cannot write checkpoint " + path + ": " + message_of(error));
  }
  write_file_atomically(path, std::move(bytes).str());
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

}  // namespace structdiff::train
