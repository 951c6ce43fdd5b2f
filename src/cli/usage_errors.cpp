// The usage errors of a parsed command line that CLI11 cannot see, and the did-you-mean of those
// it can.
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/command_line.h"
#include "cli/output_policy.h"
#include "structdiff/device.h"
#include "util/text.h"

namespace structdiff::cli {
namespace {

// The subcommands the user selected, outermost first.
std::vector<CLI::App*> selected_chain(CLI::App& app) {
  std::vector<CLI::App*> chain{&app};
  for (;;) {
    const std::vector<CLI::App*> selected = chain.back()->get_subcommands();
    if (selected.empty()) return chain;
    chain.push_back(selected.front());
  }
}

}  // namespace

std::string did_you_mean(CLI::App& app) {
  const std::vector<std::string> extras = app.remaining(/*recurse=*/true);
  if (extras.empty()) return "";
  std::string word = extras.front();
  const std::vector<CLI::App*> chain = selected_chain(app);
  std::string where;
  for (const CLI::App* level : chain) where += (where.empty() ? "" : " ") + level->get_name();
  if (where.empty()) where = "structdiff";
  std::vector<std::string> names;
  if (word.rfind("-", 0) == 0) {
    word = word.substr(0, word.find('='));
    // Global options fall through, so every level's options are valid here.
    for (const CLI::App* level : chain) {
      for (const CLI::Option* option : level->get_options()) {
        for (const std::string& name : option->get_lnames()) names.push_back("--" + name);
      }
    }
    const std::string closest = closest_name(word, names);
    if (closest.empty()) return "";
    return "unknown option '" + word + "' for '" + where + "'; did you mean '" + closest + "'?";
  }
  for (const CLI::App* command : chain.back()->get_subcommands([](CLI::App*) { return true; })) {
    names.push_back(command->get_name());
  }
  const std::string closest = closest_name(word, names);
  if (closest.empty()) {
    if (names.empty()) return "";
    std::string listed;
    for (const std::string& name : names) listed += (listed.empty() ? "" : ", ") + name;
    return "unknown command '" + word + "' for '" + where + "'; the commands are " + listed;
  }
  return "unknown command '" + word + "' for '" + where + "'; did you mean '" + closest + "'?";
}

std::string error_after_parsing(CommandLine& line) {
  if (std::string conflict = output_conflict(line.app); !conflict.empty()) return conflict;
  line.global.device = parse_device(line.device);
  const bool launched_rank = std::getenv("WORLD_SIZE") != nullptr;
  std::string command;  // "ddpm train"
  for (const CLI::App* level : selected_chain(line.app)) {
    if (level != &line.app) command += (command.empty() ? "" : " ") + level->get_name();
  }
  try {
    check_support(command, line.global.device, line.world_size > 1 || launched_rank);
  } catch (const std::exception& e) {
    return e.what();
  }
  if (line.world_size > 1 && launched_rank) {
    return "--world-size starts local ranks itself; with WORLD_SIZE set (torchrun) leave it out";
  }
  return "";
}

}  // namespace structdiff::cli
