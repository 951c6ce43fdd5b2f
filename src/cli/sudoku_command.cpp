// `structdiff sudoku`: train a GSDM Sudoku solver (gsdm train --problem sudoku) and solve puzzles
// with it (`sudoku eval` is in sudoku_eval_command.cpp).
#include <chrono>
#include <cstdio>
#include <sstream>
#include <stdexcept>

#include "cli/command.h"
#include "cli/gsdm_options.h"
#include "structdiff/runtime.h"
#include "structdiff/sudoku_model.h"

namespace structdiff::cli {
namespace {

constexpr int64_t kMaxPuzzleFileBytes = int64_t{16} << 20;  // 200,000 9x9 puzzles

struct SolveCommand {
  std::string model_path;
  std::string puzzle;
  std::string file;
  // With these the Gaussian 9x9 model solves 298 of 300 unique puzzles with 26-45 givens (about
  // 6 s for one it cannot solve, 2 threads), the shipped masked one 295 (docs/results/gsdm-sudoku.md).
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

  register_sudoku_eval(*sudoku, global, action);
}

}  // namespace structdiff::cli
