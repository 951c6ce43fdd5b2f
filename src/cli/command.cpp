#include "cli/command.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <vector>
#include <stdexcept>

namespace structdiff::cli {

void print_training_summary(const train::LoopResult& result, const std::string& model_path) {
  std::printf("trained %ld steps in %.1f s (%.3f s/step) to step %ld; final loss %.4f; wrote %s\n",
              static_cast<long>(result.steps_this_run), result.seconds,
              result.seconds / static_cast<double>(std::max<int64_t>(1, result.steps_this_run)),
              static_cast<long>(result.steps_done), result.final_loss, model_path.c_str());
}

void add_training_loop_options(CLI::App& command, train::LoopOptions& options) {
  command.add_option("--train-steps", options.steps, "Total optimiser steps")->capture_default_str();
  command.add_option_function<double>(
             "--max-minutes", [&options](double minutes) { options.max_seconds = minutes * 60.0; },
             "Stop (and checkpoint) after this many minutes of this run (default: no limit)")
      ->check(CLI::NonNegativeNumber);
  command.add_option("--lr", options.learning_rate, "Adam learning rate")->capture_default_str();
  command.add_option_function<std::string>(
             "--lr-decay",
             [&options](const std::string& name) { options.decay = train::parse_learning_rate_decay(name); },
             "constant or cosine (to zero at --train-steps; follows the step, so resuming keeps it)")
      ->check(CLI::IsMember({"constant", "cosine"}))
      ->default_str("constant");
  command.add_option("--warmup", options.warmup_steps, "Linear learning-rate warm-up steps")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  command.add_option("--clip", options.clip_norm, "Gradient norm clip")->capture_default_str();
  command.add_option("--ema", options.ema_decay, "EMA decay")->capture_default_str();
  command.add_option("--validate-every", options.validate_every, "Steps between validations (0: never)")
      ->capture_default_str();
  command.add_option("--checkpoint", options.checkpoint_path, "Full training state, for --resume");
  command.add_option("--checkpoint-every", options.checkpoint_every, "Steps between checkpoints")
      ->capture_default_str();
  command.add_flag("--resume", options.resume, "Continue from --checkpoint if it exists");
  command.add_option("--log", options.log_path, "JSONL metrics log");
}

void write_json_file(const std::string& path, const nlohmann::json& value) {
  std::ofstream out(path);
  out << value.dump(2) << "\n";
  if (!out) throw std::runtime_error("cannot write " + path);
}

double median_ms(const std::function<void()>& run, int min_runs, double budget_seconds) {
  using Clock = std::chrono::steady_clock;
  std::vector<double> times;
  const auto start = Clock::now();
  while (static_cast<int>(times.size()) < std::max(min_runs, 1) ||
         std::chrono::duration<double>(Clock::now() - start).count() + 1e-3 * times.back() <
             budget_seconds) {
    const auto t0 = Clock::now();
    run();
    times.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace structdiff::cli
