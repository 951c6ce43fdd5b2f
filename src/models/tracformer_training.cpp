// Tracformer on text: masked crops, the loss, training on the one loop, evaluation, sampling.
#include <cmath>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "structdiff/device.h"
#include "structdiff/enum_names.h"
#include "structdiff/random.h"
#include "structdiff/runtime.h"
#include "structdiff/tracformer_training.h"
#include "structdiff/training_loop.h"

namespace structdiff::tracformer {

namespace {
const auto kMaskingNames = enum_names<Masking>("masking", {
    {Masking::spans, "spans"},
    {Masking::mixed, "mixed"},
    {Masking::all, "all"},
});
}  // namespace

Masking parse_masking(const std::string& name) { return kMaskingNames.parse(name); }

std::string masking_name(Masking masking) { return kMaskingNames.name(masking); }

Batch random_batch(const torch::Tensor& ids, int64_t batch, int64_t length, Masking masking,
                   const data::SpanMasking& spans, std::mt19937_64& rng) {
  const int64_t n = ids.size(0);
  if (batch < 1 || length < 1 || n < length) {
    throw std::invalid_argument("random_batch: need batch >= 1 and a text of at least " +
                                std::to_string(length) + " characters, got " + std::to_string(n));
  }
  std::vector<torch::Tensor> tokens, hidden;
  for (int64_t b = 0; b < batch; ++b) {
    const auto offset =
        static_cast<int64_t>(data::uniform01(rng) * static_cast<double>(n - length + 1));
    tokens.push_back(ids.narrow(0, offset, length));
    hidden.push_back(masking == Masking::all     ? torch::ones({length}, torch::kBool)
                     : masking == Masking::mixed ? data::mixed_span_mask(length, spans, rng)
                                                 : data::span_mask(length, spans, rng));
  }
  return {torch::stack(tokens), torch::stack(hidden).logical_not(), torch::Tensor()};
}

Batch Batch::to(torch::Device device) const {
  return {tokens.to(device), given.to(device), targets.defined() ? targets.to(device) : targets};
}

namespace {

torch::Tensor true_token_log_probs(const torch::Tensor& logits, const torch::Tensor& tokens) {
  return torch::log_softmax(logits.to(torch::kDouble), -1)
      .gather(2, tokens.clamp_min(0).unsqueeze(2))
      .squeeze(2);
}

}  // namespace

Scores score(Tracformer& model, const Batch& given_batch, Mode mode) {
  torch::NoGradGuard no_grad;
  model->eval();
  const Batch batch = given_batch.to(device_of(*model));
  const torch::Device caller = given_batch.tokens.device();
  const bool query = batch.targets.defined();
  const torch::Tensor targets = query ? batch.targets : batch.given.logical_not();
  const torch::Tensor scored = targets & (batch.tokens >= 0);
  torch::Tensor log_probs;
  const Architecture architecture = model->config().architecture;
  if (!query) {
    log_probs = true_token_log_probs(model->forward(batch.tokens, batch.given, mode), batch.tokens);
  } else {
    if ((batch.given & batch.targets).any().item<bool>()) {
      throw std::invalid_argument("a query set's context and targets overlap");
    }
    if (has_prefix_encoder(architecture)) {
      log_probs = true_token_log_probs(
          model->forward_visible(batch.tokens, batch.given, batch.given | batch.targets),
          batch.tokens);
    } else if (architecture == Architecture::bert) {
      // Reveal the targets one position at a time.
      log_probs = torch::zeros(batch.tokens.sizes(), torch::kDouble);
      torch::Tensor given = batch.given.clone();
      for (int64_t t = 0; t < batch.tokens.size(1); ++t) {
        const torch::Tensor rows = batch.targets.select(1, t);
        if (!rows.any().item<bool>()) continue;
        log_probs.select(1, t).copy_(
            true_token_log_probs(model->forward(batch.tokens, given, Mode::ac), batch.tokens)
                .select(1, t));
        given.select(1, t).logical_or_(rows);
      }
    } else {
      // Position t reads every position before it: all must be known (context or target).
      const torch::Tensor known = batch.given | batch.targets;
      const torch::Tensor unknown_before =
          known.logical_not().to(torch::kLong).cumsum(1) > 0;  // an unknown at or before t
      if ((unknown_before & batch.targets).any().item<bool>()) {
        throw std::invalid_argument(
            architecture_name(architecture) +
            " reads every preceding position: a query set may not leave a position unknown "
            "before a target");
      }
      log_probs =
          true_token_log_probs(model->forward(batch.tokens, batch.given, Mode::car), batch.tokens);
    }
  }
  return {torch::where(scored, log_probs, torch::zeros_like(log_probs)).to(caller),
          scored.to(caller)};
}

namespace {
// What the training loss scores: hidden positions holding a character of the vocabulary.
torch::Tensor loss_targets(const Batch& batch) {
  return batch.given.logical_not() & (batch.tokens >= 0);
}
void refuse_batch_hiding_nothing() {
  throw std::invalid_argument("masked_nll: the batch hides no character of the vocabulary");
}
}  // namespace

torch::Tensor masked_nll(Tracformer& model, const Batch& given_batch, at::Generator* dropout) {
  const Batch batch = given_batch.to(device_of(*model));
  const torch::Tensor logits =
      model->forward(batch.tokens, batch.given, model->config().objective, dropout);
  const torch::Tensor targets = loss_targets(batch);
  if (!targets.any().item<bool>()) refuse_batch_hiding_nothing();
  return torch::nn::functional::cross_entropy(logits.index({targets}),
                                              batch.tokens.index({targets}));
}

std::vector<train::LossPart> loss_parts(Tracformer model, const Batch& batch, at::Generator& noise,
                                        const std::vector<train::Shard>& parts) {
  const int64_t rows = batch.tokens.size(0);
  const torch::Tensor hidden_per_row =
      loss_targets(batch).sum(1).to(torch::kCPU, torch::kDouble);
  const std::vector<at::Generator> dropout = train::part_generators(noise, parts.size());
  std::vector<train::LossPart> losses;
  double hidden = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const int64_t begin = parts[i].begin(rows), count = parts[i].end(rows) - begin;
    const double weight = hidden_per_row.narrow(0, begin, count).sum().item<double>();
    hidden += weight;
    const Batch part{batch.tokens.narrow(0, begin, count), batch.given.narrow(0, begin, count), {}};
    losses.push_back({weight, [model, part, generator = dropout[i]]() mutable {
                        return masked_nll(model, part, &generator);
                      }});
  }
  if (hidden == 0) refuse_batch_hiding_nothing();
  return losses;
}

void check_training_text(const torch::Tensor& train_ids, const Config& config) {
  if (train_ids.size(0) < config.block_size) {
    throw std::invalid_argument("the training text has " + std::to_string(train_ids.size(0)) +
                                " characters, fewer than the block size " +
                                std::to_string(config.block_size));
  }
}

train::LoopOptions TrainingOptions::default_loop() {
  train::LoopOptions loop;
  loop.learning_rate = 1e-3;
  loop.weight_decay = 0.1;
  loop.warmup_steps = 100;
  loop.decay = train::LearningRateDecay::cosine;
  loop.ema_decay = 0.0;
  return loop;
}

train::LoopResult train_model(Tracformer model, Tracformer ema_model,
                              const torch::Tensor& train_ids, const torch::Tensor& validation_ids,
                              const TrainingOptions& options, const nlohmann::json& metadata,
                              uint64_t data_seed) {
  const Config& config = model->config();
  data::check_span_masking(options.spans);
  if (options.batch < 1) throw std::invalid_argument("batch must be >= 1");
  check_training_text(train_ids, config);
  // Activations kept for the backward pass: about 40 floats per token and width unit in each of
  // the prefix encoder, suffix encoder and decoder layers.
  require_memory(40.0 * 4.0 * static_cast<double>(options.batch * config.block_size) *
                     static_cast<double>(config.d_model * 3 * config.layers),
                 "training at this batch, block size, width and depth");
  std::vector<Batch> validation;
  if (options.loop.validate_every > 0 && validation_ids.size(0) > 0) {
    validation =
        evaluation_batches(validation_ids, config.block_size, options.validation_crops,
                           EvalMasking{options.spans, {}, {}, {}}, data_seed + 1, options.batch);
  }
  train::LoopTask task;
  task.model = model.ptr().get();
  task.ema_model = ema_model.ptr().get();
  task.metadata = metadata;
  task.loss_parts = [&](int64_t, std::mt19937_64& rng, at::Generator& noise,
                        const std::vector<train::Shard>& parts) {
    return loss_parts(model,
                      random_batch(train_ids, options.batch, config.block_size, options.masking,
                                   options.spans, rng),
                      noise, parts);
  };
  if (!validation.empty()) {
    task.validate = [&]() -> nlohmann::json {
      const EvalResult result = evaluate(ema_model, validation, config.objective);
      return {{"validation_bits_per_char", result.bits_per_char},
              {"validation_chars", result.masked_chars}};
    };
  }
  return train::run_training(task, options.loop, data_seed);
}

// ---- evaluation ------------------------------------------------------------------------------

std::vector<std::pair<double, double>> parse_ranges(const std::string& text) {
  std::vector<std::pair<double, double>> ranges;
  size_t at = 0;
  while (at <= text.size()) {
    size_t end = text.find(',', at);
    if (end == std::string::npos) end = text.size();
    const std::string part = text.substr(at, end - at);
    const size_t colon = part.find(':');
    auto bad = [&](const std::string& why) {
      return std::invalid_argument("mask range '" + part + "' " + why +
                                   " (expected A:B with 0 <= A < B <= 1, e.g. 0.25:0.75)");
    };
    if (colon == std::string::npos) throw bad("has no ':'");
    double a = 0, b = 0;
    try {
      size_t used_a = 0, used_b = 0;
      a = std::stod(part.substr(0, colon), &used_a);
      b = std::stod(part.substr(colon + 1), &used_b);
      if (used_a != colon || used_b != part.size() - colon - 1) throw std::invalid_argument("");
    } catch (const std::exception&) {
      throw bad("is not two numbers");
    }
    if (!(a >= 0 && a < b && b <= 1)) throw bad("is out of order or outside [0, 1]");
    ranges.emplace_back(a, b);
    at = end + 1;
  }
  return ranges;
}

std::vector<Batch> evaluation_batches(const torch::Tensor& ids, int64_t length, int64_t max_crops,
                                      const EvalMasking& masking, uint64_t seed, int64_t batch) {
  const int64_t n = ids.size(0);
  if (n < 1) throw std::invalid_argument("evaluation text is empty");
  if (length < 1 || max_crops < 1 || batch < 1) {
    throw std::invalid_argument("evaluation needs length, crops and batch >= 1");
  }
  const int64_t crop_length = std::min(length, n);
  const int64_t crops = std::min(max_crops, std::max<int64_t>(1, n / crop_length));
  std::mt19937_64 rng(seed);
  std::vector<Batch> batches;
  std::vector<torch::Tensor> tokens, given, targets;
  for (int64_t c = 0; c < crops; ++c) {
    tokens.push_back(ids.narrow(0, c * crop_length, crop_length));
    auto fractions = [&](const std::vector<std::pair<double, double>>& ranges) {
      torch::Tensor selected = torch::zeros({crop_length}, torch::kBool);
      for (const auto& [a, b] : ranges) {
        const auto from = std::llround(a * static_cast<double>(crop_length));
        const auto to = std::llround(b * static_cast<double>(crop_length));
        selected.narrow(0, from, to - from).fill_(true);
      }
      return selected;
    };
    if (!masking.query_targets.empty()) {
      const torch::Tensor context = fractions(masking.query_context);
      const torch::Tensor query = fractions(masking.query_targets);
      if ((context & query).any().item<bool>()) {
        throw std::invalid_argument("the query set's context and target ranges overlap");
      }
      if (!query.any().item<bool>()) {
        throw std::invalid_argument("the query set's target ranges hold no position of a " +
                                    std::to_string(crop_length) + "-character crop");
      }
      given.push_back(context);
      targets.push_back(query);
    } else {
      const torch::Tensor hidden = masking.ranges.empty()
                                       ? data::span_mask(crop_length, masking.spans, rng)
                                       : fractions(masking.ranges);
      if (!hidden.any().item<bool>()) {
        throw std::invalid_argument("the mask ranges hide no position of a " +
                                    std::to_string(crop_length) + "-character crop");
      }
      given.push_back(hidden.logical_not());
    }
    if (static_cast<int64_t>(tokens.size()) == batch || c + 1 == crops) {
      batches.push_back({torch::stack(tokens), torch::stack(given),
                         targets.empty() ? torch::Tensor() : torch::stack(targets)});
      tokens.clear();
      given.clear();
      targets.clear();
    }
  }
  return batches;
}

EvalResult evaluate(Tracformer& model, const std::vector<Batch>& batches, Mode mode) {
  EvalResult result;
  double total_bits = 0;
  for (const Batch& batch : batches) {
    const Scores scores = score(model, batch, mode);
    const torch::Tensor bits = -scores.log_probs.sum(1) / std::log(2.0);
    const torch::Tensor chars = scores.scored.sum(1);
    for (int64_t b = 0; b < batch.tokens.size(0); ++b) {
      result.crop_bits.push_back(bits[b].item<double>());
      result.crop_chars.push_back(chars[b].item<int64_t>());
      total_bits += result.crop_bits.back();
      result.masked_chars += result.crop_chars.back();
    }
    const torch::Tensor targets =
        batch.targets.defined() ? batch.targets : batch.given.logical_not();
    result.unknown_chars += (targets & (batch.tokens < 0)).sum().item<int64_t>();
    result.crops += batch.tokens.size(0);
  }
  result.bits_per_char = result.masked_chars > 0
                             ? total_bits / static_cast<double>(result.masked_chars)
                             : std::nan("");
  return result;
}

// ---- sampling --------------------------------------------------------------------------------

namespace {

// One draw per row of `logits` (rows, V), in float64, with temperature and nucleus filtering.
torch::Tensor draw(const torch::Tensor& logits, const SamplingOptions& options,
                   at::Generator& generator) {
  torch::Tensor probs = random::tempered_softmax(logits.to(torch::kDouble), options.temperature);
  if (options.top_p < 1.0) {
    const auto [sorted, order] = probs.sort(-1, /*descending=*/true);
    // Keep a token while the mass before it is below top_p: the smallest set reaching top_p.
    const torch::Tensor keep = (sorted.cumsum(-1) - sorted) < options.top_p;
    probs = torch::zeros_like(probs).scatter(-1, order, sorted * keep);
  }
  return random::categorical(probs, generator);
}

}  // namespace

torch::Tensor infill(Tracformer& model, const Batch& given_batch, const SamplingOptions& options,
                     at::Generator& generator) {
  if (!(options.temperature > 0) || !std::isfinite(options.temperature)) {
    throw std::invalid_argument("temperature must be a finite number > 0, got " +
                                std::to_string(options.temperature));
  }
  if (!(options.top_p > 0 && options.top_p <= 1)) {
    throw std::invalid_argument("top-p must be in (0, 1], got " + std::to_string(options.top_p));
  }
  torch::NoGradGuard no_grad;
  model->eval();
  const Batch batch = given_batch.to(device_of(*model));
  const torch::Device caller = given_batch.tokens.device();
  if (options.cache && has_prefix_encoder(model->config().architecture)) {
    return model
        ->decode_cached(
            batch.tokens, batch.given,
            [&](int64_t, const torch::Tensor& logits) { return draw(logits, options, generator); })
        .to(caller);
  }
  // Models that read the preceding tokens see the draws there; bert sees them as context.
  const bool reveal = model->effective_mode(Mode::car) == Mode::ac;
  torch::Tensor tokens = batch.tokens.clone();
  torch::Tensor given = batch.given.clone();
  const torch::Tensor hidden = batch.given.logical_not();
  for (int64_t t = 0; t < tokens.size(1); ++t) {
    const torch::Tensor rows = hidden.select(1, t);
    if (!rows.any().item<bool>()) continue;
    const torch::Tensor logits = model->forward(tokens.clamp_min(0), given, Mode::car).select(1, t);
    const torch::Tensor drawn = draw(logits, options, generator);
    tokens.select(1, t).copy_(torch::where(rows, drawn, tokens.select(1, t)));
    if (reveal) given.select(1, t).logical_or_(rows);
  }
  return tokens.to(caller);
}

torch::Tensor chain_rule_log_likelihood(Tracformer& model, const Batch& batch) {
  return score(model, {batch.tokens, batch.given, batch.given.logical_not()}, Mode::car)
      .log_probs.sum(1);
}

}  // namespace structdiff::tracformer
