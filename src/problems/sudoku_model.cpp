#include "structdiff/sudoku_model.h"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <set>
#include <stdexcept>

#include <torch/torch.h>

#include "problems/entries.h"
#include "structdiff/model_file.h"

namespace structdiff::sudoku {

graph::GraphicalModel graphical_model(int n) {
  if (n < 2 || n > 5) throw std::invalid_argument("sudoku: n must be in 2..5, got " + std::to_string(n));
  const int64_t side = n * n;
  graph::GraphicalModel model;
  model.add_array("cell", {side, side}, graph::VariableType::discrete, side);
  for (int64_t i = 0; i < side; ++i) {
    std::vector<graph::Element> row, col, block;
    for (int64_t j = 0; j < side; ++j) {
      row.push_back({"cell", {i, j}});
      col.push_back({"cell", {j, i}});
      block.push_back({"cell", {(i / n) * n + j / n, (i % n) * n + j % n}});
    }
    model.add_factor(row);
    model.add_factor(col);
    model.add_factor(block);
  }
  for (int64_t row = 0; row < side; ++row) {
    for (int64_t stack = 0; stack < n; ++stack) {
      std::vector<graph::Element> group;
      for (int64_t k = 0; k < n; ++k) group.push_back({"cell", {row, stack * n + k}});
      model.add_embedding_group(group);
    }
  }
  return model;
}

torch::Tensor encode(const std::vector<Grid>& grids) {
  if (grids.empty()) throw std::invalid_argument("sudoku::encode: no grids");
  const int side = grids.front().side(), cells = grids.front().size();
  torch::Tensor state = torch::zeros({static_cast<int64_t>(grids.size()), cells * side});
  auto data = state.accessor<float, 2>();
  for (size_t b = 0; b < grids.size(); ++b) {
    if (grids[b].n != grids.front().n) throw std::invalid_argument("sudoku::encode: mixed sizes");
    for (int c = 0; c < cells; ++c) {
      if (grids[b].cells[c] != kBlank) data[b][c * side + grids[b].cells[c]] = 1.0f;
    }
  }
  return state;
}

std::vector<Grid> decode(const torch::Tensor& state, int n) {
  const int side = n * n, cells = side * side;
  torch::Tensor digits = state.view({state.size(0), cells, side}).argmax(-1).to(torch::kInt).contiguous();
  std::vector<Grid> grids(state.size(0));
  const int* data = digits.data_ptr<int>();
  for (size_t b = 0; b < grids.size(); ++b) {
    grids[b].n = n;
    grids[b].cells.assign(data + b * cells, data + (b + 1) * cells);
  }
  return grids;
}

torch::Tensor observed_mask(const std::vector<Grid>& puzzles) {
  const int cells = puzzles.front().size();
  torch::Tensor mask = torch::zeros({static_cast<int64_t>(puzzles.size()), cells}, torch::kBool);
  auto data = mask.accessor<bool, 2>();
  for (size_t b = 0; b < puzzles.size(); ++b) {
    for (int c = 0; c < cells; ++c) data[b][c] = puzzles[b].cells[c] != kBlank;
  }
  return mask;
}

Batch make_training_batch(int n, int64_t batch, std::mt19937_64& rng, GridFamily family,
                          bool unique_puzzles) {
  if (unique_puzzles && n != 3) throw std::invalid_argument("sudoku: unique puzzles are 9x9 only");
  std::vector<Grid> solutions, puzzles;
  for (int64_t b = 0; b < batch; ++b) {
    solutions.push_back(generate_solution(n, rng, family));
    if (unique_puzzles && rng() % 2 == 0) {
      puzzles.push_back(make_unique_puzzle(solutions.back(), 17, 45, rng));
      continue;
    }
    const int cells = solutions.back().size();
    // Uniform in 0 .. cells-1, from the generator's own draw so the stream stays portable.
    const int observed = static_cast<int>(rng() % static_cast<uint64_t>(cells));
    puzzles.push_back(observe_random_cells(solutions.back(), observed, rng));
  }
  return {encode(solutions), observed_mask(puzzles)};
}

std::vector<Grid> solve(gsdm::Gsdm model, const diffusion::NoiseSchedule& schedule,
                        const std::vector<Grid>& puzzles, const SolveOptions& options) {
  const torch::Tensor observed = observed_mask(puzzles);
  const torch::Tensor x0 = gsdm::sample(model, schedule, observed, encode(puzzles), options);
  return decode(x0, puzzles.front().n);
}

}  // namespace structdiff::sudoku

namespace structdiff::sudoku {

gsdm::ProblemOptions problem_options(int n, GridFamily grids) {
  gsdm::ProblemOptions options;
  options.size = {static_cast<int64_t>(n) * n};
  options.variant = grids == GridFamily::pattern ? "pattern" : "";
  return options;
}

int block_side(const gsdm::ProblemOptions& options) {
  const int64_t side = options.size.at(0);
  int n = 2;
  while (n < 5 && n * n < side) ++n;
  if (n * n != side) {
    throw std::invalid_argument("sudoku: the grid side must be 4, 9, 16 or 25, got " +
                                std::to_string(side));
  }
  return n;
}

GridFamily grid_family(const gsdm::ProblemOptions& options) {
  return options.variant == "pattern" ? GridFamily::pattern : GridFamily::broad;
}

namespace {

TrainedModel sudoku_view(const gsdm::ProblemModel& built) {
  if (built.problem->name != "sudoku") {
    throw std::invalid_argument("not a Sudoku model (problem '" + built.problem->name + "')");
  }
  return {block_side(built.options), grid_family(built.options), built.model, built.schedule};
}

}  // namespace

nlohmann::json model_metadata(int n, GridFamily grids, const gsdm::GsdmConfig& config,
                              const diffusion::ScheduleConfig& schedule) {
  return gsdm::problem_model_metadata(gsdm::find_problem("sudoku"), problem_options(n, grids),
                                      config, schedule);
}

TrainedModel build_model(const nlohmann::json& metadata) {
  return sudoku_view(gsdm::build_problem_model(metadata));
}

TrainedModel load_model(const std::string& path) {
  const gsdm::ProblemModel loaded = gsdm::load_problem_model(path);
  if (loaded.problem->name != "sudoku") {
    throw std::runtime_error(path + " holds a GSDM of problem '" + loaded.problem->name +
                             "', not a Sudoku model");
  }
  return sudoku_view(loaded);
}

void save_model(const std::string& path, const TrainedModel& trained) {
  // Saving does not modify the module.
  train::save_model_file(path, "gsdm", *trained.model.ptr(),
                         model_metadata(trained.n, trained.grids, trained.model->config(),
                                        trained.schedule.config()));
}

}  // namespace structdiff::sudoku

namespace structdiff::sudoku {

SolveOptions repeated_draws(const TrainedModel& trained, SolveOptions options) {
  const gsdm::DiffusionProcess process = trained.model->config().process;
  if (gsdm::resolve_sampler(options.sampler, process) == gsdm::Sampler::adaptive &&
      options.temperature == 0 && options.order_noise == 0) {
    options.order_noise = kRepeatedDrawOrderNoise;
  }
  return options;
}

SolveOptions own_distribution(const TrainedModel& trained, SolveOptions options) {
  if (trained.model->config().process == gsdm::DiffusionProcess::masked) {
    options.temperature = std::max(options.temperature, 1.0);
  }
  return options;
}

std::vector<Attempt> solve_until_valid(const TrainedModel& trained, const std::vector<Grid>& puzzles,
                                       int64_t max_samples, const SolveOptions& options,
                                       int64_t batch) {
  if (max_samples < 1 || batch < 1) {
    throw std::invalid_argument("sudoku: samples per puzzle and batch must be >= 1");
  }
  const SolveOptions again = repeated_draws(trained, options);
  std::vector<Attempt> attempts(puzzles.size());
  std::vector<size_t> unsolved(puzzles.size());
  std::iota(unsolved.begin(), unsolved.end(), size_t{0});
  for (int64_t round = 1; !unsolved.empty(); round *= 2) {
    // This round's copies, puzzle by puzzle, then sampled in batches.
    std::vector<size_t> owner;
    for (size_t p : unsolved) {
      const int64_t copies = std::min(round, max_samples - attempts[p].drawn);
      owner.insert(owner.end(), static_cast<size_t>(copies), p);
    }
    for (size_t first = 0; first < owner.size(); first += static_cast<size_t>(batch)) {
      const size_t last = std::min(owner.size(), first + static_cast<size_t>(batch));
      std::vector<Grid> chunk;
      for (size_t k = first; k < last; ++k) chunk.push_back(puzzles[owner[k]]);
      const std::vector<Grid> samples =
          solve(trained.model, trained.schedule, chunk, round == 1 ? options : again);
      for (size_t k = first; k < last; ++k) {
        Attempt& a = attempts[owner[k]];
        const Grid& sample = samples[k - first];
        const bool valid = is_valid_solution(sample, puzzles[owner[k]]);
        if (a.drawn == 0 || (valid && a.valid == 0)) a.shown = sample;
        a.valid += valid;
        ++a.drawn;
      }
    }
    std::vector<size_t> still;
    for (size_t p : unsolved) {
      if (attempts[p].valid == 0 && attempts[p].drawn < max_samples) still.push_back(p);
    }
    unsolved = std::move(still);
  }
  return attempts;
}

Accuracy evaluate(const TrainedModel& trained, const std::vector<Grid>& puzzles,
                  const SolveOptions& options, int64_t max_samples, int64_t batch) {
  Accuracy accuracy;
  const auto started = std::chrono::steady_clock::now();
  const double pairs = static_cast<double>(constrained_pairs(trained.n));
  std::set<std::vector<int>> valid_grids;
  for (const Attempt& a : solve_until_valid(trained, puzzles, max_samples, options, batch)) {
    accuracy.valid += a.valid > 0;
    if (a.valid > 0) valid_grids.insert(a.shown.cells);
    accuracy.samples += a.drawn;
    accuracy.violated_fraction += static_cast<double>(violated_pairs(a.shown)) / pairs;
    ++accuracy.puzzles;
  }
  accuracy.distinct_valid = static_cast<int64_t>(valid_grids.size());
  if (accuracy.puzzles) accuracy.violated_fraction /= static_cast<double>(accuracy.puzzles);
  accuracy.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return accuracy;
}

}  // namespace structdiff::sudoku

namespace structdiff::gsdm::entries {

Problem sudoku() {
  Problem p;
  p.name = "sudoku";
  p.summary = "complete an n^2 x n^2 Sudoku grid from a random number of given cells";
  p.size_help = "grid side: 4, 9, 16 or 25";
  p.default_size = {9};
  p.min_size = {4};
  p.max_size = {25};
  p.size_rule = [](const ProblemOptions& options) -> std::string {
    const int64_t side = options.size.at(0);
    if (side != 4 && side != 9 && side != 16 && side != 25) return "a square of 2..5";
    return options.variant == "puzzles" && side != 9 ? "the puzzles variant is 9x9 only" : "";
  };
  p.variants = {{"pattern",
                 "train on the authors' grids: one shifted-row pattern, relabelled and shuffled "
                 "(paper footnote 2)"},
                {"puzzles",
                 "9x9: half the training examples observe the givens of a unique-solution puzzle "
                 "(17-45 givens) instead of random cells"}};
  // Table 2: D 128, 6 blocks, 8 heads, batch 32; lr 3e-4 as the spec note's CPU row.
  p.learning_rate = 3e-4;
  p.batch = 32;
  p.graph = [](const ProblemOptions& options) {
    return sudoku::graphical_model(sudoku::block_side(options));
  };
  p.make_examples = [](const graph::GraphicalModel&, const ProblemOptions& options, int64_t count,
                       std::mt19937_64& rng) {
    const sudoku::Batch batch =
        sudoku::make_training_batch(sudoku::block_side(options), count, rng, sudoku::grid_family(options),
                                    options.variant == "puzzles");
    return TrainingBatch{batch.x0, batch.observed};
  };
  // The paper validates with half the cells given.
  p.make_validation_examples = [](const graph::GraphicalModel&, const ProblemOptions& options,
                                  int64_t count, std::mt19937_64& rng) {
    const int n = sudoku::block_side(options);
    std::vector<sudoku::Grid> solutions, puzzles;
    for (int64_t i = 0; i < count; ++i) {
      solutions.push_back(sudoku::generate_solution(n, rng, sudoku::grid_family(options)));
      puzzles.push_back(sudoku::observe_random_cells(solutions.back(), solutions.back().size() / 2, rng));
    }
    return TrainingBatch{sudoku::encode(solutions), sudoku::observed_mask(puzzles)};
  };
  p.score = [](const graph::GraphicalModel&, const ProblemOptions& options,
               const TrainingBatch& examples, const torch::Tensor& samples) {
    const int n = sudoku::block_side(options);
    const std::vector<sudoku::Grid> solutions = sudoku::decode(examples.x0, n);
    const std::vector<sudoku::Grid> sampled = sudoku::decode(samples, n);
    const auto observed = examples.observed.accessor<bool, 2>();
    const double pairs = static_cast<double>(sudoku::constrained_pairs(n));
    int64_t valid = 0;
    double violated = 0;
    for (size_t b = 0; b < sampled.size(); ++b) {
      sudoku::Grid puzzle = solutions[b];
      for (size_t c = 0; c < puzzle.cells.size(); ++c) {
        if (!observed[b][c]) puzzle.cells[c] = sudoku::kBlank;
      }
      valid += sudoku::is_valid_solution(sampled[b], puzzle);
      violated += static_cast<double>(sudoku::violated_pairs(sampled[b])) / pairs;
    }
    const double count = static_cast<double>(sampled.size());
    return nlohmann::json{{"valid_fraction", static_cast<double>(valid) / count},
                          {"violated_fraction", violated / count},
                          {"baseline_uniform_violated_fraction", 1.0 / (n * n)}};
  };
  return p;
}

}  // namespace structdiff::gsdm::entries
