// The checkpoint file format (keys, version) and the readers that checkpoints and model files
// share; internal to src/train/.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>
#include <torch/serialize/archive.h>
#include <torch/types.h>

namespace structdiff::train {

inline constexpr int64_t kFormatVersion = 1;
inline const std::string kVersionKey = "structdiff_checkpoint_version";
inline const std::string kModelKey = "model";
inline const std::string kOptimizerKey = "optimizer";
inline const std::string kEmaKey = "ema";
inline const std::string kTaskStateKey = "task_state";
inline const std::string kNoiseGeneratorKey = "noise_generator_state";
inline const std::string kStepKey = "step";
inline const std::string kMetadataKey = "metadata";
inline const std::string kProvenanceKey = "provenance";
inline const std::string kParameterCountKey = "parameter_count";

torch::Tensor bytes_of(const std::string& text);
std::string string_of(const torch::Tensor& bytes);
// Opens `path` with its tensors on `device`; throws std::runtime_error naming the path when it is
// missing, not an archive, not a structdiff checkpoint or of another format version.
torch::serialize::InputArchive open_checkpoint(const std::string& path,
                                               torch::Device device = torch::kCPU);
// Throw std::runtime_error naming the path and what is missing or malformed.
torch::serialize::InputArchive read_part(torch::serialize::InputArchive& archive,
                                         const std::string& key, const std::string& path,
                                         const std::string& description);
torch::Tensor read_tensor(torch::serialize::InputArchive& archive, const std::string& key,
                          const std::string& path);
nlohmann::json parse_metadata(torch::serialize::InputArchive& archive, const std::string& path);

}  // namespace structdiff::train
