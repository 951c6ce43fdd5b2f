// `structdiff unn train|eval|generate`: undirected neural networks, trained in one direction or
// both and run in either, with any schedule, from one model file.
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "cli/command.h"
#include "cli/output_policy.h"
#include "structdiff/attention_unn.h"
#include "structdiff/conv_unn.h"
#include "structdiff/ddpm.h"
#include "structdiff/image_metrics.h"
#include "structdiff/images.h"
#include "structdiff/model_tensors.h"
#include "structdiff/number_sequences.h"
#include "structdiff/treebank.h"
#include "structdiff/unn_parser.h"

namespace structdiff::cli {
namespace {

// The task names of the CLI and the dataset each reads.
std::string task_dataset(const std::string& task) {
  return task == "fashion-conv" ? "fashion-mnist" : "mnist";
}

struct TrainCommand {
  std::string task = "mnist-conv";
  std::string data_dir;
  std::string out_path;
  std::string schedule = "forward";
  std::string generate_schedule = "forward-backward";
  unn::ConvUnnConfig config;
  bool untied = false;
  int64_t dev_size = 0;  // 0: 1,000 for the MNIST subset, 10,000 for Fashion-MNIST and sequences
  unn::ConvUnnTraining training;
  unn::AttentionUnnConfig attention;  // the attention task's own settings
  bool control = false;               // parse: the control treebank (heads independent of words)
  bool jacobi = false;                // parse: H and M updated together
  uint64_t treebank_seed = 1;         // parse
  std::string treebank;               // parse: a committed UD treebank ("": the synthetic one)
  CLI::App* command = nullptr;        // to tell given options from defaults
};

// Refuses options that belong to other tasks, naming them.
void reject_options(const TrainCommand& c, const std::vector<std::string>& options,
                    const std::string& owners) {
  for (const std::string& option : options) {
    if (c.command->count(option) > 0) {
      throw std::invalid_argument(option + " applies to " + owners + " only");
    }
  }
}

const std::vector<std::string> kConvOnly = {"--gamma", "--untied", "--dropout",
                                            "--generate-schedule", "--data-dir"};
const std::vector<std::string> kAttentionOnly = {"--d-model", "--random-iterations"};
const std::vector<std::string> kParseOnly = {"--control", "--jacobi", "--treebank-seed",
                                             "--treebank"};
const std::vector<std::string> kSyntheticTreebankOnly = {"--control", "--treebank-seed"};

struct EvalCommand {
  std::string model_path, json_path, data_dir;
  int64_t iterations = 0;  // 0: the model's
  std::string schedule;    // "": the model's
  int64_t energy_examples = 16;
};

struct GenerateCommand {
  std::string model_path, out_path, json_path, classifier_path;
  int64_t label = -1;      // -1: every class
  int64_t iterations = 0;  // 0: the model's
  std::string schedule;    // "": the model's
};

int64_t default_dev_size(const std::string& dataset) { return dataset == "mnist" ? 1000 : 10000; }

// The attention task: the authors' settings where the conv task's defaults would differ.
void run_train_attention(TrainCommand c, const GlobalOptions& global) {
  auto given = [&](const char* option) { return c.command->count(option) > 0; };
  reject_options(c, kConvOnly, "the conv tasks");
  reject_options(c, kParseOnly, "the parse task");
  unn::AttentionUnnTraining training;
  training.loop = c.training.loop;
  if (!given("--lr")) training.loop.learning_rate = 1e-4;
  if (!given("--clip")) training.loop.clip_norm = 10;
  if (!given("--train-steps")) training.loop.steps = 150000;
  if (!given("--validate-every")) training.loop.validate_every = 1000;
  training.batch_size = given("--batch") ? c.training.batch_size : 256;
  training.dev_size = c.dev_size > 0 ? c.dev_size : 10000;
  training.seed = global.seed;
  training.loop.progress_label = "unn attention";
  c.attention.iterations = c.config.iterations;
  c.attention.schedule = unn::parse_schedule(c.schedule);
  c.attention.init_seed = global.seed;
  unn::check_config(c.attention);
  const data::NumberSequenceSplit split = data::generate_number_sequence_split();
  unn::AttentionUnn model(c.attention);
  const int64_t parameters = train::parameter_count(*model);
  std::printf(
      "undirected attention on number sequences: %ld training (%ld held out for "
      "selection), %ld test sequences; d %ld, %ld parameters; k = %s, %s order\n",
      static_cast<long>(split.train.size() - training.dev_size),
      static_cast<long>(training.dev_size), static_cast<long>(split.test.size()),
      static_cast<long>(c.attention.d_model), static_cast<long>(parameters),
      c.attention.random_iterations ? "1..5 at random (evaluated at 3)"
                                    : std::to_string(c.attention.iterations).c_str(),
      c.schedule.c_str());
  std::fflush(stdout);
  const unn::AttentionUnnTrainingResult result =
      unn::train_attention_unn(model, split.train, training);
  const int64_t k = c.attention.random_iterations ? 3 : c.attention.iterations;
  const double accuracy = unn::masked_token_accuracy(model, split.test, k, c.attention.schedule);
  std::printf(
      "best development accuracy %.3f%% at step %ld; test masked-token accuracy %.3f%%; "
      "%ld steps in %s\n",
      100 * result.best_dev_accuracy, static_cast<long>(result.best_step), 100 * accuracy,
      static_cast<long>(result.steps), train::format_duration(result.seconds).c_str());
  unn::save_attention_unn(c.out_path, model,
                          {{"task", c.task},
                           {"test_accuracy", accuracy},
                           {"best_dev_accuracy", result.best_dev_accuracy},
                           {"best_step", result.best_step},
                           {"steps", result.steps},
                           {"batch", training.batch_size},
                           {"lr", training.loop.learning_rate},
                           {"dev_sequences", training.dev_size},
                           {"train_seconds", result.seconds}});
  std::printf("wrote %s\n", c.out_path.c_str());
}

data::TreebankOptions treebank_options(uint64_t seed, bool control) {
  data::TreebankOptions options;
  options.seed = seed;
  options.control = control;
  return options;
}

// Sentence lengths of every split, for the parser's padded width: dev and test whole, training
// sentences up to kLongestTrainingSentence words (the paper drops those of >= 100 word pieces).
constexpr int64_t kLongestTrainingSentence = 100;
int64_t padded_width(const data::Treebank& bank) {
  int64_t width = 1;
  for (const auto* split : {&bank.dev, &bank.test}) {
    for (const data::Sentence& s : *split) width = std::max(width, s.size());
  }
  for (const data::Sentence& s : bank.train) {
    if (s.size() <= kLongestTrainingSentence) width = std::max(width, s.size());
  }
  return width;
}

// The bank a parser trains or is evaluated on: a committed UD treebank (from `directory`, or
// data/ud/NAME when empty) or the synthetic one of `seed`.
data::Treebank parser_treebank(const std::string& treebank, const std::string& directory,
                               uint64_t seed, bool control) {
  if (treebank.empty()) return data::generate_treebank(treebank_options(seed, control));
  return data::read_ud_treebank(directory.empty() ? std::string(data::kUdDirectory) + "/" + treebank
                                                  : directory);
}

// The parse task. The synthetic treebank keeps the encoder settings of the spec note's section
// 4.7; a UD treebank gets the paper's training-length filter (>= 5 words) and, standing in for
// its multilingual BERT, word and character embeddings with encoder and word dropout, as
// biaffine parsers had before BERT.
void run_train_parse(TrainCommand c, const GlobalOptions& global) {
  auto given = [&](const char* option) { return c.command->count(option) > 0; };
  reject_options(c, kConvOnly, "the conv tasks");
  reject_options(c, kAttentionOnly, "the attention task");
  if (given("--schedule")) {
    throw std::invalid_argument("the parse task updates H, M, then Y (--jacobi: H and M together)");
  }
  const bool ud = !c.treebank.empty();
  if (ud) reject_options(c, kSyntheticTreebankOnly, "the synthetic treebank");
  const data::Treebank bank = parser_treebank(c.treebank, "", c.treebank_seed, c.control);
  unn::ParserConfig config;
  config.vocabulary = static_cast<int64_t>(bank.vocabulary.size());
  config.iterations = c.config.iterations;
  config.jacobi = c.jacobi;
  config.init_seed = global.seed;
  unn::ParserTraining training;
  if (ud) {
    config.max_words = padded_width(bank);
    config.character_embedding = 32;
    config.character_filters = 100;
    config.dropout = 0.33;
    config.encoder_dropout = 0.33;
    training.min_words = 5;
    training.word_dropout = 0.2;
  }
  training.loop = c.training.loop;
  const int64_t batch = given("--batch") ? c.training.batch_size : 32;
  const int64_t epoch = (static_cast<int64_t>(bank.train.size()) + batch - 1) / batch;
  if (!given("--lr")) training.loop.learning_rate = 2e-3;
  if (!given("--clip")) training.loop.clip_norm = 5;
  if (!given("--train-steps")) training.loop.steps = (ud ? 20 : 30) * epoch;
  training.batch_size = batch;
  training.seed = global.seed;
  training.loop.progress_label = "unn parse";
  unn::UnnParser model(config);
  const int64_t parameters = train::parameter_count(*model);
  const std::string source =
      ud ? "UD treebank " + c.treebank
         : std::string("synthetic ") + (c.control ? "control " : "") + "treebank (seed " +
               std::to_string(c.treebank_seed) + ")";
  std::printf(
      "UNN parser on the %s: %zu train, %zu dev, %zu test sentences; %ld parameters; k = %ld "
      "(%s); %ld steps = %.1f epochs\n",
      source.c_str(), bank.train.size(), bank.dev.size(), bank.test.size(),
      static_cast<long>(parameters), static_cast<long>(config.iterations),
      c.jacobi ? "Jacobi H, M" : "sequential", static_cast<long>(training.loop.steps),
      static_cast<double>(training.loop.steps) / static_cast<double>(epoch));
  std::fflush(stdout);
  const unn::ParserTrainingResult result = unn::train_parser(model, bank, training);
  const unn::ParseScores test = unn::evaluate_parser(model, bank.test, config.iterations);
  std::printf(
      "best dev UAS %.2f%% at step %ld; test UAS %.2f%%, exact match %.2f%%, modifier "
      "lists %.2f%% (set) / %.2f%% (count); %ld steps in %s\n",
      100 * result.best_dev_uas, static_cast<long>(result.best_step), 100 * test.uas(),
      100 * test.exact_match(), 100 * test.modlist_set(), 100 * test.modlist_count(),
      static_cast<long>(result.steps), train::format_duration(result.seconds).c_str());
  nlohmann::json metadata = {{"task", c.task},
                             {"test_uas", test.uas()},
                             {"best_dev_uas", result.best_dev_uas},
                             {"best_step", result.best_step},
                             {"steps", result.steps},
                             {"batch", batch},
                             {"lr", training.loop.learning_rate},
                             {"min_training_words", training.min_words},
                             {"word_dropout", training.word_dropout},
                             {"train_seconds", result.seconds}};
  if (ud) {
    metadata["treebank"] = c.treebank;
  } else {
    metadata["treebank_seed"] = c.treebank_seed;
    metadata["control"] = c.control;
  }
  unn::save_parser(c.out_path, model, metadata);
  std::printf("wrote %s\n", c.out_path.c_str());
}

void run_train(TrainCommand c, const GlobalOptions& global) {
  if (c.task == "attention") {
    run_train_attention(std::move(c), global);
    return;
  }
  if (c.task == "parse") {
    run_train_parse(std::move(c), global);
    return;
  }
  reject_options(c, kAttentionOnly, "the attention task");
  reject_options(c, kParseOnly, "the parse task");
  c.config.dataset = task_dataset(c.task);
  c.config.classify_schedule = unn::parse_schedule(c.schedule);
  c.config.generate_schedule = unn::parse_schedule(c.generate_schedule);
  c.config.tied = !c.untied;
  c.config.init_seed = global.seed;
  unn::check_config(c.config);
  const data::ImageDataset all =
      data::load_image_dataset(c.config.dataset, data::ImageSplit::train, c.data_dir);
  const unn::ImageSplits splits =
      unn::split_off_dev(all, c.dev_size > 0 ? c.dev_size : default_dev_size(c.config.dataset));
  const data::ImageDataset test =
      data::load_image_dataset(c.config.dataset, data::ImageSplit::test, c.data_dir);
  unn::ConvUnn model(c.config);
  const int64_t parameters = train::parameter_count(*model);
  const int64_t batches =
      (splits.train.images.size(0) + c.training.batch_size - 1) / c.training.batch_size;
  std::printf(
      "conv UNN on %s: %ld training, %ld development, %ld test images; %ld parameters "
      "(%s, k = %ld, %s classification, gamma %g); %ld steps = %.1f epochs\n",
      c.config.dataset.c_str(), static_cast<long>(splits.train.images.size(0)),
      static_cast<long>(splits.dev.images.size(0)), static_cast<long>(test.images.size(0)),
      static_cast<long>(parameters), c.config.tied ? "tied" : "untied",
      static_cast<long>(c.config.iterations), c.schedule.c_str(), c.config.gamma,
      static_cast<long>(c.training.loop.steps),
      static_cast<double>(c.training.loop.steps) / static_cast<double>(batches));
  std::fflush(stdout);
  c.training.seed = global.seed;
  c.training.loop.progress_label = "unn " + c.task;
  const unn::ConvUnnTrainingResult result = unn::train_conv_unn(model, splits, c.training);
  const double accuracy =
      unn::conv_unn_accuracy(model, test, c.config.iterations, c.config.classify_schedule);
  std::printf(
      "best development accuracy %.2f%% at step %ld; test accuracy %.2f%%; %ld steps in %s\n",
      100 * result.best_dev_accuracy, static_cast<long>(result.best_step), 100 * accuracy,
      static_cast<long>(result.steps), train::format_duration(result.seconds).c_str());
  unn::save_conv_unn(c.out_path, model,
                     {{"task", c.task},
                      {"test_accuracy", accuracy},
                      {"best_dev_accuracy", result.best_dev_accuracy},
                      {"best_step", result.best_step},
                      {"steps", result.steps},
                      {"batch", c.training.batch_size},
                      {"lr", c.training.loop.learning_rate},
                      {"dev_images", splits.dev.images.size(0)},
                      {"train_seconds", result.seconds}});
  std::printf("wrote %s\n", c.out_path.c_str());
}

// Prints and returns one energy trace: the share of block updates that lowered or kept the
// energy (relative tolerance 1e-9; updates from a state off some variable's domain, energy +inf,
// are not counted) and the trace itself (null for +inf).
nlohmann::json energy_report(const std::string& what, int64_t examples,
                             const unn::InferenceResult& result) {
  const std::vector<double>& energy = result.energy;
  int64_t kept = 0, counted = 0;
  nlohmann::json trace = nlohmann::json::array();
  for (size_t i = 0; i < energy.size(); ++i) {
    trace.push_back(std::isinf(energy[i]) ? nlohmann::json(nullptr) : nlohmann::json(energy[i]));
    if (i == 0 || std::isinf(energy[i - 1])) continue;
    ++counted;
    if (energy[i] <= energy[i - 1] + 1e-9 * std::abs(energy[i - 1])) ++kept;
  }
  const double share =
      counted == 0 ? 1.0 : static_cast<double>(kept) / static_cast<double>(counted);
  std::printf(
      "energy, %s over %ld examples: %ld block updates, %.1f%% lowered or kept it; "
      "final %.6g\n",
      what.c_str(), static_cast<long>(examples), static_cast<long>(counted), 100 * share,
      energy.back());
  return {{"updates", result.updates}, {"energy", trace}, {"non_increasing_share", share}};
}

void run_eval_attention(const EvalCommand& c) {
  nlohmann::json metadata;
  unn::AttentionUnn model = unn::load_attention_unn(c.model_path, &metadata);
  const unn::AttentionUnnConfig& config = model->config();
  const int64_t k =
      c.iterations > 0 ? c.iterations : (config.random_iterations ? 3 : config.iterations);
  const unn::Schedule schedule =
      c.schedule.empty() ? config.schedule : unn::parse_schedule(c.schedule);
  const data::NumberSequences test = data::generate_number_sequence_split().test;
  const double accuracy = unn::masked_token_accuracy(model, test, k, schedule);
  std::printf(
      "%s on the number-sequence test split (%ld sequences), k = %ld, %s: masked-token "
      "accuracy %.3f%%\n",
      c.model_path.c_str(), static_cast<long>(test.size()), static_cast<long>(k),
      unn::schedule_name(schedule).c_str(), 100 * accuracy);
  nlohmann::json energy;
  {
    torch::NoGradGuard no_grad;
    unn::AttentionUnn exact = unn::load_attention_unn(c.model_path);
    exact->to(torch::kDouble);
    const int64_t n = std::min<int64_t>(c.energy_examples, test.size());
    const unn::InferenceResult result =
        exact->infer(test.tokens.narrow(0, 0, n), k, schedule, nullptr, true);
    energy["fill"] = energy_report("filling masked tokens", n, result);
  }
  if (!c.json_path.empty()) {
    write_json_file(c.json_path,
                    {{"model", c.model_path},
                     {"task", "attention"},
                     {"split", "test"},
                     {"sequences", test.size()},
                     {"iterations", k},
                     {"schedule", unn::schedule_name(schedule)},
                     {"accuracy", accuracy},
                     {"energy_sequences", std::min<int64_t>(c.energy_examples, test.size())},
                     {"energy", energy},
                     {"trained", metadata}});
  }
}

void run_eval_parse(const EvalCommand& c) {
  if (!c.schedule.empty()) {
    throw std::invalid_argument("a parser's order is fixed when it is trained (H, M, then Y)");
  }
  nlohmann::json metadata;
  unn::UnnParser model = unn::load_parser(c.model_path, &metadata);
  const unn::ParserConfig& config = model->config();
  const int64_t k = c.iterations > 0 ? c.iterations : config.iterations;
  const std::string treebank = metadata.value("treebank", std::string());
  const uint64_t seed = metadata.value("treebank_seed", uint64_t{1});
  const bool control = metadata.value("control", false);
  if (treebank.empty() && !c.data_dir.empty()) {
    throw std::invalid_argument("--data-dir: this parser was trained on the synthetic treebank");
  }
  const data::Treebank bank = parser_treebank(treebank, c.data_dir, seed, control);
  const std::string source =
      treebank.empty() ? std::string("the synthetic ") + (control ? "control " : "") + "treebank"
                       : "UD " + treebank;
  const unn::ParseScores test = unn::evaluate_parser(model, bank.test, k);
  std::printf(
      "%s on %s's test split (%zu sentences, %ld words), k = %ld: UAS %.2f%%, exact match "
      "%.2f%%, modifier lists %.2f%% (set) / %.2f%% (count) / %.2f%% (the authors' packed "
      "count)\n",
      c.model_path.c_str(), source.c_str(), bank.test.size(), static_cast<long>(test.words),
      static_cast<long>(k), 100 * test.uas(), 100 * test.exact_match(), 100 * test.modlist_set(),
      100 * test.modlist_count(), 100 * test.modlist_packed());
  nlohmann::json energy;
  if (!config.jacobi) {  // Jacobi updates carry no descent guarantee
    torch::NoGradGuard no_grad;
    unn::UnnParser exact = unn::load_parser(c.model_path);
    exact->to(torch::kDouble);
    exact->eval();
    const int64_t n = std::min<int64_t>(c.energy_examples, static_cast<int64_t>(bank.test.size()));
    std::vector<int64_t> index(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) index[static_cast<size_t>(i)] = i;
    energy["parse"] =
        energy_report("parsing", n, exact->parse(data::make_batch(bank.test, index), k, nullptr, true));
  }
  if (!c.json_path.empty()) {
    write_json_file(c.json_path, {{"model", c.model_path},
                                  {"task", "parse"},
                                  {"split", "test"},
                                  {"treebank", treebank.empty() ? "synthetic" : treebank},
                                  {"control", control},
                                  {"sentences", bank.test.size()},
                                  {"words", test.words},
                                  {"iterations", k},
                                  {"uas", test.uas()},
                                  {"exact_match", test.exact_match()},
                                  {"modlist_set", test.modlist_set()},
                                  {"modlist_count", test.modlist_count()},
                                  {"modlist_packed", test.modlist_packed()},
                                  {"energy", energy},
                                  {"trained", metadata}});
  }
}

void run_eval(const EvalCommand& c) {
  const std::string kind = train::model_kind(train::read_checkpoint_metadata(c.model_path));
  if (kind == "unn-attention") {
    run_eval_attention(c);
    return;
  }
  if (kind == "unn-parser") {
    run_eval_parse(c);
    return;
  }
  nlohmann::json metadata;
  unn::ConvUnn model = unn::load_conv_unn(c.model_path, &metadata);
  const unn::ConvUnnConfig& config = model->config();
  const int64_t k = c.iterations > 0 ? c.iterations : config.iterations;
  const unn::Schedule schedule =
      c.schedule.empty() ? config.classify_schedule : unn::parse_schedule(c.schedule);
  const data::ImageDataset test =
      data::load_image_dataset(config.dataset, data::ImageSplit::test, c.data_dir);
  const double accuracy = unn::conv_unn_accuracy(model, test, k, schedule);
  std::printf("%s on %s test (%ld images), k = %ld, %s: accuracy %.2f%%\n", c.model_path.c_str(),
              config.dataset.c_str(), static_cast<long>(test.images.size(0)), static_cast<long>(k),
              unn::schedule_name(schedule).c_str(), 100 * accuracy);

  // Energy traces in float64, dropout off, in both directions.
  nlohmann::json energy;
  {
    torch::NoGradGuard no_grad;
    unn::ConvUnn exact = unn::load_conv_unn(c.model_path);
    exact->to(torch::kDouble);
    const int64_t n = std::min<int64_t>(c.energy_examples, test.images.size(0));
    const torch::Tensor images = test.images.narrow(0, 0, n).to(torch::kDouble);
    const unn::Schedule back =
        c.schedule.empty() ? config.generate_schedule : unn::parse_schedule(c.schedule);
    const unn::InferenceResult classify = exact->classify(images, k, schedule, nullptr, true);
    const unn::InferenceResult generate =
        exact->generate(test.labels.narrow(0, 0, n), k, back, true);
    energy["classify"] = energy_report("classify direction", n, classify);
    energy["generate"] = energy_report("generate direction", n, generate);
  }
  if (!c.json_path.empty()) {
    write_json_file(c.json_path,
                    {{"model", c.model_path},
                     {"dataset", config.dataset},
                     {"split", "test"},
                     {"images", test.images.size(0)},
                     {"iterations", k},
                     {"schedule", unn::schedule_name(schedule)},
                     {"accuracy", accuracy},
                     {"energy_images", std::min<int64_t>(c.energy_examples, test.images.size(0))},
                     {"energy", energy},
                     {"trained", metadata}});
  }
}

void run_generate(const GenerateCommand& c) {
  const std::string kind = train::model_kind(train::read_checkpoint_metadata(c.model_path));
  if (kind == "unn-attention" || kind == "unn-parser") {
    throw std::invalid_argument(c.model_path + " holds a " + kind +
                                " model, which has no class prototypes (use unn eval)");
  }
  nlohmann::json metadata;
  unn::ConvUnn model = unn::load_conv_unn(c.model_path, &metadata);
  const unn::ConvUnnConfig& config = model->config();
  const int64_t k = c.iterations > 0 ? c.iterations : config.iterations;
  const unn::Schedule schedule =
      c.schedule.empty() ? config.generate_schedule : unn::parse_schedule(c.schedule);
  const torch::Tensor labels =
      c.label >= 0 ? torch::full({1}, c.label, torch::kLong) : torch::arange(10);
  // Before the grid is written: a bad classifier must not cost the old grid.
  eval::Classifier classifier{nullptr};
  if (!c.classifier_path.empty()) classifier = eval::load_classifier(c.classifier_path, config.dataset);
  torch::NoGradGuard no_grad;
  const unn::InferenceResult result = model->generate(labels, k, schedule);
  // Rows: classes; columns: X after each iteration, in [0, 1].
  const torch::Tensor steps = torch::stack(result.trace.at("X"), 1);  // (classes, k, 1, 28, 28)
  const torch::Tensor tiles = ((steps + 1) / 2).clamp(0, 1).reshape({-1, 1, 28, 28});
  OutputSet outputs;  // the grid and the JSON are replaced together, after both are ready
  ddpm::write_image_grid(outputs.staged(c.out_path), tiles, k);
  const torch::Tensor prototypes = ((torch::tanh(result.preactivation.at("X")) + 1) / 2);
  std::printf("wrote %s: prototypes of %s after each of %ld iterations (%s)\n", c.out_path.c_str(),
              c.label >= 0 ? ("class " + std::to_string(c.label)).c_str() : "classes 0-9",
              static_cast<long>(k), unn::schedule_name(schedule).c_str());
  nlohmann::json out = {{"model", c.model_path},
                        {"iterations", k},
                        {"schedule", unn::schedule_name(schedule)},
                        {"grid", c.out_path}};
  if (classifier) {
    const torch::Tensor predicted = classifier->forward(prototypes).argmax(1);
    const int64_t correct = predicted.eq(labels).sum().item<int64_t>();
    std::printf("%s labels %ld of %ld prototypes as their class:", c.classifier_path.c_str(),
                static_cast<long>(correct), static_cast<long>(labels.numel()));
    for (int64_t i = 0; i < labels.numel(); ++i) {
      std::printf(" %ld->%ld", static_cast<long>(labels[i].item<int64_t>()),
                  static_cast<long>(predicted[i].item<int64_t>()));
    }
    std::printf("\n");
    out["classifier"] = c.classifier_path;
    out["classes"] = std::vector<int64_t>(labels.data_ptr<int64_t>(),
                                          labels.data_ptr<int64_t>() + labels.numel());
    const torch::Tensor p = predicted.contiguous();
    out["predicted"] =
        std::vector<int64_t>(p.data_ptr<int64_t>(), p.data_ptr<int64_t>() + p.numel());
    out["correct"] = correct;
  }
  if (!c.json_path.empty()) write_json_file(outputs.staged(c.json_path), out);
  outputs.commit();
}

}  // namespace

void register_unn(CLI::App& app, const GlobalOptions& global, Action& action) {
  CLI::App* unn = app.add_subcommand(
      "unn", "Undirected neural networks: train, classify, generate, with any update order");
  unn->require_subcommand(1);
  const std::vector<std::string> schedules = {"forward", "forward-backward", "random", "jacobi"};

  auto t = std::make_shared<TrainCommand>();
  // The paper's settings for the conv UNN (batch 128 for the 7,000-image subset, 50 epochs); the
  // attention task replaces those it does not share unless given (see run_train_attention).
  t->training.loop.steps = 2750;
  t->training.loop.learning_rate = 5e-4;
  t->training.loop.clip_norm = std::numeric_limits<double>::infinity();
  t->training.loop.ema_decay = 0;
  CLI::App* train = unn->add_subcommand("train", "Train a UNN; keeps the best development epoch");
  train->add_option("--task", t->task, "mnist-conv, fashion-conv, attention or parse")
      ->check(CLI::IsMember({"mnist-conv", "fashion-conv", "attention", "parse"}))
      ->capture_default_str();
  train->add_option("--data-dir", t->data_dir, "IDX directory (default: the dataset's)")
      ->check(CLI::ExistingDirectory);
  train->add_option("--out", t->out_path, "Model file to write")
      ->check(writable_file())
      ->required();
  train->add_option("--iterations", t->config.iterations, "k: sweeps of the schedule")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  train->add_option("--schedule", t->schedule, "Update order when classifying")
      ->check(CLI::IsMember(schedules))
      ->capture_default_str();
  train->add_option("--generate-schedule", t->generate_schedule, "Update order when generating")
      ->check(CLI::IsMember(schedules))
      ->capture_default_str();
  train
      ->add_option("--gamma", t->config.gamma,
                   "Weight of the generation (reconstruction) loss; 0: classification only")
      ->check(non_negative())
      ->capture_default_str();
  train->add_option("--dropout", t->config.dropout, "Dropout on H1 and H2 when classifying")
      ->check(CLI::Range(0.0, 0.99))
      ->capture_default_str();
  train->add_flag("--untied", t->untied,
                  "One weight copy per iteration, H2 with 64 / k channels (Table 3)");
  train->add_option("--batch", t->training.batch_size, "Mini-batch size")
      ->check(positive())
      ->capture_default_str();
  train
      ->add_option("--dev-size", t->dev_size,
                   "Training images held out for model selection (default 1000 MNIST, 10000 "
                   "Fashion-MNIST)")
      ->check(non_negative());
  train->add_option("--d-model", t->attention.d_model, "attention: hidden size d")
      ->check(positive())
      ->capture_default_str();
  train->add_flag("--random-iterations", t->attention.random_iterations,
                  "attention: draw k from 1..5 per batch (evaluated at k = 3)");
  train->add_flag("--control", t->control,
                  "parse: the control treebank, whose heads do not depend on the words");
  train->add_flag("--jacobi", t->jacobi, "parse: update H and M together (the authors' code)");
  train->add_option("--treebank-seed", t->treebank_seed, "parse: the synthetic treebank's seed")
      ->capture_default_str();
  train
      ->add_option("--treebank", t->treebank,
                   "parse: a committed Universal Dependencies treebank (data/ud) instead of the "
                   "synthetic one")
      ->check(CLI::IsMember(data::committed_ud_treebanks()));
  add_training_loop_options(*train, t->training.loop);
  t->command = train;
  train->callback([t, &global, &action] { action = [t, &global] { run_train(*t, global); }; });

  auto e = std::make_shared<EvalCommand>();
  CLI::App* evaluate = unn->add_subcommand(
      "eval", "Test accuracy and float64 energy traces (both directions for conv models)");
  evaluate->add_option("--model", e->model_path, "UNN model file")
      ->check(CLI::ExistingFile)
      ->required();
  evaluate->add_option("--iterations", e->iterations, "k (default: the model's)")
      ->check(CLI::Range(1, 64));
  evaluate->add_option("--schedule", e->schedule, "Update order (default: the model's)")
      ->check(CLI::IsMember(schedules));
  evaluate
      ->add_option("--energy-images", e->energy_examples,
                   "Test images (or sequences) for the energy traces")
      ->check(positive())
      ->capture_default_str();
  evaluate->add_option("--data-dir", e->data_dir,
                       "IDX directory, or a UD parser's treebank directory (default: the "
                       "dataset's, data/ud/NAME)")
      ->check(CLI::ExistingDirectory);
  evaluate->add_option("--json", e->json_path, "Write the results as JSON")->check(writable_file());
  evaluate->callback([e, &global, &action] { action = [e, &global] { run_eval(*e); }; });

  auto g = std::make_shared<GenerateCommand>();
  CLI::App* generate = unn->add_subcommand(
      "generate", "Class prototypes: clamp the label, run the network backwards");
  generate->add_option("--model", g->model_path, "UNN model file")
      ->check(CLI::ExistingFile)
      ->required();
  generate->add_option("--class", g->label, "Class 0-9 (default: all ten)")
      ->check(CLI::Range(0, 9));
  generate->add_option("--iterations", g->iterations, "k (default: the model's)")
      ->check(CLI::Range(1, 64));
  generate->add_option("--schedule", g->schedule, "Update order (default: the model's)")
      ->check(CLI::IsMember(schedules));
  generate->add_option("--out", g->out_path, "PNG grid: a row per class, a column per iteration")
      ->check(writable_file())
      ->required();
  generate
      ->add_option("--classifier", g->classifier_path,
                   "Classifier that labels the prototypes, e.g. models/classifier-mnist.pt")
      ->check(CLI::ExistingFile);
  generate->add_option("--json", g->json_path, "Write the results as JSON")->check(writable_file());
  generate->callback([g, &global, &action] { action = [g, &global] { run_generate(*g); }; });
}

}  // namespace structdiff::cli
