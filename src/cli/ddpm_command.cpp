// `structdiff ddpm train|sample|eval`: image diffusion with a U-Net whose attention is dense,
// FAVOR+ (softmax or ReLU) or linear, on Fashion-MNIST or MNIST.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/output_policy.h"
#include "structdiff/ddpm_runs.h"
#include "structdiff/progress.h"

namespace structdiff::cli {
namespace {

const std::vector<std::string> kDatasets = {"fashion-mnist", "mnist"};

struct TrainCommand {
  ddpm::TrainRequest request;
  std::string attention = "dense", bottleneck_attention = "dense";
  std::string out = "ddpm.pt";
};

struct SampleCommand {
  std::string model_path, out = "samples.png";
  ddpm::SampleOptions sampling;
  int64_t columns = 0;  // 0: about square
};

struct EvalCommand {
  ddpm::EvalRequest request;
  std::string grid_path, json_path;
};

// The shared progress bar over images done, started when sampling starts.
void show_progress(ddpm::SampleOptions& options, std::optional<train::ProgressBar>& bar) {
  options.progress = [&bar](int64_t done, int64_t total) {
    if (!bar) bar.emplace("sample", total);
    bar->update(done);
  };
}

void run_train(const TrainCommand& c, const GlobalOptions& global) {
  ddpm::TrainRequest request = c.request;
  request.unet.attention = unet::parse_attention(c.attention);
  request.unet.bottleneck_attention = unet::parse_attention(c.bottleneck_attention);
  request.seed = global.seed;
  request.training.loop.ranks = global.ranks;
  ddpm::TrainReport report = ddpm::train_model(request);
  if (!global.writes_outputs()) return;
  ddpm::save_model(c.out, report.averaged);
  print_training_summary(report.result, c.out);
}

void run_sample(const SampleCommand& c, const GlobalOptions& global) {
  ddpm::Model model = ddpm::load_model(c.model_path);
  ddpm::SampleOptions options = c.sampling;
  options.seed = global.seed;
  std::optional<train::ProgressBar> bar;
  show_progress(options, bar);
  const auto started = std::chrono::steady_clock::now();
  const torch::Tensor images = ddpm::sample(model, options);
  bar->finish();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  ddpm::write_image_grid(c.out, images, c.columns);
  std::printf("sampled %ld images with %s in %.1f s (%.3f s/image); wrote %s\n",
              static_cast<long>(options.count), ddpm::sampler_description(options).c_str(), seconds,
              seconds / static_cast<double>(options.count), c.out.c_str());
}

void run_eval(const EvalCommand& c, const GlobalOptions& global) {
  ddpm::EvalRequest request = c.request;
  request.sampling.seed = global.seed;
  std::optional<train::ProgressBar> bar;
  show_progress(request.sampling, bar);
  const ddpm::EvalReport report = ddpm::evaluate(request);
  bar->finish();
  const ddpm::SampleOptions& options = request.sampling;
  std::printf("%s, %s: %ld samples in %.1f s\n", report.dataset.c_str(), ddpm::sampler_description(options).c_str(),
              static_cast<long>(options.count), report.sampling_seconds);
  std::printf("Frechet classifier distance to the test set: %.3f (floor, %ld training images: %.3f)\n",
              report.frechet_distance, static_cast<long>(report.floor_images), report.frechet_floor);
  std::printf("predicted classes:");
  for (int64_t n : report.class_histogram) std::printf(" %ld", static_cast<long>(n));
  std::printf("  (total variation from uniform %.3f)\n", report.class_total_variation);
  OutputSet outputs;  // the grid and the JSON are replaced together, after both are ready
  if (!c.grid_path.empty()) {
    ddpm::write_image_grid(outputs.staged(c.grid_path),
                           report.samples.narrow(0, 0, std::min<int64_t>(100, options.count)), 10);
  }
  if (!c.json_path.empty()) {
    write_json_file(outputs.staged(c.json_path), ddpm::eval_record(request, report));
  }
  outputs.commit();
}

void add_train(CLI::App& ddpm, const GlobalOptions& global, Action& action) {
  auto t = std::make_shared<TrainCommand>();
  t->request.training.loop.steps = 10000;
  CLI::App* train = ddpm.add_subcommand("train", "Train a DDPM U-Net on Fashion-MNIST or MNIST");
  train->add_option("--dataset", t->request.dataset, "fashion-mnist or mnist")
      ->check(CLI::IsMember(kDatasets))
      ->capture_default_str();
  train->add_option("--data-dir", t->request.data_dir, "Directory of the IDX files (default: the dataset's)")
      ->check(CLI::ExistingDirectory);
  train->add_option("--attention", t->attention, "U-Net attention: dense, favor-softmax, favor-relu, linear")
      ->check(CLI::IsMember(unet::attention_names()))
      ->capture_default_str();
  train->add_option("--bottleneck-attention", t->bottleneck_attention, "Attention at the bottleneck")
      ->check(CLI::IsMember(unet::attention_names()))
      ->capture_default_str();
  train->add_option("--favor-features", t->request.unet.favor_features, "FAVOR+ random features m (0: d ln d)")
      ->check(non_negative())
      ->capture_default_str();
  train->add_option("--redraw", t->request.unet.redraw_interval, "FAVOR+: training calls between feature redraws (0: never)")
      ->check(non_negative())
      ->capture_default_str();
  train->add_option("--base-channels", t->request.unet.base_channels, "U-Net channels at full resolution")
      ->check(positive())
      ->capture_default_str();
  train->add_option("--channel-mult", t->request.unet.channel_multipliers, "Channel multiplier per level")
      ->capture_default_str();
  train->add_option("--res-blocks", t->request.unet.res_blocks, "ResNet blocks per level")
      ->check(depth())
      ->capture_default_str();
  train->add_option("--attention-resolutions", t->request.unet.attention_resolutions,
                    "Side lengths with attention (besides the bottleneck)")
      ->capture_default_str();
  train->add_option("--heads", t->request.unet.heads, "Attention heads")->check(positive())->capture_default_str();
  train->add_option("--head-dim", t->request.unet.head_dim, "Channels per head")->check(positive())->capture_default_str();
  train->add_option("--groups", t->request.unet.groups, "GroupNorm groups")->check(positive())->capture_default_str();
  train->add_option("--dropout", t->request.unet.dropout, "Dropout in ResNet blocks")->capture_default_str();
  train->add_option("--batch", t->request.training.batch, "Batch size")->check(positive())->capture_default_str();
  add_training_loop_options(*train, t->request.training.loop);
  train->add_option("--validation-images", t->request.validation_images,
                    "Training images held out (the split's last ones, not trained on) whose loss each validation logs")
      ->check(positive())
      ->capture_default_str();
  train->add_option("--out", t->out, "Trained model (EMA weights) to write")
      ->check(writable_file())->capture_default_str();
  train->callback([t, &global, &action] { action = [t, &global] { run_train(*t, global); }; });
}

void add_sampling(CLI::App* command, ddpm::SampleOptions& sampling) {
  command->add_option("--count", sampling.count, "Images to generate")->check(positive())->capture_default_str();
  command->add_option("--sample-steps", sampling.ddim_steps, "DDIM steps (0: the full ancestral chain)")
      ->check(non_negative())
      ->capture_default_str();
  command->add_option("--eta", sampling.ddim_eta, "DDIM noise: 0 deterministic, 1 the posterior variance")
      ->check(between(0.0, 1.0))
      ->capture_default_str();
  command->add_option("--batch", sampling.batch, "Images denoised at once")->check(positive())->capture_default_str();
}

void add_sample(CLI::App& ddpm, const GlobalOptions& global, Action& action) {
  auto s = std::make_shared<SampleCommand>();
  CLI::App* sample = ddpm.add_subcommand("sample", "Generate images into a PNG grid");
  sample->add_option("--model", s->model_path, "Trained model file")->required()->check(CLI::ExistingFile);
  add_sampling(sample, s->sampling);
  sample->add_option("--out", s->out, "PNG grid to write")
      ->check(writable_file())
      ->check(png_name())
      ->capture_default_str();
  sample->add_option("--columns", s->columns, "Grid columns (0: about square)")->check(non_negative());
  sample->callback([s, &global, &action] { action = [s, &global] { run_sample(*s, global); }; });
}

void add_eval(CLI::App& ddpm, const GlobalOptions& global, Action& action) {
  auto e = std::make_shared<EvalCommand>();
  e->request.sampling.count = 1000;
  e->request.sampling.ddim_steps = 50;
  CLI::App* evaluate = ddpm.add_subcommand(
      "eval", "Sample quality: Frechet classifier distance to the test set and class histogram");
  evaluate->add_option("--model", e->request.model_path, "Trained model file")->required()->check(CLI::ExistingFile);
  evaluate->add_option("--classifier", e->request.classifier_path, "Classifier from `structdiff classifier train`")
      ->required()
      ->check(CLI::ExistingFile);
  evaluate->add_option("--dataset", e->request.dataset, "Real data to compare with (default: the model's)")
      ->check(CLI::IsMember(kDatasets));
  evaluate->add_option("--data-dir", e->request.data_dir, "Directory of the IDX files (default: the dataset's)")
      ->check(CLI::ExistingDirectory);
  add_sampling(evaluate, e->request.sampling);
  evaluate->add_option("--grid", e->grid_path, "Also write the first 100 samples as a PNG grid")
      ->check(writable_file())
      ->check(png_name());
  evaluate->add_option("--json", e->json_path, "Write the metrics as JSON")->check(writable_file());
  evaluate->callback([e, &global, &action] { action = [e, &global] { run_eval(*e, global); }; });
}

}  // namespace

void register_ddpm(CLI::App& app, const GlobalOptions& global, Action& action) {
  CLI::App* ddpm = app.add_subcommand("ddpm", "Image diffusion (DDPM) with dense, FAVOR+ or linear attention");
  ddpm->require_subcommand(1);
  add_train(*ddpm, global, action);
  add_sample(*ddpm, global, action);
  add_eval(*ddpm, global, action);
}

}  // namespace structdiff::cli
