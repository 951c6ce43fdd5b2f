#include "structdiff/unn_runs.h"

#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <limits>
#include <stdexcept>

#include <torch/torch.h>

#include "structdiff/checkpoint.h"
#include "structdiff/enum_names.h"
#include "structdiff/image_metrics.h"
#include "structdiff/loop_options.h"
#include "structdiff/model_file.h"
#include "structdiff/model_tensors.h"
#include "structdiff/images.h"
#include "structdiff/number_sequences.h"
#include "structdiff/progress.h"
#include "structdiff/treebank.h"
#include "structdiff/unn_parser.h"

namespace structdiff::unn {
namespace {

const auto kTaskNames = enum_names<Task>("UNN task", {{Task::mnist_conv, "mnist-conv"},
                                                       {Task::fashion_conv, "fashion-conv"},
                                                       {Task::attention, "attention"},
                                                       {Task::parse, "parse"}});

std::string format_line(const char* format, ...) __attribute__((format(printf, 1, 2)));
std::string format_line(const char* format, ...) {
  char text[1024];
  va_list arguments;
  va_start(arguments, format);
  std::vsnprintf(text, sizeof text, format, arguments);
  va_end(arguments);
  return text;
}

// The loop of `request` with the task's defaults where the request left a choice empty.
train::LoopOptions task_loop(const TrainRequest& request, const train::LoopChoices& defaults,
                             const std::string& label) {
  train::LoopOptions loop =
      train::with_choices(train::with_choices(request.loop, defaults), request.loop_choices);
  loop.progress_label = label;
  return loop;
}

// The summary line and the record a model file keeps of its run. `measure` names the score
// ("accuracy" or "uas"), shown with `decimals` as the task's test score shows it.
template <class Result>
TrainReport run_report(const std::string& task, const std::string& measure, int decimals,
                       double test_score, const std::string& test_text, double best_dev,
                       const Result& result, int64_t batch, double learning_rate) {
  TrainReport report;
  const std::string shown = measure == "uas" ? "UAS" : measure;
  report.summary = format_line("best development %s %.*f%% at step %ld; test %s; %ld steps in %s",
                               shown.c_str(), decimals, 100 * best_dev,
                               static_cast<long>(result.best_step), test_text.c_str(),
                               static_cast<long>(result.steps),
                               train::format_duration(result.seconds).c_str());
  report.metadata = {{"task", task},
                     {"test_" + measure, test_score},
                     {"best_dev_" + measure, best_dev},
                     {"best_step", result.best_step},
                     {"steps", result.steps},
                     {"batch", batch},
                     {"lr", learning_rate},
                     {"train_seconds", result.seconds}};
  return report;
}

TrainReport train_attention(const TrainRequest& request) {
  AttentionUnnTraining training;
  training.loop = task_loop(request, {150000, 1e-4, 10.0, 1000}, "unn attention");
  training.batch_size = request.batch.value_or(256);
  training.dev_size = request.dev_size.value_or(10000);
  training.seed = request.seed;
  AttentionUnnConfig config = request.attention;
  config.iterations = request.iterations;
  config.schedule = request.schedule.value_or(kDefaultSchedule);
  config.init_seed = request.seed;
  check_config(config);
  const data::NumberSequenceSplit split = data::generate_number_sequence_split();
  AttentionUnn model(config);
  std::printf(
      "undirected attention on number sequences: %ld training (%ld held out for selection), %ld "
      "test sequences; d %ld, %ld parameters; k = %s, %s order\n",
      static_cast<long>(split.train.size() - training.dev_size), static_cast<long>(training.dev_size),
      static_cast<long>(split.test.size()), static_cast<long>(config.d_model),
      static_cast<long>(train::parameter_count(*model)),
      config.random_iterations ? "1..5 at random (evaluated at 3)"
                               : std::to_string(config.iterations).c_str(),
      schedule_name(config.schedule).c_str());
  std::fflush(stdout);
  const AttentionUnnTrainingResult result = train_attention_unn(model, split.train, training);
  const int64_t k = config.random_iterations ? 3 : config.iterations;
  const double accuracy = masked_token_accuracy(model, split.test, k, config.schedule);
  TrainReport report = run_report(
      "attention", "accuracy", 3, accuracy, format_line("masked-token accuracy %.3f%%", 100 * accuracy),
      result.best_dev_accuracy, result, training.batch_size, training.loop.learning_rate);
  report.metadata["dev_sequences"] = training.dev_size;
  save_attention_unn(request.out_path, model, report.metadata);
  return report;
}

// The bank a parser trains or is evaluated on: a committed UD treebank (from `directory`, or
// data/ud/NAME when empty) or the synthetic one of `seed`.
data::Treebank parser_treebank(const std::string& treebank, const std::string& directory,
                               uint64_t seed, bool control) {
  if (!treebank.empty()) {
    return data::read_ud_treebank(
        directory.empty() ? std::string(data::kUdDirectory) + "/" + treebank : directory);
  }
  data::TreebankOptions options;
  options.seed = seed;
  options.control = control;
  return data::generate_treebank(options);
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

std::string parse_scores(const ParseScores& scores) {
  return format_line("UAS %.2f%%, exact match %.2f%%, modifier lists %.2f%% (set) / %.2f%% (count)",
                     100 * scores.uas(), 100 * scores.exact_match(), 100 * scores.modlist_set(),
                     100 * scores.modlist_count());
}

// The synthetic treebank keeps the encoder settings of the spec note's section 4.7; a UD treebank
// gets the paper's training-length filter (>= 5 words) and, standing in for its multilingual
// BERT, word and character embeddings with encoder and word dropout, as biaffine parsers had
// before BERT.
TrainReport train_parse(const TrainRequest& request) {
  if (request.schedule) {
    throw std::invalid_argument("the parse task updates H, M, then Y (--jacobi: H and M together)");
  }
  const bool ud = !request.treebank.empty();
  const data::Treebank bank =
      parser_treebank(request.treebank, "", request.treebank_seed, request.control);
  ParserConfig config;
  config.vocabulary = static_cast<int64_t>(bank.vocabulary.size());
  config.iterations = request.iterations;
  config.jacobi = request.jacobi;
  config.init_seed = request.seed;
  ParserTraining training;
  if (ud) {
    config.max_words = padded_width(bank);
    config.character_embedding = 32;
    config.character_filters = 100;
    config.dropout = 0.33;
    config.encoder_dropout = 0.33;
    training.min_words = 5;
    training.word_dropout = 0.2;
  }
  training.batch_size = request.batch.value_or(32);
  const int64_t epoch =
      (static_cast<int64_t>(bank.train.size()) + training.batch_size - 1) / training.batch_size;
  training.loop = task_loop(request, {(ud ? 20 : 30) * epoch, 2e-3, 5.0, {}}, "unn parse");
  training.seed = request.seed;
  UnnParser model(config);
  const std::string source = ud ? "UD treebank " + request.treebank
                                : std::string("synthetic ") + (request.control ? "control " : "") +
                                      "treebank (seed " + std::to_string(request.treebank_seed) + ")";
  std::printf(
      "UNN parser on the %s: %zu train, %zu dev, %zu test sentences; %ld parameters; k = %ld "
      "(%s); %ld steps = %.1f epochs\n",
      source.c_str(), bank.train.size(), bank.dev.size(), bank.test.size(),
      static_cast<long>(train::parameter_count(*model)), static_cast<long>(config.iterations),
      config.jacobi ? "Jacobi H, M" : "sequential", static_cast<long>(training.loop.steps),
      static_cast<double>(training.loop.steps) / static_cast<double>(epoch));
  std::fflush(stdout);
  const ParserTrainingResult result = train_parser(model, bank, training);
  const ParseScores test = evaluate_parser(model, bank.test, config.iterations);
  TrainReport report = run_report("parse", "uas", 2, test.uas(), parse_scores(test),
                                  result.best_dev_uas, result, training.batch_size,
                                  training.loop.learning_rate);
  report.metadata["min_training_words"] = training.min_words;
  report.metadata["word_dropout"] = training.word_dropout;
  if (ud) {
    report.metadata["treebank"] = request.treebank;
  } else {
    report.metadata["treebank_seed"] = request.treebank_seed;
    report.metadata["control"] = request.control;
  }
  save_parser(request.out_path, model, report.metadata);
  return report;
}

TrainReport train_conv(const TrainRequest& request) {
  ConvUnnConfig config = request.conv;
  config.dataset = request.task == Task::fashion_conv ? "fashion-mnist" : "mnist";
  config.iterations = request.iterations;
  config.classify_schedule = request.schedule.value_or(kDefaultSchedule);
  config.init_seed = request.seed;
  check_config(config);
  ConvUnnTraining training;
  training.batch_size = request.batch.value_or(128);
  training.loop = task_loop(request, {}, "unn " + task_name(request.task));
  training.seed = request.seed;
  const data::ImageDataset all =
      data::load_image_dataset(config.dataset, data::ImageSplit::train, request.data_dir);
  const ImageSplits splits =
      split_off_dev(all, request.dev_size.value_or(config.dataset == "mnist" ? 1000 : 10000));
  const data::ImageDataset test =
      data::load_image_dataset(config.dataset, data::ImageSplit::test, request.data_dir);
  ConvUnn model(config);
  const int64_t batches = (splits.train.images.size(0) + training.batch_size - 1) / training.batch_size;
  std::printf(
      "conv UNN on %s: %ld training, %ld development, %ld test images; %ld parameters (%s, k = "
      "%ld, %s classification, gamma %g); %ld steps = %.1f epochs\n",
      config.dataset.c_str(), static_cast<long>(splits.train.images.size(0)),
      static_cast<long>(splits.dev.images.size(0)), static_cast<long>(test.images.size(0)),
      static_cast<long>(train::parameter_count(*model)), config.tied ? "tied" : "untied",
      static_cast<long>(config.iterations), schedule_name(config.classify_schedule).c_str(),
      config.gamma, static_cast<long>(training.loop.steps),
      static_cast<double>(training.loop.steps) / static_cast<double>(batches));
  std::fflush(stdout);
  const ConvUnnTrainingResult result = train_conv_unn(model, splits, training);
  const double accuracy =
      conv_unn_accuracy(model, test, config.iterations, config.classify_schedule);
  TrainReport report = run_report(
      task_name(request.task), "accuracy", 2, accuracy, format_line("accuracy %.2f%%", 100 * accuracy),
      result.best_dev_accuracy, result, training.batch_size, training.loop.learning_rate);
  report.metadata["dev_images"] = splits.dev.images.size(0);
  save_conv_unn(request.out_path, model, report.metadata);
  return report;
}

// One energy trace: a line with the share of block updates that lowered or kept the energy
// (relative tolerance 1e-9; updates from a state off some variable's domain, energy +inf, are not
// counted) and the record with the trace itself (null for +inf).
nlohmann::json energy_trace(const std::string& what, int64_t examples, const InferenceResult& result,
                            std::vector<std::string>& lines) {
  const std::vector<double>& energy = result.energy;
  int64_t kept = 0, counted = 0;
  nlohmann::json trace = nlohmann::json::array();
  for (size_t i = 0; i < energy.size(); ++i) {
    trace.push_back(std::isinf(energy[i]) ? nlohmann::json(nullptr) : nlohmann::json(energy[i]));
    if (i == 0 || std::isinf(energy[i - 1])) continue;
    ++counted;
    if (energy[i] <= energy[i - 1] + 1e-9 * std::abs(energy[i - 1])) ++kept;
  }
  const double share = counted == 0 ? 1.0 : static_cast<double>(kept) / static_cast<double>(counted);
  lines.push_back(format_line(
      "energy, %s over %ld examples: %ld block updates, %.1f%% lowered or kept it; final %.6g",
      what.c_str(), static_cast<long>(examples), static_cast<long>(counted), 100 * share,
      energy.back()));
  return {{"updates", result.updates}, {"energy", trace}, {"non_increasing_share", share}};
}

EvalReport evaluate_attention(const EvalRequest& request) {
  nlohmann::json metadata;
  AttentionUnn model = load_attention_unn(request.model_path, &metadata);
  const AttentionUnnConfig& config = model->config();
  const int64_t k = request.iterations.value_or(config.random_iterations ? 3 : config.iterations);
  const Schedule schedule = request.schedule.value_or(config.schedule);
  const data::NumberSequences test = data::generate_number_sequence_split().test;
  const double accuracy = masked_token_accuracy(model, test, k, schedule);
  EvalReport report;
  report.lines.push_back(format_line(
      "%s on the number-sequence test split (%ld sequences), k = %ld, %s: masked-token accuracy "
      "%.3f%%",
      request.model_path.c_str(), static_cast<long>(test.size()), static_cast<long>(k),
      schedule_name(schedule).c_str(), 100 * accuracy));
  const int64_t n = std::min<int64_t>(request.energy_examples, test.size());
  nlohmann::json energy;
  {
    torch::NoGradGuard no_grad;
    AttentionUnn exact = load_attention_unn(request.model_path);
    exact->to(torch::kDouble);
    energy["fill"] = energy_trace("filling masked tokens", n,
                                  exact->infer(test.tokens.narrow(0, 0, n), k, schedule, nullptr, true),
                                  report.lines);
  }
  report.record = {{"model", request.model_path}, {"task", "attention"},
                   {"split", "test"},             {"sequences", test.size()},
                   {"iterations", k},             {"schedule", schedule_name(schedule)},
                   {"accuracy", accuracy},        {"energy_sequences", n},
                   {"energy", energy},            {"trained", metadata}};
  return report;
}

EvalReport evaluate_parser_file(const EvalRequest& request) {
  if (request.schedule) {
    throw std::invalid_argument("a parser's order is fixed when it is trained (H, M, then Y)");
  }
  nlohmann::json metadata;
  UnnParser model = load_parser(request.model_path, &metadata);
  const ParserConfig& config = model->config();
  const int64_t k = request.iterations.value_or(config.iterations);
  const std::string treebank = metadata.value("treebank", std::string());
  const bool control = metadata.value("control", false);
  if (treebank.empty() && !request.data_dir.empty()) {
    throw std::invalid_argument("--data-dir: this parser was trained on the synthetic treebank");
  }
  const data::Treebank bank = parser_treebank(
      treebank, request.data_dir, metadata.value("treebank_seed", uint64_t{1}), control);
  const std::string source = treebank.empty()
                                 ? std::string("the synthetic ") + (control ? "control " : "") + "treebank"
                                 : "UD " + treebank;
  const ParseScores test = evaluate_parser(model, bank.test, k);
  EvalReport report;
  report.lines.push_back(format_line(
      "%s on %s's test split (%zu sentences, %ld words), k = %ld: %s / %.2f%% (the authors' packed "
      "count)",
      request.model_path.c_str(), source.c_str(), bank.test.size(), static_cast<long>(test.words),
      static_cast<long>(k), parse_scores(test).c_str(), 100 * test.modlist_packed()));
  nlohmann::json energy;
  if (!config.jacobi) {  // Jacobi updates carry no descent guarantee
    torch::NoGradGuard no_grad;
    UnnParser exact = load_parser(request.model_path);
    exact->to(torch::kDouble);
    exact->eval();
    const int64_t n =
        std::min<int64_t>(request.energy_examples, static_cast<int64_t>(bank.test.size()));
    std::vector<int64_t> index(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) index[static_cast<size_t>(i)] = i;
    energy["parse"] = energy_trace(
        "parsing", n, exact->parse(data::make_batch(bank.test, index), k, nullptr, true), report.lines);
  }
  report.record = {{"model", request.model_path},
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
                   {"trained", metadata}};
  return report;
}

EvalReport evaluate_conv(const EvalRequest& request) {
  nlohmann::json metadata;
  ConvUnn model = load_conv_unn(request.model_path, &metadata);
  const ConvUnnConfig& config = model->config();
  const int64_t k = request.iterations.value_or(config.iterations);
  const Schedule schedule = request.schedule.value_or(config.classify_schedule);
  const data::ImageDataset test =
      data::load_image_dataset(config.dataset, data::ImageSplit::test, request.data_dir);
  const double accuracy = conv_unn_accuracy(model, test, k, schedule);
  EvalReport report;
  report.lines.push_back(format_line(
      "%s on %s test (%ld images), k = %ld, %s: accuracy %.2f%%", request.model_path.c_str(),
      config.dataset.c_str(), static_cast<long>(test.images.size(0)), static_cast<long>(k),
      schedule_name(schedule).c_str(), 100 * accuracy));
  // Energy traces in float64, dropout off, in both directions.
  const int64_t n = std::min<int64_t>(request.energy_examples, test.images.size(0));
  nlohmann::json energy;
  {
    torch::NoGradGuard no_grad;
    ConvUnn exact = load_conv_unn(request.model_path);
    exact->to(torch::kDouble);
    const torch::Tensor images = test.images.narrow(0, 0, n).to(torch::kDouble);
    const Schedule back = request.schedule.value_or(config.generate_schedule);
    const InferenceResult classify = exact->classify(images, k, schedule, nullptr, true);
    const InferenceResult generate = exact->generate(test.labels.narrow(0, 0, n), k, back, true);
    energy["classify"] = energy_trace("classify direction", n, classify, report.lines);
    energy["generate"] = energy_trace("generate direction", n, generate, report.lines);
  }
  report.record = {{"model", request.model_path}, {"dataset", config.dataset},
                   {"split", "test"},             {"images", test.images.size(0)},
                   {"iterations", k},             {"schedule", schedule_name(schedule)},
                   {"accuracy", accuracy},        {"energy_images", n},
                   {"energy", energy},            {"trained", metadata}};
  return report;
}

// The UNN model kinds, each with its evaluation and whether it has class prototypes to generate.
struct UnnKind {
  const char* name;
  EvalReport (*evaluate)(const EvalRequest&);
  bool generates;
};
constexpr UnnKind kUnnKinds[] = {{"unn-attention", evaluate_attention, false},
                                 {"unn-parser", evaluate_parser_file, false},
                                 {"unn-conv", evaluate_conv, true}};

const UnnKind& unn_kind_of(const std::string& path) {
  const std::string kind = train::model_kind(train::read_checkpoint_metadata(path));
  for (const UnnKind& entry : kUnnKinds) {
    if (kind == entry.name) return entry;
  }
  throw std::runtime_error(path + " holds a model of kind '" + kind +
                              "', not 'unn-conv', 'unn-attention' or 'unn-parser'");
}

}  // namespace

train::LoopOptions TrainRequest::default_loop() {
  train::LoopOptions loop;
  loop.steps = 2750;
  loop.learning_rate = 5e-4;
  loop.clip_norm = std::numeric_limits<double>::infinity();
  loop.ema_decay = 0;
  return loop;
}

Task parse_task(const std::string& name) { return kTaskNames.parse(name); }

std::string task_name(Task task) { return kTaskNames.name(task); }

const std::vector<std::string>& schedule_choices() {
  static const std::vector<std::string> names = {
      schedule_name(Schedule::forward), schedule_name(Schedule::forward_backward),
      schedule_name(Schedule::random), schedule_name(Schedule::jacobi)};
  return names;
}

const std::vector<std::string>& task_names() {
  static const std::vector<std::string> names = kTaskNames.choices();
  return names;
}

TrainReport train_task(const TrainRequest& request) {
  switch (request.task) {
    case Task::attention:
      return train_attention(request);
    case Task::parse:
      return train_parse(request);
    case Task::mnist_conv:
    case Task::fashion_conv:
      break;
  }
  return train_conv(request);
}

EvalReport evaluate(const EvalRequest& request) {
  return unn_kind_of(request.model_path).evaluate(request);
}

GenerateReport generate(const GenerateRequest& request) {
  const UnnKind& kind = unn_kind_of(request.model_path);
  if (!kind.generates) {
    throw std::invalid_argument(request.model_path + " holds a " + kind.name +
                                " model, which has no class prototypes (use unn eval)");
  }
  nlohmann::json metadata;
  ConvUnn model = load_conv_unn(request.model_path, &metadata);
  const ConvUnnConfig& config = model->config();
  const int64_t k = request.iterations.value_or(config.iterations);
  const Schedule schedule = request.schedule.value_or(config.generate_schedule);
  const torch::Tensor labels =
      request.label ? torch::full({1}, *request.label, torch::kLong) : torch::arange(10);
  eval::Classifier classifier{nullptr};
  if (!request.classifier_path.empty()) {
    classifier = eval::load_classifier(request.classifier_path, config.dataset);
  }
  torch::NoGradGuard no_grad;
  const InferenceResult result = model->generate(labels, k, schedule);
  const torch::Tensor steps = torch::stack(result.trace.at("X"), 1);  // (classes, k, 1, 28, 28)
  GenerateReport report;
  report.tiles = ((steps + 1) / 2).clamp(0, 1).reshape({-1, 1, 28, 28});
  report.columns = k;
  report.lines.push_back(format_line(
      "prototypes of %s after each of %ld iterations (%s)",
      request.label ? ("class " + std::to_string(*request.label)).c_str() : "classes 0-9",
      static_cast<long>(k), schedule_name(schedule).c_str()));
  report.record = {{"model", request.model_path}, {"iterations", k}, {"schedule", schedule_name(schedule)}};
  if (classifier) {
    const torch::Tensor prototypes = (torch::tanh(result.preactivation.at("X")) + 1) / 2;
    const torch::Tensor predicted = classifier->forward(prototypes).argmax(1).contiguous();
    const int64_t correct = predicted.eq(labels).sum().item<int64_t>();
    std::string line = format_line("%s labels %ld of %ld prototypes as their class:",
                                   request.classifier_path.c_str(), static_cast<long>(correct),
                                   static_cast<long>(labels.numel()));
    for (int64_t i = 0; i < labels.numel(); ++i) {
      line += format_line(" %ld->%ld", static_cast<long>(labels[i].item<int64_t>()),
                          static_cast<long>(predicted[i].item<int64_t>()));
    }
    report.lines.push_back(line);
    report.record["classifier"] = request.classifier_path;
    report.record["classes"] = std::vector<int64_t>(labels.data_ptr<int64_t>(),
                                                    labels.data_ptr<int64_t>() + labels.numel());
    report.record["predicted"] = std::vector<int64_t>(predicted.data_ptr<int64_t>(),
                                                      predicted.data_ptr<int64_t>() + predicted.numel());
    report.record["correct"] = correct;
  }
  return report;
}

}  // namespace structdiff::unn
