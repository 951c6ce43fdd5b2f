// Shared pieces of the command-line tool: global options and subcommand registration.
#pragma once

#include <cstdint>
#include <functional>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <torch/types.h>

#include "cli/value_domains.h"
#include "structdiff/loop_options.h"
#include "structdiff/model_file.h"

namespace structdiff::cli {

struct GlobalOptions {
  int threads = 0;  // set from default_threads() in main
  uint64_t seed = 0;
  torch::Device device = torch::kCPU;  // --device
  std::shared_ptr<train::Ranks> ranks;  // data-parallel ranks (--world-size, torchrun); null: one
  // Whether this process writes the run's files and report: the only one, or rank 0.
  bool writes_outputs() const;
};

// What each command ("ddpm train") supports beyond one process on the CPU, declared in one table
// that main checks before any work: other devices, and data-parallel ranks.
struct Support {
  bool devices = false;
  bool ranks = false;
};
// The command's row; nullopt for a command without one.
std::optional<Support> support_of(const std::string& command);
// Throws std::invalid_argument saying what `command` does not support of what the run asks
// (--device other than the CPU, `ranks`: --world-size or a launched rank), or naming a command
// without a row in the table.
void check_support(const std::string& command, const torch::Device& device, bool ranks);

// Writes `value` as indented JSON with the run's provenance (train::provenance()) beside it: an
// object gains a "provenance" key, anything else becomes {"rows": value, "provenance": ...}.
// Atomic (temporary file, then rename); throws std::runtime_error naming the path on failure.
void write_json_file(const std::string& path, const nlohmann::json& value);

// For every option naming a file the command writes (--out, --json, --log, --checkpoint, --png):
// rejects, at parse time and so before any work, a path that is a directory, lies in a missing
// directory, or cannot be written.
CLI::Validator writable_file();
// Beside writable_file() on options that write a PNG image: the name must end in .png, so that
// `--out grid.txt` is refused instead of holding an image its name hides.
CLI::Validator png_name();

// The shared training-loop options: --train-steps, --max-minutes, --lr, --lr-decay, --warmup,
// --clip, --ema, --validate-every, --checkpoint, --checkpoint-every, --resume, --log.
// `options` must outlive the parse (the subcommand's state).
// `more_checks`: the command's other parse-time checks (CLI11 keeps one such callback per
// command, which the loop options' check takes).
// `choices`: where --train-steps, --lr, --clip and --validate-every go when their defaults
// depend on another option (null: into `options`).
void add_training_loop_options(CLI::App& command, train::LoopOptions& options,
                               std::function<void()> more_checks = {},
                               train::LoopChoices* choices = nullptr);

// "trained N steps in S s (X s/step) to step T; final loss L; wrote PATH": N and the rate count
// this run's steps only, T includes those before a resume.
void print_training_summary(const train::LoopResult& result, const std::string& model_path);

// Each subcommand registers its options and stores the work to run in `action`; main runs it
// after the global options took effect.
using Action = std::function<void()>;

void register_bench_attention(CLI::App& bench, const GlobalOptions& global, Action& action);
void register_bench_gsdm(CLI::App& bench, const GlobalOptions& global, Action& action);
void register_bench_difformer(CLI::App& bench, const GlobalOptions& global, Action& action);
void register_bench_ddpm(CLI::App& bench, const GlobalOptions& global, Action& action);
void register_bench_tracformer(CLI::App& bench, const GlobalOptions& global, Action& action);
void register_pattern(CLI::App& app, const GlobalOptions& global, Action& action);
void register_gsdm(CLI::App& app, const GlobalOptions& global, Action& action);
// `train` under `parent`: gsdm train, or with `fixed_problem` the same command for that problem
// alone (sudoku train).
void register_gsdm_train(CLI::App& parent, const GlobalOptions& global, Action& action,
                         const std::string& fixed_problem = "");
void register_sudoku(CLI::App& app, const GlobalOptions& global, Action& action);
void register_difformer(CLI::App& app, const GlobalOptions& global, Action& action);
void register_classifier(CLI::App& app, const GlobalOptions& global, Action& action);
void register_ddpm(CLI::App& app, const GlobalOptions& global, Action& action);
void register_tracformer(CLI::App& app, const GlobalOptions& global, Action& action);
void register_unn(CLI::App& app, const GlobalOptions& global, Action& action);
// `train` under `unn`.
void register_unn_train(CLI::App& unn, const GlobalOptions& global, Action& action);
void register_model(CLI::App& app, const GlobalOptions& global, Action& action);
void register_export(CLI::App& app, const GlobalOptions& global, Action& action);

}  // namespace structdiff::cli
