// The GSDM problem registry and what every problem shares: its model file, and evaluation by
// conditional sampling.
#include <chrono>
#include <stdexcept>

#include <torch/torch.h>

#include "problems/entries.h"
#include "structdiff/gsdm_problems.h"
#include "structdiff/train.h"
#include "util/text.h"

namespace structdiff::gsdm {

void to_json(nlohmann::json& j, const ProblemOptions& options) {
  j = {{"size", options.size}, {"intermediates", options.intermediates}};
}

void from_json(const nlohmann::json& j, ProblemOptions& options) {
  // Files from before sizes were lists hold one number.
  const nlohmann::json& size = j.at("size");
  options.size = size.is_number_integer() ? std::vector<int64_t>{size.get<int64_t>()}
                                          : size.get<std::vector<int64_t>>();
  options.intermediates = j.at("intermediates").get<bool>();
}

const std::vector<Problem>& problems() {
  static const std::vector<Problem> registry = {entries::sudoku(), entries::sorting(),
                                                entries::bcmf(), entries::matrix_inversion(),
                                                entries::boolean_circuit()};
  return registry;
}

const Problem& find_problem(const std::string& name) {
  std::vector<std::string> names;
  for (const Problem& problem : problems()) {
    if (problem.name == name) return problem;
    names.push_back(problem.name);
  }
  std::string list;
  for (const std::string& known : names) list += (list.empty() ? "" : ", ") + known;
  const std::string nearest = closest_name(name, names);
  throw std::invalid_argument("unknown problem '" + name + "'" +
                              (nearest.empty() ? "" : " (did you mean '" + nearest + "'?)") +
                              "; the problems are " + list);
}

std::vector<int64_t> parse_size(const std::string& text) {
  std::vector<int64_t> size;
  std::string digits;
  const auto fail = [&] {
    throw std::invalid_argument("--size '" + text +
                                "': give whole numbers separated by ',' or 'x', e.g. 16,16,8");
  };
  for (size_t at = 0; at <= text.size(); ++at) {
    if (at == text.size() || text[at] == ',' || text[at] == 'x') {
      if (digits.empty() || digits.size() > 9) fail();
      size.push_back(std::stoll(digits));
      digits.clear();
    } else if (text[at] >= '0' && text[at] <= '9') {
      digits += text[at];
    } else {
      fail();
    }
  }
  return size;
}

std::string size_text(const std::vector<int64_t>& size) {
  std::string text;
  for (const int64_t v : size) text += (text.empty() ? "" : ",") + std::to_string(v);
  return text;
}

ProblemOptions resolve_options(const Problem& problem, ProblemOptions options) {
  if (options.size.empty()) options.size = problem.default_size;
  bool inside = options.size.size() == problem.default_size.size();
  for (size_t d = 0; inside && d < options.size.size(); ++d) {
    inside = options.size[d] >= problem.min_size[d] && options.size[d] <= problem.max_size[d];
  }
  if (!inside) {
    throw std::invalid_argument("--size for " + problem.name + " (" + problem.size_help +
                                ") must be in " + size_text(problem.min_size) + " .. " +
                                size_text(problem.max_size) + ", got " + size_text(options.size));
  }
  if (!options.intermediates && !problem.has_intermediates) {
    throw std::invalid_argument(problem.name + " has no intermediate variables to drop");
  }
  return options;
}

Problem traced_problem(Problem problem, GenerativeProgram program) {
  problem.graph = [program](const ProblemOptions& options) {
    graph::Tracer tracer({options.intermediates});
    std::mt19937_64 rng(0);
    program(tracer, options, rng);
    return tracer.graph();
  };
  problem.make_examples = [program](const graph::GraphicalModel& model,
                                    const ProblemOptions& options, int64_t count,
                                    std::mt19937_64& rng) {
    std::vector<torch::Tensor> values, observed;
    for (int64_t example = 0; example < count; ++example) {
      graph::Tracer tracer({options.intermediates});
      program(tracer, options, rng);
      values.push_back(tracer.values());
      if (values.back().numel() != model.num_nodes()) {
        throw std::invalid_argument(
            "the generative program traced " + std::to_string(values.back().numel()) +
            " variables in one run and " + std::to_string(model.num_nodes()) +
            " in the run that made the graph; what it creates must not depend on its draws");
      }
      observed.push_back(tracer.observed());
    }
    return TrainingBatch{encode_state(StateLayout(model), model, torch::stack(values)),
                         torch::stack(observed)};
  };
  return problem;
}

nlohmann::json problem_model_metadata(const Problem& problem, const ProblemOptions& options,
                                      const GsdmConfig& config,
                                      const diffusion::ScheduleConfig& schedule) {
  return {{"kind", "gsdm"},
          {"problem", problem.name},
          {"problem_options", options},
          {"model", config},
          {"schedule", schedule}};
}

ProblemModel build_problem_model(const nlohmann::json& metadata) {
  ProblemModel built;
  built.problem = &find_problem(metadata.at("problem").get<std::string>());
  // Files of `sudoku train` (kind "sudoku") name their block side "n".
  built.options = metadata.contains("problem_options")
                      ? metadata.at("problem_options").get<ProblemOptions>()
                      : ProblemOptions{{metadata.at("n").get<int64_t>()}, true};
  built.options = resolve_options(*built.problem, built.options);
  built.graph = built.problem->graph(built.options);
  built.model = Gsdm(built.graph, metadata.at("model").get<GsdmConfig>());
  built.schedule =
      diffusion::NoiseSchedule(metadata.at("schedule").get<diffusion::ScheduleConfig>());
  built.metadata = metadata;
  return built;
}

ProblemModel load_problem_model(const std::string& path) {
  const nlohmann::json metadata = train::read_checkpoint_metadata(path);
  const std::string kind = train::model_kind(metadata);
  // Sudoku models from `sudoku train` are GSDMs of the sudoku problem too.
  train::require_model_kind(metadata, kind == "sudoku" ? "sudoku" : "gsdm", path);
  ProblemModel loaded;
  train::load_model_file(path, kind, [&](const nlohmann::json& stored) -> torch::nn::Module& {
    try {
      loaded = build_problem_model(stored);
    } catch (const nlohmann::json::exception& error) {
      throw std::runtime_error(path + ": the model's configuration is incomplete or malformed (" +
                               error.what() + ")");
    }
    return *loaded.model;
  });
  return loaded;
}

ProblemModel load_problem_model(const std::string& path, const std::vector<int64_t>& size) {
  ProblemModel trained = load_problem_model(path);
  if (size.empty() || size == trained.options.size) return trained;
  // The graph's own tensors (mask, embedding rows per node) are rebuilt for the new size; the
  // learned parameters are copied and must keep their shapes.
  ProblemOptions options = trained.options;
  options.size = size;
  nlohmann::json metadata = trained.metadata;
  metadata["problem_options"] = resolve_options(*trained.problem, options);
  metadata["trained_size"] = size_text(trained.options.size);
  ProblemModel resized = build_problem_model(metadata);
  const auto source = trained.model->named_parameters();
  torch::NoGradGuard no_grad;
  for (auto& item : resized.model->named_parameters()) {
    const std::string& name = item.key();
    torch::Tensor& parameter = item.value();
    const torch::Tensor* found = source.find(name);
    if (found == nullptr) throw std::logic_error("load_problem_model: no parameter " + name);
    const torch::Tensor& learned = *found;
    if (!learned.sizes().equals(parameter.sizes())) {
      throw std::invalid_argument(
          path + " was trained at size " + size_text(trained.options.size) +
          " and cannot run at size " + size_text(size) + ": its parameter " + name +
          " depends on the problem's size (" + std::to_string(learned.numel()) + " vs " +
          std::to_string(parameter.numel()) +
          " values); models trained with --embedding EE on a problem whose variables keep "
          "their options transfer");
    }
    parameter.copy_(learned);
  }
  resized.model->eval();
  return resized;
}

void save_problem_model(const std::string& path, ProblemModel& trained) {
  train::save_model_file(path, "gsdm", *trained.model, trained.metadata);
}

nlohmann::json evaluate(ProblemModel& trained, const TrainingBatch& examples,
                        const SampleOptions& options, int64_t batch) {
  if (batch < 1) throw std::invalid_argument("evaluate: batch must be >= 1");
  const auto started = std::chrono::steady_clock::now();
  const int64_t count = examples.x0.size(0);
  std::vector<torch::Tensor> samples;
  for (int64_t first = 0; first < count; first += batch) {
    const int64_t size = std::min(batch, count - first);
    samples.push_back(sample(trained.model, trained.schedule,
                             examples.observed.narrow(0, first, size),
                             examples.x0.narrow(0, first, size), options));
  }
  nlohmann::json metrics =
      trained.problem->score(trained.graph, trained.options, examples, torch::cat(samples, 0));
  metrics["examples"] = count;
  metrics["seconds"] =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return metrics;
}

}  // namespace structdiff::gsdm
