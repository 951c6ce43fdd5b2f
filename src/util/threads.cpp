#include <stdexcept>
#include <string>
#include <thread>

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

}  // namespace structdiff
