#include "structdiff/device.h"

#include <stdexcept>

#include <torch/cuda.h>

namespace structdiff {

torch::Device parse_device(const std::string& name) {
  if (name == "cpu") return torch::kCPU;
  if (name.rfind("cuda", 0) != 0) {
    throw std::invalid_argument("unknown device '" + name + "' (cpu, cuda or cuda:N)");
  }
  int64_t index = 0;
  if (name != "cuda") {
    const std::string digits = name.substr(5);
    const bool well_formed = name[4] == ':' && !digits.empty() && digits.size() <= 3 &&
                             digits.find_first_not_of("0123456789") == std::string::npos;
    if (!well_formed) {
      throw std::invalid_argument("unknown device '" + name + "' (cpu, cuda or cuda:N)");
    }
    index = std::stoll(digits);
  }
  const int64_t count = torch::cuda::is_available() ? torch::cuda::device_count() : 0;
  if (count == 0) {
    throw std::invalid_argument("--device " + name +
                                ": this libtorch sees no GPU (no CUDA device or driver on this "
                                "machine, or a CPU-only libtorch)");
  }
  if (index >= count) {
    throw std::invalid_argument("--device " + name + ": this machine has " +
                                std::to_string(count) + " GPU" + (count == 1 ? "" : "s") +
                                " (cuda:0.." + "cuda:" + std::to_string(count - 1) + ")");
  }
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(index));
}

void synchronize(torch::Device device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

torch::Device device_of(const torch::nn::Module& module) {
  // Some modules register undefined tensors (an optional bias, say): they have no device.
  for (const auto& parameter : module.parameters()) {
    if (parameter.defined()) return parameter.device();
  }
  for (const auto& buffer : module.buffers()) {
    if (buffer.defined()) return buffer.device();
  }
  return torch::kCPU;
}

}  // namespace structdiff
