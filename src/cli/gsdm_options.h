// What `structdiff gsdm` and its Sudoku front end `structdiff sudoku` share: the problem options,
// the GSDM's architecture and noise schedule, the sampler; and their commands kept in files of
// their own.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "cli/command.h"
#include "structdiff/diffusion.h"
#include "structdiff/gsdm.h"
#include "structdiff/gsdm_problems.h"

namespace structdiff::cli {

// --problem NAME (unless the command is for the one problem `fixed`), --size, --no-intermediates,
// --variant; returns the --problem option (nullptr with `fixed`).
CLI::Option* add_problem_options(CLI::App& command, std::string& problem,
                                 gsdm::ProblemOptions& options, const std::string& fixed = "");
// The check of the problem's name, sizes and variant, for a command's parse-time callback: usage
// errors, the same under --dry-run as in a run.
std::function<void()> problem_check(const std::string& problem, const gsdm::ProblemOptions& options);

// `gsdm mask` and `gsdm invariance` (gsdm_graph_command.cpp), under the `gsdm` command.
void register_gsdm_graph_commands(CLI::App& gsdm, Action& action);
// `sudoku eval` (sudoku_eval_command.cpp), under the `sudoku` command.
void register_sudoku_eval(CLI::App& sudoku, const GlobalOptions& global, Action& action);

struct GsdmModelOptions {
  gsdm::GsdmConfig model;
  // Unset: the problem's (paper Table 2).
  std::optional<int64_t> dim, blocks, heads;
  std::optional<std::string> embedding;
  std::string norm = "token", attention = "structured", mask = "standard";
  std::string attention_scaling = "inverse-sqrt-dim", output_head = "norm", time_path = "plain";
  diffusion::ScheduleConfig schedule;
  std::string schedule_kind = "linear";
  std::string process = "gaussian", mask_schedule = "cosine", masked_loss = "elbo";
  // The request's architecture fields: `model` with the names parsed, and the optional four.
  void fill(gsdm::ProblemTrainRequest& request) const;
};
// --dim, --blocks, --heads, --embedding, --norm, --attention-scaling, --output-head, --time-path,
// --observed-embedding-init, --attention, --mask-rule, --mask-seed,
// --noise-schedule, --diffusion-steps, --beta-start, --beta-end, --diffusion, --mask-schedule,
// --masked-loss.
void add_gsdm_model_options(CLI::App& command, GsdmModelOptions& options);

struct SamplingOptions {
  std::string sampler;  // "": the model's (ddim for Gaussian, adaptive for masked)
  int64_t steps = 50;
  double eta = gsdm::SampleOptions{}.ddim_eta;
  double temperature = 0;
  std::string confidence;  // "": margin at temperature 0, probability above
  int64_t unmask_per_step = gsdm::SampleOptions{}.unmask_per_step, remask = 0;
  double order_noise = 0;
  // The sampler that runs on a model of this process.
  gsdm::Sampler resolved_sampler(gsdm::DiffusionProcess process) const;
  // " (50 steps)", " (1 variable(s) per step)" or "" (the Gaussian ancestral chain's T steps).
  std::string pace(gsdm::DiffusionProcess process) const;
  // One generator for all of a command's sampling, seeded by --seed.
  gsdm::SampleOptions sample_options(uint64_t seed) const;
};
// --sampler, --sample-steps, --eta, --temperature, --confidence, --unmask-per-step, --remask,
// --order-noise.
void add_sampling_options(CLI::App& command, SamplingOptions& options);

}  // namespace structdiff::cli
