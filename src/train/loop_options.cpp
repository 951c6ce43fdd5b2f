#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>
#include <string>

#include "structdiff/enum_names.h"
#include "structdiff/loop_options.h"

namespace structdiff::train {

namespace {
const auto kDecayNames = enum_names<LearningRateDecay>("learning-rate decay", {
    {LearningRateDecay::constant, "constant"},
    {LearningRateDecay::cosine, "cosine"},
});
}  // namespace

LearningRateDecay parse_learning_rate_decay(const std::string& name) { return kDecayNames.parse(name); }

std::vector<std::string> learning_rate_decay_names() { return kDecayNames.choices(); }

std::string learning_rate_decay_name(LearningRateDecay decay) { return kDecayNames.name(decay); }

double learning_rate_at(double base, LearningRateDecay decay, int64_t warmup_steps, int64_t step,
                        int64_t total_steps) {
  double rate = base;
  if (step < warmup_steps) rate *= static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  if (decay == LearningRateDecay::cosine && total_steps > 0) {
    const double progress = std::min(1.0, static_cast<double>(step) / static_cast<double>(total_steps));
    rate *= 0.5 * (1.0 + std::cos(M_PI * progress));
  }
  return rate;
}

void check_loop_options(const LoopOptions& o) {
  auto fail = [](const std::string& option, const std::string& accepted, double value) {
    std::ostringstream text;
    text << option << " must be " << accepted << ", got " << value;
    throw std::invalid_argument(text.str());
  };
  if (o.steps < 1) fail("--train-steps", ">= 1", static_cast<double>(o.steps));
  if (!(std::isfinite(o.learning_rate) && o.learning_rate > 0)) fail("--lr", "a finite number > 0", o.learning_rate);
  if (!(std::isfinite(o.weight_decay) && o.weight_decay >= 0)) {
    fail("--weight-decay", "a finite number >= 0", o.weight_decay);
  }
  if (o.warmup_steps < 0) fail("--warmup", ">= 0", static_cast<double>(o.warmup_steps));
  // --clip 0 would freeze training, a negative limit would flip every gradient.
  if (!(o.clip_norm > 0)) fail("--clip", "a number > 0 (inf: no clipping)", o.clip_norm);
  if (!(o.ema_decay >= 0 && o.ema_decay < 1)) fail("--ema", "in [0, 1)", o.ema_decay);
  if (o.validate_every < 0) fail("--validate-every", ">= 0", static_cast<double>(o.validate_every));
  if (o.checkpoint_every < 0) fail("--checkpoint-every", ">= 0", static_cast<double>(o.checkpoint_every));
  if (!(std::isfinite(o.max_seconds) && o.max_seconds >= 0)) {
    fail("--max-minutes", "a finite number >= 0", o.max_seconds / 60.0);
  }
  if (o.checkpoint_path.empty() && (o.resume || o.checkpoint_every > 0)) {
    throw std::invalid_argument(std::string(o.resume ? "--resume" : "--checkpoint-every") +
                                " needs --checkpoint FILE");
  }
}

LoopOptions with_choices(LoopOptions options, const LoopChoices& choices) {
  options.steps = choices.steps.value_or(options.steps);
  options.learning_rate = choices.learning_rate.value_or(options.learning_rate);
  options.clip_norm = choices.clip_norm.value_or(options.clip_norm);
  options.validate_every = choices.validate_every.value_or(options.validate_every);
  return options;
}

}  // namespace structdiff::train
