// Text helpers for messages: "did you mean ...?" for mistyped names (options, subcommands, spec
// keys), and UTF-8 sequences for naming characters in user text.
#pragma once

#include <exception>
#include <string>
#include <vector>

#include <c10/util/ArrayRef.h>

namespace structdiff {

// An exception's message for users: c10::Error's without the C++ backtrace its what() carries.
std::string message_of(const std::exception& error);

// A tensor shape for messages: "(2, 1, 28, 28)".
std::string shape_text(c10::ArrayRef<int64_t> shape);

// The name in `names` closest to `word` by edit distance (insertions, deletions, substitutions
// and swaps of neighbours), if it is close enough to be a likely typo (a third of the longer
// name's length in edits, at least 1 and at most 3); "" otherwise.
std::string closest_name(const std::string& word, const std::vector<std::string>& names);

// The length in bytes (1-4) of the well-formed UTF-8 sequence starting at text[at], or 0 if the
// bytes there are not one.
size_t utf8_sequence_length(const std::string& text, size_t at);

}  // namespace structdiff
