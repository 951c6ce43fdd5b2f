// Sudoku as library calls, request in, report out: solving puzzles (what `structdiff sudoku solve`
// prints), and the evaluation (`structdiff sudoku eval`): a model's valid grids by number of given
// cells, on unique puzzles of three difficulties, and the diversity of its draws.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/types.h>

#include "structdiff/sudoku.h"
#include "structdiff/sudoku_model.h"

namespace structdiff::sudoku {

struct SolveRequest {
  std::string model_path;
  std::vector<std::string> puzzles;  // each as `parse` reads it
  std::string file;                  // "" or puzzles one per line, blank lines skipped
  // With these the Gaussian 9x9 model solves 298 of 300 unique puzzles with 26-45 givens, the
  // shipped masked one 300 (its later draws with order noise: repeated_draws); a puzzle no draw
  // solves costs the masked one about 6 s on 2 threads (docs/results/gsdm-sudoku.md).
  int64_t samples = 64;  // up to this many per puzzle, stopping at a valid one (solve_until_valid)
  SolveOptions sampling;
  torch::Device device = torch::kCPU;
};

struct SolvedPuzzle {
  std::string name;  // "the puzzle given", or "FILE line N"
  // False when an exact search (9x9 and smaller) finds no solution at all: then no sample is drawn.
  bool has_solution = true;
  Attempt attempt;
};

struct SolveReport {
  std::vector<SolvedPuzzle> puzzles;  // in the order given: the puzzle argument, then the file's
  double seconds = 0;                 // sampling
  int64_t solved() const;
  // "" when every puzzle was solved; else which have no solution and which found none valid.
  std::string failures(int64_t samples) const;
};

// Throws std::invalid_argument naming the puzzle (and file line) that does not parse or is not of
// the model's size, or when no puzzle is given; the file is read up to 16 MiB.
SolveReport solve_puzzles(const SolveRequest& request);

// Distinct valid grids among repeated draws for one lightly constrained puzzle.
struct Diversity {
  int64_t samples = 0;
  int64_t valid = 0;
  int64_t distinct_valid = 0;
  double temperature = 0;  // of the draws (own_distribution)
};

struct EvalRequest {
  int64_t count = 100;             // puzzles per setting
  int64_t diversity_samples = 32;
  int64_t samples = 1;             // per puzzle, stopping at the first valid one
  bool unique = true;              // the unique-solution settings too (9 x 9 models)
  // Only these settings (eval_setting_names()); empty: all. The puzzles of every setting are
  // drawn all the same, so a setting scores the same puzzles whichever others run.
  std::vector<std::string> settings;
  std::optional<GridFamily> grids;  // puzzles from these grids; empty: what the model trained on
  SolveOptions sampling;           // the seed below draws the puzzles
  uint64_t seed = 0;
  // Each setting as it is measured, and the diversity check (for printing as the run goes).
  std::function<void(const std::string& setting, const Accuracy& accuracy)> on_setting;
  std::function<void(const Diversity& diversity)> on_diversity;
};

struct EvalReport {
  GridFamily grids = GridFamily::broad;  // the puzzles'
  nlohmann::json rows;                   // one object per setting and the diversity, in run order
};

// The grids the request's puzzles come from: request.grids, or those the model trained on.
GridFamily puzzle_grids(const TrainedModel& trained, const EvalRequest& request);

// The short names EvalRequest::settings takes, in the order the settings run: from nothing, 16
// cells given, 20/50/80 % given, unique 25-35 givens, diversity, unique 26-45 and 17-25 givens.
std::vector<std::string> eval_setting_names();

// The puzzles of each setting are drawn from request.seed in a fixed order, so equal seeds score
// equal puzzles across models and runs.
EvalReport evaluate_settings(const TrainedModel& trained, const EvalRequest& request);

}  // namespace structdiff::sudoku
