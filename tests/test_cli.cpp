// The command-line tool as a user meets it, whatever the command: help, one-line errors and exit
// codes, global options and devices, the support table, the output policy, the value domains and
// size gate, model files, interrupted and data-parallel training. Each system's own commands:
// test_cli_gsdm.cpp and test_cli_systems.cpp.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/cuda.h>

#include "support/cli.h"

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
           {"--threads 100000", "--threads: must be in [1, "},
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

// An output that is a symbolic link is written through to its target, as the shell's `>` writes,
// and stays a link; links that lead round in a loop are a usage error.
TEST(Cli, OutputsWriteThroughSymbolicLinks) {
  namespace fs = std::filesystem;
  const std::string model = std::string(STRUCTDIFF_SOURCE_DIR) + "/models/gsdm-sorting5.pt";
  const std::string target = temp_path("link-target.safetensors"), link = temp_path("latest.safetensors");
  std::ofstream(target) << "old";
  fs::remove(link);
  fs::create_symlink(target, link);
  Result r = run("export --model " + model + " --out " + link);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_GT(fs::file_size(target), 1000u);

  const std::string first = temp_path("loop-a.pt"), second = temp_path("loop-b.pt");
  fs::remove(first);
  fs::remove(second);
  fs::create_symlink(second, first);
  fs::create_symlink(first, second);
  r = run("export --model " + model + " --out " + first);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(line_count(r.output), 1) << r.output;
  EXPECT_TRUE(contains(r.output, "--out: cannot write " + first + ": its symbolic links lead round in a loop")) << r.output;
  EXPECT_TRUE(fs::is_symlink(first) && fs::is_symlink(second));
}

TEST(Cli, ModelFilesOfAnotherKindTruncatedOrNotRegularAreNamed) {
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

  // A pipe with no writer: libtorch's reader would wait for ever.
  const std::string pipe = temp_path("model-pipe.pt");
  ASSERT_EQ(run_shell("rm -f " + pipe + " && mkfifo " + pipe).exit_code, 0);
  r = run_shell("timeout 30 " + std::string(STRUCTDIFF_BINARY) + " model info " + pipe + " 2>&1");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_EQ(line_count(r.output), 1) << r.output;
  EXPECT_TRUE(contains(r.output, "checkpoint " + pipe + " is not a regular file")) << r.output;
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

// The acceptance check: SIGINT, then --resume, ends with the weights of an
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
           {"--world-size 0 " + train, "--world-size: must be in [1, 64], got 0"},
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
            "training a GSDM of dim 128 and 6 blocks on batches of 1000000000 needs"},
           {"gsdm train --problem sorting --dim 100000000 --out " + temp_path("wide.pt"),
            "training a GSDM of dim 100000000 and 6 blocks on batches of 16 needs"},
           {"gsdm eval --model " + std::string(STRUCTDIFF_SOURCE_DIR) +
                "/models/gsdm-sorting5.pt --count 1000000 --batch 1000000",
            "--count 1000000 with --batch 1000000 needs"},
           {"bench gsdm --problem sorting --batch 100000000 --train-steps 1",
            "--batch 100000000 with --train-steps 1 needs"},
           {"bench gsdm --problem sorting --train-steps 1 --sample-examples 1000000 --no-ancestral",
            "--sample-examples 1000000 needs"}}) {
    Result r = run(c.args);
    EXPECT_EQ(r.exit_code, 1) << c.args << ": " << r.output;
    // `sudoku train` first says what it trains; the error is the one line after.
    const std::string last_line = r.output.substr(r.output.rfind('\n', r.output.size() - 2) + 1);
    EXPECT_EQ(last_line.rfind("structdiff: error: ", 0), 0u) << r.output;
    EXPECT_TRUE(contains(last_line, c.message)) << r.output;
    EXPECT_TRUE(contains(last_line, "GB available")) << r.output;
  }
}

// The value vocabulary, generated from the CLI's own option table: every floating-point option of
// every command refuses NaN and -inf (and inf unless it says "or inf"), every unsigned option and
// every integer one whose range does not take negative values refuses -1, every integer option
// refuses a value beyond 64 bits (which strtoull would clamp), and every numeric option refuses a
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
      values = {"-1", "abc", "99999999999999999999"};
    } else if (type == "INT") {
      values = {"abc", "-99999999999999999999"};  // a range that takes negative values
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
      {"--seed 18446744073709551616 pattern --workload sudoku9",
       "--seed: must fit a 64-bit integer, got 18446744073709551616"},
      {"--rank-timeout inf pattern --workload sudoku9", "--rank-timeout: must be a finite number > 0, got inf"},
      {"difformer train --weight-decay -1", "--weight-decay: must be >= 0, got -1"},
      {"difformer train --weight-decay nan", "must be a finite number >= 0, got nan"},
      {"tracformer train --dropout nan", "must be a finite number, got nan"},
      {"sudoku train --clip -inf --out x.pt", "must be > 0 (or inf), got -inf"},
      {"bogus", "unknown command 'bogus' for 'structdiff'; the commands are bench, pattern"},
      {"pattern --builder causal --tokens 0", "--tokens: must be > 0, got 0"},
      // CLI11 alone would read an empty value as the option's default.
      {"--seed '' pattern --workload sudoku9", "--seed: '' is not a number"},
      {"--threads '' pattern --workload sudoku9", "--threads: '' is not a number"},
      {"pattern --workload sudoku9 --png mask.txt", "'mask.txt' would hold a PNG image: give a name ending in .png"},
      // Checked by the library, as the command line is read: the same in --dry-run as in a run.
      {"gsdm train --problem chess", "unknown problem 'chess'"},
      {"difformer train --dataset pubmed",
       "--dataset: unknown dataset 'pubmed' (choose csbm, fashion-mnist, cora, citeseer or planetoid:DIR)"},
      {"gsdm train --problem sorting --size 0", "--size for sorting (list length) must be in 2 .. 64, got 0"},
      {"gsdm mask --problem bcmf --variant wide", "--variant"},
      {"tracformer train --mask-ratio 2", "--mask-ratio: must be in (0, 1], got 2"},
      {"tracformer eval --span-mean 0.5", "--span-mean: must be >= 1, got 0.5"},
      // Depths, time budgets and counts of work have an upper bound: no memory check covers them.
      {"gsdm train --problem sorting --blocks 5000", "--blocks: must be at most 1024, got 5000"},
      {"bench tracformer --budget 1e12", "--budget: must be at most 86400, got 1e12"},
      {"difformer train --epochs 1000000000000", "--epochs: must be at most 1000000, got 1000000000000"},
      {"gsdm sample --model " + std::string(STRUCTDIFF_SOURCE_DIR) + "/models/gsdm-sorting5.pt --count 1000001",
       "--count: must be at most 1000000, got 1000001"},
      {"bench gsdm --sample-examples 1000001", "--sample-examples: must be in [0, 1000000], got 1000001"},
      {"sudoku eval --model " + std::string(STRUCTDIFF_SOURCE_DIR) +
           "/models/sudoku9.pt --diversity-samples 1000000000000",
       "--diversity-samples: must be at most 1000000, got 1000000000000"},
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

// An allocation the size gate does not foresee (a benchmark's batch) still ends in one line of
// ours, naming the size asked for, not the allocator's text.
TEST(Cli, AnAllocationTooLargeForTheMachineIsNamedInOurWords) {
  const Result r = run("bench ddpm --batch 100000000");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  // The benchmark's heading lines, then the error.
  const std::string last_line = r.output.substr(r.output.rfind('\n', r.output.size() - 2) + 1);
  EXPECT_EQ(last_line, "structdiff: error: out of memory: the sizes or counts given need more memory "
                       "than this machine can give (one tensor of 313.6 GB was asked for); choose "
                       "smaller ones\n")
      << r.output;
  EXPECT_EQ(r.output.find("error"), r.output.rfind("error")) << r.output;
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

}  // namespace
