#include "cli/command.h"

#include <fstream>
#include <stdexcept>

namespace structdiff::cli {

void write_json_file(const std::string& path, const nlohmann::json& value) {
  std::ofstream out(path);
  out << value.dump(2) << "\n";
  if (!out) throw std::runtime_error("cannot write " + path);
}

}  // namespace structdiff::cli
