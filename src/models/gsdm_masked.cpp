// GSDM's masked (absorbing-state) process: training loss and samplers. A masked discrete variable
// is an all-zero block of the flat state; continuous variables keep Gaussian noise under the same
// time step, so one model handles graphs with both kinds.
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <tuple>
#include <vector>

#include <torch/torch.h>

#include "structdiff/gsdm.h"
#include "structdiff/random.h"

namespace structdiff::gsdm {

namespace {

// t in (0, 1] of 0-based steps: step T-1 is t = 1 (everything masked), and the state after the
// last sampler step is t = 0.
torch::Tensor unit_time(const torch::Tensor& steps, int64_t total) {
  return (steps.to(torch::kDouble) + 1) / static_cast<double>(total);
}

// (batch, n, width) view of a discrete group's entries.
torch::Tensor group_blocks(const torch::Tensor& state, const ArityGroup& group) {
  return state.index_select(1, group.entries).view({state.size(0), group.nodes.size(0), group.width});
}

torch::Tensor write_group(const torch::Tensor& state, const ArityGroup& group,
                          const torch::Tensor& blocks) {
  return state.index_copy(1, group.entries, blocks.reshape({state.size(0), -1}));
}

// Each entry's rank within its row (0 = first in the order).
torch::Tensor ranks(const torch::Tensor& scores, bool descending) {
  const torch::Tensor order = scores.argsort(1, descending);
  const torch::Tensor positions =
      torch::arange(order.size(1), order.options()).expand_as(order).contiguous();
  return torch::empty_like(order).scatter_(1, order, positions);
}

}  // namespace

torch::Tensor masked_training_loss(const MaskedModelFn& network, const GsdmStructure& structure,
                                   const diffusion::NoiseSchedule& schedule,
                                   diffusion::MaskScheduleKind mask_schedule, MaskedLoss loss,
                                   const torch::Tensor& x0, const torch::Tensor& observed_nodes,
                                   const diffusion::TrainingExample& example) {
  const int64_t batch = x0.size(0);
  const torch::Tensor t = unit_time(example.t, schedule.steps());
  const torch::Tensor alpha = diffusion::mask_alpha(mask_schedule, t).to(x0.scalar_type());
  // Each latent discrete variable is masked with probability 1 - alpha(t). The draw comes from
  // the example's noise (its first entry, through the normal CDF), so that the rows a rank or a
  // thread computes see what the whole batch's example gives them.
  torch::Tensor x_t = example.x_t;
  torch::Tensor masked_groups_loss;
  std::vector<std::pair<const ArityGroup*, torch::Tensor>> masked_of_group;
  for (const ArityGroup& group : structure.groups) {
    if (!group.discrete) continue;
    const torch::Tensor first = group.entries.view({-1, group.width}).select(1, 0);
    const torch::Tensor uniform = 0.5 * torch::erfc(-example.noise.index_select(1, first) / std::sqrt(2.0));
    const torch::Tensor latent = ~observed_nodes.index_select(1, group.nodes);
    const torch::Tensor masked = latent & (uniform >= alpha.unsqueeze(1));
    x_t = write_group(x_t, group, group_blocks(x0, group) * (~masked).unsqueeze(-1).to(x0.scalar_type()));
    masked_of_group.emplace_back(&group, masked);
  }
  const torch::Tensor output = network(x_t, example.t);
  // Continuous latent entries: the Gaussian process's squared x0 error.
  torch::Tensor continuous_latent = ~structure.layout.expand_node_mask(observed_nodes);
  for (const auto& [group, masked] : masked_of_group) {
    continuous_latent = continuous_latent.index_fill(1, group->entries, false);
  }
  torch::Tensor per_example =
      ((output - x0).pow(2) * continuous_latent.to(x0.scalar_type())).reshape({batch, -1}).sum(1);
  if (masked_of_group.empty()) return per_example.mean();
  const torch::Tensor weight =
      loss == MaskedLoss::elbo
          ? diffusion::mask_elbo_weight(mask_schedule, t).to(x0.scalar_type())
          : torch::ones({batch}, x0.options());
  for (const auto& [group, masked] : masked_of_group) {
    const torch::Tensor log_p = torch::log_softmax(group_blocks(output, *group), -1);
    const torch::Tensor target = group_blocks(x0, *group).argmax(-1, /*keepdim=*/true);
    const torch::Tensor cross_entropy = -log_p.gather(-1, target).squeeze(-1);  // (batch, n)
    per_example = per_example +
                  weight * (cross_entropy * masked.to(cross_entropy.scalar_type())).sum(1);
  }
  return per_example.mean();
}

torch::Tensor proposal_confidence(const torch::Tensor& probabilities, const torch::Tensor& proposal,
                                  Confidence confidence) {
  if (confidence == Confidence::by_temperature) {
    throw std::invalid_argument("proposal_confidence: say probability or margin");
  }
  const torch::Tensor index = proposal.unsqueeze(-1);
  const torch::Tensor chosen = probabilities.gather(-1, index).squeeze(-1);
  if (confidence == Confidence::probability || probabilities.size(-1) < 2) return chosen;
  const torch::Tensor strongest_other = std::get<0>(probabilities.scatter(-1, index, -1.0).max(-1));
  return chosen - strongest_other;
}

namespace {

void check_masked_sampling(const diffusion::NoiseSchedule& schedule, const SampleOptions& options) {
  if (options.sampler != Sampler::ancestral && options.sampler != Sampler::adaptive) {
    throw std::invalid_argument("a masked-process model samples with ancestral or adaptive, not " +
                                sampler_name(options.sampler));
  }
  if (options.ddim_steps < 1 || options.ddim_steps > schedule.steps()) {
    throw std::invalid_argument("sample steps must be in [1, " + std::to_string(schedule.steps()) +
                                "], got " + std::to_string(options.ddim_steps));
  }
  if (!(options.temperature >= 0) || !std::isfinite(options.temperature)) {
    throw std::invalid_argument("the temperature must be finite and >= 0");
  }
  if (options.unmask_per_step < 0 || options.remask < 0) {
    throw std::invalid_argument("unmask-per-step and remask must be >= 0");
  }
  if (!(options.order_noise >= 0) || !std::isfinite(options.order_noise)) {
    throw std::invalid_argument("the order noise must be finite and >= 0");
  }
  if (options.order_noise > 0 && options.sampler != Sampler::adaptive) {
    throw std::invalid_argument(
        "order noise reorders the adaptive sampler's choices; the ancestral sampler unmasks at random");
  }
}

// Below any confidence, order noise added or not: what is not masked is never chosen.
constexpr double kNeverChosen = -std::numeric_limits<double>::infinity();

// One step's reading of the network's output for the discrete variables: each variable's proposed
// value, the model's confidence in it, and (when remasking) how probable each decided variable's
// current value still is.
struct Proposals {
  std::vector<torch::Tensor> value;  // per arity group (undefined for continuous ones)
  torch::Tensor confidence;          // (batch, nodes); kNeverChosen where nothing is proposed
  torch::Tensor value_probability;   // (batch, nodes); 2 where not computed
};

Proposals propose(const GsdmStructure& structure, const torch::Tensor& output, const torch::Tensor& x,
                  const torch::Tensor& masked, const SampleOptions& options, Confidence confidence,
                  bool remasking) {
  const int64_t batch = x.size(0);
  Proposals proposals;
  proposals.value.resize(structure.groups.size());
  proposals.confidence = torch::full(masked.sizes(), kNeverChosen, x.options());
  proposals.value_probability = torch::full(masked.sizes(), 2.0, x.options());
  for (size_t g = 0; g < structure.groups.size(); ++g) {
    const ArityGroup& group = structure.groups[g];
    if (!group.discrete) continue;
    const torch::Tensor logits = group_blocks(output, group);
    const torch::Tensor p = torch::softmax(logits, -1);
    proposals.value[g] =
        options.temperature == 0
            ? logits.argmax(-1)
            : random::categorical(
                  random::tempered_softmax(logits, options.temperature).view({-1, group.width}),
                  options.generator)
                  .view({batch, -1});
    proposals.confidence = proposals.confidence.index_copy(
        1, group.nodes, proposal_confidence(p, proposals.value[g], confidence));
    if (remasking) {
      const torch::Tensor value = group_blocks(x, group).argmax(-1, /*keepdim=*/true);
      proposals.value_probability =
          proposals.value_probability.index_copy(1, group.nodes, p.gather(-1, value).squeeze(-1));
    }
  }
  return proposals;
}

// Decided variables whose value the model now finds improbable (< 0.5) are masked again, the
// `remask` least probable of each example.
torch::Tensor remask_doubtful(const torch::Tensor& masked, const torch::Tensor& latent_nodes,
                              const Proposals& proposals, int64_t remask) {
  const torch::Tensor doubtful = latent_nodes & ~masked & (proposals.value_probability < 0.5);
  const torch::Tensor rank = ranks(torch::where(doubtful, proposals.value_probability,
                                                torch::full_like(proposals.value_probability, 3.0)),
                                   /*descending=*/false);
  return masked | (doubtful & (rank < remask));
}

// Which masked variables a step before the last decides: ancestral, each with the schedule's
// probability; adaptive, the most confident, as many as leave what the schedule keeps masked at
// the next step (or `unmask_per_step` fewer than now).
torch::Tensor step_unmask(const torch::Tensor& masked, const Proposals& proposals,
                          const torch::Tensor& latent_discrete, const SampleOptions& options,
                          bool by_count, double alpha_now, double alpha_next) {
  if (options.sampler == Sampler::ancestral) {
    const double probability = (alpha_next - alpha_now) / (1 - alpha_now);
    return masked & (random::uniform(masked.sizes(), options.generator, proposals.confidence.options()) <
                     probability);
  }
  const torch::Tensor masked_now = masked.sum(1);
  const torch::Tensor keep_masked =
      by_count ? (masked_now - options.unmask_per_step).clamp_min(0)
               : torch::minimum(masked_now,
                                (latent_discrete.to(torch::kDouble) * (1 - alpha_next)).floor().to(torch::kLong));
  torch::Tensor order = proposals.confidence;
  if (options.order_noise > 0) {
    order = order + options.order_noise * random::gumbel(masked.sizes(), options.generator, order.options());
  }
  const torch::Tensor rank =
      ranks(torch::where(masked, order, torch::full_like(order, kNeverChosen)), /*descending=*/true);
  return masked & (rank < (masked_now - keep_masked).unsqueeze(1));
}

bool has_group(const GsdmStructure& structure, bool discrete) {
  return std::any_of(structure.groups.begin(), structure.groups.end(),
                     [&](const ArityGroup& group) { return group.discrete == discrete; });
}

// The state sampling starts from: observed entries from `observed_values`, latent continuous ones
// from `noise`, latent discrete variables masked (all-zero blocks); and which variables are masked.
std::pair<torch::Tensor, torch::Tensor> starting_state(const GsdmStructure& structure,
                                                       const torch::Tensor& observed_entries,
                                                       const torch::Tensor& observed_nodes,
                                                       const torch::Tensor& observed_values,
                                                       const torch::Tensor& noise) {
  torch::Tensor x = torch::where(observed_entries, observed_values, noise);
  torch::Tensor masked = torch::zeros_like(observed_nodes);
  for (const ArityGroup& group : structure.groups) {
    if (!group.discrete) continue;
    const torch::Tensor latent = ~observed_nodes.index_select(1, group.nodes);
    masked = masked.index_copy(1, group.nodes, latent);
    x = write_group(x, group, group_blocks(x, group) * (~latent).unsqueeze(-1).to(x.scalar_type()));
  }
  return {x, masked};
}

// Decided values as one-hot blocks (kept from `x` unless just decided), masked variables as zeros,
// written into `next`.
torch::Tensor write_discrete(const GsdmStructure& structure, torch::Tensor next, const torch::Tensor& x,
                             const Proposals& proposals, const torch::Tensor& unmask,
                             const torch::Tensor& masked) {
  for (size_t g = 0; g < structure.groups.size(); ++g) {
    const ArityGroup& group = structure.groups[g];
    if (!group.discrete) continue;
    const torch::Tensor decided_now = unmask.index_select(1, group.nodes).unsqueeze(-1);
    const torch::Tensor still_masked = masked.index_select(1, group.nodes).unsqueeze(-1);
    torch::Tensor blocks = torch::where(
        decided_now, torch::one_hot(proposals.value[g], group.width).to(x.scalar_type()),
        group_blocks(x, group));
    blocks = blocks * (~still_masked).to(x.scalar_type());
    next = write_group(next, group, blocks);
  }
  return next;
}

}  // namespace

torch::Tensor sample_masked(const MaskedModelFn& model, const GsdmStructure& structure,
                            const diffusion::NoiseSchedule& schedule,
                            diffusion::MaskScheduleKind mask_schedule,
                            const torch::Tensor& observed_nodes, const torch::Tensor& observed_values,
                            const torch::Tensor& noise, const SampleOptions& options) {
  check_masked_sampling(schedule, options);
  torch::NoGradGuard no_grad;
  const Confidence confidence =
      options.confidence != Confidence::by_temperature ? options.confidence
      : options.temperature == 0                       ? Confidence::margin
                                                       : Confidence::probability;
  const int64_t batch = observed_values.size(0);
  const torch::Tensor observed_entries = structure.layout.expand_node_mask(observed_nodes);
  torch::Tensor x, masked;  // not a structured binding: the lambdas below capture them
  std::tie(x, masked) = starting_state(structure, observed_entries, observed_nodes, observed_values, noise);
  const bool continuous = has_group(structure, false), discrete = has_group(structure, true);
  const torch::Tensor latent_nodes = masked.clone();  // latent discrete variables
  const torch::Tensor latent_discrete = latent_nodes.sum(1);  // (batch,)
  const int64_t most_latent = latent_discrete.max().item<int64_t>();
  const bool by_count = options.sampler == Sampler::adaptive && options.unmask_per_step > 0;
  const int64_t pass_steps =
      by_count ? std::max<int64_t>(1, (most_latent + options.unmask_per_step - 1) / options.unmask_per_step)
               : options.ddim_steps;
  // Revision: past the pass that decides every variable, remasking goes on until the model doubts
  // no decided value of an example (it is then settled and left alone), for as many steps again
  // at most. Only where no continuous entry follows the step grid.
  const bool revising = by_count && options.remask > 0 && !continuous;
  const int64_t steps = revising ? 2 * pass_steps : pass_steps;
  const std::vector<int64_t> grid = diffusion::ddim_timesteps(schedule.steps(), std::min(steps, schedule.steps()));
  const auto long_options = torch::TensorOptions().dtype(torch::kLong).device(x.device());
  const auto alpha_at = [&](int64_t step) {
    return diffusion::mask_alpha(mask_schedule, unit_time(torch::tensor(step), schedule.steps()))
        .item<double>();
  };
  // The network's time: the grid's, which the continuous entries' noise follows; on a graph of
  // discrete variables only, the time whose alpha is the fraction of latent variables still
  // decided, whatever order and pace the sampler unmasks at.
  const auto network_time = [&](int64_t step) {
    if (continuous) return torch::full({batch}, step, long_options);
    const torch::Tensor fraction_masked =
        masked.sum(1).to(torch::kDouble) / latent_discrete.clamp_min(1).to(torch::kDouble);
    const torch::Tensor time = diffusion::mask_time_of_alpha(mask_schedule, 1 - fraction_masked);
    const int64_t total = schedule.steps();
    return (time * total).ceil().sub(1).clamp(0, total - 1).to(torch::kLong);
  };
  torch::Tensor settled = torch::zeros({batch}, observed_nodes.options());
  for (size_t i = 0; i < grid.size(); ++i) {
    const bool last = i + 1 == grid.size();
    const torch::Tensor t = network_time(grid[i]);
    const torch::Tensor output = model(x, t);
    // Gaussian part: a DDIM step of the continuous entries (the discrete ones are rewritten below
    // from the state before the step).
    torch::Tensor next =
        last || !continuous
            ? output
            : diffusion::ddim_step(schedule, output, x, t, grid[i], grid[i + 1], options.ddim_eta,
                                   options.generator);
    next = torch::where(observed_entries, observed_values, next);
    if (discrete) {
      const bool remasking = options.remask > 0 && !last;
      const Proposals proposals = propose(structure, output, x, masked, options, confidence, remasking);
      if (remasking) {
        masked = remask_doubtful(masked, latent_nodes & ~settled.unsqueeze(1), proposals, options.remask);
      }
      if (revising) {
        settled = settled | ~masked.any(1);
        if (settled.all().item<bool>()) break;
      }
      const torch::Tensor unmask =
          last ? masked
               : step_unmask(masked, proposals, latent_discrete, options, by_count, alpha_at(grid[i]),
                             alpha_at(grid[i + 1]));
      masked = masked & ~unmask;
      next = write_discrete(structure, next, x, proposals, unmask, masked);
    }
    x = next;
    if (options.progress) options.progress(static_cast<int64_t>(i) + 1, static_cast<int64_t>(grid.size()));
  }
  return x;
}

}  // namespace structdiff::gsdm
