#include "structdiff/enum_names.h"

#include "util/text.h"

namespace structdiff {

void throw_unknown_name(const char* what, std::string_view name, const std::string& choices) {
  throw std::invalid_argument("unknown " + std::string(what) + " " +
                              single_quoted(std::string(name)) + " (choose " + choices + ")");
}

}  // namespace structdiff
