// The one training loop: exact resume (also after a signal), stopping on a non-finite loss, a step
// split into parts on several threads, option checks, refusing a resume with another
// configuration, log truncation, AdamW's decay on matrices only, and the provenance and model
// info of the files it writes; the benches' step timing on it.
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include "structdiff/best_weights.h"
#include "structdiff/checkpoint.h"
#include "structdiff/model_export.h"
#include "structdiff/model_file.h"
#include "structdiff/step_timing.h"
#include "support/expect_throw.h"
#include "support/temporary_files.h"

namespace structdiff::train {
namespace {

namespace fs = std::filesystem;

// Fixed initial weights (seeded), a batch-norm buffer, and a loss that draws from both the data
// generator and libtorch's default one, so resuming must restore both.
struct TinyRun {
  torch::nn::Sequential model, averaged;
  TinyRun() {
    torch::manual_seed(7);
    model = make();
    averaged = make();
  }
  static torch::nn::Sequential make() {
    return torch::nn::Sequential(torch::nn::Linear(3, 8), torch::nn::BatchNorm1d(8),
                                 torch::nn::ReLU(), torch::nn::Linear(8, 1));
  }
  LoopTask task(std::function<void(int64_t)> on_loss = nullptr) {
    LoopTask t;
    t.model = model.ptr().get();
    t.ema_model = averaged.ptr().get();
    t.metadata = {{"kind", "test"}, {"model", {{"hidden", 8}, {"layers", 2}}}};
    t.loss = [this, on_loss, calls = std::make_shared<int64_t>(0)](int64_t, std::mt19937_64& rng,
                                                                    at::Generator& noise) {
      if (on_loss) on_loss(++*calls);
      std::normal_distribution<float> normal;
      std::vector<float> values(16 * 3);
      for (float& v : values) v = normal(rng);
      const torch::Tensor x =
          torch::tensor(values).reshape({16, 3}) + 0.1 * torch::randn({16, 3}, noise);
      return torch::mse_loss(model->forward(x), x.sum(1, true));
    };
    return t;
  }
};

LoopOptions options(const TemporaryDirectory& directory, int64_t steps) {
  LoopOptions o;
  o.steps = steps;
  o.learning_rate = 1e-2;
  o.weight_decay = 0.1;
  o.ema_decay = 0.9;
  o.show_progress = false;
  o.checkpoint_path = directory.file("run.ckpt");
  o.log_path = directory.file("run.jsonl");
  return o;
}

void expect_equal_modules(torch::nn::Module& expected, torch::nn::Module& actual) {
  const auto a = expected.named_parameters(), b = actual.named_parameters();
  ASSERT_EQ(a.size(), b.size());
  for (const auto& item : a) EXPECT_TRUE(torch::equal(item.value(), b[item.key()])) << item.key();
  const auto c = expected.named_buffers(), d = actual.named_buffers();
  for (const auto& item : c) EXPECT_TRUE(torch::equal(item.value(), d[item.key()])) << item.key();
}

std::vector<int64_t> logged_steps(const std::string& path) {
  std::vector<int64_t> steps;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    steps.push_back(nlohmann::json::parse(line).at("step").get<int64_t>());
  }
  return steps;
}

std::vector<std::string> temporaries(const TemporaryDirectory& directory) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(directory.path())) {
    if (entry.path().filename().string().find(".tmp.") != std::string::npos) {
      names.push_back(entry.path().filename().string());
    }
  }
  return names;
}

TEST(TrainingLoop, HalfThenResumeEqualsStraightRunBitForBit) {
  TemporaryDirectory straight_dir, split_dir;
  TinyRun straight;
  run_training(straight.task(), options(straight_dir, 10), /*data_seed=*/3);

  {
    TinyRun first_half;
    run_training(first_half.task(), options(split_dir, 5), 3);
  }
  TinyRun second_half;  // a new process: fresh modules, other default-generator state
  torch::manual_seed(12345);
  LoopOptions resumed = options(split_dir, 10);
  resumed.resume = true;
  const LoopResult result = run_training(second_half.task(), resumed, 3);

  EXPECT_EQ(result.steps_done, 10);
  EXPECT_EQ(result.steps_this_run, 5);
  expect_equal_modules(*straight.model, *second_half.model);
  expect_equal_modules(*straight.averaged, *second_half.averaged);
  EXPECT_EQ(model_info(straight_dir.file("run.ckpt"))["weights_sha256"],
            model_info(split_dir.file("run.ckpt"))["weights_sha256"]);
  EXPECT_EQ(logged_steps(split_dir.file("run.jsonl")), logged_steps(straight_dir.file("run.jsonl")));
}

TEST(TrainingLoop, SignalCheckpointsTheFinishedStepAndResumesExactly) {
  TemporaryDirectory straight_dir, interrupted_dir;
  TinyRun straight;
  run_training(straight.task(), options(straight_dir, 8), 5);

  {
    TinyRun interrupted;
    // The signal arrives during step 4; the loop finishes it, checkpoints and stops.
    auto task = interrupted.task([](int64_t call) {
      if (call == 4) std::raise(SIGINT);
    });
    try {
      run_training(task, options(interrupted_dir, 8), 5);
      ADD_FAILURE() << "expected TrainingStopped";
    } catch (const TrainingStopped& stopped) {
      EXPECT_EQ(stopped.exit_code(), 128 + SIGINT);
      EXPECT_NE(std::string(stopped.what()).find("interrupted by SIGINT after step 4"), std::string::npos)
          << stopped.what();
      EXPECT_NE(std::string(stopped.what()).find("continue with --resume"), std::string::npos);
    }
  }
  EXPECT_EQ(model_info(interrupted_dir.file("run.ckpt"))["step"], 4);
  EXPECT_TRUE(temporaries(interrupted_dir).empty());

  TinyRun resumed;
  LoopOptions o = options(interrupted_dir, 8);
  o.resume = true;
  run_training(resumed.task(), o, 5);
  expect_equal_modules(*straight.model, *resumed.model);
  expect_equal_modules(*straight.averaged, *resumed.averaged);
}

TEST(TrainingLoop, NonFiniteLossStopsAndKeepsTheLastCheckpoint) {
  TemporaryDirectory directory;
  TinyRun setup;
  LoopTask task = setup.task();
  auto finite_loss = task.loss;
  int64_t calls = 0;
  task.loss = [&](int64_t step, std::mt19937_64& rng, at::Generator& noise) {
    const torch::Tensor loss = finite_loss(step, rng, noise);
    return ++calls == 5 ? loss * std::numeric_limits<float>::quiet_NaN() : loss;
  };
  LoopOptions o = options(directory, 10);
  o.checkpoint_every = 2;
  try {
    run_training(task, o, 1);
    ADD_FAILURE() << "expected TrainingStopped";
  } catch (const TrainingStopped& stopped) {
    EXPECT_EQ(stopped.exit_code(), 1);
    const std::string message = stopped.what();
    EXPECT_NE(message.find("the loss at step 5 is nan"), std::string::npos) << message;
    EXPECT_NE(message.find("holds step 4"), std::string::npos) << message;
  }
  EXPECT_EQ(model_info(directory.file("run.ckpt"))["step"], 4);
}

// Early stopping ends the run at the validation that asks for it, not a step later.
TEST(TrainingLoop, StopAfterEndsTheRunAtTheValidationThatAsksForIt) {
  TemporaryDirectory directory;
  TinyRun run;
  LoopTask task = run.task();
  int64_t validations = 0;
  task.validate = [&] { return nlohmann::json{{"count", ++validations}}; };
  task.stop_after = [](const nlohmann::json& metrics) { return metrics.at("count") == 2; };
  LoopOptions o = options(directory, 20);
  o.validate_every = 3;
  EXPECT_EQ(run_training(task, o, 1).steps_done, 6);
  EXPECT_EQ(model_info(directory.file("run.ckpt"))["step"], 6);
}

TEST(TrainingLoop, KeepingTheBestRestoresTheBestValidationsWeights) {
  TemporaryDirectory directory;
  TinyRun run;
  BestWeights best(TinyRun::make().ptr());
  LoopOptions o = options(directory, 6);
  o.validate_every = 2;
  o.ema_decay = 0;
  // Scores 3, 5, 4 at steps 2, 4, 6: the weights of step 4 come back.
  std::vector<double> scores = {3, 5, 4};
  std::vector<torch::Tensor> seen;
  size_t call = 0;
  run_training_keeping_best(
      run.task(), o, 1,
      [&] {
        seen.push_back(run.averaged->parameters().front().clone());
        return scores.at(call++);
      },
      "score", best);
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(best->step(), 4);
  EXPECT_EQ(best->score(), 5.0);
  EXPECT_TRUE(torch::equal(run.model->parameters().front(), seen[1]));
  LoopTask with_state = run.task();
  with_state.state = run.averaged.ptr().get();
  EXPECT_THROW_WITH(run_training_keeping_best(with_state, o, 1, [] { return 0.0; }, "x", best),
                    std::invalid_argument, "keeps its own state (the best weights)");
}

TEST(TrainingLoop, KeepingTheBestLogsTheTasksOwnMetricsAndHonoursItsStop) {
  TemporaryDirectory directory;
  TinyRun run;
  BestWeights best(TinyRun::make().ptr());
  LoopOptions o = options(directory, 8);
  o.validate_every = 2;
  LoopTask task = run.task();
  std::vector<std::string> order;
  task.validate = [&] {
    order.push_back("more");
    return nlohmann::json{{"extra", 7}};
  };
  task.on_step = [](int64_t step, double) { return step < 4; };
  const LoopResult result = run_training_keeping_best(
      task, o, 1,
      [&] {
        order.push_back("score");
        return 1.0;
      },
      "score", best);
  EXPECT_EQ(result.steps_done, 4);
  EXPECT_EQ(order, (std::vector<std::string>{"score", "more", "score", "more"}));
  std::ifstream log(o.log_path);
  int64_t validations = 0;
  for (std::string line; std::getline(log, line);) {
    const nlohmann::json row = nlohmann::json::parse(line);
    if (!row.contains("dev_score")) continue;
    ++validations;
    EXPECT_EQ(row.at("extra"), 7) << line;
  }
  EXPECT_EQ(validations, 2);
}

TEST(TrainingLoop, OptionsThatCannotTrainAreRefusedByName) {
  auto with = [](auto change) {
    LoopOptions o;
    change(o);
    return o;
  };
  EXPECT_THROW_WITH(check_loop_options(with([](LoopOptions& o) { o.clip_norm = -1; })),
                    std::invalid_argument, "--clip must be a number > 0 (inf: no clipping), got -1");
  EXPECT_THROW_WITH(check_loop_options(with([](LoopOptions& o) { o.clip_norm = 0; })),
                    std::invalid_argument, "--clip must be a number > 0 (inf: no clipping), got 0");
  EXPECT_THROW_WITH(check_loop_options(with([](LoopOptions& o) { o.clip_norm = NAN; })),
                    std::invalid_argument, "--clip must be a number > 0 (inf: no clipping), got nan");
  EXPECT_NO_THROW(check_loop_options(with([](LoopOptions& o) { o.clip_norm = INFINITY; })));
  EXPECT_THROW_WITH(check_loop_options(with([](LoopOptions& o) { o.steps = -3; })),
                    std::invalid_argument, "--train-steps must be >= 1, got -3");
  EXPECT_THROW_WITH(check_loop_options(with([](LoopOptions& o) { o.learning_rate = NAN; })),
                    std::invalid_argument, "--lr must be a finite number > 0, got nan");
  EXPECT_THROW_WITH(check_loop_options(with([](LoopOptions& o) { o.ema_decay = 1; })),
                    std::invalid_argument, "--ema must be in [0, 1), got 1");
  EXPECT_THROW_WITH(check_loop_options(with([](LoopOptions& o) { o.weight_decay = -0.1; })),
                    std::invalid_argument, "--weight-decay must be a finite number >= 0, got -0.1");
  EXPECT_THROW_WITH(check_loop_options(with([](LoopOptions& o) { o.resume = true; })),
                    std::invalid_argument, "--resume needs --checkpoint FILE");
  EXPECT_NO_THROW(check_loop_options(LoopOptions{}));
}

TEST(TrainingLoop, ResumingWithAnotherConfigurationNamesTheField) {
  TemporaryDirectory directory;
  {
    TinyRun setup;
    run_training(setup.task(), options(directory, 2), 1);
  }
  TinyRun setup;
  LoopTask task = setup.task();
  task.metadata["model"]["layers"] = 3;
  LoopOptions o = options(directory, 4);
  o.resume = true;
  EXPECT_THROW_WITH(run_training(task, o, 1), std::invalid_argument,
                    "cannot resume from " + directory.file("run.ckpt") +
                        ": model.layers is 2 in the checkpoint but 3 in this run");
}

TEST(TrainingLoop, ResumeDropsLogRecordsAfterTheCheckpoint) {
  TemporaryDirectory directory;
  LoopOptions o = options(directory, 4);
  {
    TinyRun setup;
    run_training(setup.task(), o, 1);
  }
  {
    // What a killed run leaves: records past its last checkpoint, the last line cut short.
    std::ofstream log(o.log_path, std::ios::app);
    log << R"({"step": 5, "loss": 1.0})" << "\n" << R"({"step": 6, "lo)";
  }
  TinyRun setup;
  o.steps = 6;
  o.resume = true;
  run_training(setup.task(), o, 1);
  EXPECT_EQ(logged_steps(o.log_path), (std::vector<int64_t>{1, 2, 3, 4, 5, 6}));
}

TEST(TrainingLoop, TheLogsSecondsCountOnAcrossAResume) {
  TemporaryDirectory directory;
  LoopOptions o = options(directory, 3);
  const auto slow = [](int64_t) { std::this_thread::sleep_for(std::chrono::milliseconds(20)); };
  {
    TinyRun first;
    run_training(first.task(slow), o, 1);
  }
  TinyRun second;
  o.steps = 4;
  o.resume = true;
  run_training(second.task(slow), o, 1);
  std::vector<double> seconds;
  std::ifstream in(o.log_path);
  for (std::string line; std::getline(in, line);) {
    seconds.push_back(nlohmann::json::parse(line).at("seconds").get<double>());
  }
  ASSERT_EQ(seconds.size(), 4u);
  EXPECT_GE(seconds[2], 0.06);
  EXPECT_GE(seconds[3], seconds[2] + 0.02);
}

TEST(TrainingLoop, WeightDecayShrinksMatricesOnly) {
  TinyRun setup;
  LoopTask task = setup.task();
  // A zero gradient: Adam's step is exactly zero, so only the decoupled decay moves parameters.
  task.loss = [&](int64_t, std::mt19937_64&, at::Generator&) {
    torch::Tensor sum = torch::zeros({});
    for (const auto& p : setup.model->parameters()) sum = sum + 0.0 * p.sum();
    return sum;
  };
  std::vector<torch::Tensor> before;
  for (const auto& p : setup.model->parameters()) before.push_back(p.detach().clone());
  LoopOptions o;
  o.steps = 1;
  o.learning_rate = 0.1;
  o.weight_decay = 0.5;
  o.show_progress = false;
  run_training(task, o, 1);
  const auto after = setup.model->parameters();
  for (size_t i = 0; i < after.size(); ++i) {
    const torch::Tensor expected = before[i].dim() >= 2 ? before[i] * (1 - 0.1 * 0.5) : before[i];
    EXPECT_TRUE(torch::allclose(after[i], expected, 0, 1e-7)) << "parameter " << i;
  }
}

// A task whose batch splits by rows: regression of the row sums of a batch drawn whole, each part
// the mean squared error of its rows; records the threads the parts ran on.
struct SplitRun {
  torch::nn::Linear model{nullptr}, averaged{nullptr};
  std::shared_ptr<std::mutex> mutex = std::make_shared<std::mutex>();
  std::shared_ptr<std::set<std::thread::id>> threads = std::make_shared<std::set<std::thread::id>>();
  SplitRun() {
    torch::manual_seed(3);
    model = torch::nn::Linear(4, 1);
    averaged = torch::nn::Linear(4, 1);
  }
  LoopTask task(int64_t failing_part = -1) {
    LoopTask t;
    t.model = model.ptr().get();
    t.ema_model = averaged.ptr().get();
    t.loss_parts = [this, failing_part](int64_t, std::mt19937_64&, at::Generator& noise,
                                        const std::vector<Shard>& parts) {
      const torch::Tensor x = torch::randn({10, 4}, noise);
      std::vector<LossPart> losses;
      for (size_t i = 0; i < parts.size(); ++i) {
        const int64_t begin = parts[i].begin(10), end = parts[i].end(10);
        const bool fails = static_cast<int64_t>(i) == failing_part;
        losses.push_back({end - begin, [this, x, begin, end, fails] {
                            {
                              const std::lock_guard<std::mutex> lock(*mutex);
                              threads->insert(std::this_thread::get_id());
                            }
                            if (fails) throw std::invalid_argument("this part's rows are broken");
                            const torch::Tensor rows = x.narrow(0, begin, end - begin);
                            return torch::mse_loss(model->forward(rows), rows.sum(1, true));
                          }});
      }
      return losses;
    };
    return t;
  }
};

LoopOptions split_options(int64_t steps) {
  LoopOptions o;
  o.steps = steps;
  o.learning_rate = 1e-2;
  o.show_progress = false;
  return o;
}

// Restores libtorch's thread count when a test changes it.
struct ThreadCount {
  const int saved = at::get_num_threads();
  explicit ThreadCount(int threads) { at::set_num_threads(threads); }
  ~ThreadCount() { at::set_num_threads(saved); }
};

TEST(TrainingLoop, PartsOnTwoThreadsTrainAsOnePartAndRepeatBitForBit) {
  SplitRun one_part, two_parts, again;
  {
    const ThreadCount threads(1);
    run_training(one_part.task(), split_options(8), 5);
  }
  const ThreadCount threads(2);
  run_training(two_parts.task(), split_options(8), 5);
  run_training(again.task(), split_options(8), 5);
  EXPECT_EQ(one_part.threads->size(), 1u);
  EXPECT_EQ(two_parts.threads->size(), 2u);  // the parts ran on two threads
  EXPECT_TRUE(torch::allclose(two_parts.model->weight, one_part.model->weight, 1e-5, 1e-6));
  EXPECT_TRUE(torch::allclose(two_parts.model->bias, one_part.model->bias, 1e-5, 1e-6));
  expect_equal_modules(*two_parts.model, *again.model);
}

TEST(TrainingLoop, AnErrorInAPartReachesTheCaller) {
  const ThreadCount threads(2);
  SplitRun run;
  EXPECT_THROW_WITH(run_training(run.task(/*failing_part=*/1), split_options(2), 5),
                    std::invalid_argument, "this part's rows are broken");
}

TEST(ModelFile, RecordsProvenanceParameterCountAndKind) {
  TemporaryDirectory directory;
  set_run_description("structdiff test --seed 9", 9);
  TinyRun setup;
  LoopOptions o = options(directory, 1);
  run_training(setup.task(), o, 1);
  const nlohmann::json info = model_info(o.checkpoint_path);
  EXPECT_EQ(info["kind"], "test");
  EXPECT_EQ(info["parameters"], 3 * 8 + 8 + 8 + 8 + 8 + 1);
  EXPECT_EQ(info["provenance"]["command_line"], "structdiff test --seed 9");
  EXPECT_EQ(info["provenance"]["seed"], 9);
  EXPECT_EQ(info["provenance"]["libtorch"], TORCH_VERSION);
  EXPECT_EQ(info["provenance"]["git_commit"].get<std::string>().size() >= 7, true);
  EXPECT_TRUE(info["resumable"].get<bool>());
  EXPECT_FALSE(info["recorded"].contains("data_rng"));
  EXPECT_EQ(info["weights_sha256"].get<std::string>().size(), 64u);
}

TEST(ModelFile, WeightsHashChangesWithOneWeight) {
  TemporaryDirectory directory;
  TinyRun setup;
  CheckpointParts parts;
  parts.model = setup.model.ptr().get();
  save_checkpoint(directory.file("a.pt"), parts);
  {
    torch::NoGradGuard no_grad;
    setup.model->parameters()[0][0][0] += 1e-6;
  }
  save_checkpoint(directory.file("b.pt"), parts);
  EXPECT_NE(model_info(directory.file("a.pt"))["weights_sha256"],
            model_info(directory.file("b.pt"))["weights_sha256"]);
  EXPECT_FALSE(model_info(directory.file("a.pt"))["resumable"].get<bool>());
}

TEST(ModelFile, KindMismatchNamesBoth) {
  EXPECT_THROW_WITH(require_model_kind({{"kind", "ddpm"}}, "sudoku", "m.pt"), std::runtime_error,
                    "m.pt holds a model of kind 'ddpm', not 'sudoku'");
  EXPECT_EQ(model_kind({{"problem", "sudoku"}}), "unknown");
}

// Every older layout reads as the current one: {"kind", "config", what was recorded}.
TEST(ModelFile, OlderLayoutsReadAsTheCurrentOne) {
  using nlohmann::json;
  const json unet = {{"base_channels", 16}}, schedule = {{"steps", 1000}};
  EXPECT_EQ(current_model_layout({{"unet", unet}, {"schedule", schedule}, {"dataset", "mnist"}}),
            json({{"kind", "ddpm"}, {"config", {{"unet", unet}, {"schedule", schedule}}}, {"dataset", "mnist"}}));
  EXPECT_EQ(current_model_layout({{"kind", "gsdm"}, {"problem", "sorting"}, {"problem_options", {{"size", 5}}},
                                  {"model", {{"dim", 16}}}, {"schedule", schedule}, {"trained_steps", 7}}),
            json({{"kind", "gsdm"},
                  {"config", {{"problem", "sorting"}, {"problem_options", {{"size", 5}}},
                              {"model", {{"dim", 16}}}, {"schedule", schedule}}},
                  {"trained_steps", 7}}));
  EXPECT_EQ(current_model_layout({{"problem", "sudoku"}, {"n", 3}, {"grids", "broad"}, {"model", {{"dim", 8}}}}),
            json({{"kind", "sudoku"},
                  {"config", {{"problem", "sudoku"}, {"n", 3}, {"grids", "broad"}, {"model", {{"dim", 8}}}}}}));
  EXPECT_EQ(current_model_layout({{"kind", "difformer"}, {"model", {{"tau", 0.5}}}, {"dataset", "cora"}}),
            json({{"kind", "difformer"}, {"config", {{"tau", 0.5}}}, {"dataset", "cora"}}));
  EXPECT_EQ(current_model_layout({{"architecture", "lenet5"}, {"dataset", "mnist"}}),
            json({{"kind", "classifier"}, {"config", {{"architecture", "lenet5"}}}, {"dataset", "mnist"}}));
  // The current layout, and metadata of no model kind, are left as they are.
  const json current = {{"kind", "ddpm"}, {"config", {{"unet", unet}}}, {"model", "x.pt"}};
  EXPECT_EQ(current_model_layout(current), current);
  EXPECT_EQ(current_model_layout({{"kind", "test"}, {"model", 1}}), json({{"kind", "test"}, {"model", 1}}));
  EXPECT_EQ(current_model_layout(json::array()), json::array());
}

TEST(ModelFile, SavingWithoutAConfigIsAProgrammingError) {
  const TemporaryDirectory directory;
  torch::nn::Linear model(2, 2);
  EXPECT_THROW_WITH(save_model_file(directory.file("m.pt"), "test", *model, {{"dataset", "x"}}),
                    std::logic_error, "the metadata holds no \"config\"");
}

// safetensors as its specification lays it out: the header's length in 8 little-endian bytes,
// the header (padded to 8), each tensor's bytes at its offsets; the file's metadata in the header.
TEST(ModelExport, SafetensorsHoldEveryTensorAtItsOffsetsAndTheMetadata) {
  const TemporaryDirectory directory;
  torch::manual_seed(0);
  torch::nn::Linear model(3, 2);
  save_model_file(directory.file("m.pt"), "test", *model, {{"config", {{"in", 3}}}});
  const ExportReport report =
      export_model(directory.file("m.pt"), ExportFormat::safetensors, directory.file("m.safetensors"));
  EXPECT_EQ(report.tensors, 2);
  EXPECT_EQ(report.values, 3 * 2 + 2);
  EXPECT_EQ(report.kind, "test");
  std::ifstream in(directory.file("m.safetensors"), std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  uint64_t length = 0;
  for (int i = 0; i < 8; ++i) length |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  ASSERT_EQ(length % 8, 0u);
  const nlohmann::json header = nlohmann::json::parse(bytes.substr(8, length));
  EXPECT_EQ(nlohmann::json::parse(header.at("__metadata__").at("structdiff").get<std::string>()).at("kind"),
            "test");
  for (const auto& item : model->named_parameters()) {
    const std::string& name = item.key();
    const torch::Tensor& tensor = item.value();
    const nlohmann::json& entry = header.at(name);
    EXPECT_EQ(entry.at("dtype"), "F32");
    EXPECT_EQ(entry.at("shape").get<std::vector<int64_t>>(), tensor.sizes().vec());
    const auto begin = entry.at("data_offsets")[0].get<size_t>(), end = entry.at("data_offsets")[1].get<size_t>();
    ASSERT_EQ(end - begin, static_cast<size_t>(tensor.nbytes()));
    const torch::Tensor read =
        torch::from_blob(const_cast<char*>(bytes.data()) + 8 + length + begin, tensor.sizes(), torch::kFloat).clone();
    EXPECT_TRUE(torch::equal(read, tensor)) << name;
  }
  EXPECT_THROW_WITH(parse_export_format("onnx"), std::invalid_argument,
                    "unknown export format 'onnx' (choose safetensors or torch)");
}

TEST(StepTiming, TimesTheStepsAfterTheWarmUpAtLeastTheMinimumAndWithinTheBudget) {
  TinyRun run;
  int64_t losses = 0;
  StepTimingBudget budget;
  budget.warmup_steps = 2;
  budget.min_steps = 3;
  const double seconds = median_step_seconds(run.task([&](int64_t) { ++losses; }), {}, budget, 1);
  EXPECT_EQ(losses, 5);  // no budget: exactly warm-up + minimum
  EXPECT_GT(seconds, 0.0);
  EXPECT_LT(seconds, 1.0);

  losses = 0;
  budget.budget_seconds = 0.2;
  median_step_seconds(run.task([&](int64_t) { ++losses; }), {}, budget, 1);
  EXPECT_GT(losses, 5);  // a tiny step: many more fit in 0.2 s

  budget.min_steps = 0;
  EXPECT_THROW_WITH(median_step_seconds(run.task(), {}, budget, 1), std::invalid_argument,
                    "at least one timed step");
}

}  // namespace
}  // namespace structdiff::train
