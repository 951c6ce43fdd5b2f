// The output policy every command obeys before any work (issue 43): the files it writes are
// distinct from each other and from every file it reads, by file identity, and an existing one is
// a regular file (outputs replace files by renaming a temporary over them, which must never land
// on a device, a directory or an input).
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace structdiff::cli {

// The name writable_file()'s validator carries: it marks an option as one of the command's outputs.
inline const char* const kOutputValidatorName = "output";

// What the parsed command line `app` would break, in one line naming the options and the path, or
// "" when its outputs are fine. Outputs: options checked by writable_file(), with their default
// when not given; inputs: the values of the other options that name an existing file.
std::string output_conflict(CLI::App& app);

}  // namespace structdiff::cli
