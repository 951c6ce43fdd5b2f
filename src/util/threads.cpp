#include <stdexcept>
#include <string>
#include <thread>

#include <mutex>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>

#include "structdiff/runtime.h"

namespace structdiff {

int default_threads() {
  const unsigned cores = std::thread::hardware_concurrency();
  return cores == 0 ? 1 : static_cast<int>(cores);
}

void set_threads(int threads) {
  if (threads < 1) {
    throw std::invalid_argument("--threads must be >= 1, got " + std::to_string(threads));
  }
  at::set_num_threads(threads);
}

namespace {

torch::Tensor default_generator_state() {
  at::Generator generator = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  return generator.get_state();
}

}  // namespace

DefaultGeneratorGuard::DefaultGeneratorGuard()
    : state_(std::make_shared<torch::Tensor>(default_generator_state())) {}

DefaultGeneratorGuard::DefaultGeneratorGuard(uint64_t initial_weights_seed)
    : DefaultGeneratorGuard() {
  at::Generator generator = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_current_seed(initial_weights_seed);
}

DefaultGeneratorGuard::~DefaultGeneratorGuard() {
  at::Generator generator = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_state(*std::static_pointer_cast<torch::Tensor>(state_));
}

}  // namespace structdiff
