// Where models run. Models live on one device; inputs given on another move to it, and results
// come back on the device the inputs came from, so callers may keep their data on the CPU.
#pragma once

#include <string>

#include <torch/nn/module.h>
#include <torch/types.h>

namespace structdiff {

// "cpu", "cuda" or "cuda:N". Throws std::invalid_argument naming what is accepted, and saying so
// when this libtorch sees no GPU or no GPU N.
torch::Device parse_device(const std::string& name);
// The device of a module's first defined parameter or buffer; the CPU for a module without.
torch::Device device_of(const torch::nn::Module& module);
// Waits for the work queued on `device` (a GPU runs asynchronously); nothing on the CPU. Timings
// of GPU work end with it.
void synchronize(torch::Device device);

}  // namespace structdiff
