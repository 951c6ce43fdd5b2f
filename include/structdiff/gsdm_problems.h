// GSDM's problems as registry entries: each brings its graphical model, a generator of examples
// (complete states and which variables are observed), and its metric. `structdiff gsdm
// train|eval|sample --problem NAME` work for every entry; adding a problem is one file in
// src/problems/ and one line in the registry.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/types.h>

#include "structdiff/diffusion.h"
#include "structdiff/graph.h"
#include "structdiff/gsdm.h"
#include "structdiff/gsdm_training.h"
#include "structdiff/loop_options.h"
#include "structdiff/ranks.h"
#include "structdiff/tracer.h"

namespace structdiff::gsdm {

// What selects one graph of a problem family; a model file records it.
struct ProblemOptions {
  // The family's dimensions (sorting {list length}; sudoku {grid side n^2}; bcmf {m, n, k});
  // empty: the problem's default.
  std::vector<int64_t> size;
  bool intermediates = true;  // keep the deterministic intermediate variables (paper §3.3)
  // Another form of the problem (one of its `variants`): another graphical model of the same
  // data, or another conditioning; "": the problem's own.
  std::string variant{};
  // Training with a new size per batch (paper App. F): each batch draws every dimension
  // uniformly from [size_low, size_high]; empty: every batch is of `size`, which validation and
  // the model file keep in any case.
  std::vector<int64_t> size_low{}, size_high{};
};
// "16,16,8" (or "16x16x8") -> {16, 16, 8}: whole decimal numbers; anything else throws
// std::invalid_argument naming --size.
std::vector<int64_t> parse_size(const std::string& text);
std::string size_text(const std::vector<int64_t>& size);  // {16, 16, 8} -> "16,16,8"
// "1,1,1..10,10,10" -> size_low and size_high of `options`; throws std::invalid_argument naming
// --size-range.
void parse_size_range(const std::string& text, ProblemOptions& options);
void to_json(nlohmann::json& j, const ProblemOptions& options);
void from_json(const nlohmann::json& j, ProblemOptions& options);

struct Problem {
  std::string name;
  std::string summary;    // one line for --help
  std::string size_help;  // what --size's dimensions mean
  std::vector<int64_t> default_size, min_size, max_size;
  // Optional: what a size inside min..max must also be, for the options' variant (sudoku: a
  // square side, 9 for its puzzles variant); returns "" when it is fine, else what is wrong,
  // which resolve_options puts in its message.
  std::function<std::string(const ProblemOptions& options)> size_rule;
  bool has_intermediates = false;  // whether --no-intermediates changes the graph
  // Other forms of the problem, name -> one line for --help: sorting's "s fully connected" and
  // "unconstrained s" graphs (paper Fig. 7), unconditional BCMF (Fig. 13). `graph`,
  // `make_examples` and `score` read ProblemOptions::variant.
  std::vector<std::pair<std::string, std::string>> variants;
  // The paper's (Table 2) architecture and learning rate, scaled for the CPU as the spec note
  // says; command-line options override them.
  GsdmConfig config;
  double learning_rate = 2e-4;
  int64_t batch = 16;
  // The graphical model of `options` (size already checked against min/max).
  std::function<graph::GraphicalModel(const ProblemOptions& options)> graph;
  // `count` fresh examples: the complete state x0 (batch, width) and the observed nodes.
  std::function<TrainingBatch(const graph::GraphicalModel& model, const ProblemOptions& options,
                              int64_t count, std::mt19937_64& rng)>
      make_examples;
  // Metrics of sampled states against the examples they were conditioned on, including the
  // metric's reference level (e.g. a random permutation's RMSE) under a "baseline_" key.
  std::function<nlohmann::json(const graph::GraphicalModel& model, const ProblemOptions& options,
                               const TrainingBatch& examples, const torch::Tensor& samples)>
      score;
  // Optional: the examples `gsdm eval` scores when they differ from the training distribution
  // (matrix inversion: E = I). Same signature as make_examples.
  std::function<TrainingBatch(const graph::GraphicalModel& model, const ProblemOptions& options,
                              int64_t count, std::mt19937_64& rng)>
      make_test_examples;
  // Optional: the examples validation during `gsdm train` scores, where the paper validates on
  // others than the training distribution (sudoku: half the cells given). Same signature.
  std::function<TrainingBatch(const graph::GraphicalModel& model, const ProblemOptions& options,
                              int64_t count, std::mt19937_64& rng)>
      make_validation_examples;
};

// A problem written as a generative program (graph::Tracer): each run of `program` on a fresh
// tracer is one example (its values; its observe() calls mark what is observed), and the trace of
// a run is the graph. Fills `problem.graph` (a run with a fixed seed) and `problem.make_examples`;
// the rest (name, sizes, configuration, score) is the caller's. Every run must trace the same
// variables: a run that traces another number throws std::invalid_argument.
using GenerativeProgram =
    std::function<void(graph::Tracer& tracer, const ProblemOptions& options, std::mt19937_64& rng)>;
Problem traced_problem(Problem problem, GenerativeProgram program);

const std::vector<Problem>& problems();
// Throws std::invalid_argument listing the problems (and the nearest name) for an unknown one.
const Problem& find_problem(const std::string& name);
// `options` with an empty size replaced by the default; throws std::invalid_argument naming
// --size (or --size-range) and the problem's ranges for a size outside them, or --variant and the
// problem's variants for an unknown one.
ProblemOptions resolve_options(const Problem& problem, ProblemOptions options);

// A GSDM of one problem, as a model file (kind "gsdm") holds it.
struct ProblemModel {
  const Problem* problem = nullptr;
  ProblemOptions options;
  graph::GraphicalModel graph;
  Gsdm model{nullptr};
  diffusion::NoiseSchedule schedule{diffusion::ScheduleConfig{}};
  nlohmann::json metadata;
};
nlohmann::json problem_model_metadata(const Problem& problem, const ProblemOptions& options,
                                      const GsdmConfig& config,
                                      const diffusion::ScheduleConfig& schedule);
ProblemModel build_problem_model(const nlohmann::json& metadata);  // fresh weights
ProblemModel load_problem_model(const std::string& path);
// Size generalisation: the file's model running on the graph of `size`
// (GsdmImpl::structure_for); throws std::invalid_argument naming both sizes and what does not
// carry over (IE embeddings, size-dependent EE rows). metadata["trained_size"] records the file's
// size, or its training range ("1,1,1..10,10,10"). An empty `size` or the file's own loads the
// file as it is.
ProblemModel load_problem_model(const std::string& path, const std::vector<int64_t>& size);
void save_problem_model(const std::string& path, ProblemModel& trained);

// Sets task.make_batch to draw examples of `trained`'s problem: of its size, or with a size range
// each batch of a size drawn from it, on that size's graph and structure (built on first use and
// kept). With a range, also task.largest_structure; the range's two ends are built at once, so a
// model that cannot run at other sizes (IE embeddings) is refused before training.
void add_training_batches(TrainingProblem& task, const ProblemModel& trained);

// Throws std::invalid_argument starting with `what` (the options that asked) when `count`
// examples, sampled `batch` at a time on the model's current structure, would not fit in the
// memory available.
void require_sampling_memory(const ProblemModel& trained, int64_t count, int64_t batch,
                             const std::string& what);
// Samples `examples` conditioned on their observed variables, `batch` at a time.
torch::Tensor sample_in_batches(ProblemModel& trained, const TrainingBatch& examples,
                                const SampleOptions& options, int64_t batch = 64);
// sample_in_batches, scored with the problem's metric; adds "examples" and "seconds".
nlohmann::json evaluate(ProblemModel& trained, const TrainingBatch& examples,
                        const SampleOptions& options, int64_t batch = 64);

// ---- training a problem's GSDM: what `gsdm train` and `sudoku train` run ------------------------

// Random streams apart from the training's (seed + stream): the validation examples and their
// sampling, and the test examples of eval and sample.
inline constexpr uint64_t kValidationStream = 1000003, kTestStream = 2000003;

// "accuracy>=1" or "rmse<=0.05": a validation metric and the level that ends training.
struct StopCondition {
  std::string metric;
  bool at_least = true;
  double level = 0;
};
// Throws std::invalid_argument naming --stop-at for text of another form.
StopCondition parse_stop_condition(const std::string& text);

struct ProblemTrainRequest {
  std::string problem;
  ProblemOptions options;
  // The architecture: `model`, with the fields below in place of its own where given, else the
  // problem's (paper Table 2).
  GsdmConfig model;
  std::optional<int64_t> dim, blocks, heads;
  std::optional<EmbeddingKind> embedding;
  diffusion::ScheduleConfig schedule;
  // The loop; its learning rate and batch are the problem's unless given here.
  TrainingOptions training;
  std::optional<double> learning_rate;
  std::optional<int64_t> batch;
  int64_t validation_examples = 64;
  std::optional<StopCondition> stop;  // needs training.validate_every
  // A model file of the same problem, size and architecture whose weights start the run (the
  // optimiser starts afresh; an existing checkpoint with training.resume wins).
  std::string init_from;
  uint64_t seed = 0;
  torch::Device device = torch::kCPU;
  std::shared_ptr<train::Ranks> ranks;  // null: one process
};

struct ProblemTrainReport {
  train::LoopResult result;
  ProblemModel averaged;  // the EMA model; metadata["trained_steps"] (and "initialised_from")
};

// Builds the model the request describes, says on stderr what it trains (rank 0), trains it and
// returns the EMA model to save. Throws std::invalid_argument for a request it cannot run, naming
// the option (--stop-at, --init-from, --size, ...).
ProblemTrainReport train_problem(const ProblemTrainRequest& request);

}  // namespace structdiff::gsdm
