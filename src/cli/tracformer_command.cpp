// `structdiff tracformer train|eval|infill`: character-level Tracformer and its baselines.
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "structdiff/tracformer_runs.h"

namespace structdiff::cli {
namespace {

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

struct TrainCommand {
  tracformer::TrainRequest request;
  std::string architecture = "tracformer", attention = "structured";
  std::string objective, masking;  // "": the architecture's own
  std::string out_path;
};

void run_train(const TrainCommand& c, const GlobalOptions& global) {
  tracformer::TrainRequest request = c.request;
  request.config.architecture = tracformer::parse_architecture(c.architecture);
  request.config.mechanism = parse_mechanism(c.attention);
  if (!c.objective.empty()) request.objective = tracformer::parse_mode(c.objective);
  if (!c.masking.empty()) request.masking = tracformer::parse_masking(c.masking);
  request.seed = global.seed;
  request.device = global.device;
  tracformer::TrainReport report = tracformer::train_on_text(request);
  tracformer::save_model(c.out_path, report.averaged, report.metadata);
  print_training_summary(report.result, c.out_path);
}

struct EvalCommand {
  tracformer::TextEvalRequest request;
  std::string mode;  // "": the model's objective
  std::string json_path;
};

void run_eval(const EvalCommand& c, const GlobalOptions& global) {
  tracformer::TextEvalRequest request = c.request;
  if (!c.mode.empty()) request.mode = tracformer::parse_mode(c.mode);
  request.seed = global.seed;
  request.device = global.device;
  const tracformer::TextEvalReport report = tracformer::evaluate_text(request);
  const tracformer::EvalResult& result = report.result;
  std::printf(
      "%s on %s (%s): %.4f bits per character over %ld hidden characters in %ld crops "
      "(%s: %s; %ld hidden characters outside the vocabulary, not scored)\n",
      request.model_path.c_str(), request.text_path.c_str(), request.split.c_str(), result.bits_per_char,
      static_cast<long>(result.masked_chars), static_cast<long>(result.crops), report.scored_as.c_str(),
      report.scored_as == "ac" ? "marginal pseudo-likelihood" : "exact chain rule",
      static_cast<long>(result.unknown_chars));
  if (c.json_path.empty()) return;
  write_json_file(c.json_path, tracformer::eval_record(request, report));
}

void run_infill(tracformer::InfillRequest request, const GlobalOptions& global) {
  request.seed = global.seed;
  request.device = global.device;
  const tracformer::InfillReport report = tracformer::infill_text(request);
  if (report.unknown_context > 0) {
    std::fprintf(stderr, "note: %ld context character(s) outside the model's vocabulary (%s), read as unknown\n",
                 static_cast<long>(report.unknown_context), report.unknown_characters.c_str());
  }
  for (const tracformer::Infilled& sample : report.samples) {
    std::printf("%s\n  log-likelihood %.3f nats (%.3f bits per filled character, %ld characters)\n",
                sample.text.c_str(), sample.log_likelihood,
                -sample.log_likelihood / std::log(2.0) / static_cast<double>(report.hidden),
                static_cast<long>(report.hidden));
  }
}

void add_train(CLI::App& command, const GlobalOptions& global, Action& action) {
  auto t = std::make_shared<TrainCommand>();
  t->request.text_path = "data/kjv/kjv.txt";
  CLI::App* train = command.add_subcommand("train", "Train on a UTF-8 text, save the model");
  train->add_option("--text", t->request.text_path, "UTF-8 text (split by blank-line blocks)")
      ->check(CLI::ExistingFile)
      ->capture_default_str();
  train
      ->add_option("--architecture", t->architecture,
                   "tracformer, tracformer-dense-encoder, bart, bert or ar")
      ->capture_default_str();
  train->add_option("--objective", t->objective, "car or ac (default: car; ac for bert)");
  train->add_option("--attention", t->attention, "structured (the core picks sparse or masked dense by the pattern), sparse, dense or gather")->capture_default_str();
  train->add_option("--d-model", t->request.config.d_model, "Width")->capture_default_str();
  train->add_option("--heads", t->request.config.heads, "Attention heads")->capture_default_str();
  train->add_option("--layers", t->request.config.layers, "Encoder layers (and tracformer decoder layers)")
      ->check(depth())
      ->capture_default_str();
  train
      ->add_option("--decoder-layers", t->request.config.decoder_layers,
                   "bart decoder layers (0: --layers)")
      ->capture_default_str();
  train->add_option("--n-max", t->request.config.n_max, "Keys per tracformer encoder row")
      ->capture_default_str();
  train->add_option("--block-size", t->request.config.block_size, "Training crop length")
      ->capture_default_str();
  train->add_option("--dropout", t->request.config.dropout, "Dropout")->capture_default_str();
  train->add_option("--batch", t->request.training.batch, "Crops per step")
      ->check(positive())
      ->capture_default_str();
  train->add_option("--masking", t->masking,
                    "spans, mixed or all (default: all for ar, else spans)");
  add_span_options(*train, t->request.training.spans);
  train->add_option("--validation-crops", t->request.training.validation_crops, "Validation crops")
      ->check(positive())
      ->capture_default_str();
  add_training_loop_options(*train, t->request.training.loop);
  train->add_option("--out", t->out_path, "Model file to write")
      ->check(writable_file())
      ->required();
  train->callback([t, &global, &action] { action = [t, &global] { run_train(*t, global); }; });
}

void add_eval(CLI::App& command, const GlobalOptions& global, Action& action) {
  auto e = std::make_shared<EvalCommand>();
  CLI::App* evaluate = command.add_subcommand(
      "eval", "Bits per character on hidden positions of fixed crops (same masks for every model)");
  evaluate->add_option("--model", e->request.model_path, "Model file")
      ->check(CLI::ExistingFile)
      ->required();
  evaluate->add_option("--text", e->request.text_path, "UTF-8 text")->required()->check(CLI::ExistingFile);
  evaluate
      ->add_option("--split", e->request.split, "all, train, validation or test (blocks as in training)")
      ->check(CLI::IsMember({"all", "train", "validation", "test"}))
      ->capture_default_str();
  evaluate->add_option("--mode", e->mode, "car or ac (default: the model's objective)")
      ->check(CLI::IsMember({"car", "ac"}));
  evaluate->add_option("--length", e->request.length, "Crop length (default: the model's block size)")
      ->check(non_negative());
  evaluate->add_option("--crops", e->request.crops, "Most crops")->check(work_count(1000000))->capture_default_str();
  evaluate->add_option("--batch", e->request.batch, "Crops per pass")
      ->check(positive())
      ->capture_default_str();
  add_span_options(*evaluate, e->request.spans);
  evaluate->add_option("--ranges", e->request.ranges,
                       "Hide fixed fractions of every crop instead of spans, e.g. 0.25:0.75");
  evaluate->add_option("--query-set", e->request.query_set,
                       "Exact log Pr(targets | context) in one pass: CONTEXT/TARGETS fraction "
                       "ranges of each crop, e.g. 0:0.25,0.75:1/0.25:0.5 (the rest unknown)");
  evaluate->add_option("--json", e->json_path, "Write the results as JSON")->check(writable_file());
  evaluate->callback([e, &global, &action] { action = [e, &global] { run_eval(*e, global); }; });
}

void add_infill(CLI::App& command, const GlobalOptions& global, Action& action) {
  auto f = std::make_shared<tracformer::InfillRequest>();
  CLI::App* infill = command.add_subcommand(
      "infill", "Fill the '_' characters of a text (one character each), left to right");
  infill->add_option("--model", f->model_path, "Model file")->check(CLI::ExistingFile)->required();
  infill->add_option("text", f->text, "Text with '_' where characters are to be filled")
      ->required();
  infill->add_option("--mask", f->mask, "Fill these character ranges instead, e.g. 3:10,20:25");
  infill->add_option("--samples", f->samples, "Samples to draw")
      ->check(between(1, 1000))
      ->capture_default_str();
  infill->add_option("--temperature", f->sampling.temperature, "Sampling temperature (> 0)")
      ->capture_default_str();
  infill->add_option("--top-p", f->sampling.top_p, "Nucleus mass, in (0, 1]")
      ->capture_default_str();
  infill->add_flag("!--no-cache", f->sampling.cache,
                   "Re-encode at every step instead of the KV cache (same distribution)");
  infill->callback([f, &global, &action] { action = [f, &global] { run_infill(*f, global); }; });
}

}  // namespace

void register_tracformer(CLI::App& app, const GlobalOptions& global, Action& action) {
  CLI::App* command = app.add_subcommand(
      "tracformer", "Tracformer: infilling and exact conditional likelihoods for any context");
  command->require_subcommand(1);
  add_train(*command, global, action);
  add_eval(*command, global, action);
  add_infill(*command, global, action);
}

}  // namespace structdiff::cli
