#include "structdiff/model_export.h"

#include <map>
#include <stdexcept>

#include <caffe2/serialize/inline_container.h>
#include <nlohmann/json.hpp>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/pickler.h>
#include <torch/torch.h>

#include "structdiff/enum_names.h"
#include "structdiff/model_tensors.h"
#include "structdiff/runtime.h"

namespace structdiff::train {
namespace {

const auto kFormatNames = enum_names<ExportFormat>("export format", {
    {ExportFormat::safetensors, "safetensors"},
    {ExportFormat::torch, "torch"},
});

std::string safetensors_dtype(torch::ScalarType type) {
  static const std::map<torch::ScalarType, std::string> names = {
      {torch::kFloat, "F32"}, {torch::kDouble, "F64"}, {torch::kHalf, "F16"},
      {torch::kBFloat16, "BF16"}, {torch::kLong, "I64"}, {torch::kInt, "I32"},
      {torch::kShort, "I16"}, {torch::kChar, "I8"}, {torch::kByte, "U8"}, {torch::kBool, "BOOL"}};
  const auto found = names.find(type);
  if (found == names.end()) {
    throw std::runtime_error(std::string("safetensors has no dtype for ") + c10::toString(type));
  }
  return found->second;
}

// https://github.com/huggingface/safetensors: an 8-byte little-endian header length, the JSON
// header (padded with spaces to a multiple of 8), then each tensor's bytes, row-major and
// little-endian (this machine's order; x86-64 and arm64 are little-endian).
std::string safetensors_bytes(const ModelTensors& model) {
  nlohmann::json header = nlohmann::json::object();
  header["__metadata__"] = {{"format", "pt"}, {"structdiff", model.metadata.dump()}};
  std::string data;
  for (const auto& [name, tensor] : model.tensors) {
    const torch::Tensor contiguous = tensor.contiguous();
    const uint64_t begin = data.size();
    data.append(static_cast<const char*>(contiguous.data_ptr()), contiguous.nbytes());
    header[name] = {{"dtype", safetensors_dtype(contiguous.scalar_type())},
                    {"shape", contiguous.sizes().vec()},
                    {"data_offsets", {begin, static_cast<uint64_t>(data.size())}}};
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string bytes(8, '\0');
  const uint64_t length = text.size();
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((length >> (8 * i)) & 0xff);
  return bytes + text + data;
}

std::string torch_bytes(const ModelTensors& model) {
  c10::Dict<std::string, torch::Tensor> state_dict;
  for (const auto& [name, tensor] : model.tensors) state_dict.insert(name, tensor.contiguous());
  c10::impl::GenericDict document(c10::StringType::get(), c10::AnyType::get());
  document.insert("state_dict", state_dict);
  document.insert("metadata", model.metadata.dump());
  // torch::pickle_save tags each dict with its element types through a global that torch.load's
  // weights-only unpickler refuses; the same archive without the tags is a plain pickled dict.
  std::string pickle;
  torch::jit::Pickler pickler(
      [&](const char* data, size_t size) { pickle.append(data, size); },
      /*tensor_table=*/nullptr, /*type_renamer=*/nullptr, /*memoized_class_types=*/nullptr,
      /*get_tensor_id=*/nullptr, /*tag_aggregates=*/false);
  pickler.protocol();
  pickler.pushIValue(document);
  pickler.stop();
  std::string bytes;
  caffe2::serialize::PyTorchStreamWriter writer([&](const void* data, size_t size) {
    bytes.append(static_cast<const char*>(data), size);
    return size;
  });
  torch::jit::writeArchiveAndTensors("data", pickle.data(), pickle.size(), pickler.tensorData(),
                                     writer);
  writer.writeEndOfFile();
  return bytes;
}

}  // namespace

ExportFormat parse_export_format(const std::string& name) { return kFormatNames.parse(name); }

std::vector<std::string> export_format_names() { return kFormatNames.choices(); }

std::string export_format_name(ExportFormat format) { return kFormatNames.name(format); }

ExportReport export_model(const std::string& model_path, ExportFormat format,
                          const std::string& out_path) {
  const ModelTensors model = read_model_tensors(model_path);
  write_file_atomically(out_path, format == ExportFormat::safetensors ? safetensors_bytes(model)
                                                                      : torch_bytes(model));
  ExportReport report;
  report.tensors = static_cast<int64_t>(model.tensors.size());
  for (const auto& item : model.tensors) report.values += item.second.numel();
  report.kind = model.metadata.value("kind", std::string("unknown"));
  return report;
}

}  // namespace structdiff::train
