// `structdiff tracformer train|eval|infill`: character-level Tracformer and its baselines.
#include <cmath>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "cli/command.h"
#include "structdiff/tracformer_training.h"

namespace structdiff::cli {
namespace {

using tracformer::Tracformer;

const char* const kDefaultText = "data/kjv/kjv.txt";

// The span-masking options shared by train and eval.
void add_span_options(CLI::App& command, data::SpanMasking& spans) {
  command.add_option("--mask-ratio", spans.ratio, "Fraction of each crop hidden")
      ->check(fraction())
      ->capture_default_str();
  command.add_option("--span-mean", spans.mean, "Mean hidden span length")
      ->check(at_least(1))
      ->capture_default_str();
  command.add_option_function<std::string>(
      "--span-dist",
      [&spans](const std::string& name) {
        spans.distribution = data::parse_span_distribution(name);
      },
      "Span lengths: geometric or logistic (default geometric)");
  command.add_option("--span-std", spans.stddev, "Logistic span lengths' standard deviation")
      ->check(positive())
      ->capture_default_str();
}

torch::Tensor split_of(const data::TextSplits& splits, const std::string& name,
                       const std::u32string& whole, const data::CharVocabulary& vocabulary) {
  if (name == "all") return vocabulary.encode(whole);
  if (name == "train") return vocabulary.encode(splits.train);
  if (name == "validation") return vocabulary.encode(splits.validation);
  return vocabulary.encode(splits.test);
}

// ---- train -------------------------------------------------------------------------------------

struct TrainCommand {
  std::string text_path = kDefaultText;
  std::string architecture = "tracformer";
  std::string objective;  // "": the architecture's own
  std::string attention = "structured";
  std::string masking;  // "": all for ar, spans otherwise
  tracformer::Config config;
  tracformer::TrainingOptions training;
  std::string out_path;
};

void run_train(TrainCommand c, const GlobalOptions& global) {
  c.config.architecture = tracformer::parse_architecture(c.architecture);
  const bool bert = c.config.architecture == tracformer::Architecture::bert;
  c.config.objective =
      tracformer::parse_mode(c.objective.empty() ? (bert ? "ac" : "car") : c.objective);
  c.config.mechanism = parse_mechanism(c.attention);
  c.training.masking =
      tracformer::parse_masking(!c.masking.empty()                                      ? c.masking
                                : c.config.architecture == tracformer::Architecture::ar ? "all"
                                                                                        : "spans");
  data::check_span_masking(c.training.spans);
  train::check_loop_options(c.training);

  const std::u32string text = data::read_text_file(c.text_path);
  const data::TextSplits splits = data::split_text(text);
  const data::CharVocabulary vocabulary = data::CharVocabulary::of_text(splits.train);
  c.config.characters = vocabulary.characters();
  c.config.init_seed = global.seed;
  tracformer::check_config(c.config);
  const torch::Tensor train_ids = vocabulary.encode(splits.train);
  const torch::Tensor validation_ids = vocabulary.encode(splits.validation);
  tracformer::check_training_text(train_ids, c.config);  // before anything is printed
  Tracformer model(c.config);
  Tracformer averaged(c.config);
  model->to(global.device);
  averaged->to(global.device);
  std::printf(
      "%s (%s): %ld train / %ld validation / %ld test characters in %ld blocks, "
      "%ld characters in the vocabulary\n",
      c.text_path.c_str(), tracformer::architecture_name(c.config.architecture).c_str(),
      static_cast<long>(splits.train.size()), static_cast<long>(splits.validation.size()),
      static_cast<long>(splits.test.size()), static_cast<long>(splits.blocks),
      static_cast<long>(vocabulary.num_characters()));
  std::printf("%s, objective %s, on %s, %ld parameters (%ld outside the embedding)\n",
              tracformer::architecture_name(c.config.architecture).c_str(),
              tracformer::mode_name(c.config.objective).c_str(), global.device.str().c_str(),
              static_cast<long>(model->non_embedding_parameters() +
                                c.config.vocab_size() * c.config.d_model),
              static_cast<long>(model->non_embedding_parameters()));
  std::fflush(stdout);

  nlohmann::json training = {
      {"text", c.text_path},
      {"batch", c.training.batch},
      {"masking", tracformer::masking_name(c.training.masking)},
      {"mask_ratio", c.training.spans.ratio},
      {"span_mean", c.training.spans.mean},
      {"span_distribution", c.training.spans.distribution == data::SpanDistribution::geometric
                                ? "geometric"
                                : "logistic"},
      {"span_std", c.training.spans.stddev},
      {"lr", c.training.learning_rate},
      {"weight_decay", c.training.weight_decay},
      {"warmup", c.training.warmup_steps},
      {"lr_decay", c.training.decay == train::LearningRateDecay::cosine ? "cosine" : "constant"}};
  // What a resumed run must share with its checkpoint. The number of steps belongs to it only
  // under cosine decay, whose rates depend on it: a constant-rate run can go on to more steps and
  // follow the same path as one run to that number from the start.
  nlohmann::json metadata = {
      {"kind", "tracformer-run"}, {"config", c.config}, {"training", training}};
  if (c.training.decay == train::LearningRateDecay::cosine) {
    metadata["training"]["train_steps"] = c.training.steps;
  }
  training["train_steps"] = c.training.steps;
  c.training.progress_label = "tracformer train";
  const train::LoopResult result = tracformer::train_model(
      model, averaged, train_ids, validation_ids, c.training, metadata, global.seed);
  tracformer::save_model(c.out_path, averaged,
                         {{"training", training},
                          {"steps", result.steps_done},
                          {"train_seconds", result.seconds},
                          {"final_loss", result.final_loss}});
  print_training_summary(result, c.out_path);
}

// ---- eval --------------------------------------------------------------------------------------

struct EvalCommand {
  std::string model_path;
  std::string text_path;
  std::string split = "all";
  std::string mode;  // "": the model's objective
  std::string ranges;
  std::string query_set;  // "CONTEXT/TARGETS" fraction ranges
  int64_t length = 0;     // 0: the model's block size
  int64_t crops = 256;
  int64_t batch = 32;
  data::SpanMasking spans;
  std::string json_path;
};

void run_eval(const EvalCommand& c, const GlobalOptions& global) {
  tracformer::EvalMasking masking;
  masking.spans = c.spans;
  data::check_span_masking(masking.spans);
  if (!c.ranges.empty()) masking.ranges = tracformer::parse_ranges(c.ranges);
  if (!c.query_set.empty()) {
    const size_t slash = c.query_set.find('/');
    if (slash == std::string::npos || !c.ranges.empty()) {
      throw std::invalid_argument(
          "--query-set takes CONTEXT/TARGETS fraction ranges, e.g. 0:0.25,0.75:1/0.25:0.5 "
          "(and replaces --ranges)");
    }
    if (slash > 0) masking.query_context = tracformer::parse_ranges(c.query_set.substr(0, slash));
    masking.query_targets = tracformer::parse_ranges(c.query_set.substr(slash + 1));
  }
  Tracformer model = tracformer::load_model(c.model_path);
  model->to(global.device);
  const tracformer::Config& config = model->config();
  const tracformer::Mode mode = c.mode.empty() ? config.objective : tracformer::parse_mode(c.mode);
  const std::u32string text = data::read_text_file(c.text_path);
  const data::CharVocabulary vocabulary(config.characters);
  const torch::Tensor ids = split_of(c.split == "all" ? data::TextSplits{} : data::split_text(text),
                                     c.split, text, vocabulary);
  if (ids.size(0) == 0)
    throw std::invalid_argument("the " + c.split + " split of " + c.text_path + " is empty");
  const int64_t length = c.length > 0 ? c.length : config.block_size;
  const std::vector<tracformer::Batch> batches =
      tracformer::evaluation_batches(ids, length, c.crops, masking, global.seed, c.batch);
  const tracformer::EvalResult result = tracformer::evaluate(model, batches, mode);
  if (result.masked_chars == 0) {
    throw std::runtime_error("no hidden character of " + c.text_path +
                             " is in the model's vocabulary (" +
                             std::to_string(result.unknown_chars) +
                             " outside it): nothing to score");
  }
  const bool query = !masking.query_targets.empty();
  const std::string used = query ? "query-set" : tracformer::mode_name(model->effective_mode(mode));
  std::printf(
      "%s on %s (%s): %.4f bits per character over %ld hidden characters in %ld crops "
      "(%s: %s; %ld hidden characters outside the vocabulary, not scored)\n",
      c.model_path.c_str(), c.text_path.c_str(), c.split.c_str(), result.bits_per_char,
      static_cast<long>(result.masked_chars), static_cast<long>(result.crops), used.c_str(),
      used == "ac" ? "marginal pseudo-likelihood" : "exact chain rule",
      static_cast<long>(result.unknown_chars));
  if (!c.json_path.empty()) {
    write_json_file(c.json_path, {{"model", c.model_path},
                                  {"text", c.text_path},
                                  {"split", c.split},
                                  {"mode", used},
                                  {"length", length},
                                  {"mask_ratio", masking.spans.ratio},
                                  {"span_mean", masking.spans.mean},
                                  {"ranges", c.ranges},
                                  {"query_set", c.query_set},
                                  {"seed", global.seed},
                                  {"bits_per_char", result.bits_per_char},
                                  {"masked_chars", result.masked_chars},
                                  {"unknown_chars", result.unknown_chars},
                                  {"crops", result.crops},
                                  {"crop_bits", result.crop_bits},
                                  {"crop_chars", result.crop_chars}});
  }
}

// ---- infill ------------------------------------------------------------------------------------

struct InfillCommand {
  std::string model_path;
  std::string text;
  std::string mask;  // character ranges "a:b,c:d"; "": the '_' characters
  int64_t samples = 1;
  tracformer::SamplingOptions sampling;
};

void run_infill(const InfillCommand& c, const GlobalOptions& global) {
  Tracformer model = tracformer::load_model(c.model_path);
  model->to(global.device);
  const tracformer::Config& config = model->config();
  const std::u32string text = data::decode_utf8(c.text, "the text to fill");
  const int64_t n = static_cast<int64_t>(text.size());
  if (n == 0) throw std::invalid_argument("the text to fill is empty");
  const int64_t max_length = 16 * config.block_size;
  if (n > max_length) {
    throw std::invalid_argument("the text has " + std::to_string(n) + " characters; at most " +
                                std::to_string(max_length) + " (16 x the model's block size)");
  }
  torch::Tensor hidden = torch::zeros({n}, torch::kBool);
  if (c.mask.empty()) {
    for (int64_t i = 0; i < n; ++i) hidden[i] = text[i] == U'_';
  } else {
    size_t at = 0;
    while (at <= c.mask.size()) {
      size_t end = c.mask.find(',', at);
      if (end == std::string::npos) end = c.mask.size();
      const std::string part = c.mask.substr(at, end - at);
      long long a = -1, b = -1;
      char tail = 0;
      if (std::sscanf(part.c_str(), "%lld:%lld%c", &a, &b, &tail) != 2 || a < 0 || b <= a ||
          b > n) {
        throw std::invalid_argument("--mask range '" + part + "' is not A:B with 0 <= A < B <= " +
                                    std::to_string(n) + " (character positions, B excluded)");
      }
      hidden.narrow(0, a, b - a).fill_(true);
      at = end + 1;
    }
  }
  const int64_t num_hidden = hidden.sum().item<int64_t>();
  if (num_hidden == 0) {
    throw std::invalid_argument(
        "nothing to fill: mark each character to fill with '_' or give --mask");
  }
  const data::CharVocabulary vocabulary(config.characters);
  torch::Tensor tokens = vocabulary.encode(text);
  tokens.masked_fill_(hidden, 0);
  tracformer::Batch batch{tokens.unsqueeze(0).repeat({c.samples, 1}),
                          hidden.logical_not().unsqueeze(0).repeat({c.samples, 1})};
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(global.seed);
  const torch::Tensor filled = tracformer::infill(model, batch, c.sampling, generator);
  const torch::Tensor log_likelihood =
      tracformer::chain_rule_log_likelihood(model, {filled, batch.given});
  for (int64_t s = 0; s < c.samples; ++s) {
    // Context characters outside the vocabulary print as given, not as their <MASK> reading.
    std::u32string out = text;
    const std::u32string drawn = data::decode_utf8(vocabulary.decode(filled[s]), "a sample");
    for (int64_t i = 0; i < n; ++i) {
      if (hidden[i].item<bool>()) out[i] = drawn[i];
    }
    const double nats = log_likelihood[s].item<double>();
    std::printf("%s\n  log-likelihood %.3f nats (%.3f bits per filled character, %ld characters)\n",
                data::encode_utf8(out).c_str(), nats, -nats / std::log(2.0) / num_hidden,
                static_cast<long>(num_hidden));
  }
}

}  // namespace

void register_tracformer(CLI::App& app, const GlobalOptions& global, Action& action) {
  CLI::App* command = app.add_subcommand(
      "tracformer", "Tracformer: infilling and exact conditional likelihoods for any context");
  command->require_subcommand(1);

  auto t = std::make_shared<TrainCommand>();
  CLI::App* train = command->add_subcommand("train", "Train on a UTF-8 text, save the model");
  train->add_option("--text", t->text_path, "UTF-8 text (split by blank-line blocks)")
      ->check(CLI::ExistingFile)
      ->capture_default_str();
  train
      ->add_option("--architecture", t->architecture,
                   "tracformer, tracformer-dense-encoder, bart, bert or ar")
      ->capture_default_str();
  train->add_option("--objective", t->objective, "car or ac (default: car; ac for bert)");
  train->add_option("--attention", t->attention, "structured (the core picks sparse or masked dense by the pattern), sparse, dense or gather")->capture_default_str();
  train->add_option("--d-model", t->config.d_model, "Width")->capture_default_str();
  train->add_option("--heads", t->config.heads, "Attention heads")->capture_default_str();
  train->add_option("--layers", t->config.layers, "Encoder layers (and tracformer decoder layers)")
      ->capture_default_str();
  train
      ->add_option("--decoder-layers", t->config.decoder_layers,
                   "bart decoder layers (0: --layers)")
      ->capture_default_str();
  train->add_option("--n-max", t->config.n_max, "Keys per tracformer encoder row")
      ->capture_default_str();
  train->add_option("--block-size", t->config.block_size, "Training crop length")
      ->capture_default_str();
  train->add_option("--dropout", t->config.dropout, "Dropout")->capture_default_str();
  train->add_option("--batch", t->training.batch, "Crops per step")
      ->check(positive())
      ->capture_default_str();
  train->add_option("--masking", t->masking,
                    "spans, mixed or all (default: all for ar, else spans)");
  add_span_options(*train, t->training.spans);
  train->add_option("--validation-crops", t->training.validation_crops, "Validation crops")
      ->check(positive())
      ->capture_default_str();
  add_training_loop_options(*train, t->training);
  train->add_option("--out", t->out_path, "Model file to write")
      ->check(writable_file())
      ->required();
  train->callback([t, &global, &action] { action = [t, &global] { run_train(*t, global); }; });

  auto e = std::make_shared<EvalCommand>();
  CLI::App* evaluate = command->add_subcommand(
      "eval", "Bits per character on hidden positions of fixed crops (same masks for every model)");
  evaluate->add_option("--model", e->model_path, "Model file")
      ->check(CLI::ExistingFile)
      ->required();
  evaluate->add_option("--text", e->text_path, "UTF-8 text")->required()->check(CLI::ExistingFile);
  evaluate
      ->add_option("--split", e->split, "all, train, validation or test (blocks as in training)")
      ->check(CLI::IsMember({"all", "train", "validation", "test"}))
      ->capture_default_str();
  evaluate->add_option("--mode", e->mode, "car or ac (default: the model's objective)")
      ->check(CLI::IsMember({"car", "ac"}));
  evaluate->add_option("--length", e->length, "Crop length (default: the model's block size)")
      ->check(non_negative());
  evaluate->add_option("--crops", e->crops, "Most crops")->check(positive())->capture_default_str();
  evaluate->add_option("--batch", e->batch, "Crops per pass")
      ->check(positive())
      ->capture_default_str();
  add_span_options(*evaluate, e->spans);
  evaluate->add_option("--ranges", e->ranges,
                       "Hide fixed fractions of every crop instead of spans, e.g. 0.25:0.75");
  evaluate->add_option("--query-set", e->query_set,
                       "Exact log Pr(targets | context) in one pass: CONTEXT/TARGETS fraction "
                       "ranges of each crop, e.g. 0:0.25,0.75:1/0.25:0.5 (the rest unknown)");
  evaluate->add_option("--json", e->json_path, "Write the results as JSON")->check(writable_file());
  evaluate->callback([e, &global, &action] { action = [e, &global] { run_eval(*e, global); }; });

  auto f = std::make_shared<InfillCommand>();
  CLI::App* infill = command->add_subcommand(
      "infill", "Fill the '_' characters of a text (one character each), left to right");
  infill->add_option("--model", f->model_path, "Model file")->check(CLI::ExistingFile)->required();
  infill->add_option("text", f->text, "Text with '_' where characters are to be filled")
      ->required();
  infill->add_option("--mask", f->mask, "Fill these character ranges instead, e.g. 3:10,20:25");
  infill->add_option("--samples", f->samples, "Samples to draw")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  infill->add_option("--temperature", f->sampling.temperature, "Sampling temperature (> 0)")
      ->capture_default_str();
  infill->add_option("--top-p", f->sampling.top_p, "Nucleus mass, in (0, 1]")
      ->capture_default_str();
  infill->add_flag("!--no-cache", f->sampling.cache,
                   "Re-encode at every step instead of the KV cache (same distribution)");
  infill->callback([f, &global, &action] { action = [f, &global] { run_infill(*f, global); }; });
}

}  // namespace structdiff::cli
