// The other systems' commands as a user meets them (pattern, bench, classifier, DDPM, DIFFormer,
// Tracformer, UNN): each runs end to end on a tiny setting, its options reach the library
// request, and bad input is a one-line error. What the library does with a request is tested
// beside it.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "structdiff/datasets.h"
#include "support/cli.h"
#include "support/data.h"

namespace {

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

// The study's options reach the request (what the study does with them:
// DIFFormerStudy.CsbmAndFashionMnistDefaultsAndOneModelFilePerRun).
TEST(Cli, DifformerTrainBindsItsOptionsAndWritesAModelFilePerRun) {
  const std::string out = temp_path("node-model.pt"), json = temp_path("node-model.json");
  Result r = run("--threads 1 difformer train --dataset csbm --nodes 60 --classes 3 --labels-per-class 2 "
                 "--validation 10 --architecture difformer --hidden 8 --lr 0.02 --no-value-projection "
                 "--epochs 2 --runs 2 --no-progress --json " + json + " --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json config = nlohmann::json::parse(std::ifstream(json)).at("config");
  EXPECT_EQ(config.at("hidden"), 8);
  EXPECT_DOUBLE_EQ(config.at("lr").get<double>(), 0.02);
  EXPECT_EQ(config.at("value_projection"), false);
  for (const std::string& file : {temp_path("node-model-run1.pt"), temp_path("node-model-run2.pt")}) {
    r = run("model info --json " + file);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(nlohmann::json::parse(r.output)["config"]["diffusivity"], "simple");
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
  r = run("tracformer infill --model " + model + " \"and the \xE2\x98\x85 __\"");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "note: 1 context character(s) outside the model's vocabulary (\xE2\x98\x85)"))
      << r.output;
  r = run("tracformer eval --model " + model + " --text " + text +
          " --split test --query-set 0:0.25,0.75:1/0.25:0.5 --json " + json);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json query = nlohmann::json::parse(std::ifstream(json));
  EXPECT_EQ(query.at("mode"), "query-set");
  EXPECT_EQ(query.at("masked_chars").get<int64_t>() % 8, 0) << query;  // 8 targets per crop
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

}  // namespace
