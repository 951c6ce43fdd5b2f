#include "structdiff/sudoku_runs.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "structdiff/runtime.h"

namespace structdiff::sudoku {
namespace {

constexpr int64_t kMaxPuzzleFileBytes = int64_t{16} << 20;  // 200,000 9x9 puzzles

// The puzzles of a request, each with the name an error message gives it.
std::vector<std::pair<std::string, Grid>> read_puzzles(const SolveRequest& request) {
  std::vector<std::pair<std::string, Grid>> puzzles;
  for (const std::string& text : request.puzzles) puzzles.emplace_back("the puzzle given", parse(text));
  if (request.file.empty()) return puzzles;
  std::istringstream in(read_bounded(request.file, kMaxPuzzleFileBytes, "puzzle file"));
  int line_number = 0;
  for (std::string line; std::getline(in, line);) {
    const std::string name = request.file + " line " + std::to_string(++line_number);
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      puzzles.emplace_back(name, parse(line));
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(name + ": " + e.what());
    }
  }
  return puzzles;
}

std::string listed(const std::vector<std::string>& names) {
  std::string list;
  for (const std::string& name : names) list += (list.empty() ? "" : ", ") + name;
  return list;
}

// A file of thousands of puzzles would otherwise give an error naming every one.
constexpr size_t kFailuresNamed = 5;

// "a, b, c", or "N puzzles: a, ..., e and M more" when there are more than kFailuresNamed.
std::string failed_puzzles(const std::vector<std::string>& names) {
  if (names.size() <= kFailuresNamed) return listed(names);
  const std::vector<std::string> first(names.begin(), names.begin() + kFailuresNamed);
  return std::to_string(names.size()) + " puzzles: " + listed(first) + " and " +
         std::to_string(names.size() - kFailuresNamed) + " more";
}

Diversity measure_diversity(const TrainedModel& trained, const Grid& puzzle,
                            const EvalRequest& request) {
  const SolveOptions options = own_distribution(trained, request.sampling);
  // Through the size gate before any copy: per sample the puzzle's copy, the sample drawn and the
  // sampler's one-hot state of float cells x values (twice).
  const double cells = static_cast<double>(puzzle.cells.size());
  require_memory(static_cast<double>(request.diversity_samples) *
                     (2.0 * (sizeof(Grid) + 4.0 * cells) + 8.0 * cells * puzzle.side()),
                 "--diversity-samples " + std::to_string(request.diversity_samples));
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
// Each evaluation setting's short name (EvalRequest::settings) and its row's label, in the order
// the settings run.
struct Setting {
  const char* name;
  const char* label;
};
constexpr Setting kSettings[] = {{"nothing", "observed 0 (unconditional)"},
                                 {"16", "observed 16 cells"},
                                 {"20%", "observed 20%"},
                                 {"50%", "observed 50%"},
                                 {"80%", "observed 80%"},
                                 {"25-35", "unique, 25-35 givens"},
                                 {"diversity", "diversity"},
                                 {"26-45", "unique, 26-45 givens"},
                                 {"17-25", "unique, 17-25 givens (hard)"}};

std::string setting_label(const std::string& name) {
  for (const Setting& setting : kSettings) {
    if (name == setting.name) return setting.label;
  }
  throw std::logic_error("sudoku eval: no label for setting '" + name + "'");
}

}  // namespace

std::vector<std::string> eval_setting_names() {
  std::vector<std::string> names;
  for (const Setting& setting : kSettings) names.emplace_back(setting.name);
  return names;
}

GridFamily puzzle_grids(const TrainedModel& trained, const EvalRequest& request) {
  return request.grids.value_or(trained.grids);
}

EvalReport evaluate_settings(const TrainedModel& trained, const EvalRequest& request) {
  EvalReport report;
  report.grids = puzzle_grids(trained, request);
  report.rows = nlohmann::json::array();
  const int cells = trained.n * trained.n * trained.n * trained.n;
  const std::vector<std::string> known = eval_setting_names();
  for (const std::string& name : request.settings) {
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      throw std::invalid_argument("sudoku eval: no setting '" + name + "' (" + listed(known) + ")");
    }
  }
  const auto wanted = [&](const std::string& name) {
    return request.settings.empty() ||
           std::find(request.settings.begin(), request.settings.end(), name) != request.settings.end();
  };
  std::mt19937_64 rng(request.seed);
  auto score = [&](const std::string& name, const std::vector<Grid>& puzzles) {
    if (!wanted(name)) return;
    const std::string setting = setting_label(name);
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
  score("nothing", random_puzzles(0));
  if (trained.n == 3) score("16", random_puzzles(16));
  for (int percent : {20, 50, 80}) {
    score(std::to_string(percent) + "%", random_puzzles(cells * percent / 100));
  }
  if (unique) score("25-35", unique_puzzles(25, 35));
  const Grid puzzle = random_puzzles(trained.n == 3 ? 16 : cells / 5).front();
  if (wanted("diversity")) {
    const Diversity diversity = measure_diversity(trained, puzzle, request);
    if (request.on_diversity) request.on_diversity(diversity);
    report.rows.push_back({{"setting", setting_label("diversity")}, {"samples", diversity.samples},
                           {"valid", diversity.valid}, {"distinct_valid", diversity.distinct_valid},
                           {"temperature", diversity.temperature}});
  }
  // Drawn last, so that the puzzles above stay those of earlier evaluations with the same seed.
  if (unique) {
    score("26-45", unique_puzzles(26, 45));
    score("17-25", unique_puzzles(17, 25));
  }
  return report;
}

SolveReport solve_puzzles(const SolveRequest& request) {
  const std::vector<std::pair<std::string, Grid>> puzzles = read_puzzles(request);
  if (puzzles.empty()) throw std::invalid_argument("no puzzle given (PUZZLE or --file)");
  TrainedModel trained = load_model(request.model_path);
  const int side = trained.n * trained.n;
  SolveReport report;
  std::vector<Grid> solvable;
  std::vector<size_t> solvable_index;
  for (const auto& [name, puzzle] : puzzles) {
    if (puzzle.n != trained.n) {
      throw std::invalid_argument(name + ": the model solves " + std::to_string(side) + "x" +
                                  std::to_string(side) + " puzzles, this one is " +
                                  std::to_string(puzzle.side()) + "x" + std::to_string(puzzle.side()));
    }
    SolvedPuzzle solved{name, puzzle.n > 3 || count_solutions(puzzle, 1) > 0, {}};
    if (solved.has_solution) {
      solvable.push_back(puzzle);
      solvable_index.push_back(report.puzzles.size());
    }
    report.puzzles.push_back(std::move(solved));
  }
  trained.model->to(request.device);
  const auto started = std::chrono::steady_clock::now();
  if (!solvable.empty()) {
    const std::vector<Attempt> attempts =
        solve_until_valid(trained, solvable, request.samples, request.sampling);
    for (size_t k = 0; k < attempts.size(); ++k) report.puzzles[solvable_index[k]].attempt = attempts[k];
  }
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return report;
}

int64_t SolveReport::solved() const {
  return std::count_if(puzzles.begin(), puzzles.end(),
                       [](const SolvedPuzzle& p) { return p.has_solution && p.attempt.valid > 0; });
}

std::string SolveReport::failures(int64_t samples) const {
  std::vector<std::string> impossible, unsolved;
  for (const SolvedPuzzle& puzzle : puzzles) {
    if (!puzzle.has_solution) {
      impossible.push_back(puzzle.name);
    } else if (puzzle.attempt.valid == 0) {
      unsolved.push_back(puzzle.name);
    }
  }
  std::string text;
  if (!impossible.empty()) {
    text = impossible.size() == 1 ? impossible.front() + " has no solution at all"
                                  : "no solution at all for " + failed_puzzles(impossible);
  }
  if (!unsolved.empty()) {
    text += (text.empty() ? "" : "; ") + std::string("no valid solution in ") +
            std::to_string(samples) + " sample(s) for " + failed_puzzles(unsolved) +
            " (try more --samples)";
  }
  return text;
}

}  // namespace structdiff::sudoku
