// Sudoku as a GSDM problem: the factor graph, batches of training data, and solving puzzles
// with a trained model.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/types.h>

#include "structdiff/diffusion.h"
#include "structdiff/graph.h"
#include "structdiff/gsdm.h"
#include "structdiff/gsdm_problems.h"
#include "structdiff/sudoku.h"

namespace structdiff::sudoku {

// One discrete array "cell" of shape (n^2, n^2) with n^2 options; a factor per row, column and
// block; embedding groups of the n cells sharing a row and a block (the invariance the paper's EE
// captures).
graph::GraphicalModel graphical_model(int n);

// Flat GSDM states: one one-hot block per cell, row-major.
torch::Tensor encode(const std::vector<Grid>& grids);  // blanks encode as zeros
std::vector<Grid> decode(const torch::Tensor& state, int n);
torch::Tensor observed_mask(const std::vector<Grid>& puzzles);  // (batch, cells) bool

struct Batch {
  torch::Tensor x0;        // (batch, width)
  torch::Tensor observed;  // (batch, cells) bool
};
// Fresh solutions of `family`, each observing a uniformly random number (0 .. all but one) of
// random cells; with `unique_puzzles` (9x9), each example instead observes, with probability 1/2,
// the givens of a unique-solution puzzle with 17-45 givens (the puzzles `sudoku eval` scores).
Batch make_training_batch(int n, int64_t batch, std::mt19937_64& rng,
                          GridFamily family = GridFamily::broad, bool unique_puzzles = false);

using Sampler = gsdm::Sampler;
using SolveOptions = gsdm::SampleOptions;
// One sample per puzzle, observed cells clamped at every step. Runs without gradients.
std::vector<Grid> solve(gsdm::Gsdm model, const diffusion::NoiseSchedule& schedule,
                        const std::vector<Grid>& puzzles, const SolveOptions& options);

}  // namespace structdiff::sudoku

namespace structdiff::sudoku {

// The registry's sudoku problem (gsdm train --problem sudoku) at block side n: its size is the
// grid side n^2, and the variant "pattern" trains on the authors' grids.
gsdm::ProblemOptions problem_options(int n, GridFamily grids);
int block_side(const gsdm::ProblemOptions& options);
GridFamily grid_family(const gsdm::ProblemOptions& options);

// A trained model as the Sudoku front end (solve, eval) uses it: a GSDM of the sudoku problem.
struct TrainedModel {
  int n = 3;
  GridFamily grids = GridFamily::broad;  // what it was trained on
  gsdm::Gsdm model{nullptr};
  diffusion::NoiseSchedule schedule{diffusion::ScheduleConfig{}};
};
// The metadata of a model file (kind "gsdm", problem "sudoku") for these settings.
nlohmann::json model_metadata(int n, GridFamily grids, const gsdm::GsdmConfig& config,
                              const diffusion::ScheduleConfig& schedule);
TrainedModel build_model(const nlohmann::json& metadata);  // fresh weights
// Reads files of the sudoku problem, and the older files of kind "sudoku"; throws for others.
TrainedModel load_model(const std::string& path);
void save_model(const std::string& path, const TrainedModel& trained);

}  // namespace structdiff::sudoku

namespace structdiff::sudoku {

// The options for drawing a puzzle again: the adaptive sampler at temperature 0 without order
// noise would repeat its first sample, so its repeated draws take the order noise below (values
// still the most probable); options that already vary (a temperature, order noise, the ancestral
// sampler's random order, a Gaussian model's noise) are left as given. On validation puzzles (seed 3,
// up to 64 draws) order noise 0.1 solved 300 of 300 unique puzzles with 26-45 givens where
// redrawing at temperature 1 solved 295 (docs/results/gsdm-sudoku.md).
constexpr double kRepeatedDrawOrderNoise = 0.1;
SolveOptions repeated_draws(const TrainedModel& trained, SolveOptions options);
// The options for draws from a masked model's own distribution (temperature at least 1), as the
// diversity check draws them; a Gaussian model's are left as given.
SolveOptions own_distribution(const TrainedModel& trained, SolveOptions options);

// What drawing up to K samples for one puzzle gave.
struct Attempt {
  Grid shown;           // the first valid sample, else the first sample
  int64_t drawn = 0;    // samples drawn
  int64_t valid = 0;    // of which valid (complete, no violated pair, agrees with the givens)
};
// Draws up to `max_samples` samples per puzzle in rounds of 1, 2, 4, ... and stops for a puzzle
// after the round that gives it a valid sample; rounds after the first use repeated_draws. Each round's samples, over all puzzles still
// unsolved, run in batches of up to `batch` (one batch is cheaper than its samples one by one).
// With max_samples 1 this is `solve` in batches of `batch`.
std::vector<Attempt> solve_until_valid(const TrainedModel& trained, const std::vector<Grid>& puzzles,
                                       int64_t max_samples, const SolveOptions& options,
                                       int64_t batch = 64);

struct Accuracy {
  int64_t puzzles = 0;
  int64_t valid = 0;              // puzzles with a valid sample among those drawn
  int64_t distinct_valid = 0;     // different grids among the valid samples shown (from nothing:
                                  // how many different Sudokus were made, not one repeated)
  int64_t samples = 0;            // samples drawn, all puzzles together
  double violated_fraction = 0;   // violated pairs / constrained pairs of the sample shown, averaged (Fig. 5b)
  double seconds = 0;             // wall-clock for sampling
  double valid_fraction() const { return puzzles ? static_cast<double>(valid) / puzzles : 0.0; }
};
// Solves `puzzles` with up to `max_samples` samples each (solve_until_valid) and scores them.
Accuracy evaluate(const TrainedModel& trained, const std::vector<Grid>& puzzles,
                  const SolveOptions& options, int64_t max_samples = 1, int64_t batch = 64);

}  // namespace structdiff::sudoku
