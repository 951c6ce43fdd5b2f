// Options shared by `structdiff gsdm` and its Sudoku front end `structdiff sudoku`: the GSDM's
// architecture and noise schedule, and the sampler.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "cli/command.h"
#include "structdiff/diffusion.h"
#include "structdiff/gsdm.h"
#include "structdiff/gsdm_problems.h"

namespace structdiff::cli {

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
  // What `sampler` names for a model of this process, for reports.
  std::string sampler_for(gsdm::DiffusionProcess process) const;
  // " (50 steps)", " (1 variable(s) per step)" or "" (the Gaussian ancestral chain's T steps).
  std::string pace(gsdm::DiffusionProcess process) const;
  // One generator for all of a command's sampling, seeded by --seed.
  gsdm::SampleOptions sample_options(uint64_t seed) const;
};
// --sampler, --sample-steps, --eta, --temperature, --confidence, --unmask-per-step, --remask.
void add_sampling_options(CLI::App& command, SamplingOptions& options);

}  // namespace structdiff::cli
