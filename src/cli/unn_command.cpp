// `structdiff unn train|eval|generate`: undirected neural networks, trained in one direction or
// both and run in either, with any schedule, from one model file. `train` is in
// unn_train_command.cpp; eval and generate bind their options to the library's requests here.
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/output_policy.h"
#include "structdiff/ddpm.h"
#include "structdiff/unn_runs.h"

namespace structdiff::cli {
namespace {

struct EvalCommand {
  unn::EvalRequest request;
  std::string json_path;
};

struct GenerateCommand {
  unn::GenerateRequest request;
  std::string out_path, json_path;
};

void run_eval(const EvalCommand& c) {
  const unn::EvalReport report = unn::evaluate(c.request);
  for (const std::string& line : report.lines) std::printf("%s\n", line.c_str());
  if (!c.json_path.empty()) write_json_file(c.json_path, report.record);
}

void run_generate(const GenerateCommand& c) {
  unn::GenerateReport report = unn::generate(c.request);
  OutputSet outputs;  // the grid and the JSON are replaced together, after both are ready
  ddpm::write_image_grid(outputs.staged(c.out_path), report.tiles, report.columns);
  report.record["grid"] = c.out_path;
  if (!c.json_path.empty()) write_json_file(outputs.staged(c.json_path), report.record);
  outputs.commit();
  std::printf("wrote %s: %s\n", c.out_path.c_str(), report.lines.front().c_str());
  for (size_t i = 1; i < report.lines.size(); ++i) std::printf("%s\n", report.lines[i].c_str());
}

// --iterations and --schedule of eval and generate: empty takes the model's.
void add_model_overrides(CLI::App& command, std::optional<int64_t>& iterations,
                         std::optional<unn::Schedule>& schedule,
                         const std::vector<std::string>& schedules) {
  command.add_option_function<int64_t>("--iterations", [&iterations](int64_t k) { iterations = k; },
                                       "k (default: the model's)")
      ->check(between(1, 64));
  command.add_option_function<std::string>(
             "--schedule", [&schedule](const std::string& name) { schedule = unn::parse_schedule(name); },
             "Update order (default: the model's)")
      ->check(CLI::IsMember(schedules));
}

}  // namespace

void register_unn(CLI::App& app, const GlobalOptions& global, Action& action) {
  CLI::App* unn = app.add_subcommand(
      "unn", "Undirected neural networks: train, classify, generate, with any update order");
  unn->require_subcommand(1);
  const std::vector<std::string>& schedules = unn::schedule_choices();
  register_unn_train(*unn, global, action);

  auto e = std::make_shared<EvalCommand>();
  CLI::App* evaluate = unn->add_subcommand(
      "eval", "Test accuracy and float64 energy traces (both directions for conv models)");
  evaluate->add_option("--model", e->request.model_path, "UNN model file")
      ->check(CLI::ExistingFile)
      ->required();
  add_model_overrides(*evaluate, e->request.iterations, e->request.schedule, schedules);
  evaluate
      ->add_option("--energy-images", e->request.energy_examples,
                   "Test images (or sequences) for the energy traces")
      ->check(positive())
      ->capture_default_str();
  evaluate->add_option("--data-dir", e->request.data_dir,
                       "IDX directory, or a UD parser's treebank directory (default: the "
                       "dataset's, data/ud/NAME)")
      ->check(CLI::ExistingDirectory);
  evaluate->add_option("--json", e->json_path, "Write the results as JSON")->check(writable_file());
  evaluate->callback([e, &action] { action = [e] { run_eval(*e); }; });

  auto g = std::make_shared<GenerateCommand>();
  CLI::App* generate = unn->add_subcommand(
      "generate", "Class prototypes: clamp the label, run the network backwards");
  generate->add_option("--model", g->request.model_path, "UNN model file")
      ->check(CLI::ExistingFile)
      ->required();
  generate->add_option_function<int64_t>("--class", [g](int64_t label) { g->request.label = label; },
                                         "Class 0-9 (default: all ten)")
      ->check(between(0, 9));
  add_model_overrides(*generate, g->request.iterations, g->request.schedule, schedules);
  generate->add_option("--out", g->out_path, "PNG grid: a row per class, a column per iteration")
      ->check(writable_file())
      ->check(png_name())
      ->required();
  generate
      ->add_option("--classifier", g->request.classifier_path,
                   "Classifier that labels the prototypes, e.g. models/classifier-mnist.pt")
      ->check(CLI::ExistingFile);
  generate->add_option("--json", g->json_path, "Write the results as JSON")->check(writable_file());
  generate->callback([g, &action] { action = [g] { run_generate(*g); }; });
}

}  // namespace structdiff::cli
