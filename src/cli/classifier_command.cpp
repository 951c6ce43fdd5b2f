// `structdiff classifier train|eval`: the image classifier behind the sample-quality metrics.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "cli/command.h"
#include "structdiff/image_metrics.h"
#include "structdiff/images.h"
#include "structdiff/train.h"

namespace structdiff::cli {
namespace {

// Train images whose features stand for the real data in the Fréchet floor: as many as the test
// split of Fashion-MNIST, and all of MNIST's 8,000.
constexpr int64_t kFloorTrainImages = 10000;

struct TrainCommand {
  std::string dataset;
  std::string directory;
  std::string out_path;
  eval::ClassifierTraining training;
};

struct EvalCommand {
  std::string model_path;
  std::string dataset;  // "": the dataset the model was trained on
  std::string directory;
  std::string json_path;
};

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void run_train(const TrainCommand& c, const GlobalOptions& global) {
  const data::ImageDataset train_set =
      data::load_image_dataset(c.dataset, data::ImageSplit::train, c.directory);
  const data::ImageDataset test_set =
      data::load_image_dataset(c.dataset, data::ImageSplit::test, c.directory);
  std::printf("%s: %ld training and %ld test images\n", c.dataset.c_str(),
              static_cast<long>(train_set.images.size(0)),
              static_cast<long>(test_set.images.size(0)));
  std::fflush(stdout);

  eval::ClassifierTraining training = c.training;
  training.seed = global.seed;
  const auto started = std::chrono::steady_clock::now();
  eval::Classifier model = eval::train_classifier(train_set, training);
  const double train_seconds = seconds_since(started);
  const double accuracy = eval::classifier_accuracy(model, test_set);
  std::printf("classifier on %s: test accuracy %.2f%% (%ld images), trained in %s\n",
              c.dataset.c_str(), 100.0 * accuracy, static_cast<long>(test_set.images.size(0)),
              train::format_duration(train_seconds).c_str());
  eval::save_classifier(c.out_path, model,
                        {{"dataset", c.dataset},
                         {"test_accuracy", accuracy},
                         {"test_images", test_set.images.size(0)},
                         {"train_images", train_set.images.size(0)},
                         {"epochs", training.epochs},
                         {"batch", training.batch_size},
                         {"lr", training.learning_rate},
                         {"seed", training.seed},
                         {"train_seconds", train_seconds}});
  std::printf("saved %s\n", c.out_path.c_str());
}

void run_eval(const EvalCommand& c) {
  const nlohmann::json metadata = train::read_checkpoint_metadata(c.model_path);
  eval::Classifier model = eval::load_classifier(c.model_path);
  const std::string trained_on = metadata.value("dataset", std::string());
  const std::string dataset = c.dataset.empty() ? trained_on : c.dataset;
  if (dataset.empty()) {
    throw std::invalid_argument(c.model_path + " does not record its dataset: give --dataset");
  }
  const data::ImageDataset train_set =
      data::load_image_dataset(dataset, data::ImageSplit::train, c.directory);
  const data::ImageDataset test_set =
      data::load_image_dataset(dataset, data::ImageSplit::test, c.directory);

  const double accuracy = eval::classifier_accuracy(model, test_set);
  const int64_t floor_images = std::min(kFloorTrainImages, train_set.images.size(0));
  const double floor = eval::frechet_distance(
      eval::classifier_features(model, train_set.images.slice(0, 0, floor_images)),
      eval::classifier_features(model, test_set.images));
  std::printf("classifier %s (trained on %s) on %s: test accuracy %.2f%% (%ld images)\n",
              c.model_path.c_str(), trained_on.c_str(), dataset.c_str(), 100.0 * accuracy,
              static_cast<long>(test_set.images.size(0)));
  std::printf(
      "Frechet distance, first %ld training vs %ld test images: %.4f "
      "(the floor for generated samples)\n",
      static_cast<long>(floor_images), static_cast<long>(test_set.images.size(0)), floor);
  if (!c.json_path.empty()) {
    write_json_file(c.json_path, {{"model", c.model_path},
                                  {"trained_on", trained_on},
                                  {"dataset", dataset},
                                  {"test_accuracy", accuracy},
                                  {"test_images", test_set.images.size(0)},
                                  {"frechet_train_vs_test", floor},
                                  {"frechet_train_images", floor_images}});
  }
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
  train->add_option("--dataset", t->dataset, "fashion-mnist or mnist")
      ->check(CLI::IsMember(datasets))
      ->required();
  train->add_option("--data-dir", t->directory,
                    "IDX directory (default: the Debian package's for fashion-mnist, data/mnist "
                    "for mnist)")
      ->check(CLI::ExistingDirectory);
  train->add_option("--out", t->out_path, "Checkpoint to write")
      ->check(writable_file())->required();
  train->add_option("--epochs", t->training.epochs, "Epochs")
      ->check(positive())
      ->capture_default_str();
  train->add_option("--batch", t->training.batch_size, "Mini-batch size")
      ->check(positive())
      ->capture_default_str();
  train->add_option("--lr", t->training.learning_rate, "Adam learning rate")
      ->check(positive())
      ->capture_default_str();
  train->add_flag("!--no-progress", t->training.progress, "No progress bar");
  train->add_option("--checkpoint", t->training.checkpoint_path,
                    "Full training state, written every epoch (for --resume)")
      ->check(writable_file());
  train->add_flag("--resume", t->training.resume,
                  "Continue from --checkpoint if it exists (same options), bit for bit");
  train->callback([t, &global, &action] { action = [t, &global] { run_train(*t, global); }; });

  auto e = std::make_shared<EvalCommand>();
  CLI::App* evaluate = classifier->add_subcommand(
      "eval", "Test accuracy and the train-vs-test Frechet distance (the floor for samples)");
  evaluate->add_option("--model", e->model_path, "Classifier checkpoint")
      ->check(CLI::ExistingFile)
      ->required();
  evaluate
      ->add_option("--dataset", e->dataset,
                   "fashion-mnist or mnist (default: the one it was trained on)")
      ->check(CLI::IsMember(datasets));
  evaluate->add_option("--data-dir", e->directory, "IDX directory (default: the dataset's)")
      ->check(CLI::ExistingDirectory);
  evaluate->add_option("--json", e->json_path, "Write the results as JSON")
      ->check(writable_file());
  evaluate->callback([e, &global, &action] { action = [e, &global] { run_eval(*e); }; });
}

}  // namespace structdiff::cli
