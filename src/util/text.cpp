#include "util/text.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <new>

#include <c10/util/Exception.h>

namespace structdiff {

namespace {

// An allocation that failed, in our words: what was asked for (when the allocator says) and what
// the machine has, instead of the allocator's text.
std::string out_of_memory(const std::string& allocator_text) {
  std::string message = "out of memory: the sizes or counts given need more memory than this machine can give";
  const std::string marker = "you tried to allocate ";
  const auto at = allocator_text.find(marker);
  if (at != std::string::npos) {
    const double bytes = std::strtod(allocator_text.c_str() + at + marker.size(), nullptr);
    char text[96];
    std::snprintf(text, sizeof text, " (one tensor of %.1f GB was asked for)", bytes / 1e9);
    message += text;
  }
  return message + "; choose smaller ones";
}

}  // namespace

std::string message_of(const std::exception& error) {
  if (dynamic_cast<const std::bad_alloc*>(&error) != nullptr) return out_of_memory("");
  if (const auto* torch_error = dynamic_cast<const c10::Error*>(&error)) {
    const std::string text = torch_error->what_without_backtrace();
    if (text.find("can't allocate memory") != std::string::npos) return out_of_memory(text);
    return text;
  }
  return error.what();
}

std::string shape_text(c10::ArrayRef<int64_t> shape, const char* brackets) {
  std::string text(1, brackets[0]);
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + brackets[1];
}

std::string printable(const std::string& text, size_t max_shown) {
  std::string out;
  size_t i = 0;
  while (i < text.size() && i < max_shown) {
    const auto byte = static_cast<unsigned char>(text[i]);
    const size_t length = utf8_sequence_length(text, i);
    if (length == 0 || byte < 0x20 || byte == 0x7F) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02X", byte);
      out += escaped;
      ++i;
    } else {
      out.append(text, i, length);
      i += length;
    }
  }
  return i < text.size() ? out + "..." : out;
}

std::string single_quoted(const std::string& text, size_t max_shown) {
  return "'" + printable(text, max_shown) + "'";
}

std::string trimmed(const std::string& text) {
  const auto first = text.find_first_not_of(' ');
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(' ') - first + 1);
}

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts{""};
  for (char c : text) {
    if (c == separator) {
      parts.emplace_back();
    } else {
      parts.back() += c;
    }
  }
  return parts;
}

namespace {

// Optimal string alignment distance (Damerau-Levenshtein without repeated edits of a substring).
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t substitution = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + substitution});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

}  // namespace

std::string closest_name(const std::string& word, const std::vector<std::string>& names) {
  constexpr size_t kLongest = 64;  // longer words are no typo, and would cost a large table
  std::string best;
  size_t best_distance = 0;
  for (const std::string& name : names) {
    if (word.size() > kLongest || name.size() > kLongest) continue;
    const size_t distance = edit_distance(word, name);
    const size_t allowed = std::clamp<size_t>(std::max(word.size(), name.size()) / 3, 1, 3);
    if (distance == 0 || distance > allowed) continue;
    if (best.empty() || distance < best_distance) {
      best = name;
      best_distance = distance;
    }
  }
  return best;
}

std::string did_you_mean(const std::string& word, const std::vector<std::string>& names) {
  const std::string closest = closest_name(word, names);
  return closest.empty() ? "" : "; did you mean " + single_quoted(closest) + "?";
}

size_t utf8_sequence_length(const std::string& text, size_t at) {
  const auto byte = static_cast<unsigned char>(text[at]);
  size_t length = byte < 0x80                    ? 1
                  : byte >= 0xC2 && byte <= 0xDF ? 2
                  : byte >= 0xE0 && byte <= 0xEF ? 3
                  : byte >= 0xF0 && byte <= 0xF4 ? 4
                                                 : 0;
  for (size_t k = 1; k < length; ++k) {
    if (at + k >= text.size() || (static_cast<unsigned char>(text[at + k]) & 0xC0) != 0x80) return 0;
  }
  return length;
}

}  // namespace structdiff
