// `structdiff sudoku`: train a GSDM Sudoku solver (gsdm train --problem sudoku) and solve puzzles
// with it (`sudoku eval` is in sudoku_eval_command.cpp).
#include <cstdio>
#include <stdexcept>

#include "cli/command.h"
#include "cli/gsdm_options.h"
#include "structdiff/sudoku_runs.h"

namespace structdiff::cli {
namespace {

struct SolveCommand {
  sudoku::SolveRequest request;
  std::string puzzle;
  SamplingOptions sampling;
};

void run_solve(SolveCommand c, const GlobalOptions& global) {
  if (!c.puzzle.empty()) c.request.puzzles.push_back(c.puzzle);
  c.request.sampling = c.sampling.sample_options(global.seed);
  c.request.device = global.device;
  const sudoku::SolveReport report = sudoku::solve_puzzles(c.request);
  for (const sudoku::SolvedPuzzle& puzzle : report.puzzles) {
    if (!puzzle.has_solution) continue;
    const sudoku::Attempt& a = puzzle.attempt;
    std::printf("%s\n", sudoku::format(a.shown, /*pretty=*/true).c_str());
    std::printf("%s (%ld of %ld samples drawn valid; %ld violated pairs in the one shown)\n\n",
                a.valid > 0 ? "valid solution" : "NOT a valid solution", static_cast<long>(a.valid),
                static_cast<long>(a.drawn), static_cast<long>(sudoku::violated_pairs(a.shown)));
  }
  const double count = static_cast<double>(report.puzzles.size());
  std::printf("%ld of %zu puzzles solved in %.1f s (%.2f s per puzzle)\n",
              static_cast<long>(report.solved()), report.puzzles.size(), report.seconds,
              report.seconds / count);
  const std::string failures = report.failures(c.request.samples);
  if (!failures.empty()) throw std::runtime_error(failures);
}

}  // namespace

void register_sudoku(CLI::App& app, const GlobalOptions& global, Action& action) {
  CLI::App* sudoku = app.add_subcommand("sudoku", "GSDM Sudoku solver: train, solve, evaluate");
  sudoku->require_subcommand(1);

  register_gsdm_train(*sudoku, global, action, "sudoku");

  auto s = std::make_shared<SolveCommand>();
  CLI::App* solve = sudoku->add_subcommand("solve", "Solve puzzles with a trained model");
  solve->add_option("--model", s->request.model_path, "Trained model file")->required()->check(CLI::ExistingFile);
  solve->add_option("puzzle", s->puzzle, "Puzzle: 81 characters, '.' or '0' for blanks");
  solve->add_option("--file", s->request.file, "Puzzles, one per line")->check(CLI::ExistingFile);
  solve->add_option("--samples", s->request.samples, "Draw up to K samples, stopping once one is valid (rounds of 1, 2, 4, ...)")
      ->check(positive())
      ->capture_default_str();
  add_sampling_options(*solve, s->sampling);
  solve->callback([s, &global, &action] { action = [s, &global] { run_solve(*s, global); }; });

  register_sudoku_eval(*sudoku, global, action);
}

}  // namespace structdiff::cli
