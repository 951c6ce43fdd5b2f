// `structdiff classifier train|eval`: the image classifier behind the sample-quality metrics.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/command.h"
#include "structdiff/classifier_runs.h"
#include "structdiff/progress.h"

namespace structdiff::cli {
namespace {

struct TrainCommand {
  eval::ClassifierTrainRequest request;
  std::string out_path;
};

struct EvalCommand {
  eval::ClassifierEvalRequest request;
  std::string dataset;  // "": the dataset the model was trained on
  std::string json_path;
};

void run_train(const TrainCommand& c, const GlobalOptions& global) {
  eval::ClassifierTrainRequest request = c.request;
  request.training.seed = global.seed;
  request.on_data = [&request](int64_t train_images, int64_t test_images) {
    std::printf("%s: %ld training and %ld test images\n", request.dataset.c_str(),
                static_cast<long>(train_images), static_cast<long>(test_images));
    std::fflush(stdout);
  };
  eval::ClassifierTrainReport report = eval::train_classifier_run(request);
  std::printf("classifier on %s: test accuracy %.2f%% (%ld images), trained in %s\n",
              request.dataset.c_str(), 100.0 * report.test_accuracy,
              static_cast<long>(report.test_images),
              train::format_duration(report.train_seconds).c_str());
  eval::save_classifier(c.out_path, report.model, report.metadata);
  std::printf("saved %s\n", c.out_path.c_str());
}

void run_eval(const EvalCommand& c) {
  eval::ClassifierEvalRequest request = c.request;
  if (!c.dataset.empty()) request.dataset = c.dataset;
  const eval::ClassifierEvalReport report = eval::evaluate_classifier_file(request);
  std::printf("classifier %s (trained on %s) on %s: test accuracy %.2f%% (%ld images)\n",
              report.model_path.c_str(), report.trained_on.c_str(), report.dataset.c_str(),
              100.0 * report.test_accuracy, static_cast<long>(report.test_images));
  std::printf(
      "Frechet distance, first %ld training vs %ld test images: %.4f "
      "(the floor for generated samples)\n",
      static_cast<long>(report.floor_train_images), static_cast<long>(report.test_images),
      report.frechet_floor);
  if (!c.json_path.empty()) write_json_file(c.json_path, report.json());
}

}  // namespace

void register_classifier(CLI::App& app, const GlobalOptions& global, Action& action) {
  CLI::App* classifier = app.add_subcommand(
      "classifier",
      "The image classifier behind sample-quality metrics (accuracy, Frechet distance)");
  classifier->require_subcommand(1);
  const std::vector<std::string> datasets = {"fashion-mnist", "mnist"};

  auto t = std::make_shared<TrainCommand>();
  CLI::App* train = classifier->add_subcommand(
      "train", "Train on a dataset's training split, report test accuracy, save the model");
  train->add_option("--dataset", t->request.dataset, "fashion-mnist or mnist")
      ->check(CLI::IsMember(datasets))
      ->required();
  train->add_option("--data-dir", t->request.directory,
                    "IDX directory (default: the Debian package's for fashion-mnist, data/mnist "
                    "for mnist)")
      ->check(CLI::ExistingDirectory);
  train->add_option("--out", t->out_path, "Checkpoint to write")
      ->check(writable_file())->required();
  train->add_option("--epochs", t->request.training.epochs, "Epochs")
      ->check(positive())
      ->capture_default_str();
  train->add_option("--batch", t->request.training.batch_size, "Mini-batch size")
      ->check(positive())
      ->capture_default_str();
  train->add_option("--lr", t->request.training.learning_rate, "Adam learning rate")
      ->check(positive())
      ->capture_default_str();
  train->add_flag("!--no-progress", t->request.training.progress, "No progress bar");
  train->add_option("--checkpoint", t->request.training.checkpoint_path,
                    "Full training state, written every epoch (for --resume)")
      ->check(writable_file());
  train->add_flag("--resume", t->request.training.resume,
                  "Continue from --checkpoint if it exists (same options), bit for bit");
  train->callback([t, &global, &action] { action = [t, &global] { run_train(*t, global); }; });

  auto e = std::make_shared<EvalCommand>();
  CLI::App* evaluate = classifier->add_subcommand(
      "eval", "Test accuracy and the train-vs-test Frechet distance (the floor for samples)");
  evaluate->add_option("--model", e->request.model_path, "Classifier checkpoint")
      ->check(CLI::ExistingFile)
      ->required();
  evaluate
      ->add_option("--dataset", e->dataset,
                   "fashion-mnist or mnist (default: the one it was trained on)")
      ->check(CLI::IsMember(datasets));
  evaluate->add_option("--data-dir", e->request.directory, "IDX directory (default: the dataset's)")
      ->check(CLI::ExistingDirectory);
  evaluate->add_option("--json", e->json_path, "Write the results as JSON")
      ->check(writable_file());
  evaluate->callback([e, &global, &action] { action = [e, &global] { run_eval(*e); }; });
}

}  // namespace structdiff::cli
