// The output policy every command obeys before any work (issue 43): the files it writes are
// distinct from each other and from every file it reads, by file identity, and an existing one is
// a regular file (outputs replace files by renaming a temporary over them, which must never land
// on a device, a directory or an input).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

namespace structdiff::cli {

// The name writable_file()'s validator carries: it marks an option as one of the command's outputs.
inline const char* const kOutputValidatorName = "output";

// What the parsed command line `app` would break, in one line naming the options and the path, or
// "" when its outputs are fine. Outputs: options checked by writable_file(), with their default
// when not given; inputs: the values of the other options that name an existing file.
std::string output_conflict(CLI::App& app);

// A command's several outputs, replaced together: each is written to a temporary beside it as it
// becomes ready (`staged` gives the temporary's path to write to), and commit() moves them all in
// place at the end, so that a failure before then leaves every old output as it was. Uncommitted
// temporaries are removed.
class OutputSet {
 public:
  OutputSet() = default;
  OutputSet(const OutputSet&) = delete;
  OutputSet& operator=(const OutputSet&) = delete;
  ~OutputSet();
  // The temporary to write `path`'s new content to; "" for an empty path (an output not asked for).
  std::string staged(const std::string& path);
  void commit();

 private:
  std::vector<std::pair<std::string, std::string>> pending_;  // (temporary, path)
};

}  // namespace structdiff::cli
