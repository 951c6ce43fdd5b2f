// One table per enum gives its command-line names: parsing, naming, the list of choices, and the
// one wording of the error for a name outside it ("unknown <what> 'x' (choose a, b or c)").
#pragma once

#include <array>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace structdiff {

// Throws std::invalid_argument: "unknown <what> '<name>' (choose <choices>)", the name shown
// printable and cut short.
[[noreturn]] void throw_unknown_name(const char* what, std::string_view name,
                                     const std::string& choices);

template <typename Enum, size_t N>
struct EnumNames {
  const char* what;  // what the enum chooses, as the error names it: "learning-rate decay"
  std::array<std::pair<Enum, const char*>, N> entries;

  Enum parse(std::string_view name) const {
    for (const auto& [value, text] : entries) {
      if (name == text) return value;
    }
    throw_unknown_name(what, name, choice_list());
  }

  // A value outside the table is a programming error.
  const char* name(Enum value) const {
    for (const auto& [entry, text] : entries) {
      if (entry == value) return text;
    }
    throw std::logic_error(std::string(what) + ": a value without a name");
  }

  std::vector<std::string> choices() const {
    std::vector<std::string> names;
    for (const auto& entry : entries) names.emplace_back(entry.second);
    return names;
  }

  // "a, b or c"
  std::string choice_list() const {
    std::string text;
    for (size_t i = 0; i < N; ++i) {
      if (i > 0) text += i + 1 == N ? " or " : ", ";
      text += entries[i].second;
    }
    return text;
  }
};

// The table of `Enum` from {value, name} pairs, its size deduced.
template <typename Enum, size_t N>
EnumNames<Enum, N> enum_names(const char* what,
                                        const std::pair<Enum, const char*> (&entries)[N]) {
  EnumNames<Enum, N> table{what, {}};
  for (size_t i = 0; i < N; ++i) table.entries[i] = entries[i];
  return table;
}

}  // namespace structdiff
