// gsdm::train_problem: a registered problem's GSDM built, trained and returned as its EMA model.
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "structdiff/attention.h"
#include "structdiff/gsdm_problems.h"
#include "structdiff/model_tensors.h"
#include "structdiff/ranks.h"
#include "structdiff/runtime.h"

namespace structdiff::gsdm {
namespace {

// The architecture the request names, the problem's (paper Table 2) where it names none.
GsdmConfig resolved_config(const Problem& problem, const ProblemTrainRequest& request) {
  GsdmConfig config = request.model;
  config.dim = request.dim.value_or(problem.config.dim);
  config.blocks = request.blocks.value_or(problem.config.blocks);
  config.heads = request.heads.value_or(problem.config.heads);
  config.embedding = request.embedding.value_or(problem.config.embedding);
  return config;
}

// --init-from: the file's EMA weights into both copies, after checking that it is a model of the
// same problem, size and architecture. Returns what the new file records about its start.
nlohmann::json start_from_model_file(const std::string& path, ProblemModel& trained,
                                     ProblemModel& averaged) {
  const ProblemModel start = load_problem_model(path);
  const auto refuse = [&](const std::string& what) {
    throw std::invalid_argument("--init-from " + path + ": " + what +
                                "; give the options the file was trained with (structdiff model "
                                "info " + path + " lists them)");
  };
  if (start.problem != trained.problem) {
    refuse("it is a model of " + start.problem->name + ", this run trains " + trained.problem->name);
  }
  // A variant that changes only the examples (sudoku's "puzzles") keeps the graph, and so the
  // weights fit.
  const bool same_graph = start.graph.to_json() == trained.graph.to_json();
  for (const char* part : {"problem_options", "model"}) {
    const nlohmann::json theirs = start.metadata.at("config").value(part, nlohmann::json::object());
    for (const auto& [key, value] : trained.metadata.at("config").at(part).items()) {
      const nlohmann::json other = theirs.value(key, nlohmann::json());
      if (key == "variant" && same_graph) continue;
      if (other != value) {
        refuse(std::string(part == std::string("model") ? "model " : "problem option ") + key +
               " is " + other.dump() + " in the file and " + value.dump() + " here");
      }
    }
  }
  torch::NoGradGuard no_grad;
  const auto weights = start.model->named_parameters();
  const auto buffers = start.model->named_buffers();
  for (ProblemModel* target : {&trained, &averaged}) {
    for (auto& item : target->model->named_parameters()) item.value().copy_(weights[item.key()]);
    for (auto& item : target->model->named_buffers()) item.value().copy_(buffers[item.key()]);
  }
  return {{"path", path}, {"trained_steps", start.metadata.value("trained_steps", nlohmann::json())}};
}

// "training a GSDM for sorting (size 3): 24 variables, 66 mask entries, 1234 parameters, ..."
std::string heading(const ProblemModel& trained, const ProblemTrainRequest& request) {
  const ProblemOptions& options = trained.options;
  const int64_t parameters = train::parameter_count(*trained.model);
  const std::string sizes = options.size_low.empty()
                                ? size_text(options.size)
                                : size_text(options.size_low) + ".." + size_text(options.size_high) +
                                      " per batch, validated at " + size_text(options.size);
  char counts[160];
  std::snprintf(counts, sizeof counts, "%ld variables, %ld mask entries, %ld parameters",
                static_cast<long>(trained.graph.num_nodes()),
                static_cast<long>(trained.model->pattern().num_entries()),
                static_cast<long>(parameters));
  return "training a GSDM for " + trained.problem->name + " (size " + sizes +
         (options.variant.empty() ? "" : ", " + options.variant) +
         (options.intermediates ? "" : ", no intermediates") + "): " + counts + ", " +
         mechanism_name(trained.model->config().attention) + " attention, on " +
         request.device.str() + ", " + std::to_string(at::get_num_threads()) + " threads" +
         (request.ranks ? ", " + std::to_string(request.ranks->size()) + " ranks" : "");
}

}  // namespace

StopCondition parse_stop_condition(const std::string& text) {
  for (const char* op : {">=", "<="}) {
    const size_t at = text.find(op);
    if (at == std::string::npos || at == 0) continue;
    StopCondition c{text.substr(0, at), op[0] == '>', 0};
    try {
      size_t used = 0;
      const std::string level = text.substr(at + 2);
      c.level = std::stod(level, &used);
      if (used == level.size() && std::isfinite(c.level)) return c;
    } catch (const std::exception&) {
    }
  }
  throw std::invalid_argument("--stop-at takes METRIC>=LEVEL or METRIC<=LEVEL (e.g. accuracy>=1), "
                              "got '" + text + "'");
}

ProblemTrainReport train_problem(const ProblemTrainRequest& request) {
  const Problem& problem = find_problem(request.problem);
  const ProblemOptions options = resolve_options(problem, request.options);
  TrainingOptions training = request.training;
  training.loop.ranks = request.ranks;
  training.loop.learning_rate = request.learning_rate.value_or(problem.learning_rate);
  training.batch = request.batch.value_or(problem.batch);
  const bool root = !request.ranks || request.ranks->is_root();

  const GsdmConfig config = resolved_config(problem, request);
  // Through the size gate before the first weight is made: the model, its average, and in training
  // the gradients, the optimiser's two moments, its update's temporary and a batch's activations
  // (without the attention weights, which need the compiled mask: train checks again with them
  // once the weights exist).
  const int64_t nodes = problem.graph(options).num_nodes();
  require_memory(6.0 * weight_bytes(config, nodes) +
                     static_cast<double>(training.batch) *
                         activation_bytes_per_example(config, static_cast<double>(nodes), 0.0),
                 "training a GSDM of dim " + std::to_string(config.dim) + " and " +
                     std::to_string(config.blocks) + " blocks on batches of " +
                     std::to_string(training.batch));
  const nlohmann::json metadata =
      problem_model_metadata(problem, options, config, request.schedule);
  ProblemModel trained = [&] {
    DefaultGeneratorGuard initial_weights(request.seed);
    return build_problem_model(metadata);
  }();
  ProblemModel averaged = build_problem_model(metadata);  // receives the EMA weights
  nlohmann::json initialised_from;
  if (!request.init_from.empty()) {
    initialised_from = start_from_model_file(request.init_from, trained, averaged);
  }
  trained.model->to(request.device);
  averaged.model->to(request.device);

  std::mt19937_64 validation_rng(request.seed + kValidationStream);
  const auto& make_validation =
      problem.make_validation_examples ? problem.make_validation_examples : problem.make_examples;
  const TrainingBatch validation =
      make_validation(trained.graph, options, request.validation_examples, validation_rng);
  TrainingProblem task;
  task.metadata = metadata;
  add_training_batches(task, trained);
  if (request.stop) {
    if (training.loop.validate_every == 0) throw std::invalid_argument("--stop-at needs --validate-every");
    // The metric's names, known before training from scoring the examples' own values.
    const nlohmann::json names = problem.score(trained.graph, options, validation, validation.x0);
    if (!names.contains(request.stop->metric)) {
      std::string known;
      for (const auto& item : names.items()) known += (known.empty() ? "" : ", ") + item.key();
      throw std::invalid_argument("--stop-at: " + problem.name + " has no validation metric '" +
                                  request.stop->metric + "'; it has " + known);
    }
    const StopCondition stop = *request.stop;
    task.stop_after = [stop](const nlohmann::json& metrics) {
      const double value = metrics.at(stop.metric).get<double>();
      return stop.at_least ? value >= stop.level : value <= stop.level;
    };
  }
  task.validate = [&](Gsdm) {
    // Its own generator, restarted each time: every validation scores the same draws.
    SampleOptions sampling;
    sampling.ddim_steps = 20;
    sampling.generator = at::make_generator<at::CPUGeneratorImpl>(request.seed + kValidationStream);
    nlohmann::json metrics = evaluate(averaged, validation, sampling);
    metrics.erase("seconds");
    return metrics;
  };
  if (root) std::fprintf(stderr, "%s\n", heading(trained, request).c_str());
  ProblemTrainReport report{train(trained.model, averaged.model, trained.schedule, task, training,
                                  request.seed),
                            averaged};
  report.averaged.metadata["trained_steps"] = report.result.steps_done;
  if (!initialised_from.is_null()) report.averaged.metadata["initialised_from"] = initialised_from;
  return report;
}

}  // namespace structdiff::gsdm
