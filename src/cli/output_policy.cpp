#include "cli/output_policy.h"

#include <unistd.h>

#include <filesystem>
#include <system_error>
#include <vector>

#include "structdiff/runtime.h"

namespace structdiff::cli {
namespace {

namespace fs = std::filesystem;

struct NamedPath {
  std::string option, path;
};

bool same_file(const std::string& a, const std::string& b) {
  std::error_code error;
  if (fs::exists(a, error) && fs::exists(b, error)) return fs::equivalent(a, b, error);
  // A file not written yet: the same path however it is spelled.
  return fs::weakly_canonical(a, error) == fs::weakly_canonical(b, error);
}

bool is_output(CLI::Option* option) {
  try {
    option->get_validator(kOutputValidatorName);
    return true;
  } catch (const CLI::OptionNotFound&) {
    return false;
  }
}

}  // namespace

std::string output_conflict(CLI::App& app) {
  std::vector<NamedPath> outputs, inputs;
  std::vector<CLI::App*> levels = {&app};
  for (size_t i = 0; i < levels.size(); ++i) {
    for (CLI::App* command : levels[i]->get_subcommands()) levels.push_back(command);
  }
  for (CLI::App* level : levels) {
    for (CLI::Option* option : level->get_options()) {
      const std::string name = option->get_name();
      if (is_output(option)) {
        std::vector<std::string> paths = option->results();
        if (paths.empty() && !option->get_default_str().empty()) paths = {option->get_default_str()};
        for (const std::string& path : paths) outputs.push_back({name, path});
        continue;
      }
      for (const std::string& value : option->results()) {
        std::error_code error;
        if (!value.empty() && fs::exists(value, error) && !fs::is_directory(value, error)) {
          inputs.push_back({name, value});
        }
      }
    }
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    const NamedPath& output = outputs[i];
    std::error_code error;
    if (fs::exists(output.path, error) && !fs::is_regular_file(output.path, error)) {
      return output.option + " " + output.path +
             " exists and is not a regular file; outputs replace regular files only";
    }
    for (const NamedPath& input : inputs) {
      if (same_file(output.path, input.path)) {
        return output.option + " " + output.path + " is also the input " + input.option +
               ": writing it would destroy what the command reads";
      }
    }
    for (size_t j = 0; j < i; ++j) {
      if (same_file(output.path, outputs[j].path)) {
        return outputs[j].option + " and " + output.option + " both name " + output.path +
               ": one output would overwrite the other";
      }
    }
  }
  return "";
}

OutputSet::~OutputSet() {
  for (const auto& [temporary, path] : pending_) {
    std::error_code ignored;
    fs::remove(temporary, ignored);
  }
}

std::string OutputSet::staged(const std::string& path) {
  if (path.empty()) return "";
  const std::string target = output_target(path);
  pending_.emplace_back(target + ".pending." + std::to_string(::getpid()), target);
  return pending_.back().first;
}

void OutputSet::commit() {
  for (const auto& [temporary, path] : pending_) replace_file(temporary, path);
  pending_.clear();
}

}  // namespace structdiff::cli
