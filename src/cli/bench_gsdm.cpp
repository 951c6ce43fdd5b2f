// `structdiff bench gsdm`: training step time and sampling time of any registered GSDM problem
// (its paper architecture, Table 2), at one or more graph sizes, per attention mechanism; with
// several sizes, the log-log slope of step time against the number of graph nodes.
#include <cstdio>
#include <map>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "structdiff/gsdm_bench.h"
#include "structdiff/runtime.h"
#include "structdiff/timing.h"

namespace structdiff::cli {
namespace {

struct BenchGsdmOptions {
  std::string problem = "sudoku";
  std::vector<std::string> sizes;  // empty: the problem's default size
  int64_t batch = 0;               // 0: the problem's training batch
  std::vector<std::string> attention = {"sparse", "dense"};
  int64_t dense_max_nodes = 4096;
  int64_t train_steps = 10;
  int64_t sample_examples = 8;
  bool ancestral = true;
  int64_t sample_steps = 50;
  std::string json_path;
};

void run(const BenchGsdmOptions& o, const GlobalOptions& global) {
  const gsdm::Problem& problem = gsdm::find_problem(o.problem);
  std::vector<gsdm::ProblemOptions> sizes;
  for (const std::string& text : o.sizes.empty() ? std::vector<std::string>{""} : o.sizes) {
    gsdm::ProblemOptions options;
    if (!text.empty()) options.size = gsdm::parse_size(text);
    sizes.push_back(gsdm::resolve_options(problem, options));
  }
  gsdm::GsdmConfig config = problem.config;
  const int64_t batch = o.batch > 0 ? o.batch : problem.batch;
  std::printf("structdiff bench gsdm: %s, batch %ld, D=%ld, %ld blocks, %ld heads, on %s, %d "
              "threads\n",
              problem.name.c_str(), static_cast<long>(batch), static_cast<long>(config.dim),
              static_cast<long>(config.blocks), static_cast<long>(config.heads),
              global.device.str().c_str(), global.threads);
  nlohmann::json rows = nlohmann::json::array();
  std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> scaling;
  for (const gsdm::ProblemOptions& options : sizes) {
    for (const std::string& attention : o.attention) {
      config.attention = parse_mechanism(attention);
      const nlohmann::json metadata = gsdm::problem_model_metadata(
          problem, options, config, diffusion::ScheduleConfig{});
      gsdm::ProblemModel trained = [&] {
        DefaultGeneratorGuard seeded(global.seed);  // the bench's weights
        return gsdm::build_problem_model(metadata);
      }();
      const int64_t nodes = trained.graph.num_nodes();
      const std::string label = gsdm::size_text(options.size) + " " + attention;
      // Without the mask every pair of nodes is attended to: (nodes x nodes) scores per head.
      if (config.attention == Mechanism::dense && nodes > o.dense_max_nodes) {
        std::printf("%-22s %7ld nodes  skipped (more than --dense-max-nodes %ld)\n",
                    label.c_str(), static_cast<long>(nodes), static_cast<long>(o.dense_max_nodes));
        continue;
      }
      gsdm::ProblemModel averaged = gsdm::build_problem_model(metadata);
      trained.model->to(global.device);
      averaged.model->to(global.device);
      const double step_ms = gsdm::median_training_step_ms(trained, averaged, batch, o.train_steps, global.seed);
      std::printf("%-22s %7ld nodes  training step %9.1f ms (median of %ld)\n", label.c_str(),
                  static_cast<long>(nodes), step_ms, static_cast<long>(o.train_steps));
      nlohmann::json row = {{"problem", problem.name}, {"size", options.size},
                            {"nodes", nodes}, {"attention", attention}, {"batch", batch},
                            {"threads", global.threads}, {"device", global.device.str()},
                            {"train_step_ms", step_ms}};
      scaling[attention].first.push_back(static_cast<double>(nodes));
      scaling[attention].second.push_back(step_ms);
      if (o.sample_examples > 0) {
        const double ddim = gsdm::sampling_seconds_per_example(
            trained, gsdm::Sampler::ddim, o.sample_examples, o.sample_steps, global.seed);
        std::printf("%-22s DDIM (%ld steps)   %9.3f s/example (batch of %ld)\n", label.c_str(),
                    static_cast<long>(o.sample_steps), ddim, static_cast<long>(o.sample_examples));
        row["sample_steps"] = o.sample_steps;
        row["ddim_seconds_per_example"] = ddim;
        if (o.ancestral) {
          const double ancestral = gsdm::sampling_seconds_per_example(
              trained, gsdm::Sampler::ancestral, o.sample_examples, o.sample_steps, global.seed);
          std::printf("%-22s ancestral (%ld steps) %7.3f s/example (batch of %ld)\n",
                      label.c_str(), static_cast<long>(trained.schedule.steps()), ancestral,
                      static_cast<long>(o.sample_examples));
          row["ancestral_seconds_per_example"] = ancestral;
        }
        row["sample_batch"] = o.sample_examples;
      }
      rows.push_back(row);
    }
  }
  for (const auto& [attention, points] : scaling) {
    if (points.first.size() < 2) continue;
    const double slope = log_log_slope(points.first, points.second);
    std::printf("%s: training step time ~ nodes^%.2f (log-log slope over %zu sizes)\n",
                attention.c_str(), slope, points.first.size());
    for (nlohmann::json& row : rows) {
      if (row["attention"] == attention) row["log_log_slope"] = slope;
    }
  }
  if (!o.json_path.empty()) write_json_file(o.json_path, rows);
}

}  // namespace

void register_bench_gsdm(CLI::App& bench, const GlobalOptions& global, Action& action) {
  auto o = std::make_shared<BenchGsdmOptions>();
  CLI::App* cmd = bench.add_subcommand(
      "gsdm", "GSDM training step and sampling time, per attention mechanism and graph size");
  std::vector<std::string> names;
  for (const gsdm::Problem& p : gsdm::problems()) names.push_back(p.name);
  cmd->add_option("--problem", o->problem, "Problem")->check(CLI::IsMember(names))->capture_default_str();
  cmd->add_option("--size", o->sizes,
                  "Graph sizes, each as `gsdm train --size` takes it (e.g. 9, or 16,16,4); "
                  "default: the problem's");
  cmd->add_option("--batch", o->batch, "Training batch (default: the problem's)")->check(positive());
  cmd->add_option("--attention", o->attention, "Mechanisms to compare")
      ->check(CLI::IsMember({"sparse", "structured", "gather", "dense"}))
      ->capture_default_str();
  cmd->add_option("--dense-max-nodes", o->dense_max_nodes,
                  "Skip dense on graphs with more nodes (its memory grows as nodes^2)")
      ->check(positive())
      ->capture_default_str();
  cmd->add_option("--train-steps", o->train_steps, "Timed training steps")->check(work_count(1000000))->capture_default_str();
  cmd->add_option("--sample-examples", o->sample_examples,
                  "Examples sampled together (0: no sampling)")
      ->check(between(0, 1000000))
      ->capture_default_str();
  cmd->add_option("--sample-steps", o->sample_steps, "DDIM steps")->check(positive())->capture_default_str();
  cmd->add_flag("--ancestral,!--no-ancestral", o->ancestral, "Also time the 1000-step ancestral sampler")
      ->capture_default_str();
  cmd->add_option("--json", o->json_path, "Write one JSON row per size and attention mechanism")
      ->check(writable_file());
  cmd->callback([o, &global, &action] { action = [o, &global] { run(*o, global); }; });
}

}  // namespace structdiff::cli
