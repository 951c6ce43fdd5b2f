// The GSDM problem registry and what every problem shares: its model file, and evaluation by
// conditional sampling.
#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <stdexcept>

#include <torch/torch.h>

#include "problems/entries.h"
#include "structdiff/gsdm_problems.h"
#include "structdiff/checkpoint.h"
#include "structdiff/model_file.h"
#include "structdiff/runtime.h"
#include "util/text.h"

namespace structdiff::gsdm {

void to_json(nlohmann::json& j, const ProblemOptions& options) {
  j = {{"size", options.size}, {"intermediates", options.intermediates}};
  if (!options.size_low.empty()) j["size_range"] = {options.size_low, options.size_high};
  if (!options.variant.empty()) j["variant"] = options.variant;
}

void from_json(const nlohmann::json& j, ProblemOptions& options) {
  // Files from before sizes were lists hold one number.
  const nlohmann::json& size = j.at("size");
  options.size = size.is_number_integer() ? std::vector<int64_t>{size.get<int64_t>()}
                                          : size.get<std::vector<int64_t>>();
  options.intermediates = j.at("intermediates").get<bool>();
  if (j.contains("size_range")) {
    options.size_low = j.at("size_range").at(0).get<std::vector<int64_t>>();
    options.size_high = j.at("size_range").at(1).get<std::vector<int64_t>>();
  }
  options.variant = j.value("variant", std::string());
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

namespace {
std::vector<int64_t> parse_dimensions(const std::string& text, const std::string& option,
                                      const std::string& example) {
  std::vector<int64_t> size;
  std::string digits;
  const auto fail = [&] {
    throw std::invalid_argument(option + " '" + text +
                                "': give whole numbers separated by ',' or 'x', e.g. " + example);
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
}  // namespace

std::vector<int64_t> parse_size(const std::string& text) {
  return parse_dimensions(text, "--size", "16,16,8");
}

void parse_size_range(const std::string& text, ProblemOptions& options) {
  const size_t dots = text.find("..");
  if (dots == std::string::npos || dots == 0 || dots + 2 == text.size()) {
    throw std::invalid_argument("--size-range '" + text +
                                "': give the smallest and largest size as LOW..HIGH, e.g. "
                                "1,1,1..10,10,10");
  }
  options.size_low = parse_dimensions(text.substr(0, dots), "--size-range", "1,1,1..10,10,10");
  options.size_high = parse_dimensions(text.substr(dots + 2), "--size-range", "1,1,1..10,10,10");
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
  if (problem.size_rule) {
    if (const std::string wrong = problem.size_rule(options); !wrong.empty()) {
      throw std::invalid_argument("--size for " + problem.name + " (" + problem.size_help +
                                  "): " + wrong + ", got " + size_text(options.size));
    }
  }
  if (!options.size_low.empty()) {
    const std::string range = size_text(options.size_low) + ".." + size_text(options.size_high);
    if (options.size_low.size() != options.size_high.size()) {
      throw std::invalid_argument("--size-range " + range +
                                  ": both ends need the same number of dimensions");
    }
    for (size_t d = 0; d < options.size_low.size(); ++d) {
      if (options.size_low[d] > options.size_high[d]) {
        throw std::invalid_argument("--size-range " + range +
                                    ": the low end must not exceed the high end in any dimension");
      }
    }
    for (const std::vector<int64_t>* end : {&options.size_low, &options.size_high}) {
      ProblemOptions at_end = options;
      at_end.size = *end;
      at_end.size_low.clear();
      at_end.size_high.clear();
      try {
        resolve_options(problem, at_end);
      } catch (const std::invalid_argument& error) {
        throw std::invalid_argument(std::string("--size-range: ") + error.what());
      }
    }
  }
  if (!options.variant.empty()) {
    std::vector<std::string> names;
    for (const auto& [name, help] : problem.variants) names.push_back(name);
    if (std::find(names.begin(), names.end(), options.variant) == names.end()) {
      std::string list;
      for (const std::string& name : names) list += (list.empty() ? "" : ", ") + name;
      const std::string nearest = closest_name(options.variant, names);
      throw std::invalid_argument("--variant '" + options.variant + "'" +
                                  (nearest.empty() ? "" : " (did you mean '" + nearest + "'?)") +
                                  ": " + problem.name +
                                  (names.empty() ? " has no variants" : "'s variants are " + list));
    }
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
          {"config",
           {{"problem", problem.name},
            {"problem_options", options},
            {"model", config},
            {"schedule", schedule}}}};
}

ProblemModel build_problem_model(const nlohmann::json& metadata) {
  const nlohmann::json& config = metadata.at("config");
  ProblemModel built;
  built.problem = &find_problem(config.at("problem").get<std::string>());
  // Files of kind "sudoku" (written by `sudoku train` before it became this problem's training)
  // name the block side "n" and the grids "grids".
  if (config.contains("problem_options")) {
    built.options = config.at("problem_options").get<ProblemOptions>();
  } else {
    const int64_t n = config.at("n").get<int64_t>();
    built.options = ProblemOptions{{n * n}, true};
    if (config.value("grids", std::string("broad")) == "pattern") built.options.variant = "pattern";
  }
  built.options = resolve_options(*built.problem, built.options);
  built.graph = built.problem->graph(built.options);
  built.model = Gsdm(built.graph, config.at("model").get<GsdmConfig>());
  built.schedule =
      diffusion::NoiseSchedule(config.at("schedule").get<diffusion::ScheduleConfig>());
  built.metadata = metadata;
  return built;
}

ProblemModel load_problem_model(const std::string& path) {
  const nlohmann::json metadata = train::read_checkpoint_metadata(path);
  const std::string kind = train::model_kind(metadata);
  // Older Sudoku model files (kind "sudoku", e.g. models/sudoku9.pt) are GSDMs of this problem.
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
  ProblemOptions options = trained.options;
  options.size = size;
  options = resolve_options(*trained.problem, options);
  graph::GraphicalModel resized = trained.problem->graph(options);
  try {
    trained.model->use_structure(trained.model->structure_for(resized));
  } catch (const std::invalid_argument& error) {
    throw std::invalid_argument(path + " was trained at size " + size_text(trained.options.size) +
                                " and cannot run at size " + size_text(size) + ": " + error.what());
  }
  const ProblemOptions& own = trained.options;
  trained.metadata["trained_size"] =
      own.size_low.empty() ? size_text(own.size)
                           : size_text(own.size_low) + ".." + size_text(own.size_high);
  trained.options = options;
  trained.graph = std::move(resized);
  return trained;
}

void save_problem_model(const std::string& path, ProblemModel& trained) {
  train::save_model_file(path, "gsdm", *trained.model, trained.metadata);
}

void add_training_batches(TrainingProblem& task, const ProblemModel& trained) {
  const Problem& problem = *trained.problem;
  const ProblemOptions options = trained.options;
  if (options.size_low.empty()) {
    task.make_batch = [&problem, options, graph = trained.graph](int64_t count,
                                                                 std::mt19937_64& rng) {
      return problem.make_examples(graph, options, count, rng);
    };
    return;
  }
  struct Sized {
    graph::GraphicalModel graph;
    std::shared_ptr<GsdmStructure> structure;
  };
  auto built = std::make_shared<std::map<std::vector<int64_t>, Sized>>();
  const auto at_size = [built, &problem, options,
                        model = trained.model](const std::vector<int64_t>& size) -> const Sized& {
    auto found = built->find(size);
    if (found != built->end()) return found->second;
    ProblemOptions sized = options;
    sized.size = size;
    graph::GraphicalModel graph = problem.graph(sized);
    std::shared_ptr<GsdmStructure> structure = model->structure_for(graph);
    return built->emplace(size, Sized{std::move(graph), std::move(structure)}).first->second;
  };
  try {
    at_size(options.size_low);
    task.largest_structure = at_size(options.size_high).structure;
  } catch (const std::invalid_argument& error) {
    throw std::invalid_argument("--size-range: this model cannot run at other sizes: " +
                                std::string(error.what()));
  }
  task.make_batch = [at_size, &problem, options](int64_t count, std::mt19937_64& rng) {
    std::vector<int64_t> size(options.size_low.size());
    for (size_t d = 0; d < size.size(); ++d) {
      size[d] =
          std::uniform_int_distribution<int64_t>(options.size_low[d], options.size_high[d])(rng);
    }
    const Sized& sized = at_size(size);
    ProblemOptions at = options;
    at.size = size;
    TrainingBatch batch = problem.make_examples(sized.graph, at, count, rng);
    batch.structure = sized.structure;
    return batch;
  };
}

void require_sampling_memory(const ProblemModel& trained, int64_t count, int64_t batch,
                             const std::string& what) {
  // Per example: the state, its observed mask, the sample and what scoring derives from them
  // (about 4 copies of the state, 4 bytes each); per example in a batch, one block's activations.
  const GsdmStructure& structure = *trained.model->structure();
  const double per_example = 16.0 * static_cast<double>(trained.model->layout().width);
  const double per_batched =
      block_activation_bytes(trained.model->config(), static_cast<double>(structure.num_nodes),
                             structure.attended_pairs(), /*floats_per_node=*/8.0);
  require_memory(per_example * static_cast<double>(count) +
                     per_batched * static_cast<double>(std::min(count, batch)),
                 what);
}

torch::Tensor sample_in_batches(ProblemModel& trained, const TrainingBatch& examples,
                                const SampleOptions& options, int64_t batch) {
  if (batch < 1) throw std::invalid_argument("sampling: batch must be >= 1");
  const int64_t count = examples.x0.size(0);
  std::vector<torch::Tensor> samples;
  for (int64_t first = 0; first < count; first += batch) {
    const int64_t size = std::min(batch, count - first);
    samples.push_back(sample(trained.model, trained.schedule,
                             examples.observed.narrow(0, first, size),
                             examples.x0.narrow(0, first, size), options));
  }
  return torch::cat(samples, 0);
}

nlohmann::json evaluate(ProblemModel& trained, const TrainingBatch& examples,
                        const SampleOptions& options, int64_t batch) {
  const auto started = std::chrono::steady_clock::now();
  const torch::Tensor samples = sample_in_batches(trained, examples, options, batch);
  nlohmann::json metrics = trained.problem->score(trained.graph, trained.options, examples, samples);
  metrics["examples"] = examples.x0.size(0);
  metrics["seconds"] =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return metrics;
}

}  // namespace structdiff::gsdm
