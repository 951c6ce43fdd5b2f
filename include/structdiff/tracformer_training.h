// Tracformer on text: batches of masked crops, the training task on the one loop, likelihoods,
// evaluation over fixed crops and masks, and CAR sampling.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "structdiff/text_data.h"
#include "structdiff/tracformer.h"
#include "structdiff/training_loop.h"

namespace structdiff::tracformer {

// What a training sequence hides: spans (Algorithm 1), the paper's mixture (Algorithm 2), or all
// positions (plain left-to-right language modelling, the AR baseline's objective).
enum class Masking { spans, mixed, all };
Masking parse_masking(const std::string& name);  // "spans" | "mixed" | "all"
std::string masking_name(Masking masking);

// A batch: true tokens (B, T) int64 (-1 outside the vocabulary) and the context C (B, T) bool.
// `targets` (B, T) bool, when defined, is a query set: the positions whose likelihood is asked,
// given C; positions in neither are unknown (neither seen nor scored). Undefined: every position
// outside C is a target.
// A batch may live on any device: the functions below move it to the model's, and return their
// results on the batch's device.
struct Batch {
  torch::Tensor tokens, given, targets;
  Batch to(torch::Device device) const;
};

// `batch` crops of `length` tokens at uniformly drawn offsets of `ids`, masked by `masking`.
Batch random_batch(const torch::Tensor& ids, int64_t batch, int64_t length, Masking masking,
                   const data::SpanMasking& spans, std::mt19937_64& rng);

// Per-position log-probabilities (natural log) of the true tokens under `mode`, and which
// positions are scored: targets inside the vocabulary. No gradient; model in eval mode.
// A query set (batch.targets defined) is scored by the left-to-right chain rule over its targets,
// log Pr(x_R | x_C) = sum_t log Pr(x_t | x_C, x_R<t), whatever `mode`: in one pass for the
// Tracformer architectures (the prefix encoder reads C and the targets, the suffix encoder C),
// one pass per target for bert; bart and ar, which read every preceding position, refuse a set
// with an unknown position before a target.
struct Scores {
  torch::Tensor log_probs;  // (B, T) float64, 0 where not scored
  torch::Tensor scored;     // (B, T) bool
};
Scores score(Tracformer& model, const Batch& batch, Mode mode);

// The training loss (Eq. 7 or 8 by the model's objective): the negative log-likelihood of the
// hidden tokens, summed over the batch and divided by the number of hidden tokens (the paper's
// Eq. 7 sums per sequence; dividing by the count keeps the scale fixed when the mixture's masked
// fraction varies).
torch::Tensor masked_nll(Tracformer& model, const Batch& batch, at::Generator* dropout);
// The training loop's parts of one step (train::LoopTask::loss_parts): part i is masked_nll over
// the rows parts[i] names, weighted by their hidden tokens, its dropout masks from its own
// generator (train::part_generators). Throws std::invalid_argument as masked_nll does when the
// batch hides nothing.
std::vector<train::LossPart> loss_parts(Tracformer model, const Batch& batch, at::Generator& noise,
                                        const std::vector<train::Shard>& parts);

struct TrainingOptions {
  train::LoopOptions loop = default_loop();
  int64_t batch = 32;
  Masking masking = Masking::spans;
  data::SpanMasking spans;
  int64_t validation_crops = 64;
  // The loop's defaults for a Tracformer: rate 1e-3, weight decay 0.1, 100 warm-up steps, cosine
  // decay, no EMA.
  static train::LoopOptions default_loop();
};

// Throws std::invalid_argument unless `train_ids` holds at least one crop of the block size.
void check_training_text(const torch::Tensor& train_ids, const Config& config);

// Trains `model` on `train_ids`, validating bits per hidden character of `ema_model` on fixed
// crops and masks of `validation_ids` (seeded by data_seed), through train::run_training.
train::LoopResult train_model(Tracformer model, Tracformer ema_model,
                              const torch::Tensor& train_ids, const torch::Tensor& validation_ids,
                              const TrainingOptions& options, const nlohmann::json& metadata,
                              uint64_t data_seed);

// ---- evaluation ------------------------------------------------------------------------------

// Which positions an evaluation hides in each crop.
struct EvalMasking {
  data::SpanMasking spans;  // used when ranges is empty
  // Fractions [a, b) of the crop, hidden as [round(a T), round(b T)); the paper's mask ranges.
  std::vector<std::pair<double, double>> ranges;
  // A query set instead: context and target fractions (as ranges; disjoint); the rest unknown.
  std::vector<std::pair<double, double>> query_context, query_targets;
};
// "0.25:0.75,0.9:1" -> ranges; throws std::invalid_argument naming the bad part.
std::vector<std::pair<double, double>> parse_ranges(const std::string& text);

// Crops of `length` tokens laid end to end from the start of `ids` (at most `max_crops`; one
// shorter crop when ids is shorter than length) with masks drawn from `seed` alone, so every
// model is scored on the same positions.
std::vector<Batch> evaluation_batches(const torch::Tensor& ids, int64_t length, int64_t max_crops,
                                      const EvalMasking& masking, uint64_t seed, int64_t batch);

struct EvalResult {
  double bits_per_char = 0;   // mean over scored positions
  int64_t masked_chars = 0;   // scored positions
  int64_t unknown_chars = 0;  // hidden positions whose character is outside the vocabulary
  int64_t crops = 0;
  std::vector<double> crop_bits;  // per crop: summed bits, for paired comparisons
  std::vector<int64_t> crop_chars;
};
EvalResult evaluate(Tracformer& model, const std::vector<Batch>& batches, Mode mode);

// ---- sampling --------------------------------------------------------------------------------

struct SamplingOptions {
  double temperature = 1.0;  // > 0
  double top_p = 1.0;        // in (0, 1]
  // Tracformer architectures: decode with the KV cache (App. E); false re-encodes the whole
  // sequence at every step (the same distribution, for timing and checks).
  bool cache = true;
};
// Fills the hidden positions of each row left to right, each drawn from Pr(x_t | x_C, x_<t)
// (the CAR chain rule; models trained for AC run in CAR input mode, bert reveals its draws as
// context). Probabilities in float64. Returns the filled tokens.
torch::Tensor infill(Tracformer& model, const Batch& batch, const SamplingOptions& options,
                     at::Generator& generator);
// log Pr(x_R | x_C) by the left-to-right chain rule: one pass for models that condition on the
// preceding tokens, one pass per hidden position for bert. (B) float64, natural log.
torch::Tensor chain_rule_log_likelihood(Tracformer& model, const Batch& batch);

}  // namespace structdiff::tracformer
