#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

#include <c10/core/Allocator.h>
#include <c10/util/ThreadLocalDebugInfo.h>
#include <torch/version.h>

#include "structdiff/runtime.h"

namespace structdiff {

int64_t available_memory_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  for (std::string line; std::getline(meminfo, line);) {
    std::istringstream fields(line);
    std::string key;
    int64_t kilobytes = 0;
    if (fields >> key >> kilobytes && key == "MemAvailable:") return kilobytes * 1024;
  }
  return -1;
}

void require_memory(double bytes, const std::string& what) {
  const int64_t available = available_memory_bytes();
  if (available < 0 || bytes <= static_cast<double>(available)) return;
  char text[128];
  std::snprintf(text, sizeof text, " needs %.1f GB of memory, %.1f GB available", bytes / 1e9,
                static_cast<double>(available) / 1e9);
  throw std::invalid_argument(what + text);
}


struct PeakMemoryTracker::Reporter : public c10::MemoryReportingInfoBase {
  int64_t current = 0;
  int64_t baseline = 0;
  int64_t peak = 0;

  void reportMemoryUsage(void* /*ptr*/, int64_t alloc_size, size_t /*total_allocated*/,
                         size_t /*total_reserved*/, c10::Device device) override {
    if (!device.is_cpu()) return;
    current += alloc_size;
    peak = std::max(peak, current);
  }
  bool memoryProfilingEnabled() const override { return true; }
};

struct DebugInfoScope {
  explicit DebugInfoScope(std::shared_ptr<c10::DebugInfoBase> info)
      : guard(c10::DebugInfoKind::PROFILER_STATE, std::move(info)) {}
  c10::DebugInfoGuard guard;
};

PeakMemoryTracker::PeakMemoryTracker()
    : reporter_(std::make_shared<Reporter>()),
      scope_(std::make_unique<DebugInfoScope>(reporter_)) {}

PeakMemoryTracker::~PeakMemoryTracker() = default;

int64_t PeakMemoryTracker::peak_bytes() const { return reporter_->peak - reporter_->baseline; }
int64_t PeakMemoryTracker::current_bytes() const {
  return reporter_->current - reporter_->baseline;
}
void PeakMemoryTracker::reset() {
  reporter_->baseline = reporter_->current;
  reporter_->peak = reporter_->current;
}

}  // namespace structdiff
