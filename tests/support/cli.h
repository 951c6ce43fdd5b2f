// Running the structdiff binary from a test: its exit code and output, scratch paths, and text
// checks. The test target defines STRUCTDIFF_BINARY.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "support/temporary_files.h"

struct Result {
  int exit_code;
  std::string output;  // stdout and stderr together
};

// A shell command line as it is (for pipelines and background jobs).
inline Result run_shell(const std::string& command) {
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return {-1, "popen failed"};
  std::string output;
  std::array<char, 4096> buffer{};
  while (fgets(buffer.data(), buffer.size(), pipe) != nullptr) output += buffer.data();
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

inline Result run(const std::string& arguments) {
  return run_shell(std::string(STRUCTDIFF_BINARY) + " " + arguments + " 2>&1");
}

inline int line_count(const std::string& text) {
  int lines = 0;
  for (char c : text) lines += c == '\n';
  return lines;
}

// Each test runs in a process of its own (ctest -j2 runs two at once): one scratch directory per
// process, so concurrent tests never share a file.
inline std::string temp_path(const std::string& name) {
  static const TemporaryDirectory directory;
  return directory.file(name);
}

// The binary's option table (`--list-value-options`), one row per option that takes a value:
// {command, option, type, domain}; empty when the binary could not list it.
inline std::vector<std::array<std::string, 4>> value_option_rows() {
  const Result listed = run("--list-value-options");
  std::vector<std::array<std::string, 4>> rows;
  if (listed.exit_code != 0) return rows;
  std::istringstream table(listed.output);
  for (std::string line; std::getline(table, line);) {
    std::array<std::string, 4> fields;
    std::istringstream columns(line);
    for (std::string& field : fields) std::getline(columns, field, '\t');
    rows.push_back(fields);
  }
  return rows;
}

inline bool contains(const std::string& text, const std::string& fragment) {
  return text.find(fragment) != std::string::npos;
}
