// `structdiff gsdm eval|sample`: evaluate and sample a GSDM of any registered problem (`gsdm train`
// is in gsdm_train_command.cpp, `gsdm mask` and `gsdm invariance` in gsdm_graph_command.cpp).
#include <cstdio>
#include <random>
#include <sstream>

#include <torch/torch.h>

#include "cli/command.h"
#include "cli/gsdm_options.h"
#include "structdiff/graph.h"
#include "structdiff/gsdm_problems.h"

namespace structdiff::cli {
namespace {

// The examples eval and sample use: the problem's test examples where it has its own (matrix
// inversion: E = I), else (or with --training-distribution) fresh draws of training examples.
gsdm::TrainingBatch test_examples(const gsdm::ProblemModel& trained, int64_t count,
                                  bool training_distribution, uint64_t seed) {
  std::mt19937_64 rng(seed + gsdm::kTestStream);
  const gsdm::Problem& problem = *trained.problem;
  const auto& make = problem.make_test_examples && !training_distribution
                         ? problem.make_test_examples
                         : problem.make_examples;
  return make(trained.graph, trained.options, count, rng);
}

struct EvalCommand {
  std::string model_path;
  std::string size;
  bool training_distribution = false;
  int64_t count = 64;
  int64_t batch = 64;
  SamplingOptions sampling;
  std::string json_path;
};

// The model file at --size (empty: its own size), on --device.
gsdm::ProblemModel load_at_size(const std::string& path, const std::string& size,
                                torch::Device device) {
  gsdm::ProblemModel trained = gsdm::load_problem_model(
      path, size.empty() ? std::vector<int64_t>{} : gsdm::parse_size(size));
  trained.model->to(device);
  return trained;
}

// "bcmf (size 4,3,2, trained at 2,2,2, no intermediates)"
std::string model_heading(const gsdm::ProblemModel& trained) {
  std::string heading = trained.problem->name + " (size " + gsdm::size_text(trained.options.size);
  if (trained.metadata.contains("trained_size")) {
    heading += ", trained at " + trained.metadata["trained_size"].get<std::string>();
  }
  if (!trained.options.variant.empty()) heading += ", " + trained.options.variant;
  return heading + (trained.options.intermediates ? ")" : ", no intermediates)");
}

void run_eval(const EvalCommand& c, const GlobalOptions& global) {
  gsdm::ProblemModel trained = load_at_size(c.model_path, c.size, global.device);
  gsdm::require_sampling_memory(trained, c.count, c.batch,
                                "--count " + std::to_string(c.count) + " with --batch " +
                                    std::to_string(c.batch));
  const gsdm::TrainingBatch examples =
      test_examples(trained, c.count, c.training_distribution, global.seed);
  const nlohmann::json metrics = gsdm::evaluate(
      trained, examples, c.sampling.sample_options(global.seed + gsdm::kTestStream), c.batch);
  const gsdm::DiffusionProcess process = trained.model->config().process;
  const gsdm::Sampler sampler = c.sampling.resolved_sampler(process);
  std::printf("%s, %ld examples, %s sampler:\n", model_heading(trained).c_str(),
              static_cast<long>(c.count), gsdm::sampler_name(sampler).c_str());
  for (const auto& [name, value] : metrics.items()) {
    std::printf("  %-36s %s\n", name.c_str(), value.dump().c_str());
  }
  if (!c.json_path.empty()) {
    write_json_file(c.json_path,
                    {{"model", c.model_path},
                     {"problem", trained.problem->name},
                     {"problem_options", trained.options},
                     {"trained_size", trained.metadata.value("trained_size",
                                                             gsdm::size_text(trained.options.size))},
                     {"examples", trained.problem->make_test_examples && !c.training_distribution
                                      ? "test"
                                      : "training distribution"},
                     {"diffusion", gsdm::process_name(process)},
                     {"sampler", gsdm::sampler_name(sampler)},
                     {"sample_steps", sampler == gsdm::Sampler::ancestral && process == gsdm::DiffusionProcess::gaussian
                                          ? trained.schedule.steps()
                                          : c.sampling.steps},
                     {"eta", c.sampling.eta},
                     {"metrics", metrics}});
  }
}

// `gsdm sample` draws this many examples at once, so its memory stays bounded whatever --count.
constexpr int64_t kSampleBatch = 64;

struct SampleCommand {
  std::string model_path;
  std::string size;
  bool training_distribution = false;
  int64_t count = 2;
  SamplingOptions sampling;
};

// Prints, for each example, every array's true values and the sample's (observed arrays once).
void run_sample(const SampleCommand& c, const GlobalOptions& global) {
  gsdm::ProblemModel trained = load_at_size(c.model_path, c.size, global.device);
  gsdm::require_sampling_memory(trained, c.count, kSampleBatch,
                                "--count " + std::to_string(c.count));
  const gsdm::TrainingBatch examples =
      test_examples(trained, c.count, c.training_distribution, global.seed);
  const gsdm::StateLayout& layout = trained.model->layout();
  const torch::Tensor samples = gsdm::sample_in_batches(
      trained, examples, c.sampling.sample_options(global.seed + gsdm::kTestStream), kSampleBatch);
  const torch::Tensor truth = gsdm::decode_state(layout, trained.graph, examples.x0);
  const torch::Tensor sampled = gsdm::decode_state(layout, trained.graph, samples);
  const auto text = [](const torch::Tensor& row) {
    std::ostringstream out;
    out.precision(3);
    for (int64_t k = 0; k < row.numel(); ++k) out << (k ? " " : "") << row[k].item<float>();
    return out.str();
  };
  std::printf("%s:\n", model_heading(trained).c_str());
  for (int64_t b = 0; b < c.count; ++b) {
    std::printf("example %ld\n", static_cast<long>(b + 1));
    for (const graph::Array& a : trained.graph.arrays()) {
      const bool observed = examples.observed[b][a.first_node].item<bool>();
      std::printf("  %-4s %s: %s\n", a.name.c_str(), observed ? "given " : "true  ",
                  text(truth[b].narrow(0, a.first_node, a.size())).c_str());
      if (!observed) {
        std::printf("  %-4s sample: %s\n", a.name.c_str(),
                    text(sampled[b].narrow(0, a.first_node, a.size())).c_str());
      }
    }
  }
}

}  // namespace

void register_gsdm(CLI::App& app, const GlobalOptions& global, Action& action) {
  CLI::App* gsdm = app.add_subcommand(
      "gsdm", "Graphically structured diffusion: train, evaluate and sample any problem; inspect "
              "graphical models");
  gsdm->require_subcommand(1);

  register_gsdm_train(*gsdm, global, action);

  auto e = std::make_shared<EvalCommand>();
  CLI::App* eval = gsdm->add_subcommand(
      "eval", "Sample fresh examples of the model's problem given their observed variables; score");
  eval->add_option("--model", e->model_path, "Trained model file (gsdm train, or sudoku train)")
      ->required()
      ->check(CLI::ExistingFile);
  eval->add_option("--count", e->count, "Examples")->check(work_count(1000000))->capture_default_str();
  eval->add_option("--size", e->size,
                   "Evaluate at another size of the problem than the model was trained at (AE or "
                   "EE embeddings), e.g. 16,16,4");
  eval->add_flag("--training-distribution", e->training_distribution,
                 "Score fresh training examples instead of the problem's test examples");
  eval->add_option("--batch", e->batch, "Examples sampled at once")
      ->check(work_count(1000000))
      ->capture_default_str();
  add_sampling_options(*eval, e->sampling);
  eval->add_option("--json", e->json_path, "Write the metrics as JSON")->check(writable_file());
  eval->callback([e, &global, &action] { action = [e, &global] { run_eval(*e, global); }; });

  auto s = std::make_shared<SampleCommand>();
  CLI::App* sample = gsdm->add_subcommand(
      "sample", "Print fresh examples of the model's problem beside the model's samples");
  sample->add_option("--model", s->model_path, "Trained model file")
      ->required()
      ->check(CLI::ExistingFile);
  sample->add_option("--count", s->count, "Examples")->check(work_count(1000000))->capture_default_str();
  sample->add_option("--size", s->size,
                     "Sample at another size of the problem (AE or EE embeddings)");
  sample->add_flag("--training-distribution", s->training_distribution,
                   "Fresh training examples instead of the problem's test examples");
  add_sampling_options(*sample, s->sampling);
  sample->callback([s, &global, &action] { action = [s, &global] { run_sample(*s, global); }; });


  register_gsdm_graph_commands(*gsdm, action);
}

}  // namespace structdiff::cli
