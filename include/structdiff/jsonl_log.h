// A training run's metrics log: one JSON object per line.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace structdiff::train {

// Appends one JSON object per line; flushed after each record.
class JsonlLog {
 public:
  explicit JsonlLog(const std::string& path, bool append = true);
  void write(const nlohmann::json& record);

 private:
  std::ofstream out_;
};
// Drops the records of `path` whose "step" is past `step` (written by a run after its last
// checkpoint), so a resumed run's log holds each step once. A missing file is left missing.
void truncate_log_after_step(const std::string& path, int64_t step);

}  // namespace structdiff::train
