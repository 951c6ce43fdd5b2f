// The Sudoku evaluation as a library call (what `structdiff sudoku eval` prints): a model's valid
// grids by number of given cells, on unique puzzles of three difficulties, and the diversity of its
// draws; request in, report out.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "structdiff/sudoku.h"
#include "structdiff/sudoku_model.h"

namespace structdiff::sudoku {

// Distinct valid grids among repeated draws for one lightly constrained puzzle.
struct Diversity {
  int64_t samples = 0;
  int64_t valid = 0;
  int64_t distinct_valid = 0;
  double temperature = 0;  // of the repeated draws (repeated_draws)
};

struct EvalRequest {
  int64_t count = 100;             // puzzles per setting
  int64_t diversity_samples = 32;
  int64_t samples = 1;             // per puzzle, stopping at the first valid one
  bool unique = true;              // the unique-solution settings too (9 x 9 models)
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

// The puzzles of each setting are drawn from request.seed in a fixed order, so equal seeds score
// equal puzzles across models and runs.
EvalReport evaluate_settings(const TrainedModel& trained, const EvalRequest& request);

}  // namespace structdiff::sudoku
