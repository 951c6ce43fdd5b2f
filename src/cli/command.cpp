#include "cli/command.h"
#include "cli/output_policy.h"
#include "structdiff/loop_options.h"
#include "structdiff/model_file.h"
#include "structdiff/ranks.h"
#include "structdiff/runtime.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>
#include <type_traits>
#include <vector>

namespace structdiff::cli {

bool GlobalOptions::writes_outputs() const { return !ranks || ranks->is_root(); }

void print_training_summary(const train::LoopResult& result, const std::string& model_path) {
  char communication[64] = "";
  if (result.communication_seconds > 0) {
    std::snprintf(communication, sizeof communication, ", %.1f %% of it with the other ranks",
                  100.0 * result.communication_seconds / std::max(result.seconds, 1e-9));
  }
  std::printf("trained %ld steps in %.1f s (%.3f s/step%s) to step %ld; final loss %.4f; wrote %s\n",
              static_cast<long>(result.steps_this_run), result.seconds,
              result.seconds / static_cast<double>(std::max<int64_t>(1, result.steps_this_run)),
              communication, static_cast<long>(result.steps_done), result.final_loss,
              model_path.c_str());
}

void add_training_loop_options(CLI::App& command, train::LoopOptions& options,
                               std::function<void()> more_checks, train::LoopChoices* choices) {
  // Into `field`, or into the choice when the command defers the default to another option.
  auto bind = [&command](const std::string& name, auto& field, auto* choice, const std::string& help) {
    using Value = std::remove_reference_t<decltype(field)>;
    if (choice == nullptr) return command.add_option(name, field, help)->capture_default_str();
    return command.add_option_function<Value>(name, [choice](const Value& v) { *choice = v; },
                                              help + " (default: the task's)");
  };
  bind("--train-steps", options.steps, choices ? &choices->steps : nullptr, "Total optimiser steps")
      ->check(work_count(1000000000));
  command.add_option_function<double>(
             "--max-minutes", [&options](double minutes) { options.max_seconds = minutes * 60.0; },
             "Stop (and checkpoint) after this many minutes of this run (default: no limit)")
      ->check(positive());
  bind("--lr", options.learning_rate, choices ? &choices->learning_rate : nullptr, "AdamW learning rate")
      ->check(positive());
  command.add_option("--weight-decay", options.weight_decay,
                     "AdamW decoupled weight decay, on matrices only")
      ->capture_default_str();
  command.add_option_function<std::string>(
             "--lr-decay",
             [&options](const std::string& name) { options.decay = train::parse_learning_rate_decay(name); },
             "constant or cosine (to zero at --train-steps; follows the step, so resuming keeps it)")
      ->check(CLI::IsMember(train::learning_rate_decay_names()))
      ->default_str(train::learning_rate_decay_name(options.decay));
  command.add_option("--warmup", options.warmup_steps, "Linear learning-rate warm-up steps")
      ->capture_default_str();
  bind("--clip", options.clip_norm, choices ? &choices->clip_norm : nullptr,
       "Gradient norm clip (> 0; inf: none)")
      ->check(positive_or_infinite());
  command.add_option("--ema", options.ema_decay, "EMA decay, in [0, 1)")->capture_default_str();
  bind("--validate-every", options.validate_every, choices ? &choices->validate_every : nullptr,
       "Steps between validations (0: never)");
  command.add_option("--checkpoint", options.checkpoint_path, "Full training state, for --resume")
      ->check(writable_file());
  command.add_option("--checkpoint-every", options.checkpoint_every, "Steps between checkpoints")
      ->capture_default_str();
  command.add_flag("--resume", options.resume, "Continue from --checkpoint if it exists");
  command.add_option("--log", options.log_path,
                     "JSONL metrics log (a resumed run drops the records after its checkpoint)")
      ->check(writable_file());
  // One check, the library's, for every value; at parse time, so a bad value is a usage error.
  command.parse_complete_callback([&options, more_checks, choices] {
    try {
      train::check_loop_options(choices ? train::with_choices(options, *choices) : options);
    } catch (const std::invalid_argument& error) {
      throw CLI::ValidationError(error.what());
    }
    if (more_checks) more_checks();
  });
}

namespace {

const std::map<std::string, Support>& support_table() {
  static const std::map<std::string, Support> table = {
      {"bench attention", {true, false}},   {"bench gsdm", {true, false}},
      {"bench difformer", {false, false}},  {"bench ddpm", {false, false}},
      {"bench tracformer", {false, false}}, {"pattern", {true, false}},
      {"gsdm train", {true, true}},         {"gsdm eval", {true, false}},
      {"gsdm sample", {true, false}},       {"gsdm mask", {true, false}},
      {"gsdm invariance", {true, false}},   {"sudoku train", {true, true}},
      {"sudoku solve", {true, false}},      {"sudoku eval", {true, false}},
      {"difformer train", {false, false}},  {"classifier train", {false, false}},
      {"classifier eval", {false, false}},  {"ddpm train", {false, true}},
      {"ddpm sample", {false, false}},      {"ddpm eval", {false, false}},
      {"tracformer train", {true, false}},  {"tracformer eval", {true, false}},
      {"tracformer infill", {true, false}}, {"unn train", {false, false}},
      {"unn eval", {false, false}},         {"unn generate", {false, false}},
      {"model info", {true, false}},        {"export", {true, false}},
  };
  return table;
}

}  // namespace

std::optional<Support> support_of(const std::string& command) {
  const auto row = support_table().find(command);
  if (row == support_table().end()) return std::nullopt;
  return row->second;
}

void check_support(const std::string& command, const torch::Device& device, bool ranks) {
  const std::optional<Support> support = support_of(command);
  if (!support) {
    throw std::logic_error("'" + command + "' has no row in the command support table (src/cli/command.cpp)");
  }
  if (!device.is_cpu() && !support->devices) {
    throw std::invalid_argument(command + " runs on the CPU only so far (--device " + device.str() +
                                " is not supported there)");
  }
  if (ranks && !support->ranks) {
    std::string trainers;
    for (const auto& [name, support] : support_table()) {
      if (support.ranks) trainers += (trainers.empty() ? "" : ", ") + name;
    }
    throw std::invalid_argument("'" + command + "' runs on one process; data-parallel ranks train with " +
                                trainers);
  }
}

void write_json_file(const std::string& path, const nlohmann::json& value) {
  nlohmann::json document = value.is_object() ? value : nlohmann::json{{"rows", value}};
  document["provenance"] = train::provenance();
  write_file_atomically(path, document.dump(2) + "\n");
}

CLI::Validator writable_file() {
  return CLI::Validator(
      [](std::string& path) -> std::string {
        namespace fs = std::filesystem;
        std::error_code error;
        if (path.empty()) return "an empty path";
        if (fs::is_directory(path, error)) return "'" + path + "' is a directory, not a file";
        std::string target;
        try {
          target = output_target(path);
        } catch (const std::invalid_argument& e) {
          return e.what();
        }
        const fs::path parent = fs::path(target).has_parent_path() ? fs::path(target).parent_path() : fs::path(".");
        if (!fs::is_directory(parent, error)) {
          return "cannot write '" + path + "': directory '" + parent.string() + "' does not exist";
        }
        // The file is replaced by renaming a temporary written beside it, so the directory must
        // be writable, and so must an existing file (it would be overwritten).
        if (::access(parent.c_str(), W_OK) != 0 || (fs::exists(target, error) && ::access(target.c_str(), W_OK) != 0)) {
          return "cannot write '" + path + "': permission denied";
        }
        return "";
      },
      "FILE (written)", kOutputValidatorName);
}

CLI::Validator png_name() {
  return CLI::Validator(
      [](std::string& path) -> std::string {
        std::string extension = std::filesystem::path(path).extension().string();
        std::transform(extension.begin(), extension.end(), extension.begin(),
                       [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
        if (extension == ".png") return "";
        return "'" + path + "' would hold a PNG image: give a name ending in .png";
      },
      "", "png_name");
}

}  // namespace structdiff::cli
