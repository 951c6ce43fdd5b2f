#include <fstream>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "structdiff/jsonl_log.h"
#include "structdiff/runtime.h"

namespace structdiff::train {

JsonlLog::JsonlLog(const std::string& path, bool append)
    : out_(path, append ? std::ios::app : std::ios::trunc) {
  if (!out_) throw std::runtime_error("cannot open metrics log " + path);
}

void JsonlLog::write(const nlohmann::json& record) {
  out_ << record.dump() << '\n';
  out_.flush();
  if (!out_) throw std::runtime_error("cannot write to metrics log");
}

void truncate_log_after_step(const std::string& path, int64_t step) {
  std::ifstream in(path);
  if (!in) return;
  std::string kept;
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json record = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    // A line cut short by a kill, or a record past the checkpoint, goes.
    if (record.is_discarded()) continue;
    if (record.is_object() && record.contains("step") && record["step"].is_number_integer() &&
        record["step"].get<int64_t>() > step) {
      continue;
    }
    kept += line + '\n';
  }
  in.close();
  write_file_atomically(path, kept);
}

}  // namespace structdiff::train
