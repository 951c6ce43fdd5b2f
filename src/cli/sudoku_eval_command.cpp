// `structdiff sudoku eval`: a Sudoku model's valid grids by number of given cells, on unique
// puzzles of three difficulties, and the diversity of its draws.
#include <algorithm>
#include <cstdio>
#include <random>

#include <nlohmann/json.hpp>

#include "cli/gsdm_options.h"
#include "structdiff/sudoku_model.h"

namespace structdiff::cli {
namespace {

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

void register_sudoku_eval(CLI::App& sudoku, const GlobalOptions& global, Action& action) {
  auto e = std::make_shared<EvalCommand>();
  CLI::App* eval = sudoku.add_subcommand("eval", "Accuracy by observed fraction, diversity");
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
