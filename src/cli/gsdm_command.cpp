// `structdiff gsdm`: train, evaluate and sample a GSDM of any registered problem, and inspect a
// graphical model: its attention mask and which index permutations leave the mask invariant
// (Theorem 3.1).
#include <cmath>
#include <cstdio>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "cli/command.h"
#include "cli/gsdm_options.h"
#include "structdiff/graph.h"
#include "structdiff/gsdm_problems.h"
#include "structdiff/runtime.h"
#include "structdiff/sudoku_model.h"

namespace structdiff::cli {
namespace {

struct GsdmOptions {
  std::string spec;
  int sudoku_size = 0;
  std::string problem;
  gsdm::ProblemOptions problem_options;
  std::string png;
  std::string rule = "standard";
  uint64_t mask_seed = 1;
  std::vector<std::string> axes;
  std::string permutation;
};

// --problem NAME (unless the command is for the one problem `fixed`), --size, --no-intermediates,
// --variant; returns the --problem option (nullptr with `fixed`).
CLI::Option* add_problem_options(CLI::App& command, std::string& problem,
                                 gsdm::ProblemOptions& options, const std::string& fixed = "") {
  std::vector<const gsdm::Problem*> covered;
  for (const gsdm::Problem& p : gsdm::problems()) {
    if (fixed.empty() || p.name == fixed) covered.push_back(&p);
  }
  std::string names, variants;
  for (const gsdm::Problem* p : covered) {
    names += (names.empty() ? "" : ", ") + p->name + " (--size: " + p->size_help + ", default " +
             gsdm::size_text(p->default_size) + ")";
    for (const auto& [name, help] : p->variants) {
      variants += (variants.empty() ? "" : "; ") + (fixed.empty() ? p->name + " " : "") + name +
                  ": " + help;
    }
  }
  CLI::Option* option = nullptr;
  if (fixed.empty()) {
    option = command.add_option("--problem", problem, "One of: " + names);
  } else {
    problem = fixed;
  }
  command.add_option_function<std::string>(
      "--size", [&options](const std::string& text) { options.size = gsdm::parse_size(text); },
      fixed.empty() ? "The problem's dimensions, e.g. 5 or 16,16,8 (default: the problem's)"
                    : "The " + names);
  command.add_flag("!--no-intermediates", options.intermediates,
                   "Drop the intermediate variables (the paper's graphs without them)");
  command.add_option("--variant", options.variant,
                     "Another form of the problem (" + variants + ")");
  return option;
}

// The check of the problem's name, sizes and variant, for a command's parse-time callback: usage
// errors, the same under --dry-run as in a run.
std::function<void()> problem_check(const std::string& problem, const gsdm::ProblemOptions& options) {
  return [&problem, &options] {
    if (!problem.empty()) gsdm::resolve_options(gsdm::find_problem(problem), options);
  };
}

graph::GraphicalModel load(const GsdmOptions& o) {
  if (!o.spec.empty()) return graph::GraphicalModel::load(o.spec);
  if (!o.problem.empty()) {
    const gsdm::Problem& problem = gsdm::find_problem(o.problem);
    return problem.graph(gsdm::resolve_options(problem, o.problem_options));
  }
  int n = 0;
  while (n * n < o.sudoku_size) ++n;
  if (n * n != o.sudoku_size) throw std::invalid_argument("--sudoku takes 4, 9, 16 or 25");
  return sudoku::graphical_model(n);
}

void show_mask(const GsdmOptions& o) {
  const graph::GraphicalModel model = load(o);
  const AttentionPattern mask = model.compile({graph::parse_mask_rule(o.rule), o.mask_seed});
  const PatternStats s = mask.stats();
  std::printf("%ld variables in %zu arrays; mask: %ld entries, degree min/mean/max %ld/%.2f/%ld, "
              "density %.4g\n",
              static_cast<long>(model.num_nodes()), model.arrays().size(),
              static_cast<long>(s.entries), static_cast<long>(s.min_degree), s.mean_degree,
              static_cast<long>(s.max_degree), s.density);
  if (!o.png.empty()) {
    mask.write_png(o.png);
    std::printf("wrote %s\n", o.png.c_str());
  }
}

void check_invariance(const GsdmOptions& o) {
  graph::IndexPermutation p;
  // The library's parsers, not std::stoll or CLI11's: those read "0x" as 0 and "010" as octal 8.
  // Their messages start "axis 'R:0x'" and "permutation '1,0x'", naming the option.
  p.permutation = graph::parse_permutation(o.permutation);
  for (const std::string& axis : o.axes) p.axes.push_back(graph::parse_axis(axis));
  const graph::GraphicalModel model = load(o);
  const bool invariant = model.mask_invariant_under(p);
  std::printf("mask %s under this permutation: sharing embeddings over it is %s\n",
              invariant ? "is invariant" : "is NOT invariant", invariant ? "valid" : "not valid");
}

void add_source_options(CLI::App* cmd, GsdmOptions& o) {
  auto* spec = cmd->add_option("--spec", o.spec, "Graphical model JSON (see docs/gsdm-spec.md)")
                   ->check(CLI::ExistingFile);
  auto* sudoku = cmd->add_option("--sudoku", o.sudoku_size, "Built-in Sudoku model of this side")
                     ->check(CLI::IsMember({4, 9, 16, 25}));
  auto* problem = add_problem_options(*cmd, o.problem, o.problem_options);
  cmd->parse_complete_callback(problem_check(o.problem, o.problem_options));
  spec->excludes(sudoku);
  spec->excludes(problem);
  sudoku->excludes(problem);
}

// ---- train, eval, sample -----------------------------------------------------------------------

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
  if (global.ranks && !global.ranks->is_root()) return;  // rank 0 writes for the run
  gsdm::save_problem_model(c.out, report.averaged);
  print_training_summary(report.result, c.out);
}

// The examples eval and sample use: the problem's test examples where it has its own (matrix
// inversion: E = I), else (or with --training-distribution) fresh draws of training examples.
gsdm::TrainingBatch test_examples(const gsdm::ProblemModel& trained, int64_t count,
                                  bool training_distribution, uint64_t seed) {
  std::mt19937_64 rng(seed + gsdm::kTestStream);
  const gsdm::Problem& problem = *trained.problem;
  const auto& make = problem.make_test_examples && !training_distribution
                         ? problem.make_test_examples
                         : problem.make_examples;
  return make(trained.graph, trained.options, count, rng);
}

struct EvalCommand {
  std::string model_path;
  std::string size;
  bool training_distribution = false;
  int64_t count = 64;
  int64_t batch = 64;
  SamplingOptions sampling;
  std::string json_path;
};

// The model file at --size (empty: its own size), on --device.
gsdm::ProblemModel load_at_size(const std::string& path, const std::string& size,
                                torch::Device device) {
  gsdm::ProblemModel trained = gsdm::load_problem_model(
      path, size.empty() ? std::vector<int64_t>{} : gsdm::parse_size(size));
  trained.model->to(device);
  return trained;
}

// "bcmf (size 4,3,2, trained at 2,2,2, no intermediates)"
std::string model_heading(const gsdm::ProblemModel& trained) {
  std::string heading = trained.problem->name + " (size " + gsdm::size_text(trained.options.size);
  if (trained.metadata.contains("trained_size")) {
    heading += ", trained at " + trained.metadata["trained_size"].get<std::string>();
  }
  if (!trained.options.variant.empty()) heading += ", " + trained.options.variant;
  return heading + (trained.options.intermediates ? ")" : ", no intermediates)");
}

void run_eval(const EvalCommand& c, const GlobalOptions& global) {
  gsdm::ProblemModel trained = load_at_size(c.model_path, c.size, global.device);
  const gsdm::TrainingBatch examples =
      test_examples(trained, c.count, c.training_distribution, global.seed);
  const nlohmann::json metrics = gsdm::evaluate(
      trained, examples, c.sampling.sample_options(global.seed + gsdm::kTestStream), c.batch);
  const gsdm::DiffusionProcess process = trained.model->config().process;
  const std::string sampler = c.sampling.sampler_for(process);
  std::printf("%s, %ld examples, %s sampler:\n", model_heading(trained).c_str(),
              static_cast<long>(c.count), sampler.c_str());
  for (const auto& [name, value] : metrics.items()) {
    std::printf("  %-36s %s\n", name.c_str(), value.dump().c_str());
  }
  if (!c.json_path.empty()) {
    write_json_file(c.json_path,
                    {{"model", c.model_path},
                     {"problem", trained.problem->name},
                     {"problem_options", trained.options},
                     {"trained_size", trained.metadata.value("trained_size",
                                                             gsdm::size_text(trained.options.size))},
                     {"examples", trained.problem->make_test_examples && !c.training_distribution
                                      ? "test"
                                      : "training distribution"},
                     {"diffusion", gsdm::process_name(process)},
                     {"sampler", sampler},
                     {"sample_steps", sampler == "ancestral" && process == gsdm::DiffusionProcess::gaussian
                                          ? trained.schedule.steps()
                                          : c.sampling.steps},
                     {"eta", c.sampling.eta},
                     {"metrics", metrics}});
  }
}

struct SampleCommand {
  std::string model_path;
  std::string size;
  bool training_distribution = false;
  int64_t count = 2;
  SamplingOptions sampling;
};

// Prints, for each example, every array's true values and the sample's (observed arrays once).
void run_sample(const SampleCommand& c, const GlobalOptions& global) {
  gsdm::ProblemModel trained = load_at_size(c.model_path, c.size, global.device);
  const gsdm::TrainingBatch examples =
      test_examples(trained, c.count, c.training_distribution, global.seed);
  const gsdm::StateLayout& layout = trained.model->layout();
  const torch::Tensor samples =
      gsdm::sample(trained.model, trained.schedule, examples.observed, examples.x0,
                   c.sampling.sample_options(global.seed + gsdm::kTestStream));
  const torch::Tensor truth = gsdm::decode_state(layout, trained.graph, examples.x0);
  const torch::Tensor sampled = gsdm::decode_state(layout, trained.graph, samples);
  const auto text = [](const torch::Tensor& row) {
    std::ostringstream out;
    out.precision(3);
    for (int64_t k = 0; k < row.numel(); ++k) out << (k ? " " : "") << row[k].item<float>();
    return out.str();
  };
  std::printf("%s:\n", model_heading(trained).c_str());
  for (int64_t b = 0; b < c.count; ++b) {
    std::printf("example %ld\n", static_cast<long>(b + 1));
    for (const graph::Array& a : trained.graph.arrays()) {
      const bool observed = examples.observed[b][a.first_node].item<bool>();
      std::printf("  %-4s %s: %s\n", a.name.c_str(), observed ? "given " : "true  ",
                  text(truth[b].narrow(0, a.first_node, a.size())).c_str());
      if (!observed) {
        std::printf("  %-4s sample: %s\n", a.name.c_str(),
                    text(sampled[b].narrow(0, a.first_node, a.size())).c_str());
      }
    }
  }
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
  add_training_loop_options(*train, request.training, problem_check(request.problem, request.options));
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

void register_gsdm(CLI::App& app, const GlobalOptions& global, Action& action) {
  auto o = std::make_shared<GsdmOptions>();
  CLI::App* gsdm = app.add_subcommand(
      "gsdm", "Graphically structured diffusion: train, evaluate and sample any problem; inspect "
              "graphical models");
  gsdm->require_subcommand(1);

  register_gsdm_train(*gsdm, global, action);

  auto e = std::make_shared<EvalCommand>();
  CLI::App* eval = gsdm->add_subcommand(
      "eval", "Sample fresh examples of the model's problem given their observed variables; score");
  eval->add_option("--model", e->model_path, "Trained model file (gsdm train, or sudoku train)")
      ->required()
      ->check(CLI::ExistingFile);
  eval->add_option("--count", e->count, "Examples")->check(positive())->capture_default_str();
  eval->add_option("--size", e->size,
                   "Evaluate at another size of the problem than the model was trained at (AE or "
                   "EE embeddings), e.g. 16,16,4");
  eval->add_flag("--training-distribution", e->training_distribution,
                 "Score fresh training examples instead of the problem's test examples");
  eval->add_option("--batch", e->batch, "Examples sampled at once")
      ->check(positive())
      ->capture_default_str();
  add_sampling_options(*eval, e->sampling);
  eval->add_option("--json", e->json_path, "Write the metrics as JSON")->check(writable_file());
  eval->callback([e, &global, &action] { action = [e, &global] { run_eval(*e, global); }; });

  auto s = std::make_shared<SampleCommand>();
  CLI::App* sample = gsdm->add_subcommand(
      "sample", "Print fresh examples of the model's problem beside the model's samples");
  sample->add_option("--model", s->model_path, "Trained model file")
      ->required()
      ->check(CLI::ExistingFile);
  sample->add_option("--count", s->count, "Examples")->check(positive())->capture_default_str();
  sample->add_option("--size", s->size,
                     "Sample at another size of the problem (AE or EE embeddings)");
  sample->add_flag("--training-distribution", s->training_distribution,
                   "Fresh training examples instead of the problem's test examples");
  add_sampling_options(*sample, s->sampling);
  sample->callback([s, &global, &action] { action = [s, &global] { run_sample(*s, global); }; });

  CLI::App* mask = gsdm->add_subcommand("mask", "Compile a graphical model to its attention mask");
  add_source_options(mask, *o);
  mask->add_option("--png", o->png, "Write the mask as a PNG")
      ->check(writable_file());
  mask->add_option("--rule", o->rule, "standard, non-symmetrised or random (as gsdm train --mask)")
      ->check(CLI::IsMember({"standard", "non-symmetrised", "random"}))
      ->capture_default_str();
  mask->add_option("--mask-seed", o->mask_seed, "The random mask's draw")->capture_default_str();
  mask->callback([o, mask, &action] {
    if (o->spec.empty() && o->sudoku_size == 0 && o->problem.empty()) {
      throw CLI::ValidationError("mask", "give --spec, --sudoku or --problem");
    }
    action = [o] { show_mask(*o); };
  });

  CLI::App* inv = gsdm->add_subcommand(
      "invariance", "Check Theorem 3.1: is the mask invariant under an index permutation?");
  add_source_options(inv, *o);
  inv->add_option("--axis", o->axes, "ARRAY:AXIS permuted together (repeatable)")->required();
  inv->add_option("--permutation", o->permutation, "New position of each index value, e.g. 1,0,2")
      ->required();
  inv->callback([o, &action] {
    if (o->spec.empty() && o->sudoku_size == 0 && o->problem.empty()) {
      throw CLI::ValidationError("invariance", "give --spec, --sudoku or --problem");
    }
    action = [o] { check_invariance(*o); };
  });
}

}  // namespace structdiff::cli
