// `structdiff gsdm train` and `structdiff sudoku train`: a GSDM of a registered problem, trained on
// its generated examples by gsdm::train_problem.
#include <memory>
#include <string>

#include "cli/command.h"
#include "cli/gsdm_options.h"
#include "structdiff/gsdm_problems.h"
#include "structdiff/runtime.h"

namespace structdiff::cli {
namespace {

struct TrainCommand {
  gsdm::ProblemTrainRequest request;
  GsdmModelOptions model;
  std::string stop_at;
  std::string out = "gsdm.pt";
};

void run_train(TrainCommand& c, const GlobalOptions& global) {
  gsdm::ProblemTrainRequest& request = c.request;
  c.model.fill(request);
  if (!c.stop_at.empty()) request.stop = gsdm::parse_stop_condition(c.stop_at);
  request.seed = global.seed;
  request.device = global.device;
  request.ranks = global.ranks;
  gsdm::ProblemTrainReport report = gsdm::train_problem(request);
  if (!global.writes_outputs()) return;
  gsdm::save_problem_model(c.out, report.averaged);
  print_training_summary(report.result, c.out);
}

}  // namespace

void register_gsdm_train(CLI::App& parent, const GlobalOptions& global, Action& action,
                         const std::string& fixed_problem) {
  auto t = std::make_shared<TrainCommand>();
  gsdm::ProblemTrainRequest& request = t->request;
  CLI::App* train = parent.add_subcommand(
      "train", fixed_problem.empty()
                   ? std::string("Train a GSDM on a problem's generated examples")
                   : "Train a GSDM on generated " + fixed_problem +
                         " examples (gsdm train --problem " + fixed_problem + ")");
  CLI::Option* problem = add_problem_options(*train, request.problem, request.options, fixed_problem);
  if (problem != nullptr) problem->required();
  if (!fixed_problem.empty()) t->out = fixed_problem + ".pt";
  add_gsdm_model_options(*train, t->model);
  add_training_loop_options(*train, request.training.loop, problem_check(request.problem, request.options));
  // The problem supplies these defaults (paper Table 2): --lr binds the request's optional.
  train->remove_option(train->get_option("--lr"));
  train->add_option("--lr", request.learning_rate, "AdamW learning rate (default: the problem's)")
      ->check(positive());
  train->add_option("--batch", request.batch, "Batch size (default: the problem's)")->check(positive());
  train->add_option("--validation-examples", request.validation_examples, "Examples per validation")
      ->check(positive())
      ->capture_default_str();
  train->add_option_function<std::string>(
      "--size-range",
      [t](const std::string& text) { gsdm::parse_size_range(text, t->request.options); },
      "Train on a new size per batch, each dimension drawn uniformly from LOW..HIGH, e.g. "
      "1,1,1..10,10,10 (needs AE or EE embeddings; --size remains the validation size)");
  train->add_option("--stop-at", t->stop_at,
                    "End training at the first validation whose metric reaches a level, e.g. "
                    "'accuracy>=1' or 'rmse<=0.05' (quoted for the shell)");
  train->add_option("--init-from", request.init_from,
                    "Start from this model file's weights (same problem, size and architecture); "
                    "the optimiser starts afresh, and a --checkpoint that exists wins with --resume")
      ->check(CLI::ExistingFile);
  train->add_option("--out", t->out, "Trained model (EMA weights) to write")
      ->check(writable_file())
      ->capture_default_str();
  train->callback([t, &global, &action] { action = [t, &global] { run_train(*t, global); }; });
}

}  // namespace structdiff::cli
