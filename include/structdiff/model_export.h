// A model file's weights in formats any PyTorch user loads without structdiff (`structdiff
// export`). safetensors: the JSON header, then the tensors' bytes; the file's metadata (kind,
// configuration, provenance) under "__metadata__". torch: a dict {"state_dict": {name: tensor},
// "metadata": JSON text} that torch.load reads, also with weights_only=True (its default since
// PyTorch 2.6).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace structdiff::train {

enum class ExportFormat { safetensors, torch };
ExportFormat parse_export_format(const std::string& name);  // "safetensors" | "torch"
std::vector<std::string> export_format_names();
std::string export_format_name(ExportFormat format);

struct ExportReport {
  int64_t tensors = 0;
  int64_t values = 0;
  std::string kind;  // the model's, "unknown" for a file that names none
};

// Writes the weights and metadata of the model file at `model_path` to `out_path` in `format`,
// atomically. Throws std::runtime_error naming the path for a file that is not a model file, or
// a tensor type safetensors has no name for.
ExportReport export_model(const std::string& model_path, ExportFormat format,
                          const std::string& out_path);

}  // namespace structdiff::train
