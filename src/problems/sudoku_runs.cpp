#include "structdiff/sudoku_runs.h"

#include <algorithm>
#include <random>
#include <vector>

namespace structdiff::sudoku {
namespace {

Diversity measure_diversity(const TrainedModel& trained, const Grid& puzzle,
                            const EvalRequest& request) {
  const SolveOptions options = repeated_draws(trained, request.sampling);
  const std::vector<Grid> samples =
      solve(trained.model, trained.schedule,
            std::vector<Grid>(request.diversity_samples, puzzle), options);
  std::vector<std::vector<int>> distinct;
  Diversity diversity;
  diversity.samples = static_cast<int64_t>(samples.size());
  diversity.temperature = options.temperature;
  for (const auto& sample : samples) {
    if (!is_valid_solution(sample, puzzle)) continue;
    ++diversity.valid;
    if (std::find(distinct.begin(), distinct.end(), sample.cells) == distinct.end()) {
      distinct.push_back(sample.cells);
    }
  }
  diversity.distinct_valid = static_cast<int64_t>(distinct.size());
  return diversity;
}

}  // namespace

EvalReport evaluate_settings(const TrainedModel& trained, const EvalRequest& request) {
  EvalReport report;
  report.grids = request.grids.value_or(trained.grids);
  report.rows = nlohmann::json::array();
  const int cells = trained.n * trained.n * trained.n * trained.n;
  std::mt19937_64 rng(request.seed);
  auto score = [&](const std::string& setting, const std::vector<Grid>& puzzles) {
    const Accuracy a = evaluate(trained, puzzles, request.sampling, request.samples);
    const double per_puzzle = static_cast<double>(std::max<int64_t>(1, a.puzzles));
    if (request.on_setting) request.on_setting(setting, a);
    report.rows.push_back({{"setting", setting}, {"grids", grid_family_name(report.grids)},
                           {"puzzles", a.puzzles}, {"valid", a.valid_fraction()},
                           {"distinct_valid", a.distinct_valid},
                           {"violated_fraction", a.violated_fraction},
                           {"seconds_per_puzzle", a.seconds / per_puzzle},
                           {"max_samples", request.samples},
                           {"samples_per_puzzle", static_cast<double>(a.samples) / per_puzzle}});
  };
  auto random_puzzles = [&](int observed) {
    std::vector<Grid> puzzles;
    for (int64_t i = 0; i < request.count; ++i) {
      puzzles.push_back(
          observe_random_cells(generate_solution(trained.n, rng, report.grids), observed, rng));
    }
    return puzzles;
  };
  auto unique_puzzles = [&](int min_givens, int max_givens) {
    std::vector<Grid> puzzles;
    for (int64_t i = 0; i < request.count; ++i) {
      puzzles.push_back(make_unique_puzzle(generate_solution(3, rng, report.grids), min_givens,
                                           max_givens, rng));
    }
    return puzzles;
  };
  const bool unique = request.unique && trained.n == 3;
  score("observed 0 (unconditional)", random_puzzles(0));
  if (trained.n == 3) score("observed 16 cells", random_puzzles(16));
  for (int percent : {20, 50, 80}) {
    score("observed " + std::to_string(percent) + "%", random_puzzles(cells * percent / 100));
  }
  if (unique) score("unique, 25-35 givens", unique_puzzles(25, 35));
  const Grid puzzle = random_puzzles(trained.n == 3 ? 16 : cells / 5).front();
  const Diversity diversity = measure_diversity(trained, puzzle, request);
  if (request.on_diversity) request.on_diversity(diversity);
  report.rows.push_back({{"setting", "diversity"}, {"samples", diversity.samples},
                         {"valid", diversity.valid}, {"distinct_valid", diversity.distinct_valid},
                         {"temperature", diversity.temperature}});
  // Drawn last, so that the puzzles above stay those of earlier evaluations with the same seed.
  if (unique) {
    score("unique, 26-45 givens", unique_puzzles(26, 45));
    score("unique, 17-25 givens (hard)", unique_puzzles(17, 25));
  }
  return report;
}

}  // namespace structdiff::sudoku
