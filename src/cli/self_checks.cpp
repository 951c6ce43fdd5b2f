#include <algorithm>
#include <fstream>
#include <functional>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli/command_line.h"

namespace structdiff::cli {
namespace {

// Checks every command line of the file at `path` in this one process (one line per command,
// arguments separated by the ASCII unit separator 0x1f): `check` gets the line as shown to a
// user and its argv, and returns false for a line that fails. Prints "K of N command lines
// <verb>"; returns the number that failed, or -1 when the file cannot be read.
int check_lines(const std::string& path, const std::string& verb,
                const std::function<bool(const std::string&, int, char**)>& check) {
  std::ifstream in(path);
  if (!in) {
    std::cerr << "structdiff: error: cannot read " << path << "\n";
    return -1;
  }
  int failures = 0, lines = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    std::vector<std::string> words{"structdiff"};
    for (size_t at = 0; at <= line.size();) {
      const size_t end = std::min(line.find('\x1f', at), line.size());
      words.push_back(line.substr(at, end - at));
      at = end + 1;
    }
    std::vector<char*> argv;
    for (std::string& word : words) argv.push_back(word.data());
    ++lines;
    std::replace(line.begin(), line.end(), '\x1f', ' ');
    if (!check("structdiff " + line, static_cast<int>(argv.size()), argv.data())) ++failures;
  }
  std::cout << lines - failures << " of " << lines << " command lines " << verb << "\n";
  return failures;
}

// Every leaf command under `level`, with its row of the support table.
void list_leaf_commands(const CLI::App& level, const std::string& prefix, int& missing) {
  for (const CLI::App* command : level.get_subcommands([](const CLI::App*) { return true; })) {
    const std::string name = prefix.empty() ? command->get_name() : prefix + " " + command->get_name();
    if (!command->get_subcommands([](const CLI::App*) { return true; }).empty()) {
      list_leaf_commands(*command, name, missing);
      continue;
    }
    const std::optional<Support> support = support_of(name);
    missing += !support;
    std::cout << name << '\t'
              << (!support ? "no row" : support->devices ? "any" : "cpu") << '\t'
              << (!support ? "no row" : support->ranks ? "ranks" : "one process") << '\n';
  }
}

}  // namespace

int check_command_lines(const std::string& path) {
  const int failures = check_lines(path, "parse", [](const std::string& shown, int argc, char** argv) {
    if (run_command_line(argc, argv, /*check_only=*/true) == 0) return true;
    std::cerr << "FAILED: " << shown << "\n";
    return false;
  });
  return failures == 0 ? 0 : failures < 0 ? 1 : 2;
}

int check_refused_lines(const std::string& path) {
  const int failures = check_lines(path, "refused", [](const std::string& shown, int argc, char** argv) {
    std::ostringstream error;
    std::streambuf* const original = std::cerr.rdbuf(error.rdbuf());
    int code = -1;
    try {
      code = run_command_line(argc, argv, /*check_only=*/true);
    } catch (...) {
    }
    std::cerr.rdbuf(original);
    const std::string message = error.str();
    const bool one_line = !message.empty() && message.find('\n') == message.size() - 1;
    if (code == 2 && one_line && message.rfind("structdiff: error: ", 0) == 0) return true;
    std::cout << "NOT REFUSED (exit " << code << "): " << shown << "\n  " << message
              << (one_line ? "" : "\n");
    return false;
  });
  return failures == 0 ? 0 : 1;
}

int list_value_options() {
  CommandLine line;
  for (const OptionEntry& entry : list_value_options(line.app)) {
    std::cout << entry.command << '\t' << entry.name << '\t' << entry.type << '\t'
              << entry.domain << '\n';
  }
  return 0;
}

int list_commands() {
  CommandLine line;
  int missing = 0;
  list_leaf_commands(line.app, "", missing);
  return missing == 0 ? 0 : 1;
}

}  // namespace structdiff::cli
