// The command-line tool as a user meets it: help, one-line errors, pattern and bench commands.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/cuda.h>

#include "structdiff/datasets.h"
#include "structdiff/gsdm_problems.h"
#include "support/cli.h"
#include "support/data.h"

namespace {

TEST(Cli, HelpOnEveryLevel) {
  for (const char* args : {"--help", "bench --help", "bench attention --help", "pattern --help"}) {
    Result r = run(args);
    EXPECT_EQ(r.exit_code, 0) << args;
    EXPECT_NE(r.output.find("Usage"), std::string::npos) << args << ": " << r.output;
  }
  EXPECT_NE(run("--help").output.find("--threads"), std::string::npos);
}

TEST(Cli, BadArgumentsGiveOneLineAndNonZeroExit) {
  for (const char* args : {"", "--no-such-flag", "--threads 0 pattern --builder causal",
                           "bench", "bench attention --workload nope", "pattern",
                           "pattern --builder causal --workload sudoku9", "classifier",
                           "classifier train --dataset cifar10 --out x.pt"}) {
    Result r = run(args);
    EXPECT_NE(r.exit_code, 0) << args;
    EXPECT_EQ(line_count(r.output), 1) << args << ": " << r.output;
    EXPECT_EQ(r.output.rfind("structdiff: error: ", 0), 0u) << args << ": " << r.output;
  }
}

TEST(Cli, LibraryErrorsGiveOneLine) {
  Result r = run("pattern --builder tracformer-encoder --tokens 16 --layer 0");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(line_count(r.output), 1) << r.output;
  EXPECT_NE(r.output.find("layer"), std::string::npos) << r.output;
}

TEST(Cli, PatternStatisticsAndPng) {
  const std::string png = temp_path("sudoku9.png");
  Result r = run("pattern --workload sudoku9 --png " + png);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // 81 cells, each sees its row, column and block: 8 + 8 + 4 others + itself = 21.
  EXPECT_NE(r.output.find("rows 81, cols 81, entries 1701"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("symmetric yes"), std::string::npos) << r.output;
  std::ifstream file(png, std::ios::binary);
  char signature[4] = {};
  file.read(signature, 4);
  EXPECT_EQ(std::string(signature + 1, 3), "PNG");
}

TEST(Cli, BenchAttentionWritesJsonRows) {
  const std::string json_path = temp_path("bench.json");
  Result r = run("--threads 2 bench attention --workload sudoku9 --min-time 0 --min-reps 1 --json " +
                 json_path);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("sparse is"), std::string::npos) << r.output;
  std::ifstream file(json_path);
  const nlohmann::json document = nlohmann::json::parse(file);
  EXPECT_TRUE(document.contains("provenance"));
  const nlohmann::json& rows = document["rows"];
  ASSERT_EQ(rows.size(), 3u);
  for (const auto& row : rows) {
    for (const char* field : {"workload", "mechanism", "ms", "gflops", "peak_mb"}) {
      EXPECT_TRUE(row.contains(field)) << field;
    }
    EXPECT_EQ(row["workload"], "sudoku9");
    EXPECT_GT(row["ms"].get<double>(), 0.0);
    EXPECT_GT(row["peak_mb"].get<double>(), 0.0);
    EXPECT_LT(row["max_abs_error_vs_reference"].get<double>(), 1e-4);
  }
}

TEST(Cli, BenchDifformerWritesJson) {
  const std::string json_path = temp_path("bench_difformer.json");
  Result r = run("--threads 1 bench difformer --kernel simple --nodes 500 1000 --dim 16 "
                 "--max-seconds 0 --json " + json_path);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("log-log slope"), std::string::npos) << r.output;
  std::ifstream file(json_path);
  const nlohmann::json document = nlohmann::json::parse(file);
  EXPECT_TRUE(document.contains("provenance"));
  const nlohmann::json& rows = document["rows"];
  ASSERT_EQ(rows.size(), 2u);
  for (const auto& row : rows) {
    for (const char* field : {"kernel", "nodes", "ms", "peak_mb"}) {
      EXPECT_TRUE(row.contains(field)) << field;
    }
    EXPECT_EQ(row["kernel"], "simple");
    EXPECT_GT(row["ms"].get<double>(), 0.0);
    EXPECT_GT(row["peak_mb"].get<double>(), 0.0);
  }
  EXPECT_EQ(rows[1]["nodes"], 1000);

  r = run("bench difformer --kernel cubic");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(line_count(r.output), 1) << r.output;
  EXPECT_EQ(r.output.rfind("structdiff: error: ", 0), 0u) << r.output;
}

TEST(Cli, BenchGsdmTimesEveryProblemAtSeveralSizes) {
  const std::string json_path = temp_path("bench_gsdm.json");
  Result r = run("--threads 1 bench gsdm --problem bcmf --size 2,2,1 4,4,2 --batch 2 --train-steps 1 "
                 "--sample-examples 1 --sample-steps 1 --no-ancestral --attention sparse dense "
                 "--dense-max-nodes 20 --json " + json_path);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "sparse: training step time ~ nodes^")) << r.output;
  EXPECT_TRUE(contains(r.output, "skipped (more than --dense-max-nodes 20)")) << r.output;
  std::ifstream file(json_path);
  const nlohmann::json rows = nlohmann::json::parse(file)["rows"];
  // bcmf 2,2,1 has 12 nodes (A 2, R 2, C 4, E 4) and 4,4,2 has 64: dense runs only on the first.
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0]["nodes"], 12);
  EXPECT_EQ(rows[1]["attention"], "dense");
  EXPECT_EQ(rows[2]["nodes"], 64);
  for (const auto& row : rows) {
    EXPECT_GT(row["train_step_ms"].get<double>(), 0.0);
    EXPECT_GT(row["ddim_seconds_per_example"].get<double>(), 0.0);
  }
  EXPECT_TRUE(rows[0].contains("log_log_slope"));
  EXPECT_FALSE(rows[1].contains("log_log_slope"));  // dense ran at one size only

  r = run("bench gsdm --problem sudoku --size 7");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(line_count(r.output), 1) << r.output;
  EXPECT_TRUE(contains(r.output, "--size for sudoku (grid side: 4, 9, 16 or 25): a square of 2..5, "
                                 "got 7")) << r.output;
}

TEST(Cli, ClassifierEvalOfTheShippedModel) {
  SKIP_WITHOUT_DATA(std::string(structdiff::data::kFashionMnistDirectory) +
                    "/t10k-images-idx3-ubyte.gz");
  const std::string json_path = temp_path("classifier_eval.json");
  Result r = run("--threads 1 classifier eval --model " + std::string(STRUCTDIFF_SOURCE_DIR) +
                 "/models/classifier-fashion-mnist.pt --json " + json_path);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("the floor for generated samples"), std::string::npos) << r.output;
  std::ifstream file(json_path);
  const nlohmann::json result = nlohmann::json::parse(file);
  EXPECT_EQ(result["dataset"], "fashion-mnist");
  EXPECT_GT(result["test_accuracy"].get<double>(), 0.85);
  EXPECT_EQ(result["frechet_train_images"], 10000);
  EXPECT_GT(result["frechet_train_vs_test"].get<double>(), 0.0);

  // A directory that does not exist is a usage error; one without the IDX files says which is
  // missing.
  r = run("classifier train --dataset mnist --data-dir /nonexistent --out " +
          temp_path("classifier.pt"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(line_count(r.output), 1) << r.output;
  EXPECT_TRUE(contains(r.output, "--data-dir: Directory does not exist: /nonexistent")) << r.output;
  r = run("classifier train --dataset mnist --data-dir " + temp_path("") + " --out " +
          temp_path("classifier.pt"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(line_count(r.output), 1) << r.output;
  EXPECT_TRUE(contains(r.output, "train-images-idx3-ubyte.gz: not found")) << r.output;
}

// `difformer train` records the options it ran with; Fashion-MNIST takes the image setting's
// defaults (hidden 300, lr 5e-4, weight decay 0.1, value projection) for the options not given,
// CSBM keeps the general ones, and options given on the command line win.
TEST(Cli, DifformerTrainDatasetDefaults) {
  auto config_of = [](const std::string& arguments) {
    const std::string json_path = temp_path("difformer_train.json");
    std::remove(json_path.c_str());
    Result r = run("--threads 1 difformer train --architecture mlp --runs 1 --epochs 1 --no-progress "
                   "--json " + json_path + " " + arguments);
    EXPECT_EQ(r.exit_code, 0) << arguments << ": " << r.output;
    std::ifstream file(json_path);
    return file ? nlohmann::json::parse(file)["config"] : nlohmann::json::object();
  };
  nlohmann::json config =
      config_of("--dataset csbm --nodes 100 --labels-per-class 2 --validation 20");
  EXPECT_EQ(config["hidden"], 64);
  EXPECT_DOUBLE_EQ(config["lr"].get<double>(), 0.01);
  EXPECT_DOUBLE_EQ(config["weight_decay"].get<double>(), 5e-4);
  EXPECT_EQ(config["value_projection"], false);

  SKIP_WITHOUT_DATA(std::string(structdiff::data::kFashionMnistDirectory) +
                    "/train-labels-idx1-ubyte.gz");
  const std::string fashion = "--dataset fashion-mnist --pool 100 --labels-per-class 2 "
                              "--validation 20 ";
  config = config_of(fashion);
  EXPECT_EQ(config["hidden"], 300);
  EXPECT_DOUBLE_EQ(config["lr"].get<double>(), 5e-4);
  EXPECT_DOUBLE_EQ(config["weight_decay"].get<double>(), 0.1);
  EXPECT_EQ(config["value_projection"], true);
  config = config_of(fashion + "--hidden 32 --lr 0.01 --weight-decay 0 --no-value-projection");
  EXPECT_EQ(config["hidden"], 32);
  EXPECT_DOUBLE_EQ(config["lr"].get<double>(), 0.01);
  EXPECT_DOUBLE_EQ(config["weight_decay"].get<double>(), 0.0);
  EXPECT_EQ(config["value_projection"], false);
}

TEST(Cli, DdpmTrainSampleEvalAndErrors) {
  SKIP_WITHOUT_DATA(std::string(structdiff::data::kFashionMnistDirectory) +
                    "/t10k-images-idx3-ubyte.gz");
  const std::string model = temp_path("ddpm_tiny.pt"), grid = temp_path("ddpm_grid.png"),
                    json_path = temp_path("ddpm_eval.json");
  std::filesystem::remove(model);
  Result r = run("--threads 2 ddpm train --attention favor-relu --favor-features 4 --base-channels 8 "
                 "--groups 4 --channel-mult 1 2 --attention-resolutions 14 --heads 2 --head-dim 4 "
                 "--train-steps 3 --batch 4 --validate-every 3 --out " + model);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("trained 3 steps"), std::string::npos) << r.output;

  r = run("ddpm sample --model " + model + " --count 3 --sample-steps 2 --eta 1 --out " + grid);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("sampled 3 images with DDIM 2 steps, eta 1 "), std::string::npos) << r.output;
  EXPECT_TRUE(std::filesystem::exists(grid));

  r = run("--threads 2 ddpm eval --model " + model + " --classifier " +
          std::string(STRUCTDIFF_SOURCE_DIR) + "/models/classifier-fashion-mnist.pt --count 20 "
          "--sample-steps 2 --json " + json_path);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream file(json_path);
  const nlohmann::json result = nlohmann::json::parse(file);
  EXPECT_EQ(result["attention"], "favor-relu");
  EXPECT_EQ(result["trained_steps"], 3);
  EXPECT_EQ(result["samples"], 20);
  EXPECT_EQ(result["ddim_eta"], 0.0);
  EXPECT_GT(result["frechet_distance"].get<double>(), result["frechet_floor_train_vs_test"].get<double>());
  int64_t histogram_total = 0;
  for (const auto& count : result["class_histogram"]) histogram_total += count.get<int64_t>();
  EXPECT_EQ(histogram_total, 20);

  for (const std::string& args : std::vector<std::string>{
           "ddpm sample --model " + std::string(STRUCTDIFF_SOURCE_DIR) +
            "/models/classifier-fashion-mnist.pt --count 1",
        "ddpm sample --model " + model + " --sample-steps 1001",
        "ddpm sample --model " + model + " --sample-steps 0 --eta 0.5",
        "ddpm train --attention performer", "ddpm train --dataset mnist --data-dir /nonexistent",
        "ddpm train --train-steps 1 --base-channels 12"}) {
    r = run(args);
    EXPECT_NE(r.exit_code, 0) << args;
    EXPECT_EQ(line_count(r.output), 1) << args << ": " << r.output;
    EXPECT_EQ(r.output.rfind("structdiff: error: ", 0), 0u) << args << ": " << r.output;
  }
  EXPECT_NE(run("ddpm sample --model " + model + " --sample-steps 1001").output.find("DDIM steps must be in [1, 1000]"),
            std::string::npos);
  EXPECT_NE(run("ddpm sample --model " + model + " --sample-steps 0 --eta 0.5").output.find("eta applies to DDIM"),
            std::string::npos);
  EXPECT_NE(run("ddpm train --train-steps 1 --base-channels 12").output.find(
                "base_channels 12 must be divisible by groups 8"),
            std::string::npos);
}

}  // namespace

namespace {

TEST(Cli, GsdmMaskAndInvariance) {
  Result r = run("gsdm mask --sudoku 9");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("81 variables in 1 arrays; mask: 1701 entries"), std::string::npos) << r.output;
  r = run("gsdm invariance --sudoku 9 --axis cell:0 --permutation 1,0,2,3,4,5,6,7,8");
  EXPECT_NE(r.output.find("mask is invariant"), std::string::npos) << r.output;
  r = run("gsdm invariance --sudoku 9 --axis cell:0 --permutation 3,1,2,0,4,5,6,7,8");
  EXPECT_NE(r.output.find("mask is NOT invariant"), std::string::npos) << r.output;
  const std::string spec = temp_path("bad_spec.json");
  std::ofstream(spec) << R"({"arrays": [{"name": "x", "shape": [2]}], "edges": [["x[0]", "x[5]"]]})";
  r = run("gsdm mask --spec " + spec);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(line_count(r.output), 1) << r.output;
  EXPECT_NE(r.output.find("edges[0]: 'x[5]': index 5 out of range"), std::string::npos) << r.output;
}

// Twenty steps give a model that `gsdm eval` accepts; sampling prints truth beside samples.
TEST(Cli, GsdmTrainEvalSampleAnyProblem) {
  const std::string model = temp_path("sorting3.pt"), json = temp_path("sorting3.json");
  Result r = run("gsdm train --problem sorting --size 3 --dim 16 --blocks 1 --heads 2 "
                 "--train-steps 20 --validate-every 10 --validation-examples 4 "
                 "--out " + model);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "training a GSDM for sorting (size 3): 24 variables")) << r.output;
  r = run("gsdm eval --model " + model + " --count 4 --sample-steps 2 --json " + json);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "baseline_random_permutation_rmse")) << r.output;
  const nlohmann::json result = nlohmann::json::parse(std::ifstream(json));
  EXPECT_EQ(result["problem"], "sorting");
  EXPECT_EQ(result["metrics"]["examples"], 4);
  EXPECT_TRUE(result.contains("provenance"));
  r = run("gsdm sample --model " + model + " --count 1 --sample-steps 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "u    given")) << r.output;
  EXPECT_TRUE(contains(r.output, "P    sample")) << r.output;
  r = run("gsdm train --problem sortng --train-steps 1 --out " + model);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.output, "unknown problem 'sortng' (did you mean 'sorting'?)")) << r.output;
  r = run("gsdm train --problem sorting --size 1 --train-steps 1 --out " + model);
  EXPECT_TRUE(contains(r.output, "--size for sorting (list length) must be in 2 .. 64, got 1"))
      << r.output;
  r = run("gsdm mask --problem sorting --size 20");
  EXPECT_TRUE(contains(r.output, "840 variables in 4 arrays; mask: 18478 entries")) << r.output;
  // The problem's defaults apply, so help shows no generic ones.
  r = run("gsdm train --help");
  EXPECT_TRUE(contains(r.output, "--lr FLOAT:POSITIVE         AdamW learning rate (default: the problem's)"))
      << r.output;
  EXPECT_TRUE(contains(r.output, "--dim INT:POSITIVE          Embedding dimension (default: the problem's)"))
      << r.output;
}

// --init-from as a user meets it (what it does is the library's test, ProblemTraining.*): a file of
// another architecture or problem is one line naming what differs.
TEST(Cli, GsdmTrainStartsFromAModelFile) {
  const std::string first = temp_path("init-first.pt"), second = temp_path("init-second.pt");
  ASSERT_EQ(run("gsdm train --problem sorting --size 3 --dim 16 --blocks 1 --heads 2 --train-steps 2 "
                "--out " + first).exit_code, 0);
  Result r = run("gsdm train --problem sorting --size 3 --dim 32 --blocks 1 --heads 2 --train-steps 1 "
                 "--init-from " + first + " --out " + second);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.output, "--init-from " + first + ": model dim is 16 in the file and 32 here"))
      << r.output;
  r = run("gsdm train --problem bcmf --train-steps 1 --init-from " + first + " --out " + second);
  EXPECT_EQ(line_count(r.output), 1) << r.output;
  EXPECT_TRUE(contains(r.output, "it is a model of sorting, this run trains bcmf")) << r.output;
}

// Size generalisation: an EE model of BCMF runs at other sizes; an IE one is refused by name.
TEST(Cli, GsdmEvalAtAnotherSize) {
  const std::string model = temp_path("bcmf-ee.pt"), json = temp_path("bcmf-ee.json");
  Result r = run("gsdm train --problem bcmf --size 2,2,2 --dim 16 --blocks 1 --heads 2 --embedding EE "
                 "--train-steps 2 --out " + model);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run("gsdm eval --model " + model + " --size 4,3,2 --count 2 --sample-steps 2 --json " + json);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "bcmf (size 4,3,2, trained at 2,2,2), 2 examples")) << r.output;
  const nlohmann::json result = nlohmann::json::parse(std::ifstream(json));
  EXPECT_EQ(result["trained_size"], "2,2,2");
  EXPECT_EQ(result["problem_options"]["size"], (std::vector<int64_t>{4, 3, 2}));
  r = run("gsdm train --problem bcmf --size 2,2,2 --dim 16 --blocks 1 --heads 2 --embedding IE "
          "--train-steps 1 --out " + model);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run("gsdm eval --model " + model + " --size 3,2,2 --count 2 --sample-steps 2");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.output, "was trained at size 2,2,2 and cannot run at size 3,2,2: a model "
                                 "with IE embeddings (a learned row per variable) runs only on the "
                                 "graph it was built on; AE and EE embeddings carry over"))
      << r.output;
  r = run("gsdm eval --model " + model + " --size 300,2,2 --count 2");
  EXPECT_TRUE(contains(r.output, "--size for bcmf (m,n,k: E is m x n, the rank k) must be in"))
      << r.output;
  r = run("gsdm train --problem bcmf --size 2,2,2 --size-range 1,1,1..3,3,2 --embedding IE "
          "--train-steps 1 --out " + model);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.output, "--size-range: this model cannot run at other sizes: a model with "
                                 "IE embeddings")) << r.output;
}

// Training with a new size per batch (paper App. F); the model then samples at any size.
TEST(Cli, GsdmTrainsOnANewSizePerBatch) {
  const std::string model = temp_path("bcmf-sizes.pt");
  Result r = run("gsdm train --problem bcmf --size 2,2,2 --size-range 1,1,1..3,3,2 --dim 16 "
                 "--blocks 1 --heads 2 --train-steps 3 --out " + model);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "training a GSDM for bcmf (size 1,1,1..3,3,2 per batch, validated "
                                 "at 2,2,2)")) << r.output;
  EXPECT_EQ(structdiff::gsdm::load_problem_model(model).options.size_high,
            (std::vector<int64_t>{3, 3, 2}));
  r = run("gsdm sample --model " + model + " --size 3,1,2 --count 1 --sample-steps 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "size 3,1,2, trained at 1,1,1..3,3,2")) << r.output;
  // Values an option's own parser rejects are usage errors, never a crash.
  r = run("gsdm train --problem bcmf --size x --out " + model);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.output, "structdiff: error: --size 'x': give whole numbers separated by "
                                 "',' or 'x', e.g. 16,16,8 (run with --help for usage)")) << r.output;
  r = run("gsdm train --problem bcmf --size-range 1.. --out " + model);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.output, "--size-range '1..': give the smallest and largest size as "
                                 "LOW..HIGH")) << r.output;
  r = run("gsdm train --problem bcmf --size-range 1,1,1..300,3,2 --out " + model);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.output, "--size-range: --size for bcmf (m,n,k: E is m x n, the rank k) "
                                 "must be in 1,1,1 .. 256,256,32, got 300,3,2")) << r.output;
}

// --stop-at ends training at the first validation that reaches the level (here any accuracy).
TEST(Cli, GsdmTrainStopsAtAValidationMetricsLevel) {
  const std::string model = temp_path("boolean1.pt");
  Result r = run("gsdm train --problem boolean --size 1 --dim 16 --blocks 1 --heads 2 "
                 "--train-steps 50 --validate-every 3 --validation-examples 4 "
                 "--stop-at 'accuracy>=0' --out " + model);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(structdiff::gsdm::load_problem_model(model).metadata["trained_steps"], 3);
  r = run("gsdm train --problem boolean --size 1 --validate-every 3 --stop-at accuracy=1 --out " + model);
  EXPECT_TRUE(contains(r.output, "--stop-at takes METRIC>=LEVEL or METRIC<=LEVEL (e.g. accuracy>=1), "
                                 "got 'accuracy=1'")) << r.output;
  r = run("gsdm train --problem boolean --size 1 --validate-every 3 --stop-at 'acc>=1' --out " + model);
  EXPECT_TRUE(contains(r.output, "--stop-at: boolean has no validation metric 'acc'; it has accuracy, "
                                 "baseline_majority_accuracy")) << r.output;
  r = run("gsdm train --problem boolean --size 1 --stop-at 'accuracy>=1' --out " + model);
  EXPECT_TRUE(contains(r.output, "--stop-at needs --validate-every")) << r.output;
}

// A mask ablation is a model option: the model file records it, so eval rebuilds the same mask.
TEST(Cli, GsdmMaskAblationsTrainAndTheirModelFilesKeepThem) {
  const std::string model = temp_path("sorting3-random.pt");
  Result r = run("gsdm train --problem sorting --size 3 --dim 16 --blocks 1 --heads 2 --mask-rule random "
                 "--mask-seed 4 --train-steps 2 --validate-every 2 --validation-examples 2 --out " +
                 model);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run("gsdm eval --model " + model + " --count 2 --sample-steps 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const structdiff::gsdm::ProblemModel loaded = structdiff::gsdm::load_problem_model(model);
  EXPECT_EQ(loaded.model->config().mask.rule, structdiff::graph::MaskRule::random);
  EXPECT_EQ(loaded.model->config().mask.seed, 4u);
  EXPECT_EQ(loaded.model->pattern(), loaded.graph.compile({structdiff::graph::MaskRule::random, 4}));
  r = run("gsdm mask --problem sorting --size 2 --rule non-symmetrised");
  EXPECT_TRUE(contains(r.output, "12 variables in 4 arrays; mask: 34 entries")) << r.output;
  r = run("gsdm train --problem sorting --size 3 --attention dense --mask-rule non-symmetrised "
          "--train-steps 1 --out " + model);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.output, "dense attention uses no mask, so mask rule non-symmetrised has "
                                 "no effect")) << r.output;
  r = run("gsdm train --problem sorting --mask-rule symmetric --train-steps 1 --out " + model);
  EXPECT_TRUE(contains(r.output, "--mask-rule: symmetric not in {standard,non-symmetrised,random}"))
      << r.output;
}

class SudokuCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = temp_path("tiny_sudoku4.pt");
    Result r = run("sudoku train --size 4 --dim 16 --blocks 1 --heads 2 --train-steps 2 --out " + model_);
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  static std::string model_;
};
std::string SudokuCli::model_;

// The shipped 9x9 model solves this puzzle in its first sample: no further samples are drawn.
TEST(Cli, SudokuSolveStopsAtTheFirstValidSample) {
  const Result r = run("sudoku solve --model " + std::string(STRUCTDIFF_SOURCE_DIR) +
                       "/models/sudoku9.pt --samples 8 --threads 1 "
                       "53..7....6..195....98....6.8...6...34..8.3..17...2...6.6....28....419..5....8..79");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "valid solution (1 of 1 samples drawn valid")) << r.output;
}

// A masked-process model: trained and recorded by the same commands, sampled by its own default
// (adaptive); the Gaussian model refuses the masked sampler, and the masked one DDIM.
TEST_F(SudokuCli, MaskedDiffusionTrainsEvaluatesAndRefusesTheOtherProcessesSamplers) {
  const std::string masked = temp_path("tiny_masked4.pt");
  Result r = run("sudoku train --size 4 --dim 16 --blocks 1 --heads 2 --train-steps 2 --diffusion "
                 "masked --out " + masked);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run("--threads 1 sudoku eval --model " + masked + " --count 2 --no-unique --diversity-samples 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "masked diffusion, sampler adaptive (1 variable(s) per step)")) << r.output;
  EXPECT_TRUE(contains(r.output, "(temperature 1)")) << r.output;
  r = run("sudoku solve --model " + model_ + " --sampler adaptive ................");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.output, "needs a masked-process model")) << r.output;
  r = run("sudoku solve --model " + masked + " --sampler ddim ................");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.output, "samples with ancestral or adaptive, not ddim")) << r.output;
  r = run("sudoku train --size 4 --diffusion absorbing --out " + masked);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.output, "--diffusion: absorbing not in {gaussian,masked}")) << r.output;
}

TEST_F(SudokuCli, TheGenericGsdmEvalReadsSudokuModels) {
  const Result r = run("gsdm eval --model " + model_ + " --count 2 --sample-steps 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "sudoku (size 4), 2 examples")) << r.output;
  EXPECT_TRUE(contains(r.output, "valid_fraction")) << r.output;
}

TEST_F(SudokuCli, SolvePrintsAGridAndItsValidity) {
  // A 2-step model solves nothing: the grid is printed, and the exit code and last line say so.
  Result r = run("sudoku solve --model " + model_ + " --samples 2 1.3..4.2.1.3....");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "0 of 2 samples drawn valid")) << r.output;
  EXPECT_TRUE(contains(r.output, "structdiff: error: no valid solution in 2 sample(s) for the puzzle given"))
      << r.output;
  // No solution exists (row 1 needs a 4 in column 4, which holds one): more samples cannot help.
  r = run("sudoku solve --model " + model_ + " --samples 2 123....4........");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "structdiff: error: the puzzle given has no solution at all")) << r.output;
}

// `eval --samples K` scores each puzzle by up to K samples, as `solve` draws them, and says how
// many it drew; the 2-step model fails its puzzles, so it draws all K for most of them.
TEST_F(SudokuCli, EvalWithSamplesDrawsUntilValid) {
  const std::string json = temp_path("sudoku_eval_samples.json");
  Result r = run("sudoku eval --model " + model_ +
                 " --count 2 --diversity-samples 2 --sample-steps 2 --samples 3 --json " + json);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "samples/puzzle")) << r.output;
  std::ifstream file(json);
  const nlohmann::json rows = nlohmann::json::parse(file).at("rows");
  EXPECT_EQ(rows.front().at("max_samples"), 3);
  EXPECT_GE(rows.front().at("samples_per_puzzle").get<double>(), 1.0);
  EXPECT_LE(rows.front().at("samples_per_puzzle").get<double>(), 3.0);
  r = run("sudoku eval --model " + model_ + " --samples 0");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "--samples: must be > 0, got 0")) << r.output;
}

// The reference-code switches of the GSDM train from the command line and refuse bad values.
TEST(Cli, GsdmReferenceSwitchesTrainAndRefuseBadValues) {
  const std::string model = temp_path("tiny_switches.pt");
  Result r = run("sudoku train --size 4 --dim 16 --blocks 1 --heads 2 --train-steps 2 --attention-scaling none "
                 "--output-head plain --time-path swish --observed-embedding-init 1 --out " + model);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run("sudoku train --size 4 --observed-embedding-init -1 --out " + model);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "--observed-embedding-init: must be >= 0, got -1")) << r.output;
  r = run("sudoku train --size 4 --observed-embedding-init inf --train-steps 1 --out " + model);
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "--observed-embedding-init: must be a finite number >= 0, got inf")) << r.output;
  r = run("sudoku train --size 4 --time-path tanh --out " + model);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "--time-path")) << r.output;
}

TEST_F(SudokuCli, StochasticDdimTakesEtaInZeroToOne) {
  Result r = run("sudoku solve --model " + model_ + " --eta 0.5 --sample-steps 5 1.3..4.2.1.3....");
  ASSERT_NE(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("samples drawn valid"), std::string::npos) << r.output;
  r = run("sudoku solve --model " + model_ + " --eta 1.5 1.3..4.2.1.3....");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(line_count(r.output), 1) << r.output;
  EXPECT_NE(r.output.find("--eta: Value 1.5 not in range"), std::string::npos) << r.output;
}

TEST_F(SudokuCli, EvalDrawsPuzzlesFromTheModelsGridFamilyUnlessTold) {
  const std::string pattern_model = temp_path("tiny_sudoku4_pattern.pt");
  Result r = run("sudoku train --size 4 --dim 16 --blocks 1 --heads 2 --train-steps 2 --variant pattern --out " +
                 pattern_model);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string eval = " --count 2 --diversity-samples 2 --sample-steps 2";
  r = run("sudoku eval --model " + pattern_model + eval);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("puzzles from pattern grids (the model was trained on pattern grids)"),
            std::string::npos)
      << r.output;
  r = run("sudoku eval --model " + model_ + eval + " --grids pattern");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("puzzles from pattern grids (the model was trained on broad grids)"),
            std::string::npos)
      << r.output;
  r = run("sudoku train --size 4 --train-steps 1 --variant uniform --out " + temp_path("unused.pt"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(line_count(r.output), 1) << r.output;
  EXPECT_NE(r.output.find("--variant 'uniform': sudoku's variants are pattern"), std::string::npos)
      << r.output;
}

TEST_F(SudokuCli, BadPuzzlesGetOneLineReasons) {
  struct Case {
    std::string puzzle, message;
  };
  for (const Case& c : std::vector<Case>{
           {"1.3..4.2.1.3...", "puzzle has 15 cells"},
           {"1.3..4.2.1.3...x", "character 'x' at position 16"},
           {"11..............", "puzzle contradicts itself"},
           {".................................................................................",
            "the model solves 4x4 puzzles, this one is 9x9"}}) {
    Result r = run("sudoku solve --model " + model_ + " " + c.puzzle);
    EXPECT_EQ(r.exit_code, 1) << c.puzzle;
    EXPECT_EQ(line_count(r.output), 1) << r.output;
    EXPECT_NE(r.output.find(c.message), std::string::npos) << r.output;
  }
  Result r = run("sudoku solve --model " + temp_path("tiny_sudoku4.pt") + " --file /nonexistent");
  EXPECT_NE(r.exit_code, 0);
}

TEST(Cli, GlobalOptionsStandBeforeOrAfterTheSubcommand) {
  for (const char* args : {"--threads 1 --seed 3 --device cpu pattern --workload sudoku9",
                           "pattern --workload sudoku9 --threads 1 --seed 3 --device cpu"}) {
    Result r = run(args);
    EXPECT_EQ(r.exit_code, 0) << args << ": " << r.output;
  }
}

TEST(Cli, UnusableDevicesAreUsageErrorsThatSayWhy) {
  const bool has_gpu = torch::cuda::is_available();
  for (const std::string& args : {"--device cuda pattern --workload sudoku9",
                                  "pattern --workload sudoku9 --device cuda:0"}) {
    if (has_gpu) break;
    Result r = run(args);
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_EQ(line_count(r.output), 1) << r.output;
    EXPECT_TRUE(contains(r.output, "this libtorch sees no GPU")) << r.output;
  }
  Result r = run("--device cuda:999 pattern --workload sudoku9");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.output, has_gpu ? "(cuda:0..cuda:" : "this libtorch sees no GPU"))
      << r.output;
  for (const char* name : {"tpu", "cuda:x", "cuda0", "cuda:"}) {
    r = run(std::string("--device ") + name + " pattern --workload sudoku9");
    EXPECT_EQ(r.exit_code, 2) << name;
    EXPECT_TRUE(contains(r.output, "unknown device '" + std::string(name) +
                                       "' (cpu, cuda or cuda:N)"))
        << r.output;
  }
}

// Every command that runs has a row in the one support table that main checks (devices, ranks).
TEST(Cli, EveryCommandDeclaresWhatItSupports) {
  const Result listed = run("--list-commands");
  EXPECT_EQ(listed.exit_code, 0) << listed.output;
  EXPECT_FALSE(contains(listed.output, "no row")) << listed.output;
  EXPECT_GE(line_count(listed.output), 27) << listed.output;
  EXPECT_TRUE(contains(listed.output, "ddpm train\tcpu\tranks\n")) << listed.output;
  EXPECT_TRUE(contains(listed.output, "gsdm train\tany\tranks\n")) << listed.output;
  EXPECT_TRUE(contains(listed.output, "model info\tany\tone process\n")) << listed.output;
  const Result r = run("--dry-run --world-size 2 unn train --out " + temp_path("unn.pt"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "'unn train' runs on one process; data-parallel ranks train with "
                                 "ddpm train, gsdm train, sudoku train")) << r.output;
}

TEST(Cli, EpochCountsBelowOneAreUsageErrors) {
  for (const std::string& args : {"difformer train --epochs 0", "classifier train --epochs 0"}) {
    Result r = run(args);
    EXPECT_EQ(r.exit_code, 2) << args << ": " << r.output;
    EXPECT_EQ(line_count(r.output), 1) << r.output;
    EXPECT_TRUE(contains(r.output, "--epochs: must be > 0, got 0")) << r.output;
  }
}

TEST(Cli, MistypedNamesGetDidYouMean) {
  struct Case {
    std::string args, message;
  };
  for (const Case& c : std::vector<Case>{
           {"sudokku", "unknown command 'sudokku' for 'structdiff'; did you mean 'sudoku'?"},
           {"sudoku trian", "unknown command 'trian' for 'structdiff sudoku'; did you mean 'train'?"},
           {"sudoku train --sead 1", "unknown option '--sead' for 'structdiff sudoku train'; did you mean '--seed'?"},
           {"sudoku train --trainsteps 5", "did you mean '--train-steps'?"}}) {
    Result r = run(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args;
    EXPECT_EQ(line_count(r.output), 1) << r.output;
    EXPECT_TRUE(contains(r.output, c.message)) << r.output;
  }
}

TEST(Cli, BadTrainingValuesAreUsageErrorsBeforeAnyWork) {
  const std::string out = temp_path("never_written.pt");
  struct Case {
    std::string args, message;
  };
  for (const Case& c : std::vector<Case>{
           {"--clip -1", "--clip: must be > 0 (or inf), got -1"},
           {"--clip 0", "--clip: must be > 0 (or inf), got 0"},
           {"--train-steps -5", "--train-steps: must be > 0, got -5"},
           {"--lr nan", "--lr: must be a finite number > 0, got nan"},
           {"--resume", "--resume needs --checkpoint FILE"},
           {"--threads 100000", "--threads: Value 100000 not in range 1 to"},
           {"--train-steps 2.7", "--train-steps"},
           {"--out /nonexistent_directory/m.pt", "cannot write '/nonexistent_directory/m.pt': directory '/nonexistent_directory' does not exist"},
           {"--out /tmp", "'/tmp' is a directory, not a file"},
           {"--log /nonexistent_directory/log.jsonl", "directory '/nonexistent_directory' does not exist"}}) {
    Result r = run("sudoku train --size 4 --out " + out + " " + c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << ": " << r.output;
    EXPECT_EQ(line_count(r.output), 1) << r.output;
    EXPECT_TRUE(contains(r.output, c.message)) << c.args << ": " << r.output;
  }
  EXPECT_FALSE(std::filesystem::exists(out));
}

TEST(Cli, NonFiniteLossStopsWithoutWritingTheModel) {
  const std::string out = temp_path("diverged.pt");
  Result r = run("--threads 1 sudoku train --size 4 --dim 16 --blocks 1 --heads 2 --train-steps 50 "
                 "--lr 1e30 --out " + out);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "structdiff: training stopped: the loss at step")) << r.output;
  EXPECT_TRUE(contains(r.output, "no model was written")) << r.output;
  EXPECT_FALSE(std::filesystem::exists(out));
}

// The output policy (issue 43): an output that is an input, two outputs on one file, or an output
// that is not a regular file are refused before any work (exit 2), and the files stay as they were.
TEST(Cli, OutputsNeverReplaceInputsEachOtherOrSpecialFiles) {
  const std::string model = temp_path("policy-model.pt");
  std::filesystem::copy_file(std::string(STRUCTDIFF_SOURCE_DIR) + "/models/gsdm-sorting5.pt", model,
                             std::filesystem::copy_options::overwrite_existing);
  const auto size = std::filesystem::file_size(model);
  const std::string same_spelled_otherwise =
      std::filesystem::path(model).parent_path().string() + "/./policy-model.pt";
  struct Case {
    std::string args, message;
  };
  for (const Case& c : {
           Case{"export --model " + model + " --out " + same_spelled_otherwise,
                "--out " + same_spelled_otherwise + " is also the input --model: writing it would destroy what the command reads"},
           Case{"--threads 1 gsdm eval --model " + model + " --count 2 --json " + model,
                "--json " + model + " is also the input --model"},
           Case{"--threads 1 gsdm train --problem sorting --size 3 --train-steps 1 --log " +
                    temp_path("policy.out") + " --out " + temp_path("policy.out"),
                "--log and --out both name " + temp_path("policy.out") + ": one output would overwrite the other"},
           Case{"export --model " + model + " --out /dev/null",
                "--out /dev/null exists and is not a regular file; outputs replace regular files only"}}) {
    const Result r = run(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.output;
    EXPECT_EQ(line_count(r.output), 1) << r.output;
    EXPECT_TRUE(contains(r.output, c.message)) << r.output;
  }
  EXPECT_EQ(std::filesystem::file_size(model), size);
  EXPECT_FALSE(std::filesystem::exists(temp_path("policy.out")));
}

TEST(Cli, ModelFilesOfAnotherKindOrTruncatedAreNamed) {
  const std::string models = std::string(STRUCTDIFF_SOURCE_DIR) + "/models/";
  Result r = run("sudoku solve --model " + models + "ddpm-fashion-mnist.pt ................");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(line_count(r.output), 1) << r.output;
  EXPECT_TRUE(contains(r.output, "ddpm-fashion-mnist.pt holds a model of kind 'ddpm', not 'gsdm'")) << r.output;

  const std::string truncated = temp_path("truncated.pt");
  {
    std::ifstream in(models + "sudoku9.pt", std::ios::binary);
    std::string bytes(4096, '\0');
    in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    std::ofstream(truncated, std::ios::binary) << bytes;
  }
  for (const std::string& args : {"sudoku solve --model " + truncated + " ................",
                                  "model info " + truncated}) {
    r = run(args);
    EXPECT_EQ(r.exit_code, 1) << args;
    EXPECT_EQ(line_count(r.output), 1) << r.output;
    EXPECT_TRUE(contains(r.output, "is not a valid archive")) << r.output;
  }
}

TEST(Cli, ModelInfoShowsKindProvenanceAndWeightsHash) {
  const std::string model = temp_path("info.pt");
  Result r = run("--seed 4 sudoku train --size 4 --dim 16 --blocks 1 --heads 2 --train-steps 2 --out " + model);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run("model info " + model + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json info = nlohmann::json::parse(r.output);
  EXPECT_EQ(info["kind"], "gsdm");
  EXPECT_EQ(info["step"], 2);  // the trainer's record: a model file's archive holds no step
  EXPECT_FALSE(info["resumable"].get<bool>());
  EXPECT_EQ(info["config"]["model"]["dim"], 16);
  EXPECT_EQ(info["provenance"]["seed"], 4);
  EXPECT_TRUE(contains(info["provenance"]["command_line"], "sudoku train --size 4")) << info;
  EXPECT_EQ(info["parameters"], 3028);
  EXPECT_EQ(info["weights_sha256"].get<std::string>().size(), 64u);
  r = run("model info " + model);
  EXPECT_TRUE(contains(r.output, "weights_sha256  " + info["weights_sha256"].get<std::string>())) << r.output;
}

TEST(Cli, DifformerTrainWritesOneModelFilePerRun) {
  const std::string out = temp_path("node-model.pt");
  Result r = run("--threads 1 difformer train --dataset csbm --nodes 60 --classes 3 --labels-per-class 2 "
                 "--validation 10 --architecture difformer --epochs 2 --runs 2 --no-progress --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const std::string& file : {temp_path("node-model-run1.pt"), temp_path("node-model-run2.pt")}) {
    r = run("model info --json " + file);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const nlohmann::json info = nlohmann::json::parse(r.output);
    EXPECT_EQ(info["kind"], "difformer");
    EXPECT_EQ(info["config"]["diffusivity"], "simple");
    EXPECT_EQ(info["recorded"]["dataset"], "csbm");
  }
}

// The issue's acceptance check: SIGINT, then --resume, ends with the weights of an
// uninterrupted run.
// SIGINT (Ctrl-C) and SIGTERM (a scheduler's stop) alike: exit 128 + signal, no temporary files,
// no model written (an earlier file at --out is left as it was), and resuming from the checkpoint
// ends where an uninterrupted run ends.
TEST(Cli, InterruptedAndResumedTrainingEqualsAnUninterruptedRun) {
  const std::string train = std::string(STRUCTDIFF_BINARY) +
                            " --threads 1 sudoku train --size 4 --dim 16 --blocks 1 --heads 2 "
                            "--train-steps 3000 --checkpoint-every 50 --validate-every 0";
  const std::string straight = temp_path("straight.pt");
  Result r = run_shell(train + " --checkpoint " + temp_path("straight.ckpt") + " --out " + straight + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto hash = [](const std::string& model) {
    return nlohmann::json::parse(run("model info " + model + " --json").output)["weights_sha256"];
  };
  for (const auto& [signal, exit_code] : {std::pair<std::string, int>{"INT", 130}, {"TERM", 143}}) {
    SCOPED_TRACE("SIG" + signal);
    const std::string resumed = temp_path("resumed-" + signal + ".pt");
    const std::string checkpoint = temp_path("interrupted-" + signal + ".ckpt");
    std::ofstream(resumed) << "an earlier model";
    r = run_shell("(" + train + " --checkpoint " + checkpoint + " --out " + resumed + " & pid=$!; " +
                  "while [ ! -f " + checkpoint + " ]; do sleep 0.02; done; kill -" + signal +
                  " $pid; wait $pid; echo exit=$?) 2>&1");
    ASSERT_TRUE(contains(r.output, "exit=" + std::to_string(exit_code)))
        << "the run ended before the signal: " << r.output;
    EXPECT_TRUE(contains(r.output, "structdiff: interrupted by SIG" + signal + " after step")) << r.output;
    std::ifstream earlier(resumed);
    EXPECT_EQ(std::string(std::istreambuf_iterator<char>(earlier), {}), "an earlier model");
    for (const auto& entry :
         std::filesystem::directory_iterator(std::filesystem::path(checkpoint).parent_path())) {
      EXPECT_FALSE(contains(entry.path().filename().string(), ".tmp.")) << entry.path();
    }
    r = run_shell(train + " --checkpoint " + checkpoint + " --resume --out " + resumed + " 2>&1");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(hash(straight), hash(resumed));
  }
}

// --world-size 2 trains on two local ranks; one process resumes from their checkpoint.
TEST(Cli, DataParallelRanksTrainAndOneProcessResumes) {
  const std::string checkpoint = temp_path("ranks.ckpt"), out = temp_path("ranks.pt");
  const std::string common = "sudoku train --size 4 --dim 16 --blocks 1 --heads 2 "
                             "--validate-every 0 --checkpoint " + checkpoint + " --out " + out;
  const std::string train = common + " --batch 8";
  Result r = run("--world-size 2 --threads 1 " + train + " --train-steps 20");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "1 threads, 2 ranks")) << r.output;
  EXPECT_TRUE(contains(r.output, "to step 20")) << r.output;
  EXPECT_EQ(contains(r.output.substr(r.output.find('\n') + 1), "training a GSDM"), false)
      << "one banner, from rank 0: " << r.output;
  r = run("--threads 1 " + train + " --train-steps 30 --resume");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "trained 10 steps")) << r.output;
  struct Case {
    std::string args, message;
  };
  for (const Case& c : std::vector<Case>{
           {"--world-size 2 gsdm eval --model " + out, "'gsdm eval' runs on one process"},
           {"--world-size 0 " + train, "--world-size: Value 0 not in range 1 to 64"},
           {"--world-size 2 " + common + " --batch 7", "--batch 7 does not split evenly over 2 ranks"}}) {
    r = run(c.args);
    EXPECT_NE(r.exit_code, 0) << c.args;
    EXPECT_TRUE(contains(r.output, c.message)) << c.args << ": " << r.output;
  }
}

TEST(Cli, SizesBeyondTheMachineAreRefusedBeforeAllocating) {
  struct Case {
    std::string args, message;
  };
  for (const Case& c : std::vector<Case>{
           {"pattern --builder full --tokens 10000000", "a full pattern of 1e+07 rows and 1e+14 entries needs 1600000.3 GB of memory"},
           {"pattern --builder window --tokens 2000000000", "a sliding_window pattern of 2e+09 rows and"},
           {"difformer train --dataset csbm --nodes 1000000000 --epochs 1", "a CSBM graph of 1000000000 nodes needs"},
           {"ddpm sample --model " + std::string(STRUCTDIFF_SOURCE_DIR) + "/models/ddpm-fashion-mnist.pt --count 1000000000 --out " + temp_path("huge.png"),
            "1000000000 images in batches of"},
           {"ddpm train --batch 1000000000 --train-steps 1 --out " + temp_path("huge-ddpm.pt"),
            "a training batch of 1000000000 needs"},
           {"sudoku train --size 4 --batch 1000000000 --out " + temp_path("huge.pt"),
            "a training batch of 1000000000 needs"}}) {
    Result r = run(c.args);
    EXPECT_EQ(r.exit_code, 1) << c.args << ": " << r.output;
    // `sudoku train` first says what it trains; the error is the one line after.
    const std::string last_line = r.output.substr(r.output.rfind('\n', r.output.size() - 2) + 1);
    EXPECT_EQ(last_line.rfind("structdiff: error: ", 0), 0u) << r.output;
    EXPECT_TRUE(contains(last_line, c.message)) << r.output;
    EXPECT_TRUE(contains(last_line, "GB available")) << r.output;
  }
}

TEST(Cli, DifformerWithoutValidationNodesIsRefused) {
  Result r = run("difformer train --dataset csbm --nodes 200 --validation 0 --epochs 1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(line_count(r.output), 1) << r.output;
  EXPECT_TRUE(contains(r.output, "--validation: must be > 0, got 0")) << r.output;
}

// A small text of 40 blocks (so train / validation / test splits by block) for Tracformer runs.
std::string tracformer_text() {
  const std::string path = temp_path("tracformer.txt");
  std::ofstream out(path);
  for (int block = 0; block < 40; ++block) {
    for (int line = 0; line < 4; ++line) out << "and the word was with god, verse " << line << ".\n";
    out << "\n";
  }
  return path;
}

const char* const kTinyTracformer =
    " --d-model 16 --heads 2 --layers 3 --block-size 32 --batch 4 --span-mean 3 --warmup 0";

TEST(Cli, TracformerTrainEvalInfill) {
  const std::string text = tracformer_text(), model = temp_path("tf.pt"), json = temp_path("tf.json");
  Result r = run("tracformer train --text " + text + kTinyTracformer +
                 " --train-steps 3 --validate-every 3 --seed 2 --out " + model);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "in 40 blocks")) << r.output;

  // The evaluation text may hold characters the model never saw: counted, never scored.
  const std::string other = temp_path("other.txt");
  std::ofstream(other) << "Zebra \xC3\xA9t\xC3\xA9 and the word was with god, verse 9.\n";
  r = run("tracformer eval --model " + model + " --text " + other +
          " --mask-ratio 0.5 --span-mean 8 --seed 1 --json " + json);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json result = nlohmann::json::parse(std::ifstream(json));
  EXPECT_GT(result.at("bits_per_char").get<double>(), 0.0);
  EXPECT_EQ(result.at("masked_chars").get<int64_t>() + result.at("unknown_chars").get<int64_t>(), 16);  // half of one 32-character crop
  EXPECT_TRUE(result.contains("provenance"));

  r = run("tracformer infill --model " + model + " \"and the ____ was\" --samples 2 --seed 3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // Two samples, each with its log-likelihood (a sample may itself hold a drawn newline).
  size_t likelihoods = 0;
  for (size_t at = r.output.find("log-likelihood"); at != std::string::npos;
       at = r.output.find("log-likelihood", at + 1)) {
    ++likelihoods;
  }
  EXPECT_EQ(likelihoods, 2u) << r.output;
  EXPECT_TRUE(contains(r.output, "and the ")) << r.output;
  EXPECT_FALSE(contains(r.output, "____")) << r.output;
  r = run("tracformer infill --model " + model + " \"and the word\" --mask 4:7 --no-cache");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  r = run("tracformer eval --model " + model + " --text " + text +
          " --split test --query-set 0:0.25,0.75:1/0.25:0.5 --json " + json);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json query = nlohmann::json::parse(std::ifstream(json));
  EXPECT_EQ(query.at("mode"), "query-set");
  EXPECT_EQ(query.at("masked_chars").get<int64_t>() % 8, 0) << query;  // 8 targets per crop
}

// A constant-rate run resumed with more steps ends where one run to that number ends (the
// Tracformer study extends and splits its runs so); under cosine decay, whose rates depend on the
// number of steps, resuming with another number is refused.
TEST(Cli, TracformerConstantRateRunGoesOnToMoreSteps) {
  const std::string train = "--threads 1 --seed 2 tracformer train --text " + tracformer_text() +
                            kTinyTracformer + " --validate-every 0 --lr-decay ";
  auto hash = [](const std::string& model) {
    return nlohmann::json::parse(run("model info " + model + " --json").output)["weights_sha256"];
  };
  const std::string straight = temp_path("tf-straight.pt"), extended = temp_path("tf-extended.pt");
  const std::string checkpoint = temp_path("tf-extended.ckpt");
  const std::string constant = train + "constant";
  Result r = run(constant + " --train-steps 4 --out " + straight);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run(constant + " --train-steps 2 --checkpoint " + checkpoint + " --out " + extended);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run(constant + " --train-steps 4 --checkpoint " + checkpoint + " --resume --out " + extended);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(hash(straight), hash(extended));

  const std::string cosine = train + "cosine --checkpoint " + temp_path("tf-cosine.ckpt");
  r = run(cosine + " --train-steps 2 --out " + extended);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run(cosine + " --train-steps 4 --resume --out " + extended);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(contains(r.output, "training.train_steps is 2 in the checkpoint but 4 in this run")) << r.output;
  r = run(constant + " --train-steps 4 --checkpoint " + temp_path("tf-cosine.ckpt") + " --resume --out " + extended);
  EXPECT_TRUE(contains(r.output, "training.lr_decay is \"cosine\" in the checkpoint")) << r.output;
}

std::string mnist_dir() { return std::string(STRUCTDIFF_SOURCE_DIR) + "/data/mnist"; }

TEST(Cli, UnnTrainEvalGenerate) {
  SKIP_WITHOUT_DATA(mnist_dir() + "/train-images-idx3-ubyte.gz");
  const std::string model = temp_path("unn.pt"), json = temp_path("unn.json");
  const std::string grid = temp_path("unn.png"), generated = temp_path("unn-gen.json");
  Result r = run("unn train --task mnist-conv --iterations 2 --schedule forward-backward --gamma 0.1 "
                 "--train-steps 4 --batch 32 --seed 3 --data-dir " + mnist_dir() + " --out " + model);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "50026 parameters (tied, k = 2")) << r.output;
  r = run("unn eval --model " + model + " --energy-images 4 --data-dir " + mnist_dir() +
          " --json " + json);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json result = nlohmann::json::parse(std::ifstream(json));
  EXPECT_GT(result.at("accuracy").get<double>(), 0.0);
  EXPECT_EQ(result.at("images").get<int64_t>(), 2000);
  // Two iterations of H1 H2 y H2 after the starting state.
  EXPECT_EQ(result.at("energy").at("classify").at("energy").size(), 9u);
  EXPECT_EQ(result.at("energy").at("classify").at("non_increasing_share").get<double>(), 1.0);
  EXPECT_EQ(result.at("energy").at("generate").at("non_increasing_share").get<double>(), 1.0);
  EXPECT_TRUE(result.contains("provenance"));
  r = run("unn generate --model " + model + " --classifier " + std::string(STRUCTDIFF_SOURCE_DIR) +
          "/models/classifier-mnist.pt --out " + grid + " --json " + generated);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(std::filesystem::file_size(grid) > 100);
  EXPECT_EQ(nlohmann::json::parse(std::ifstream(generated)).at("predicted").size(), 10u);
  r = run("unn generate --model " + model + " --class 7 --iterations 1 --schedule jacobi --out " + grid);
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

TEST(Cli, UnnAttentionAndParseTasks) {
  const std::string attention = temp_path("att.pt"), parser = temp_path("parse.pt");
  const std::string json = temp_path("task.json"), grid = temp_path("task.png");
  Result r = run("unn train --task attention --d-model 8 --train-steps 2 --validate-every 2 "
                 "--dev-size 100 --batch 16 --out " + attention);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "78514 test sequences")) << r.output;
  r = run("unn eval --model " + attention + " --iterations 2 --schedule random --energy-images 3 "
          "--json " + json);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  nlohmann::json result = nlohmann::json::parse(std::ifstream(json));
  EXPECT_EQ(result.at("sequences").get<int64_t>(), 78514);
  EXPECT_EQ(result.at("energy").at("fill").at("non_increasing_share").get<double>(), 1.0);

  r = run("unn train --task parse --iterations 2 --train-steps 2 --validate-every 2 --out " + parser);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "12000 train, 1000 dev, 2000 test sentences")) << r.output;
  r = run("unn eval --model " + parser + " --energy-images 2 --json " + json);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  result = nlohmann::json::parse(std::ifstream(json));
  EXPECT_GT(result.at("uas").get<double>(), 0.0);
  EXPECT_GE(result.at("modlist_count").get<double>(), result.at("modlist_set").get<double>());
  EXPECT_EQ(result.at("energy").at("parse").at("non_increasing_share").get<double>(), 1.0);

  struct Case {
    std::string args, message;
  };
  const std::vector<Case> cases = {
      {"unn train --task attention --gamma 0.1 --out " + attention,
       "--gamma applies to the conv tasks only"},
      {"unn train --task parse --d-model 8 --out " + parser,
       "--d-model applies to the attention task only"},
      {"unn train --task mnist-conv --control --out " + parser, "--control applies to the parse task only"},
      {"unn generate --model " + attention + " --out " + grid, "has no class prototypes"},
      {"unn eval --model " + parser + " --schedule random", "a parser's order is fixed"},
  };
  for (const Case& c : cases) {
    r = run(c.args);
    EXPECT_NE(r.exit_code, 0) << c.args;
    EXPECT_EQ(line_count(r.output), 1) << c.args << ": " << r.output;
    EXPECT_TRUE(contains(r.output, c.message)) << c.args << ": " << r.output;
  }
}

TEST(Cli, UnnBadInputIsNamed) {
  SKIP_WITHOUT_DATA(mnist_dir() + "/train-images-idx3-ubyte.gz");
  const std::string model = temp_path("unn-bad.pt"), grid = temp_path("bad.png");
  ASSERT_EQ(run("unn train --iterations 2 --untied --train-steps 1 --data-dir " + mnist_dir() +
                " --out " + model).exit_code, 0);
  struct Case {
    std::string args, message;
  };
  const std::vector<Case> cases = {
      {"unn train --task parse-tree --out " + model, "mnist-conv"},
      {"unn train --iterations 0 --out " + model, "--iterations"},
      {"unn train --gamma -1 --out " + model, "must be >= 0"},
      {"unn train --schedule backward --out " + model, "forward-backward"},
      {"unn train --dev-size 8000 --train-steps 1 --data-dir " + mnist_dir() + " --out " + model,
       "the development split needs 1..7999 images, got 8000"},
      {"unn eval --model " + model + " --iterations 3 --data-dir " + mnist_dir(),
       "has weights for 2 iterations, asked for 3"},
      {"unn generate --model " + model + " --class 10 --out " + grid, "--class"},
      {"unn generate --model " + std::string(STRUCTDIFF_SOURCE_DIR) + "/models/sudoku9-gaussian.pt --out " + grid,
       "holds a model of kind 'sudoku', not 'unn-conv', 'unn-attention' or 'unn-parser'"},
      {"unn eval --model " + model + " --data-dir " + temp_path("nowhere"), "nowhere"},
  };
  for (const Case& c : cases) {
    Result r = run(c.args);
    EXPECT_NE(r.exit_code, 0) << c.args;
    EXPECT_EQ(line_count(r.output), 1) << c.args << ": " << r.output;
    EXPECT_TRUE(contains(r.output, c.message)) << c.args << ": " << r.output;
  }
}

TEST(Cli, BenchTracformerWritesJson) {
  const std::string json = temp_path("bench-tracformer.json");
  Result r = run("bench tracformer --lengths 32 64 --dense-max-length 64 --d-model 16 --heads 2 "
                 "--layers 3 --batch 2 --block-size 32 --train-steps 2 --architectures tracformer ar "
                 "--sample-sequences 1 --budget 0.1 --json " + json);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json rows = nlohmann::json::parse(std::ifstream(json)).at("rows");
  int encoder = 0, slopes = 0, train = 0, sample = 0;
  for (const auto& row : rows) {
    const std::string part = row.at("part");
    encoder += part == "encoder";
    slopes += part == "encoder_slope";
    train += part == "train";
    sample += part == "sample";
  }
  EXPECT_EQ(encoder, 4);  // two lengths, sparse and dense
  EXPECT_EQ(slopes, 2);
  EXPECT_EQ(train, 2);
  EXPECT_EQ(sample, 2);  // cached and re-encoding
}

TEST(Cli, TracformerBadInputIsNamed) {
  const std::string text = tracformer_text(), model = temp_path("tf-bad.pt");
  const std::string empty = temp_path("empty.txt"), binary = temp_path("binary.txt");
  std::ofstream(empty).close();
  const std::string blank = temp_path("blank.txt");
  std::ofstream(blank) << " \n\t\n";
  std::ofstream(binary, std::ios::binary) << std::string("ab\0\xFF", 4);
  const std::string unknown = temp_path("unknown.txt");
  std::ofstream(unknown) << "\xE6\x97\xA5\xE6\x9C\xAC";  // characters the model never saw
  const std::string train = "tracformer train" + std::string(kTinyTracformer) + " --train-steps 1 --out " + model;
  struct Case {
    std::string args, message;
  };
  // Options the tiny configuration would give twice.
  const std::string plain = "tracformer train --train-steps 1 --out " + model + " --text " + text;
  const std::vector<Case> cases = {
      {train + " --text " + temp_path("missing.txt"), "does not exist"},
      {train + " --text " + empty, "is empty"},
      {train + " --text " + binary, "is not UTF-8 text (byte 0x00 at offset 2)"},
      {plain + " --heads 3", "multiple of heads"},
      {train + " --text " + text + " --architecture gpt", "(choose tracformer, tracformer-dense-encoder"},
      {train + " --text " + text + " --attention favor-softmax", "cannot be restricted to a pattern"},
      {train + " --text " + text + " --mask-ratio 0", "--mask-ratio: must be in (0, 1], got 0"},
      {plain + " --span-mean 0.5", "--span-mean: must be >= 1, got 0.5"},
      {train + " --text " + blank, "holds only white space: nothing to learn from"},
      {train + " --text /dev/zero", "text file /dev/zero is larger than the 256 MiB a text file may have"},
      {plain + " --block-size 100000", "fewer than the block size"},
  };
  for (const Case& c : cases) {
    Result r = run(c.args);
    EXPECT_NE(r.exit_code, 0) << c.args;
    EXPECT_EQ(line_count(r.output), 1) << c.args << ": " << r.output;
    EXPECT_TRUE(contains(r.output, c.message)) << c.args << ": " << r.output;
  }
  ASSERT_EQ(run(train + " --text " + text).exit_code, 0);
  const std::vector<Case> use = {
      {"tracformer infill --model " + model + " \"no gaps\"", "nothing to fill"},
      {"tracformer infill --model " + model + " \"abc\" --mask 2:9", "is not A:B with 0 <= A < B <= 3"},
      {"tracformer infill --model " + model + " \"a_c\" --temperature 0", "temperature must be"},
      {"tracformer eval --model " + model + " --text " + binary, "is not UTF-8 text"},
      {"tracformer eval --model " + model + " --text " + unknown, "nothing to score"},
      {"tracformer eval --model " + model + " --text " + text + " --ranges 0.9:0.1", "out of order"},
      {"tracformer eval --model " + model + " --text " + text + " --query-set 0:0.5",
       "--query-set takes CONTEXT/TARGETS"},
      {"tracformer eval --model " + model + " --text " + text + " --query-set 0:0.5/0.4:0.6",
       "context and target ranges overlap"},
      {"tracformer eval --model " + std::string(STRUCTDIFF_SOURCE_DIR) +
           "/models/sudoku9-gaussian.pt --text " + text, "holds a model of kind 'sudoku', not 'tracformer'"},
  };
  for (const Case& c : use) {
    Result r = run(c.args);
    EXPECT_NE(r.exit_code, 0) << c.args;
    EXPECT_EQ(line_count(r.output), 1) << c.args << ": " << r.output;
    EXPECT_TRUE(contains(r.output, c.message)) << c.args << ": " << r.output;
  }
}

}  // namespace

// A committed UD treebank end to end (Telugu MTG, the smallest): the parser reads words and
// characters, the model file names the treebank, and eval reads it again from data/ud.
TEST(Cli, UnnParsesACommittedUdTreebank) {
  const std::string parser = temp_path("ud.pt"), json = temp_path("ud.json");
  const std::string root = "cd " + std::string(STRUCTDIFF_SOURCE_DIR) + " && " + STRUCTDIFF_BINARY;
  Result r = run_shell(root + " unn train --task parse --treebank te_mtg --train-steps 2 "
                              "--validate-every 2 --out " + parser + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "UD treebank te_mtg: 1051 train, 131 dev, 146 test sentences"))
      << r.output;
  r = run_shell(root + " unn eval --model " + parser + " --energy-images 2 --json " + json + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json result = nlohmann::json::parse(std::ifstream(json));
  EXPECT_EQ(result.at("treebank").get<std::string>(), "te_mtg");
  EXPECT_EQ(result.at("sentences").get<int64_t>(), 146);
  EXPECT_EQ(result.at("words").get<int64_t>(), 721);
  EXPECT_EQ(result.at("trained").at("min_training_words").get<int64_t>(), 5);
  // From elsewhere, --data-dir names the treebank's directory.
  r = run("unn eval --model " + parser + " --data-dir " + std::string(STRUCTDIFF_SOURCE_DIR) +
          "/data/ud/te_mtg");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  struct Case {
    std::string args, message;
  };
  const std::vector<Case> cases = {
      {"unn train --task parse --treebank en_ewt --out " + parser,
       "en_ewt not in {af_afribooms,en_partut,hu_szeged,te_mtg}"},
      {"unn train --task parse --treebank te_mtg --control --out " + parser,
       "--control applies to the synthetic treebank only"},
      {"unn train --task mnist-conv --treebank te_mtg --out " + parser,
       "--treebank applies to the parse task only"},
      {"unn eval --model " + parser + " --data-dir " + temp_path("nowhere"), "nowhere"},
  };
  for (const Case& c : cases) {
    r = run(c.args);
    EXPECT_NE(r.exit_code, 0) << c.args;
    EXPECT_EQ(line_count(r.output), 1) << c.args << ": " << r.output;
    EXPECT_TRUE(contains(r.output, c.message)) << c.args << ": " << r.output;
  }
}

// The value vocabulary, generated from the CLI's own option table: every floating-point option of
// every command refuses NaN and -inf (and inf unless it says "or inf"), every unsigned option and
// every integer one whose range does not take negative values refuses -1, and every numeric option refuses a
// word, each as a one-line usage error (exit 2) at parse time. A new option is covered the day it
// is added.
TEST(ValueDomains, EveryNumericOptionOfEveryCommandRefusesHostileValues) {
  const std::string lines = temp_path("hostile-values");
  std::ofstream out(lines);
  int floats = 0, counts = 0;
  for (const auto& fields : value_option_rows()) {
    const std::string& type = fields[2];
    std::string prefix;
    std::istringstream command(fields[0]);
    for (std::string word; command >> word;) prefix += word + "\x1f";
    prefix += fields[1] + "\x1f";
    std::vector<std::string> values;
    if (type == "FLOAT") {
      ++floats;
      values = {"nan", "-inf", "abc"};
      if (!contains(fields[3], "or inf")) values.push_back("inf");
    } else if (type == "UINT" || (type == "INT" && fields[3].find("[-") == std::string::npos)) {
      ++counts;
      values = {"-1", "abc"};
    } else if (type == "INT") {
      values = {"abc"};  // a range that takes negative values
    }
    for (const std::string& value : values) out << prefix << value << "\n";
  }
  out.close();
  EXPECT_GT(floats, 50);
  EXPECT_GT(counts, 100);
  const Result r = run("--refused-lines " + lines);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(contains(r.output, "NOT REFUSED")) << r.output;
}

TEST(ValueDomains, MessagesNameTheValueAndHelpShowsTheRealDefault) {
  struct Case {
    std::string args, message;
  };
  const std::vector<Case> cases = {
      {"--seed -1 pattern --workload sudoku9", "--seed: must be >= 0, got -1"},
      {"--rank-timeout inf pattern --workload sudoku9", "--rank-timeout: must be a finite number > 0, got inf"},
      {"difformer train --weight-decay -1", "--weight-decay: must be >= 0, got -1"},
      {"difformer train --weight-decay nan", "must be a finite number >= 0, got nan"},
      {"tracformer train --dropout nan", "must be a finite number, got nan"},
      {"sudoku train --clip -inf --out x.pt", "must be > 0 (or inf), got -inf"},
      {"bogus", "unknown command 'bogus' for 'structdiff'; the commands are bench, pattern"},
      // Checked by the library, as the command line is read: the same in --dry-run as in a run.
      {"gsdm train --problem chess", "unknown problem 'chess'"},
      {"gsdm train --problem sorting --size 0", "--size for sorting (list length) must be in 2 .. 64, got 0"},
      {"gsdm mask --problem bcmf --variant wide", "--variant"},
      {"tracformer train --mask-ratio 2", "--mask-ratio: must be in (0, 1], got 2"},
      {"tracformer eval --span-mean 0.5", "--span-mean: must be >= 1, got 0.5"},
      // Depths, time budgets and counts of work have an upper bound: no memory check covers them.
      {"gsdm train --problem sorting --blocks 5000", "--blocks: must be at most 1024, got 5000"},
      {"bench tracformer --budget 1e12", "--budget: must be at most 86400, got 1e12"},
      {"difformer train --epochs 1000000000000", "--epochs: must be at most 1000000, got 1000000000000"},
  };
  for (const Case& c : cases) {
    const Result r = run("--dry-run " + c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << ": " << r.output;
    EXPECT_EQ(line_count(r.output), 1) << c.args << ": " << r.output;
    EXPECT_TRUE(contains(r.output, c.message)) << c.args << ": " << r.output;
  }
  EXPECT_EQ(run("--dry-run sudoku train --clip inf --out " + temp_path("clip.pt")).exit_code, 0);
  EXPECT_TRUE(contains(run("tracformer train --help").output, "--lr-decay TEXT:{constant,cosine}=cosine"))
      << run("tracformer train --help").output;
}

// An allocation the size gate does not foresee still ends in one line of ours, naming the size
// asked for, not the allocator's text.
TEST(Cli, AnAllocationTooLargeForTheMachineIsNamedInOurWords) {
  const Result r = run("gsdm eval --model " + std::string(STRUCTDIFF_SOURCE_DIR) +
                       "/models/gsdm-sorting5.pt --count 1000000000000");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_EQ(line_count(r.output), 1) << r.output;
  EXPECT_TRUE(contains(r.output, "structdiff: error: out of memory: the sizes or counts given need more memory "
                                 "than this machine can give (one tensor of 20000.0 GB was asked for)"))
      << r.output;
  EXPECT_FALSE(contains(r.output, "enforce fail")) << r.output;
}

// Readers stop at a stated size instead of reading without end (tracformer's --text is checked
// with its other inputs in TracformerBadInputIsNamed).
TEST(Cli, ReadersTakeBoundedInput) {
  const std::string sudoku = std::string(STRUCTDIFF_SOURCE_DIR) + "/models/sudoku9.pt";
  Result r = run("sudoku solve --model " + sudoku + " --file /dev/zero");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_EQ(line_count(r.output), 1) << r.output;
  EXPECT_TRUE(contains(r.output, "puzzle file /dev/zero is larger than the 16 MiB a puzzle file may have"))
      << r.output;
  r = run("gsdm mask --spec /dev/zero");
  EXPECT_EQ(line_count(r.output), 1) << r.output;
  EXPECT_TRUE(contains(r.output, "graphical model spec /dev/zero is larger than the 64 MiB")) << r.output;
}

// A classifier scores only images of the dataset it was trained on, and is checked before any
// output is written: the old grid survives a refused run.
TEST(Cli, ClassifiersScoreOnlyTheirOwnDataset) {
  const std::string models = std::string(STRUCTDIFF_SOURCE_DIR) + "/models/";
  Result r = run("ddpm eval --model " + models + "ddpm-fashion-mnist.pt --classifier " + models +
                 "classifier-mnist.pt --count 2 --sample-steps 2");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_EQ(line_count(r.output), 1) << r.output;
  EXPECT_TRUE(contains(r.output, "classifier-mnist.pt classifies mnist images; these are "
                                 "fashion-mnist")) << r.output;
  const std::string grid = temp_path("kept.png");
  std::ofstream(grid) << "old grid";
  r = run("unn generate --model " + models + "unn-mnist.pt --classifier " + models +
          "classifier-fashion-mnist.pt --out " + grid);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "classifies fashion-mnist images; these are mnist")) << r.output;
  std::ifstream kept(grid);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(kept), {}), "old grid");
}
