#include "structdiff/tracformer_runs.h"

#include <cmath>
#include <cstdio>
#include <stdexcept>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "structdiff/loop_options.h"
#include "structdiff/text_data.h"

namespace structdiff::tracformer {
namespace {

// The run's settings as the model file and a resumed run's checkpoint keep them.
nlohmann::json training_record(const std::string& text_path, const TrainingOptions& training) {
  return {{"text", text_path},
          {"batch", training.batch},
          {"masking", masking_name(training.masking)},
          {"mask_ratio", training.spans.ratio},
          {"span_mean", training.spans.mean},
          {"span_distribution",
           training.spans.distribution == data::SpanDistribution::geometric ? "geometric" : "logistic"},
          {"span_std", training.spans.stddev},
          {"lr", training.loop.learning_rate},
          {"weight_decay", training.loop.weight_decay},
          {"warmup", training.loop.warmup_steps},
          {"lr_decay", training.loop.decay == train::LearningRateDecay::cosine ? "cosine" : "constant"}};
}

void print_what_trains(const TrainRequest& request, const Config& config, const data::TextSplits& splits,
                       const data::CharVocabulary& vocabulary, Tracformer& model) {
  std::printf(
      "%s (%s): %ld train / %ld validation / %ld test characters in %ld blocks, "
      "%ld characters in the vocabulary\n",
      request.text_path.c_str(), architecture_name(config.architecture).c_str(),
      static_cast<long>(splits.train.size()), static_cast<long>(splits.validation.size()),
      static_cast<long>(splits.test.size()), static_cast<long>(splits.blocks),
      static_cast<long>(vocabulary.num_characters()));
  std::printf("%s, objective %s, on %s, %ld parameters (%ld outside the embedding)\n",
              architecture_name(config.architecture).c_str(), mode_name(config.objective).c_str(),
              request.device.str().c_str(),
              static_cast<long>(model->non_embedding_parameters() + config.vocab_size() * config.d_model),
              static_cast<long>(model->non_embedding_parameters()));
  std::fflush(stdout);
}

torch::Tensor split_of(const std::string& name, const std::u32string& whole,
                       const data::CharVocabulary& vocabulary) {
  if (name == "all") return vocabulary.encode(whole);
  const data::TextSplits splits = data::split_text(whole);
  if (name == "train") return vocabulary.encode(splits.train);
  if (name == "validation") return vocabulary.encode(splits.validation);
  if (name == "test") return vocabulary.encode(splits.test);
  throw std::invalid_argument("unknown split '" + name + "' (choose all, train, validation, test)");
}

EvalMasking eval_masking(const TextEvalRequest& request) {
  EvalMasking masking;
  masking.spans = request.spans;
  data::check_span_masking(masking.spans);
  if (!request.ranges.empty()) masking.ranges = parse_ranges(request.ranges);
  if (request.query_set.empty()) return masking;
  const size_t slash = request.query_set.find('/');
  if (slash == std::string::npos || !request.ranges.empty()) {
    throw std::invalid_argument(
        "--query-set takes CONTEXT/TARGETS fraction ranges, e.g. 0:0.25,0.75:1/0.25:0.5 "
        "(and replaces --ranges)");
  }
  if (slash > 0) masking.query_context = parse_ranges(request.query_set.substr(0, slash));
  masking.query_targets = parse_ranges(request.query_set.substr(slash + 1));
  return masking;
}

// The characters to fill: the '_' ones, or the "A:B,C:D" ranges of `mask`.
torch::Tensor hidden_positions(const std::u32string& text, const std::string& mask) {
  const int64_t n = static_cast<int64_t>(text.size());
  torch::Tensor hidden = torch::zeros({n}, torch::kBool);
  if (mask.empty()) {
    for (int64_t i = 0; i < n; ++i) hidden[i] = text[i] == U'_';
    return hidden;
  }
  for (size_t at = 0; at <= mask.size();) {
    size_t end = mask.find(',', at);
    if (end == std::string::npos) end = mask.size();
    const std::string part = mask.substr(at, end - at);
    long long a = -1, b = -1;
    char tail = 0;
    if (std::sscanf(part.c_str(), "%lld:%lld%c", &a, &b, &tail) != 2 || a < 0 || b <= a || b > n) {
      throw std::invalid_argument("--mask range '" + part + "' is not A:B with 0 <= A < B <= " +
                                  std::to_string(n) + " (character positions, B excluded)");
    }
    hidden.narrow(0, a, b - a).fill_(true);
    at = end + 1;
  }
  return hidden;
}

}  // namespace

TrainReport train_on_text(const TrainRequest& request) {
  Config config = request.config;
  const bool bert = config.architecture == Architecture::bert;
  config.objective = request.objective.value_or(bert ? Mode::ac : Mode::car);
  TrainingOptions training = request.training;
  training.masking = request.masking.value_or(config.architecture == Architecture::ar ? Masking::all
                                                                                      : Masking::spans);
  data::check_span_masking(training.spans);
  train::check_loop_options(training.loop);

  const std::u32string text = data::read_text_file(request.text_path);
  const data::TextSplits splits = data::split_text(text);
  const data::CharVocabulary vocabulary = data::CharVocabulary::of_text(splits.train);
  config.characters = vocabulary.characters();
  config.init_seed = request.seed;
  check_config(config);
  const torch::Tensor train_ids = vocabulary.encode(splits.train);
  const torch::Tensor validation_ids = vocabulary.encode(splits.validation);
  check_training_text(train_ids, config);  // before anything is printed
  Tracformer model(config);
  TrainReport report{{}, Tracformer(config), training_record(request.text_path, training)};
  model->to(request.device);
  report.averaged->to(request.device);
  print_what_trains(request, config, splits, vocabulary, model);

  // What a resumed run must share with its checkpoint. The number of steps belongs to it only
  // under cosine decay, whose rates depend on it: a constant-rate run can go on to more steps and
  // follow the same path as one run to that number from the start.
  nlohmann::json run = {{"kind", "tracformer-run"}, {"config", config}, {"training", report.metadata}};
  if (training.loop.decay == train::LearningRateDecay::cosine) {
    run["training"]["train_steps"] = training.loop.steps;
  }
  report.metadata["train_steps"] = training.loop.steps;
  training.loop.progress_label = "tracformer train";
  report.result = train_model(model, report.averaged, train_ids, validation_ids, training, run, request.seed);
  report.metadata = {{"training", report.metadata},
                     {"steps", report.result.steps_done},
                     {"train_seconds", report.result.seconds},
                     {"final_loss", report.result.final_loss}};
  return report;
}

TextEvalReport evaluate_text(const TextEvalRequest& request) {
  TextEvalReport report;
  report.masking = eval_masking(request);
  Tracformer model = load_model(request.model_path);
  model->to(request.device);
  const Config& config = model->config();
  const Mode mode = request.mode.value_or(config.objective);
  const std::u32string text = data::read_text_file(request.text_path);
  const data::CharVocabulary vocabulary(config.characters);
  const torch::Tensor ids = split_of(request.split, text, vocabulary);
  if (ids.size(0) == 0) {
    throw std::invalid_argument("the " + request.split + " split of " + request.text_path + " is empty");
  }
  if (request.length > 16 * config.block_size) {
    throw std::invalid_argument("--length " + std::to_string(request.length) + " is longer than " +
                                std::to_string(16 * config.block_size) + " (16 x the model's block size)");
  }
  report.length = request.length > 0 ? request.length : config.block_size;
  const std::vector<Batch> batches = evaluation_batches(ids, report.length, request.crops, report.masking,
                                                        request.seed, request.batch);
  report.result = evaluate(model, batches, mode);
  if (report.result.masked_chars == 0) {
    throw std::runtime_error("no hidden character of " + request.text_path +
                             " is in the model's vocabulary (" +
                             std::to_string(report.result.unknown_chars) + " outside it): nothing to score");
  }
  report.scored_as = report.masking.query_targets.empty() ? mode_name(model->effective_mode(mode)) : "query-set";
  return report;
}

nlohmann::json eval_record(const TextEvalRequest& request, const TextEvalReport& report) {
  const EvalResult& result = report.result;
  return {{"model", request.model_path},
          {"text", request.text_path},
          {"split", request.split},
          {"mode", report.scored_as},
          {"length", report.length},
          {"mask_ratio", report.masking.spans.ratio},
          {"span_mean", report.masking.spans.mean},
          {"ranges", request.ranges},
          {"query_set", request.query_set},
          {"seed", request.seed},
          {"bits_per_char", result.bits_per_char},
          {"masked_chars", result.masked_chars},
          {"unknown_chars", result.unknown_chars},
          {"crops", result.crops},
          {"crop_bits", result.crop_bits},
          {"crop_chars", result.crop_chars}};
}

InfillReport infill_text(const InfillRequest& request) {
  Tracformer model = load_model(request.model_path);
  model->to(request.device);
  const Config& config = model->config();
  const std::u32string text = data::decode_utf8(request.text, "the text to fill");
  const int64_t n = static_cast<int64_t>(text.size());
  if (n == 0) throw std::invalid_argument("the text to fill is empty");
  const int64_t max_length = 16 * config.block_size;
  if (n > max_length) {
    throw std::invalid_argument("the text has " + std::to_string(n) + " characters; at most " +
                                std::to_string(max_length) + " (16 x the model's block size)");
  }
  const torch::Tensor hidden = hidden_positions(text, request.mask);
  InfillReport report;
  report.hidden = hidden.sum().item<int64_t>();
  if (report.hidden == 0) {
    throw std::invalid_argument("nothing to fill: mark each character to fill with '_' or give --mask");
  }
  const data::CharVocabulary vocabulary(config.characters);
  torch::Tensor tokens = vocabulary.encode(text);
  std::u32string unknown;
  for (int64_t i = 0; i < n; ++i) {
    if (hidden[i].item<bool>() || vocabulary.id(text[i]) >= 0) continue;
    ++report.unknown_context;
    if (unknown.find(text[i]) == std::u32string::npos) unknown += text[i];
  }
  report.unknown_characters = data::encode_utf8(unknown);
  tokens.masked_fill_(hidden, 0);
  const Batch batch{tokens.unsqueeze(0).repeat({request.samples, 1}),
                    hidden.logical_not().unsqueeze(0).repeat({request.samples, 1})};
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(request.seed);
  const torch::Tensor filled = infill(model, batch, request.sampling, generator);
  const torch::Tensor log_likelihood = chain_rule_log_likelihood(model, {filled, batch.given});
  for (int64_t s = 0; s < request.samples; ++s) {
    // Context characters outside the vocabulary print as given, not as their <MASK> reading.
    std::u32string out = text;
    const std::u32string drawn = data::decode_utf8(vocabulary.decode(filled[s]), "a sample");
    for (int64_t i = 0; i < n; ++i) {
      if (hidden[i].item<bool>()) out[i] = drawn[i];
    }
    report.samples.push_back({data::encode_utf8(out), log_likelihood[s].item<double>()});
  }
  return report;
}

}  // namespace structdiff::tracformer
