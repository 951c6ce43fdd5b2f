#include "cli/gsdm_options.h"

#include <ATen/CPUGeneratorImpl.h>

namespace structdiff::cli {

gsdm::GsdmConfig GsdmModelOptions::config() const {
  gsdm::GsdmConfig config = model;
  config.embedding = gsdm::parse_embedding(embedding);
  config.norm = gsdm::parse_norm(norm);
  config.attention_scaling = gsdm::parse_attention_scaling(attention_scaling);
  config.output_norm = output_head == "norm";
  config.time_swish = time_path == "swish";
  config.attention = parse_mechanism(attention);
  config.mask.rule = graph::parse_mask_rule(mask);
  return config;
}

diffusion::ScheduleConfig GsdmModelOptions::schedule_config() const {
  diffusion::ScheduleConfig config = schedule;
  config.kind = diffusion::parse_schedule(schedule_kind);
  return config;
}

std::vector<CLI::Option*> add_gsdm_model_options(CLI::App& command, GsdmModelOptions& o) {
  std::vector<CLI::Option*> architecture = {
      command.add_option("--dim", o.model.dim, "Embedding dimension")->check(positive()),
      command.add_option("--blocks", o.model.blocks, "ResNet+attention pairs")->check(positive()),
      command.add_option("--heads", o.model.heads, "Attention heads")->check(positive()),
      command.add_option("--embedding", o.embedding, "IE, AE or EE")
          ->check(CLI::IsMember({"IE", "AE", "EE"}))};
  for (CLI::Option* option : architecture) option->capture_default_str();
  command.add_option("--norm", o.norm, "token (faithful) or group (reference)")
      ->check(CLI::IsMember({"token", "group"}))
      ->capture_default_str();
  command
      .add_option("--attention-scaling", o.attention_scaling,
                  "attention scores times 1/sqrt(head dim) (inverse-sqrt-dim), or unscaled (none, "
                  "the reference's sparse path)")
      ->check(CLI::IsMember({"inverse-sqrt-dim", "none"}))
      ->capture_default_str();
  command
      .add_option("--output-head", o.output_head,
                  "norm (norm and swish before the output projections) or plain (the reference)")
      ->check(CLI::IsMember({"norm", "plain"}))
      ->capture_default_str();
  command
      .add_option("--time-path", o.time_path,
                  "plain, or swish on the time embedding before each block's projection (the "
                  "reference)")
      ->check(CLI::IsMember({"plain", "swish"}))
      ->capture_default_str();
  command
      .add_option("--observed-embedding-init", o.model.observed_embedding_init,
                  "std of the observed-value embedding's initial draw (the reference: 1)")
      ->check(non_negative())
      ->capture_default_str();
  command
      .add_option("--attention", o.attention,
                  "structured (the graph's pattern, by the fused kernel or masked dense as the "
                  "core's cost model picks), sparse (the pattern, fused kernel always), gather, "
                  "or dense (unstructured)")
      ->check(CLI::IsMember({"sparse", "structured", "gather", "dense"}))
      ->capture_default_str();
  command
      .add_option("--mask-rule", o.mask,
                  "standard, or an ablation: non-symmetrised (children attend to parents only) "
                  "or random (as many pairs, drawn uniformly)")
      ->check(CLI::IsMember({"standard", "non-symmetrised", "random"}))
      ->capture_default_str();
  command.add_option("--mask-seed", o.model.mask.seed, "The random mask's draw")
      ->capture_default_str();
  command.add_option("--noise-schedule", o.schedule_kind, "linear or cosine")
      ->check(CLI::IsMember({"linear", "cosine"}))
      ->capture_default_str();
  command.add_option("--diffusion-steps", o.schedule.steps, "T")->capture_default_str();
  command.add_option("--beta-start", o.schedule.beta_start, "Linear schedule start")
      ->capture_default_str();
  command.add_option("--beta-end", o.schedule.beta_end, "Linear schedule end")
      ->capture_default_str();
  return architecture;
}

gsdm::SampleOptions SamplingOptions::sample_options(uint64_t seed) const {
  gsdm::SampleOptions o;
  o.generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  o.sampler = gsdm::parse_sampler(sampler);
  o.ddim_steps = steps;
  o.ddim_eta = eta;
  return o;
}

void add_sampling_options(CLI::App& command, SamplingOptions& o) {
  command.add_option("--sampler", o.sampler, "ddim (fast) or ancestral (all T steps)")
      ->check(CLI::IsMember({"ddim", "ancestral"}))
      ->capture_default_str();
  command.add_option("--sample-steps", o.steps, "DDIM steps")
      ->check(positive())
      ->capture_default_str();
  command.add_option("--eta", o.eta, "DDIM noise: 0 deterministic, 1 the posterior variance")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
}

}  // namespace structdiff::cli
