// `structdiff unn train`: binds the options to unn::TrainRequest. The defaults that depend on the
// task are the library's; here only the options that belong to another task are refused by name.
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/output_policy.h"
#include "structdiff/treebank.h"
#include "structdiff/unn_runs.h"

namespace structdiff::cli {
namespace {

struct TrainCommand {
  unn::TrainRequest request;
  CLI::App* command = nullptr;  // to tell given options from defaults
};

const std::vector<std::string> kConvOnly = {"--gamma", "--untied", "--dropout",
                                            "--generate-schedule", "--data-dir"};
const std::vector<std::string> kAttentionOnly = {"--d-model", "--random-iterations"};
const std::vector<std::string> kParseOnly = {"--control", "--jacobi", "--treebank-seed",
                                             "--treebank"};
const std::vector<std::string> kSyntheticTreebankOnly = {"--control", "--treebank-seed"};

// Refuses options that belong to other tasks, naming them.
void reject_options(const TrainCommand& c, const std::vector<std::string>& options,
                    const std::string& owners) {
  for (const std::string& option : options) {
    if (c.command->count(option) > 0) throw std::invalid_argument(option + " applies to " + owners + " only");
  }
}

void run_train(const TrainCommand& c, const GlobalOptions& global) {
  const unn::Task task = c.request.task;
  if (task != unn::Task::mnist_conv && task != unn::Task::fashion_conv) {
    reject_options(c, kConvOnly, "the conv tasks");
  }
  if (task != unn::Task::attention) reject_options(c, kAttentionOnly, "the attention task");
  if (task != unn::Task::parse) reject_options(c, kParseOnly, "the parse task");
  if (task == unn::Task::parse && !c.request.treebank.empty()) {
    reject_options(c, kSyntheticTreebankOnly, "the synthetic treebank");
  }
  unn::TrainRequest request = c.request;
  request.seed = global.seed;
  const unn::TrainReport report = unn::train_task(request);
  std::printf("%s\nwrote %s\n", report.summary.c_str(), request.out_path.c_str());
}

}  // namespace

void register_unn_train(CLI::App& unn, const GlobalOptions& global, Action& action) {
  const std::vector<std::string>& schedules = unn::schedule_choices();
  auto t = std::make_shared<TrainCommand>();
  unn::TrainRequest& r = t->request;
  CLI::App* train = unn.add_subcommand("train", "Train a UNN; keeps the best development epoch");
  train->add_option_function<std::string>(
           "--task", [&r](const std::string& name) { r.task = unn::parse_task(name); },
           "mnist-conv, fashion-conv, attention or parse")
      ->check(CLI::IsMember(unn::task_names()))
      ->default_str(unn::task_name(r.task));
  train->add_option("--data-dir", r.data_dir, "IDX directory (default: the dataset's)")
      ->check(CLI::ExistingDirectory);
  train->add_option("--out", r.out_path, "Model file to write")->check(writable_file())->required();
  train->add_option("--iterations", r.iterations, "k: sweeps of the schedule")
      ->check(between(1, 64))
      ->capture_default_str();
  train->add_option_function<std::string>(
           "--schedule", [&r](const std::string& name) { r.schedule = unn::parse_schedule(name); },
           "Update order when classifying (conv) or filling (attention)")
      ->check(CLI::IsMember(schedules))
      ->default_str(unn::schedule_name(unn::kDefaultSchedule));
  train->add_option_function<std::string>(
           "--generate-schedule",
           [&r](const std::string& name) { r.conv.generate_schedule = unn::parse_schedule(name); },
           "Update order when generating")
      ->check(CLI::IsMember(schedules))
      ->default_str(unn::schedule_name(r.conv.generate_schedule));
  train->add_option("--gamma", r.conv.gamma, "Weight of the generation (reconstruction) loss; 0: classification only")
      ->check(non_negative())
      ->capture_default_str();
  train->add_option("--dropout", r.conv.dropout, "Dropout on H1 and H2 when classifying")
      ->check(between(0.0, 0.99))
      ->capture_default_str();
  train->add_flag_function(
      "--untied", [&r](int64_t) { r.conv.tied = false; },
      "One weight copy per iteration, H2 with 64 / k channels (Table 3)");
  train->add_option_function<int64_t>("--batch", [&r](int64_t batch) { r.batch = batch; },
                                      "Mini-batch size (default: 128 conv, 256 attention, 32 parse)")
      ->check(positive());
  train->add_option_function<int64_t>(
           "--dev-size", [&r](int64_t size) { r.dev_size = size; },
           "Training rows held out for model selection (default 1000 MNIST, else 10000)")
      ->check(positive());
  train->add_option("--d-model", r.attention.d_model, "attention: hidden size d")
      ->check(positive())
      ->capture_default_str();
  train->add_flag("--random-iterations", r.attention.random_iterations,
                  "attention: draw k from 1..5 per batch (evaluated at k = 3)");
  train->add_flag("--control", r.control, "parse: the control treebank, whose heads do not depend on the words");
  train->add_flag("--jacobi", r.jacobi, "parse: update H and M together (the authors' code)");
  train->add_option("--treebank-seed", r.treebank_seed, "parse: the synthetic treebank's seed")
      ->capture_default_str();
  train->add_option("--treebank", r.treebank,
                    "parse: a committed Universal Dependencies treebank (data/ud) instead of the synthetic one")
      ->check(CLI::IsMember(data::committed_ud_treebanks()));
  add_training_loop_options(*train, r.loop, {}, &r.loop_choices);
  t->command = train;
  train->callback([t, &global, &action] { action = [t, &global] { run_train(*t, global); }; });
}

}  // namespace structdiff::cli
