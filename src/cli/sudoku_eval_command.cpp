// `structdiff sudoku eval`: a Sudoku model's valid grids by number of given cells, on unique
// puzzles of three difficulties, and the diversity of its draws.
#include <algorithm>
#include <cstdio>

#include "cli/gsdm_options.h"
#include "structdiff/sudoku.h"
#include "structdiff/sudoku_model.h"
#include "structdiff/sudoku_runs.h"

namespace structdiff::cli {
namespace {

struct EvalCommand {
  std::string model_path;
  sudoku::EvalRequest request;
  std::string grids;  // empty: the family the model was trained on
  SamplingOptions sampling;
  std::string json_path;
};

void print_setting(const std::string& setting, const sudoku::Accuracy& a, int64_t max_samples) {
  const double per_puzzle = static_cast<double>(std::max<int64_t>(1, a.puzzles));
  std::printf("%-26s %5ld puzzles  valid %6.1f%% (%ld distinct)  violated pairs %.4f  %.3f s/puzzle",
              setting.c_str(), static_cast<long>(a.puzzles), 100.0 * a.valid_fraction(),
              static_cast<long>(a.distinct_valid), a.violated_fraction, a.seconds / per_puzzle);
  if (max_samples > 1) std::printf("  %.2f samples/puzzle", static_cast<double>(a.samples) / per_puzzle);
  std::printf("\n");
  std::fflush(stdout);
}

void run_eval(const EvalCommand& c, const GlobalOptions& global) {
  sudoku::TrainedModel trained = sudoku::load_model(c.model_path);
  trained.model->to(global.device);
  sudoku::EvalRequest request = c.request;
  if (!c.grids.empty()) request.grids = sudoku::parse_grid_family(c.grids);
  request.sampling = c.sampling.sample_options(global.seed);
  request.seed = global.seed;
  request.on_setting = [&c](const std::string& setting, const sudoku::Accuracy& accuracy) {
    print_setting(setting, accuracy, c.request.samples);
  };
  request.on_diversity = [](const sudoku::Diversity& d) {
    std::printf("diversity: %ld distinct among %ld valid of %ld samples for one puzzle (temperature %g)\n",
                static_cast<long>(d.distinct_valid), static_cast<long>(d.valid),
                static_cast<long>(d.samples), d.temperature);
  };
  const gsdm::DiffusionProcess process = trained.model->config().process;
  std::printf("%s diffusion, sampler %s%s, seed %lu, puzzles from %s grids (the model was trained on %s grids)\n",
              gsdm::process_name(process).c_str(), gsdm::sampler_name(c.sampling.resolved_sampler(process)).c_str(),
              c.sampling.pace(process).c_str(), static_cast<unsigned long>(global.seed),
              sudoku::grid_family_name(sudoku::puzzle_grids(trained, request)).c_str(),
              sudoku::grid_family_name(trained.grids).c_str());
  const sudoku::EvalReport report = sudoku::evaluate_settings(trained, request);
  if (!c.json_path.empty()) write_json_file(c.json_path, report.rows);
}

}  // namespace

void register_sudoku_eval(CLI::App& sudoku, const GlobalOptions& global, Action& action) {
  auto e = std::make_shared<EvalCommand>();
  CLI::App* eval = sudoku.add_subcommand("eval", "Accuracy by observed fraction, diversity");
  eval->add_option("--model", e->model_path, "Trained model file")->required()->check(CLI::ExistingFile);
  eval->add_option("--count", e->request.count, "Puzzles per setting")->check(work_count(1000000))->capture_default_str();
  eval->add_option("--samples", e->request.samples,
                   "Draw up to K samples per puzzle, stopping once one is valid (as sudoku solve)")
      ->check(positive())
      ->capture_default_str();
  eval->add_option("--diversity-samples", e->request.diversity_samples, "Samples for the diversity check")
      ->check(work_count(1000000))
      ->capture_default_str();
  eval->add_flag("--unique,!--no-unique", e->request.unique,
                 "Also score unique-solution puzzles with 25-35, 26-45 and 17-25 givens (9x9)")
      ->capture_default_str();
  eval->add_option("--settings", e->request.settings,
                   "Score only these settings (default: all); the puzzles stay those of a full run "
                   "(the sampler's random draws may differ)")
      ->check(CLI::IsMember(sudoku::eval_setting_names()));
  eval->add_option("--grids", e->grids,
                   "Puzzles from broad or pattern grids (default: what the model was trained on)")
      ->check(CLI::IsMember(sudoku::grid_family_names()));
  eval->add_option("--json", e->json_path, "Write the results as JSON")
      ->check(writable_file());
  add_sampling_options(*eval, e->sampling);
  eval->callback([e, &global, &action] { action = [e, &global] { run_eval(*e, global); }; });
}

}  // namespace structdiff::cli
