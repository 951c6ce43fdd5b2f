// `structdiff ddpm train|sample|eval`: image diffusion with a U-Net whose attention is dense,
// FAVOR+ (softmax or ReLU) or linear, on Fashion-MNIST or MNIST.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "cli/command.h"
#include "cli/output_policy.h"
#include "structdiff/ddpm.h"
#include "structdiff/image_metrics.h"
#include "structdiff/images.h"
#include "structdiff/model_tensors.h"
#include "structdiff/runtime.h"
#include "structdiff/train.h"

namespace structdiff::cli {
namespace {

const std::vector<std::string> kDatasets = {"fashion-mnist", "mnist"};

struct TrainCommand {
  std::string dataset = "fashion-mnist";
  std::string data_dir;
  std::string attention = "dense";
  std::string bottleneck_attention = "dense";
  unet::UNetConfig unet;
  ddpm::TrainingOptions training;
  int64_t validation_images = 256;
  std::string out = "ddpm.pt";
};

struct SampleCommand {
  std::string model_path, out = "samples.png";
  ddpm::SampleOptions sampling;
  int64_t columns = 0;  // 0: about square
};

struct EvalCommand {
  std::string model_path, classifier_path, dataset, data_dir, grid_path, json_path;
  ddpm::SampleOptions sampling;
};

// Sampling with the shared progress bar (images done) and the elapsed time.
torch::Tensor sample_with_progress(ddpm::Model& model, ddpm::SampleOptions options, double& seconds) {
  const auto started = std::chrono::steady_clock::now();
  train::ProgressBar bar("sample", options.count);
  options.progress = [&](int64_t done, int64_t) { bar.update(done); };
  torch::Tensor images = ddpm::sample(model, options);
  bar.finish();
  seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return images;
}

std::string sampler_name(const ddpm::SampleOptions& options) {
  if (options.ddim_steps == 0) return "ancestral (1000 steps)";
  char eta[32];
  std::snprintf(eta, sizeof eta, "%g", options.ddim_eta);
  return "DDIM " + std::to_string(options.ddim_steps) + " steps, eta " + eta;
}

void run_train(const TrainCommand& c, const GlobalOptions& global) {
  const data::ImageDataset train_set = data::load_image_dataset(c.dataset, data::ImageSplit::train, c.data_dir);
  // The held-out batch is the training split's last images, never trained on: the test split is
  // for `ddpm eval`, and choosing how long to train on it would select on it.
  const int64_t train_count = train_set.images.size(0);
  if (c.validation_images >= train_count) {
    throw std::invalid_argument("--validation-images " + std::to_string(c.validation_images) +
                                " leaves no training images: " + c.dataset + " has " +
                                std::to_string(train_count));
  }
  const torch::Tensor training_images = train_set.images.narrow(0, 0, train_count - c.validation_images);
  const torch::Tensor held_out_images = train_set.images.narrow(0, train_count - c.validation_images, c.validation_images);
  unet::UNetConfig config = c.unet;
  config.attention = unet::parse_attention(c.attention);
  config.bottleneck_attention = unet::parse_attention(c.bottleneck_attention);
  config.image_channels = train_set.images.size(1);
  config.image_size = train_set.images.size(2);
  config.seed = global.seed;
  nlohmann::json metadata = ddpm::model_metadata(config, ddpm::default_schedule());
  metadata["dataset"] = c.dataset;
  ddpm::Model model = [&] {
    DefaultGeneratorGuard initial_weights(global.seed);
    return ddpm::build_model(metadata);
  }();
  ddpm::Model averaged = ddpm::build_model(metadata);  // receives the EMA weights

  const ddpm::HeldOutBatch held_out = ddpm::make_held_out_batch(model, held_out_images, /*seed=*/0);
  const int64_t parameters = train::parameter_count(*model.net);
  const bool root = !global.ranks || global.ranks->is_root();
  if (root) {
    std::fprintf(stderr,
                 "training a DDPM on %s (%ld images): %ld parameters, %s attention (bottleneck "
                 "%s), %d threads%s\n",
                 c.dataset.c_str(), static_cast<long>(training_images.size(0)),
                 static_cast<long>(parameters), c.attention.c_str(), c.bottleneck_attention.c_str(),
                 global.threads,
                 global.ranks ? (", " + std::to_string(global.ranks->size()) + " ranks").c_str() : "");
  }
  ddpm::TrainingOptions training = c.training;
  training.ranks = global.ranks;
  const train::LoopResult result =
      ddpm::train(model, averaged, training_images, training, global.seed, &held_out);
  if (!root) return;  // rank 0 writes for the run
  averaged.metadata["trained_steps"] = result.steps_done;
  ddpm::save_model(c.out, averaged);
  print_training_summary(result, c.out);
}

int64_t grid_columns(int64_t count, int64_t columns) {
  if (columns > 0) return columns;
  return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(std::sqrt(static_cast<double>(count)))));
}

void run_sample(const SampleCommand& c, const GlobalOptions& global) {
  ddpm::Model model = ddpm::load_model(c.model_path);
  ddpm::SampleOptions options = c.sampling;
  options.seed = global.seed;
  double seconds = 0;
  const torch::Tensor images = sample_with_progress(model, options, seconds);
  ddpm::write_image_grid(c.out, images, grid_columns(options.count, c.columns));
  std::printf("sampled %ld images with %s in %.1f s (%.3f s/image); wrote %s\n",
              static_cast<long>(options.count), sampler_name(options).c_str(), seconds,
              seconds / static_cast<double>(options.count), c.out.c_str());
}

void run_eval(const EvalCommand& c, const GlobalOptions& global) {
  ddpm::Model model = ddpm::load_model(c.model_path);
  const std::string dataset =
      !c.dataset.empty() ? c.dataset : model.metadata.value("dataset", std::string("fashion-mnist"));
  eval::Classifier classifier = eval::load_classifier(c.classifier_path, dataset);
  const data::ImageDataset train_set = data::load_image_dataset(dataset, data::ImageSplit::train, c.data_dir);
  const data::ImageDataset test_set = data::load_image_dataset(dataset, data::ImageSplit::test, c.data_dir);

  ddpm::SampleOptions options = c.sampling;
  options.seed = global.seed;
  double seconds = 0;
  const torch::Tensor generated = sample_with_progress(model, options, seconds);
  OutputSet outputs;  // the grid and the JSON are replaced together, after both are ready
  if (!c.grid_path.empty()) {
    ddpm::write_image_grid(outputs.staged(c.grid_path),
                           generated.narrow(0, 0, std::min<int64_t>(100, options.count)), 10);
  }
  const int64_t count = options.count;
  const torch::Tensor test_features = eval::classifier_features(classifier, test_set.images);
  const torch::Tensor generated_features = eval::classifier_features(classifier, generated);
  // The floor: as many real training images as generated ones, against the same test set.
  const int64_t floor_count = std::min<int64_t>(count, train_set.images.size(0));
  const torch::Tensor train_features =
      eval::classifier_features(classifier, train_set.images.narrow(0, 0, floor_count));
  const double distance = eval::frechet_distance(generated_features, test_features);
  const double floor = eval::frechet_distance(train_features, test_features);
  const torch::Tensor histogram = eval::predicted_class_histogram(classifier, generated);
  std::vector<int64_t> counts(histogram.data_ptr<int64_t>(), histogram.data_ptr<int64_t>() + histogram.numel());
  // Total variation distance of the predicted classes from the uniform distribution of the
  // (balanced) data sets: 0 when every class is generated equally often.
  double total_variation = 0;
  for (int64_t n : counts) {
    total_variation += std::abs(static_cast<double>(n) / static_cast<double>(count) - 1.0 / static_cast<double>(counts.size()));
  }
  total_variation *= 0.5;

  std::printf("%s, %s: %ld samples in %.1f s\n", dataset.c_str(), sampler_name(options).c_str(),
              static_cast<long>(count), seconds);
  std::printf("Frechet classifier distance to the test set: %.3f (floor, %ld training images: %.3f)\n",
              distance, static_cast<long>(floor_count), floor);
  std::printf("predicted classes:");
  for (int64_t n : counts) std::printf(" %ld", static_cast<long>(n));
  std::printf("  (total variation from uniform %.3f)\n", total_variation);
  if (!c.json_path.empty()) {
    write_json_file(outputs.staged(c.json_path),
                    {{"model", c.model_path},
                     {"classifier", c.classifier_path},
                     {"dataset", dataset},
                     {"attention", model.metadata.at("unet").at("attention")},
                     {"trained_steps", model.metadata.value("trained_steps", int64_t{0})},
                     {"samples", count},
                     {"ddim_steps", options.ddim_steps},
                     {"ddim_eta", options.ddim_eta},
                     {"seed", global.seed},
                     {"sampling_seconds", seconds},
                     {"frechet_distance", distance},
                     {"frechet_floor_train_vs_test", floor},
                     {"floor_train_images", floor_count},
                     {"class_histogram", counts},
                     {"class_total_variation", total_variation},
                     {"threads", global.threads}});
  }
  outputs.commit();
}

}  // namespace

void register_ddpm(CLI::App& app, const GlobalOptions& global, Action& action) {
  CLI::App* ddpm = app.add_subcommand("ddpm", "Image diffusion (DDPM) with dense, FAVOR+ or linear attention");
  ddpm->require_subcommand(1);

  auto t = std::make_shared<TrainCommand>();
  t->training.steps = 10000;
  CLI::App* train = ddpm->add_subcommand("train", "Train a DDPM U-Net on Fashion-MNIST or MNIST");
  train->add_option("--dataset", t->dataset, "fashion-mnist or mnist")
      ->check(CLI::IsMember(kDatasets))
      ->capture_default_str();
  train->add_option("--data-dir", t->data_dir, "Directory of the IDX files (default: the dataset's)");
  train->add_option("--attention", t->attention, "U-Net attention: dense, favor-softmax, favor-relu, linear")
      ->check(CLI::IsMember(unet::attention_names()))
      ->capture_default_str();
  train->add_option("--bottleneck-attention", t->bottleneck_attention, "Attention at the bottleneck")
      ->check(CLI::IsMember(unet::attention_names()))
      ->capture_default_str();
  train->add_option("--favor-features", t->unet.favor_features, "FAVOR+ random features m (0: d ln d)")
      ->check(non_negative())
      ->capture_default_str();
  train->add_option("--redraw", t->unet.redraw_interval, "FAVOR+: training calls between feature redraws (0: never)")
      ->check(non_negative())
      ->capture_default_str();
  train->add_option("--base-channels", t->unet.base_channels, "U-Net channels at full resolution")
      ->check(positive())
      ->capture_default_str();
  train->add_option("--channel-mult", t->unet.channel_multipliers, "Channel multiplier per level")
      ->capture_default_str();
  train->add_option("--res-blocks", t->unet.res_blocks, "ResNet blocks per level")
      ->check(positive())
      ->capture_default_str();
  train->add_option("--attention-resolutions", t->unet.attention_resolutions,
                    "Side lengths with attention (besides the bottleneck)")
      ->capture_default_str();
  train->add_option("--heads", t->unet.heads, "Attention heads")->check(positive())->capture_default_str();
  train->add_option("--head-dim", t->unet.head_dim, "Channels per head")->check(positive())->capture_default_str();
  train->add_option("--groups", t->unet.groups, "GroupNorm groups")->check(positive())->capture_default_str();
  train->add_option("--dropout", t->unet.dropout, "Dropout in ResNet blocks")->capture_default_str();
  train->add_option("--batch", t->training.batch, "Batch size")->check(positive())->capture_default_str();
  add_training_loop_options(*train, t->training);
  train->add_option("--validation-images", t->validation_images,
                    "Training images held out (the split's last ones, not trained on) whose loss each validation logs")
      ->check(positive())
      ->capture_default_str();
  train->add_option("--out", t->out, "Trained model (EMA weights) to write")
      ->check(writable_file())->capture_default_str();
  train->callback([t, &global, &action] {
    action = [t, &global] {
      require_cpu(global, "ddpm train");
      run_train(*t, global);
    };
  });

  auto add_sampling = [](CLI::App* command, ddpm::SampleOptions& sampling) {
    command->add_option("--count", sampling.count, "Images to generate")->check(positive())->capture_default_str();
    command->add_option("--sample-steps", sampling.ddim_steps, "DDIM steps (0: the full ancestral chain)")
        ->check(non_negative())
        ->capture_default_str();
    command->add_option("--eta", sampling.ddim_eta, "DDIM noise: 0 deterministic, 1 the posterior variance")
        ->check(CLI::Range(0.0, 1.0))
        ->capture_default_str();
    command->add_option("--batch", sampling.batch, "Images denoised at once")->check(positive())->capture_default_str();
  };

  auto s = std::make_shared<SampleCommand>();
  CLI::App* sample = ddpm->add_subcommand("sample", "Generate images into a PNG grid");
  sample->add_option("--model", s->model_path, "Trained model file")->required()->check(CLI::ExistingFile);
  add_sampling(sample, s->sampling);
  sample->add_option("--out", s->out, "PNG grid to write")
      ->check(writable_file())->capture_default_str();
  sample->add_option("--columns", s->columns, "Grid columns (0: about square)")->check(non_negative());
  sample->callback([s, &global, &action] {
    action = [s, &global] {
      require_cpu(global, "ddpm sample");
      run_sample(*s, global);
    };
  });

  auto e = std::make_shared<EvalCommand>();
  e->sampling.count = 1000;
  e->sampling.ddim_steps = 50;
  CLI::App* evaluate = ddpm->add_subcommand(
      "eval", "Sample quality: Frechet classifier distance to the test set and class histogram");
  evaluate->add_option("--model", e->model_path, "Trained model file")->required()->check(CLI::ExistingFile);
  evaluate->add_option("--classifier", e->classifier_path, "Classifier from `structdiff classifier train`")
      ->required()
      ->check(CLI::ExistingFile);
  evaluate->add_option("--dataset", e->dataset, "Real data to compare with (default: the model's)")
      ->check(CLI::IsMember(kDatasets));
  evaluate->add_option("--data-dir", e->data_dir, "Directory of the IDX files (default: the dataset's)");
  add_sampling(evaluate, e->sampling);
  evaluate->add_option("--grid", e->grid_path, "Also write the first 100 samples as a PNG grid")
      ->check(writable_file());
  evaluate->add_option("--json", e->json_path, "Write the metrics as JSON")
      ->check(writable_file());
  evaluate->callback([e, &global, &action] {
    action = [e, &global] {
      require_cpu(global, "ddpm eval");
      run_eval(*e, global);
    };
  });
}

}  // namespace structdiff::cli
