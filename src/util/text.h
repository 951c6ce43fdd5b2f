// Text helpers for messages: "did you mean ...?" for mistyped names (options, subcommands, spec
// keys), and UTF-8 sequences for naming characters in user text.
#pragma once

#include <exception>
#include <string>
#include <vector>

#include <c10/util/ArrayRef.h>

namespace structdiff {

// An exception's message for users: c10::Error's without the C++ backtrace its what() carries,
// and a failed allocation (libtorch's or std::bad_alloc) in our words, with the size asked for.
std::string message_of(const std::exception& error);

// A tensor shape for messages: "(2, 1, 28, 28)", or with other brackets "[3, 3]".
std::string shape_text(c10::ArrayRef<int64_t> shape, const char* brackets = "()");

// User text as a message shows it: control characters and bytes that are not UTF-8 escaped (a
// message stays one printable line), texts longer than `max_shown` bytes cut short ("...").
std::string printable(const std::string& text, size_t max_shown = 60);
std::string single_quoted(const std::string& text, size_t max_shown = 60);  // 'printable'

// Without leading and trailing spaces.
std::string trimmed(const std::string& text);
// Splits at every `separator`, keeping empty parts ("1," is two parts, the second empty).
std::vector<std::string> split(const std::string& text, char separator);

// The name in `names` closest to `word` by edit distance (insertions, deletions, substitutions
// and swaps of neighbours), if it is close enough to be a likely typo (a third of the longer
// name's length in edits, at least 1 and at most 3); "" otherwise.
std::string closest_name(const std::string& word, const std::vector<std::string>& names);
// "; did you mean 'edges'?" when closest_name finds one, else "".
std::string did_you_mean(const std::string& word, const std::vector<std::string>& names);

// The length in bytes (1-4) of the well-formed UTF-8 sequence starting at text[at], or 0 if the
// bytes there are not one.
size_t utf8_sequence_length(const std::string& text, size_t at);

}  // namespace structdiff
