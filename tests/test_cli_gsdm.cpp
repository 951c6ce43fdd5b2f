// The GSDM and Sudoku commands as a user meets them: each option reaches the library request,
// headings and files say what ran, and bad values are one-line errors. What the library does with
// a request is tested beside it (test_gsdm*.cpp).
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "structdiff/gsdm_problems.h"
#include "support/cli.h"

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

// --mask-rule and --mask-seed reach the model (what the library does with them:
// ProblemModel.AMaskAblationIsRecordedAndTheLoadedModelRebuildsItsMask).
TEST(Cli, GsdmMaskAblationOptionsReachTheModel) {
  const std::string model = temp_path("sorting3-random.pt");
  Result r = run("gsdm train --problem sorting --size 3 --dim 16 --blocks 1 --heads 2 --mask-rule random "
                 "--mask-seed 4 --train-steps 2 --out " + model);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const structdiff::gsdm::ProblemModel loaded = structdiff::gsdm::load_problem_model(model);
  EXPECT_EQ(loaded.model->config().mask.rule, structdiff::graph::MaskRule::random);
  EXPECT_EQ(loaded.model->config().mask.seed, 4u);
  r = run("gsdm mask --problem sorting --size 2 --rule non-symmetrised");
  EXPECT_TRUE(contains(r.output, "12 variables in 4 arrays; mask: 34 entries")) << r.output;
  r = run("gsdm train --problem sorting --mask-rule symmetric --train-steps 1 --out " + model);
  EXPECT_EQ(r.exit_code, 2);
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
  // Each refused: its exit code (1 from the library, 2 from option parsing) and message.
  const auto expect_refused = [](const std::string& arguments, int exit_code, const std::string& message) {
    const Result refused = run(arguments);
    EXPECT_EQ(refused.exit_code, exit_code) << arguments;
    EXPECT_TRUE(contains(refused.output, message)) << refused.output;
  };
  expect_refused("sudoku solve --model " + model_ + " --sampler adaptive ................", 1,
                 "needs a masked-process model");
  expect_refused("sudoku solve --model " + masked + " --sampler ddim ................", 1,
                 "samples with ancestral or adaptive, not ddim");
  expect_refused("sudoku solve --model " + masked + " --sampler ancestral --order-noise 0.1 ................", 1,
                 "order noise reorders the adaptive sampler's choices");
  expect_refused("sudoku solve --model " + masked + " --order-noise -1 ................", 2,
                 "--order-noise: must be >= 0, got -1");
  expect_refused("sudoku train --size 4 --diffusion absorbing --out " + masked, 2,
                 "--diffusion: absorbing not in {gaussian,masked}");
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

// --samples and --grids reach the evaluation (what it does with them:
// Gsdm.SudokuEvaluationDrawsUpToKSamplesFromTheRequestedGrids), and the heading names both grids.
TEST_F(SudokuCli, EvalBindsSamplesAndGrids) {
  const std::string json = temp_path("sudoku_eval_samples.json");
  Result r = run("sudoku eval --model " + model_ + " --count 2 --diversity-samples 2 --sample-steps 2 "
                 "--samples 3 --grids pattern --json " + json);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "samples/puzzle")) << r.output;
  EXPECT_TRUE(contains(r.output, "puzzles from pattern grids (the model was trained on broad grids)"))
      << r.output;
  std::ifstream file(json);
  const nlohmann::json rows = nlohmann::json::parse(file).at("rows");
  EXPECT_EQ(rows.front().at("max_samples"), 3);
  EXPECT_EQ(rows.front().at("grids"), "pattern");
  r = run("sudoku eval --model " + model_ + " --samples 0");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "--samples: must be > 0, got 0")) << r.output;
  r = run("sudoku train --size 4 --train-steps 1 --variant uniform --out " + temp_path("unused.pt"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(line_count(r.output), 1) << r.output;
  EXPECT_NE(r.output.find("--variant 'uniform': sudoku's variants are pattern"), std::string::npos)
      << r.output;
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
  EXPECT_NE(r.output.find("--eta: must be in [0, 1], got 1.5"), std::string::npos) << r.output;
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

}  // namespace
