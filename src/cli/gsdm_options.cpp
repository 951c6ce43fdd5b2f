#include "cli/gsdm_options.h"

#include <ATen/CPUGeneratorImpl.h>

namespace structdiff::cli {

CLI::Option* add_problem_options(CLI::App& command, std::string& problem,
                                 gsdm::ProblemOptions& options, const std::string& fixed) {
  std::vector<const gsdm::Problem*> covered;
  for (const gsdm::Problem& p : gsdm::problems()) {
    if (fixed.empty() || p.name == fixed) covered.push_back(&p);
  }
  std::string names, variants;
  for (const gsdm::Problem* p : covered) {
    names += (names.empty() ? "" : ", ") + p->name + " (--size: " + p->size_help + ", default " +
             gsdm::size_text(p->default_size) + ")";
    for (const auto& [name, help] : p->variants) {
      variants += (variants.empty() ? "" : "; ") + (fixed.empty() ? p->name + " " : "") + name +
                  ": " + help;
    }
  }
  CLI::Option* option = nullptr;
  if (fixed.empty()) {
    option = command.add_option("--problem", problem, "One of: " + names);
  } else {
    problem = fixed;
  }
  command.add_option_function<std::string>(
      "--size", [&options](const std::string& text) { options.size = gsdm::parse_size(text); },
      fixed.empty() ? "The problem's dimensions, e.g. 5 or 16,16,8 (default: the problem's)"
                    : "The " + names);
  command.add_flag("!--no-intermediates", options.intermediates,
                   "Drop the intermediate variables (the paper's graphs without them)");
  command.add_option("--variant", options.variant,
                     "Another form of the problem (" + variants + ")");
  return option;
}

std::function<void()> problem_check(const std::string& problem, const gsdm::ProblemOptions& options) {
  return [&problem, &options] {
    if (!problem.empty()) gsdm::resolve_options(gsdm::find_problem(problem), options);
  };
}

void GsdmModelOptions::fill(gsdm::ProblemTrainRequest& request) const {
  request.model = model;
  request.model.norm = gsdm::parse_norm(norm);
  request.model.attention_scaling = gsdm::parse_attention_scaling(attention_scaling);
  request.model.output_norm = output_head == "norm";
  request.model.time_swish = time_path == "swish";
  request.model.attention = parse_mechanism(attention);
  request.model.mask.rule = graph::parse_mask_rule(mask);
  request.model.process = gsdm::parse_process(process);
  request.model.mask_schedule = diffusion::parse_mask_schedule(mask_schedule);
  request.model.masked_loss = gsdm::parse_masked_loss(masked_loss);
  request.dim = dim;
  request.blocks = blocks;
  request.heads = heads;
  if (embedding) request.embedding = gsdm::parse_embedding(*embedding);
  request.schedule = schedule;
  request.schedule.kind = diffusion::parse_schedule(schedule_kind);
}

void add_gsdm_model_options(CLI::App& command, GsdmModelOptions& o) {
  command.add_option("--dim", o.dim, "Embedding dimension (default: the problem's)")->check(positive());
  command.add_option("--blocks", o.blocks, "ResNet+attention pairs (default: the problem's)")
      ->check(depth());
  command.add_option("--heads", o.heads, "Attention heads (default: the problem's)")->check(positive());
  command.add_option("--embedding", o.embedding, "IE, AE or EE (default: the problem's)")
      ->check(CLI::IsMember(gsdm::embedding_names()));
  command.add_option("--norm", o.norm, "token (faithful) or group (reference)")
      ->check(CLI::IsMember(gsdm::norm_names()))
      ->capture_default_str();
  command
      .add_option("--attention-scaling", o.attention_scaling,
                  "attention scores times 1/sqrt(head dim) (inverse-sqrt-dim), or unscaled (none, "
                  "the reference's sparse path)")
      ->check(CLI::IsMember(gsdm::attention_scaling_names()))
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
      ->check(CLI::IsMember(graph::mask_rule_names()))
      ->capture_default_str();
  command.add_option("--mask-seed", o.model.mask.seed, "The random mask's draw")
      ->capture_default_str();
  command.add_option("--noise-schedule", o.schedule_kind, "linear or cosine")
      ->check(CLI::IsMember(diffusion::schedule_names()))
      ->capture_default_str();
  command.add_option("--diffusion-steps", o.schedule.steps, "T")
      ->check(work_count(1000000))
      ->capture_default_str();
  command.add_option("--beta-start", o.schedule.beta_start, "Linear schedule start")
      ->capture_default_str();
  command.add_option("--beta-end", o.schedule.beta_end, "Linear schedule end")
      ->capture_default_str();
  command
      .add_option("--diffusion", o.process,
                  "How discrete variables diffuse: gaussian (one-hot vectors under Gaussian noise, "
                  "the paper) or masked (absorbing state; continuous variables stay Gaussian)")
      ->check(CLI::IsMember(gsdm::process_names()))
      ->capture_default_str();
  command.add_option("--mask-schedule", o.mask_schedule,
                     "masked: alpha(t) = 1 - t (linear) or cos(pi t / 2) (cosine)")
      ->check(CLI::IsMember(diffusion::mask_schedule_names()))
      ->capture_default_str();
  command
      .add_option("--masked-loss", o.masked_loss,
                  "masked: elbo (cross-entropy weighted by -alpha'/(1 - alpha)) or unweighted")
      ->check(CLI::IsMember(gsdm::masked_loss_names()))
      ->capture_default_str();
}

gsdm::SampleOptions SamplingOptions::sample_options(uint64_t seed) const {
  gsdm::SampleOptions o;
  o.generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  o.sampler = gsdm::parse_sampler(sampler);
  o.ddim_steps = steps;
  o.ddim_eta = eta;
  o.temperature = temperature;
  o.confidence = gsdm::parse_confidence(confidence);
  o.unmask_per_step = unmask_per_step;
  o.remask = remask;
  o.order_noise = order_noise;
  return o;
}

std::string SamplingOptions::pace(gsdm::DiffusionProcess process) const {
  const gsdm::Sampler resolved = resolved_sampler(process);
  if (resolved == gsdm::Sampler::ancestral && process == gsdm::DiffusionProcess::gaussian) return "";
  if (resolved == gsdm::Sampler::adaptive && unmask_per_step > 0) {
    return " (" + std::to_string(unmask_per_step) + " variable(s) per step)";
  }
  return " (" + std::to_string(steps) + " steps)";
}

gsdm::Sampler SamplingOptions::resolved_sampler(gsdm::DiffusionProcess process) const {
  return gsdm::resolve_sampler(gsdm::parse_sampler(sampler), process);
}

void add_sampling_options(CLI::App& command, SamplingOptions& o) {
  command
      .add_option("--sampler", o.sampler,
                  "Gaussian models: ddim (fast, their default) or ancestral (all T steps); masked "
                  "models: adaptive (most confident first, their default) or ancestral (as the "
                  "schedule unmasks)")
      ->check(CLI::IsMember(gsdm::sampler_names()));
  command.add_option("--sample-steps", o.steps, "DDIM steps, or the masked samplers' steps")
      ->check(positive())
      ->capture_default_str();
  command.add_option("--temperature", o.temperature,
                     "masked: values drawn at this temperature (0: the most probable)")
      ->check(non_negative())
      ->capture_default_str();
  command.add_option("--confidence", o.confidence,
                     "adaptive: rank by the value's probability or by its margin over the most "
                     "probable other value (default: margin at temperature 0, probability above)")
      ->check(CLI::IsMember(gsdm::confidence_names()));
  command.add_option("--unmask-per-step", o.unmask_per_step,
                     "adaptive: variables decided per step (0: as the schedule spreads them over "
                     "--sample-steps, which then sets the pace)")
      ->check(non_negative())
      ->capture_default_str();
  command.add_option("--remask", o.remask,
                     "masked: each step, up to this many decided variables whose value fell below "
                     "probability 1/2 return to the mask (0: never); with --unmask-per-step on a "
                     "graph of discrete variables only, sampling goes on until the model doubts no "
                     "value (at most twice the steps)")
      ->check(non_negative())
      ->capture_default_str();
  command.add_option("--order-noise", o.order_noise,
                     "adaptive: Gumbel noise of this scale on each confidence, so draws at "
                     "temperature 0 take different orders (0: the most confident first; sudoku "
                     "solve's later draws use 0.1 when this and the temperature are 0)")
      ->check(non_negative())
      ->capture_default_str();
  command.add_option("--eta", o.eta, "DDIM noise: 0 deterministic, 1 the posterior variance")
      ->check(between(0.0, 1.0))
      ->capture_default_str();
}

}  // namespace structdiff::cli
