// `structdiff sudoku`: train a GSDM Sudoku solver (gsdm train --problem sudoku), solve puzzles
// with it, evaluate it.
#include <chrono>
#include <cstdio>
#include <random>
#include <sstream>
#include <stdexcept>

#include <ATen/CPUGeneratorImpl.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "cli/command.h"
#include "cli/gsdm_options.h"
#include "structdiff/runtime.h"
#include "structdiff/sudoku_model.h"

namespace structdiff::cli {
namespace {

// ---- solve -------------------------------------------------------------------------------------

constexpr int64_t kMaxPuzzleFileBytes = int64_t{16} << 20;  // 200,000 9x9 puzzles

struct SolveCommand {
  std::string model_path;
  std::string puzzle;
  std::string file;
  // With these the Gaussian 9x9 model solves 298 of 300 unique puzzles with 26-45 givens (about
  // 6 s for one it cannot solve, 2 threads), the shipped masked one 291 (docs/results/gsdm-sudoku.md).
  int64_t samples = 64;
  SamplingOptions sampling;
};

void run_solve(const SolveCommand& c, const GlobalOptions& global) {
  std::vector<sudoku::Grid> puzzles;
  std::vector<std::string> names;  // where each puzzle came from, for the error message
  if (!c.puzzle.empty()) {
    puzzles.push_back(sudoku::parse(c.puzzle));
    names.push_back("the puzzle given");
  }
  if (!c.file.empty()) {
    std::istringstream in(read_bounded(c.file, kMaxPuzzleFileBytes, "puzzle file"));
    int line_number = 0;
    for (std::string line; std::getline(in, line);) {
      ++line_number;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      try {
        puzzles.push_back(sudoku::parse(line));
        names.push_back(c.file + " line " + std::to_string(line_number));
      } catch (const std::invalid_argument& e) {
        throw std::invalid_argument(c.file + " line " + std::to_string(line_number) + ": " + e.what());
      }
    }
  }
  if (puzzles.empty()) throw std::invalid_argument("no puzzle given (PUZZLE or --file)");
  sudoku::TrainedModel trained = sudoku::load_model(c.model_path);
  for (size_t i = 0; i < puzzles.size(); ++i) {
    if (puzzles[i].n != trained.n) {
      const int side = trained.n * trained.n;
      throw std::invalid_argument(names[i] + ": the model solves " + std::to_string(side) + "x" +
                                  std::to_string(side) + " puzzles, this one is " +
                                  std::to_string(puzzles[i].side()) + "x" +
                                  std::to_string(puzzles[i].side()));
    }
  }
  // An exact search (fast up to 9x9) finds the puzzles without any solution first: no number of
  // samples could solve them, so none are drawn.
  std::vector<sudoku::Grid> solvable;
  std::vector<size_t> solvable_index;
  std::vector<std::string> impossible, unsolved;
  for (size_t i = 0; i < puzzles.size(); ++i) {
    if (puzzles[i].n <= 3 && sudoku::count_solutions(puzzles[i], 1) == 0) {
      impossible.push_back(names[i]);
    } else {
      solvable.push_back(puzzles[i]);
      solvable_index.push_back(i);
    }
  }
  trained.model->to(global.device);
  const auto started = std::chrono::steady_clock::now();
  const std::vector<sudoku::Attempt> attempts =
      solvable.empty() ? std::vector<sudoku::Attempt>{}
                       : sudoku::solve_until_valid(trained, solvable, c.samples,
                                                   c.sampling.sample_options(global.seed));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  for (size_t k = 0; k < attempts.size(); ++k) {
    const sudoku::Attempt& a = attempts[k];
    std::printf("%s\n", sudoku::format(a.shown, /*pretty=*/true).c_str());
    std::printf("%s (%ld of %ld samples drawn valid; %ld violated pairs in the one shown)\n\n",
                a.valid > 0 ? "valid solution" : "NOT a valid solution", static_cast<long>(a.valid),
                static_cast<long>(a.drawn), static_cast<long>(sudoku::violated_pairs(a.shown)));
    if (a.valid == 0) unsolved.push_back(names[solvable_index[k]]);
  }
  std::printf("%zu of %zu puzzles solved in %.1f s (%.2f s per puzzle)\n",
              puzzles.size() - unsolved.size() - impossible.size(), puzzles.size(), seconds,
              seconds / static_cast<double>(puzzles.size()));
  const auto listed = [](const std::vector<std::string>& names) {
    std::string list;
    for (const std::string& name : names) list += (list.empty() ? "" : ", ") + name;
    return list;
  };
  std::string problems;
  if (!impossible.empty()) problems = listed(impossible) + " has no solution at all";
  if (!unsolved.empty()) {
    problems += (problems.empty() ? "" : "; ") + std::string("no valid solution in ") +
                std::to_string(c.samples) + " sample(s) for " + listed(unsolved) +
                " (try more --samples)";
  }
  if (!problems.empty()) throw std::runtime_error(problems);
}

// ---- eval --------------------------------------------------------------------------------------

struct EvalCommand {
  std::string model_path;
  int64_t count = 100;
  int64_t diversity_samples = 32;
  int64_t samples = 1;  // per puzzle, stopping at the first valid one
  bool unique = true;
  std::string grids;  // empty: the family the model was trained on
  SamplingOptions sampling;
  std::string json_path;
};

void run_eval(const EvalCommand& c, const GlobalOptions& global) {
  sudoku::TrainedModel trained = sudoku::load_model(c.model_path);
  trained.model->to(global.device);
  const int cells = trained.n * trained.n * trained.n * trained.n;
  const sudoku::GridFamily grids = c.grids.empty() ? trained.grids : sudoku::parse_grid_family(c.grids);
  std::mt19937_64 rng(global.seed);
  const sudoku::SolveOptions options = c.sampling.sample_options(global.seed);
  nlohmann::json rows = nlohmann::json::array();
  auto report = [&](const std::string& setting, const std::vector<sudoku::Grid>& puzzles) {
    const sudoku::Accuracy a = sudoku::evaluate(trained, puzzles, options, c.samples);
    const double per_puzzle = static_cast<double>(std::max<int64_t>(1, a.puzzles));
    std::printf("%-26s %5ld puzzles  valid %6.1f%% (%ld distinct)  violated pairs %.4f  %.3f s/puzzle",
                setting.c_str(), static_cast<long>(a.puzzles), 100.0 * a.valid_fraction(),
                static_cast<long>(a.distinct_valid), a.violated_fraction, a.seconds / per_puzzle);
    if (c.samples > 1) std::printf("  %.2f samples/puzzle", static_cast<double>(a.samples) / per_puzzle);
    std::printf("\n");
    std::fflush(stdout);
    rows.push_back({{"setting", setting}, {"grids", sudoku::grid_family_name(grids)},
                    {"puzzles", a.puzzles}, {"valid", a.valid_fraction()},
                    {"distinct_valid", a.distinct_valid},
                    {"violated_fraction", a.violated_fraction},
                    {"seconds_per_puzzle", a.seconds / per_puzzle},
                    {"max_samples", c.samples},
                    {"samples_per_puzzle", static_cast<double>(a.samples) / per_puzzle}});
  };
  auto random_puzzles = [&](int observed) {
    std::vector<sudoku::Grid> puzzles;
    for (int64_t i = 0; i < c.count; ++i) {
      puzzles.push_back(sudoku::observe_random_cells(sudoku::generate_solution(trained.n, rng, grids), observed, rng));
    }
    return puzzles;
  };
  const gsdm::DiffusionProcess process = trained.model->config().process;
  const std::string sampler = c.sampling.sampler_for(process);
  std::printf("%s diffusion, sampler %s%s, seed %lu, puzzles from %s grids (the model was trained on %s grids)\n",
              gsdm::process_name(process).c_str(), sampler.c_str(), c.sampling.pace(process).c_str(),
              static_cast<unsigned long>(global.seed), sudoku::grid_family_name(grids).c_str(),
              sudoku::grid_family_name(trained.grids).c_str());
  report("observed 0 (unconditional)", random_puzzles(0));
  if (trained.n == 3) report("observed 16 cells", random_puzzles(16));
  for (int percent : {20, 50, 80}) {
    report("observed " + std::to_string(percent) + "%", random_puzzles(cells * percent / 100));
  }
  auto unique_puzzles = [&](int min_givens, int max_givens) {
    std::vector<sudoku::Grid> puzzles;
    for (int64_t i = 0; i < c.count; ++i) {
      puzzles.push_back(sudoku::make_unique_puzzle(sudoku::generate_solution(3, rng, grids),
                                                   min_givens, max_givens, rng));
    }
    return puzzles;
  };
  if (c.unique && trained.n == 3) report("unique, 25-35 givens", unique_puzzles(25, 35));
  // Diversity: distinct valid solutions among samples for one lightly constrained puzzle.
  const sudoku::Grid puzzle = random_puzzles(trained.n == 3 ? 16 : cells / 5).front();
  const sudoku::SolveOptions diversity_options = sudoku::repeated_draws(trained, options);
  const std::vector<sudoku::Grid> samples = sudoku::solve(
      trained.model, trained.schedule, std::vector<sudoku::Grid>(c.diversity_samples, puzzle),
      diversity_options);
  std::vector<std::vector<int>> distinct;
  int64_t valid = 0;
  for (const auto& s : samples) {
    if (!sudoku::is_valid_solution(s, puzzle)) continue;
    ++valid;
    if (std::find(distinct.begin(), distinct.end(), s.cells) == distinct.end()) distinct.push_back(s.cells);
  }
  std::printf("diversity: %zu distinct among %ld valid of %ld samples for one puzzle (temperature %g)\n",
              distinct.size(), static_cast<long>(valid), static_cast<long>(samples.size()),
              diversity_options.temperature);
  rows.push_back({{"setting", "diversity"}, {"samples", samples.size()}, {"valid", valid},
                  {"distinct_valid", distinct.size()}, {"temperature", diversity_options.temperature}});
  // Drawn last, so that the puzzles above stay those of earlier evaluations with the same seed.
  if (c.unique && trained.n == 3) {
    report("unique, 26-45 givens", unique_puzzles(26, 45));
    report("unique, 17-25 givens (hard)", unique_puzzles(17, 25));
  }
  if (!c.json_path.empty()) write_json_file(c.json_path, rows);
}

}  // namespace

void register_sudoku(CLI::App& app, const GlobalOptions& global, Action& action) {
  CLI::App* sudoku = app.add_subcommand("sudoku", "GSDM Sudoku solver: train, solve, evaluate");
  sudoku->require_subcommand(1);

  register_gsdm_train(*sudoku, global, action, "sudoku");

  auto s = std::make_shared<SolveCommand>();
  CLI::App* solve = sudoku->add_subcommand("solve", "Solve puzzles with a trained model");
  solve->add_option("--model", s->model_path, "Trained model file")->required()->check(CLI::ExistingFile);
  solve->add_option("puzzle", s->puzzle, "Puzzle: 81 characters, '.' or '0' for blanks");
  solve->add_option("--file", s->file, "Puzzles, one per line")->check(CLI::ExistingFile);
  solve->add_option("--samples", s->samples, "Draw up to K samples, stopping once one is valid (rounds of 1, 2, 4, ...)")
      ->check(positive())
      ->capture_default_str();
  add_sampling_options(*solve, s->sampling);
  solve->callback([s, &global, &action] { action = [s, &global] { run_solve(*s, global); }; });

  auto e = std::make_shared<EvalCommand>();
  CLI::App* eval = sudoku->add_subcommand("eval", "Accuracy by observed fraction, diversity");
  eval->add_option("--model", e->model_path, "Trained model file")->required()->check(CLI::ExistingFile);
  eval->add_option("--count", e->count, "Puzzles per setting")->check(work_count(1000000))->capture_default_str();
  eval->add_option("--samples", e->samples,
                   "Draw up to K samples per puzzle, stopping once one is valid (as sudoku solve)")
      ->check(positive())
      ->capture_default_str();
  eval->add_option("--diversity-samples", e->diversity_samples, "Samples for the diversity check")
      ->check(positive())
      ->capture_default_str();
  eval->add_flag("--unique,!--no-unique", e->unique,
                 "Also score unique-solution puzzles with 25-35, 26-45 and 17-25 givens (9x9)")
      ->capture_default_str();
  eval->add_option("--grids", e->grids,
                   "Puzzles from broad or pattern grids (default: what the model was trained on)")
      ->check(CLI::IsMember({"broad", "pattern"}));
  eval->add_option("--json", e->json_path, "Write the results as JSON")
      ->check(writable_file());
  add_sampling_options(*eval, e->sampling);
  eval->callback([e, &global, &action] { action = [e, &global] { run_eval(*e, global); }; });
}

}  // namespace structdiff::cli
