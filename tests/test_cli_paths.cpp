// Hostile paths for every file option of every command, generated from the CLI's own option table
// (`--list-value-options`: inputs are marked FILE, outputs FILE (written)). Outputs get a
// directory, a device, a path under a regular file, a path in a missing directory and the path of
// each other file option of the command: all refused at parse time as one-line usage errors.
// Inputs get a directory, an empty file, random bytes, /dev/zero and a model cut in half: each run
// must stop with one error line and no library text, within its time limit. Every file that
// existed before the runs is unchanged after them. At the end, NumberFuzz runs every numeric
// option at 0 and 10^12 on the same base lines.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "support/cli.h"

namespace {

namespace fs = std::filesystem;

struct FileOption {
  std::string command, name;
  bool output;
  bool directory = false;  // an input directory (DIR)
};

// The file options of every command, from the binary's option table.
std::vector<FileOption> file_options() {
  std::vector<FileOption> options;
  for (const auto& fields : value_option_rows()) {
    if (fields[3] == "FILE") options.push_back({fields[0], fields[1], false});
    if (fields[3] == "FILE (written)") options.push_back({fields[0], fields[1], true});
    if (fields[3] == "DIR") options.push_back({fields[0], fields[1], false, true});
  }
  return options;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// Copies of real inputs, so that a run that wrongly writes over its input harms only a copy, and
// the scratch files the hostile values point at.
struct Fixtures {
  std::map<std::string, std::string> path;  // by name: "sudoku", "classifier-fashion", ...
  std::map<std::string, std::string> content;

  Fixtures() {
    const std::string models = std::string(STRUCTDIFF_SOURCE_DIR) + "/models/";
    const std::vector<std::pair<std::string, std::string>> sources = {
        {"sudoku", models + "sudoku9.pt"},
        {"sorting", models + "gsdm-sorting5.pt"},
        {"classifier-fashion", models + "classifier-fashion-mnist.pt"},
        {"classifier-mnist", models + "classifier-mnist.pt"},
        {"ddpm", models + "ddpm-fashion-mnist.pt"},
        {"tracformer", models + "tracformer-kjv.pt"},
        {"unn", models + "unn-mnist.pt"},
        {"spec", std::string(STRUCTDIFF_SOURCE_DIR) + "/examples/sudoku4.json"}};
    for (const auto& [name, source] : sources) {
      path[name] = temp_path(fs::path(source).filename().string());
      fs::copy_file(source, path[name], fs::copy_options::overwrite_existing);
    }
    path["directory"] = temp_path("a-directory");
    fs::create_directories(path["directory"]);
    path["empty"] = temp_path("empty.bin");
    std::ofstream(path["empty"]).close();
    path["random"] = temp_path("random.bin");
    std::mt19937 rng(43);
    std::string bytes(4096, '\0');
    for (char& c : bytes) c = static_cast<char>(rng() & 0xFF);
    std::ofstream(path["random"], std::ios::binary) << bytes;
    path["truncated"] = temp_path("truncated.pt");
    const std::string model = read_file(path["sudoku"]);
    std::ofstream(path["truncated"], std::ios::binary) << model.substr(0, model.size() / 2);
    path["regular"] = temp_path("regular.txt");
    std::ofstream(path["regular"]) << "a regular file\n";
    path["puzzle"] = temp_path("puzzle.txt");  // a unique-solution puzzle, 30 givens
    std::ofstream(path["puzzle"])
        << "53..7....6..195....98....6.8...6...34..8.3..17...2...6.6....28....419..5....8..79\n";
    path["kjv"] = std::string(STRUCTDIFF_SOURCE_DIR) + "/data/kjv/kjv.txt";  // read only
    // A directory of the IDX files' names holding random bytes, for the --data-dir options.
    path["random-idx"] = temp_path("random-idx");
    fs::create_directories(path["random-idx"]);
    for (const char* split : {"train", "t10k"}) {
      for (const char* part : {"images-idx3-ubyte", "labels-idx1-ubyte"}) {
        for (const char* ending : {"", ".gz"}) {
          std::ofstream(path["random-idx"] + "/" + split + "-" + part + ending, std::ios::binary) << bytes;
        }
      }
    }
    for (const auto& [name, file] : path) {
      if (name != "directory" && name != "random-idx") content[name] = read_file(file);
    }
  }

  void expect_unchanged() const {
    for (const auto& [name, before] : content) {
      EXPECT_EQ(read_file(path.at(name)), before) << name << " (" << path.at(name) << ") changed";
    }
  }
};

const Fixtures& fixtures() {
  static const Fixtures instance;
  return instance;
}

// A command line that parses and, with valid files, does little: every required option, each
// file option with a valid value (inputs a fixture, outputs a scratch path). The fuzzer replaces
// one file option's value; a command with file options and no line here fails the coverage test.
struct BaseLine {
  std::vector<std::pair<std::string, std::string>> options;  // "--model" -> fixture name or "out:NAME"
  std::vector<std::string> tail;                             // further words
};

const std::map<std::string, BaseLine>& base_lines() {
  static const std::map<std::string, BaseLine> lines = {
      {"bench attention", {{{"--json", "out:bench.json"}}, {"--workload", "sudoku9", "--min-time", "0", "--min-reps", "1"}}},
      {"bench gsdm", {{{"--json", "out:bench.json"}}, {}}},
      {"bench difformer", {{{"--json", "out:bench.json"}}, {}}},
      {"bench ddpm", {{{"--json", "out:bench.json"}}, {}}},
      {"bench tracformer", {{{"--json", "out:bench.json"}}, {}}},
      {"pattern", {{{"--png", "out:pattern.png"}}, {"--workload", "sudoku9"}}},
      {"gsdm train",
       {{{"--init-from", "sorting"}, {"--checkpoint", "out:train.ckpt"}, {"--log", "out:train.jsonl"},
         {"--out", "out:model.pt"}},
        {"--problem", "sorting", "--train-steps", "1"}}},
      {"gsdm eval", {{{"--model", "sorting"}, {"--json", "out:eval.json"}}, {"--count", "1"}}},
      {"gsdm sample", {{{"--model", "sorting"}}, {}}},
      {"gsdm mask", {{{"--spec", "spec"}, {"--png", "out:mask.png"}}, {}}},
      {"gsdm invariance", {{{"--spec", "spec"}}, {"--axis", "x:0", "--permutation", "1,0,2,3"}}},
      {"sudoku train",
       {{{"--init-from", "sudoku"}, {"--checkpoint", "out:train.ckpt"}, {"--log", "out:train.jsonl"},
         {"--out", "out:model.pt"}},
        {"--train-steps", "1"}}},
      {"sudoku solve", {{{"--model", "sudoku"}, {"--file", "regular"}}, {}}},
      {"sudoku eval", {{{"--model", "sudoku"}, {"--json", "out:eval.json"}}, {"--count", "1", "--no-unique"}}},
      {"difformer train",
       {{{"--json", "out:eval.json"}, {"--out", "out:model.pt"}, {"--log", "out:train.jsonl"},
         {"--checkpoint", "out:train.ckpt"}},
        {"--epochs", "1", "--runs", "1"}}},
      {"classifier train",
       {{{"--out", "out:model.pt"}, {"--checkpoint", "out:train.ckpt"}}, {"--dataset", "fashion-mnist"}}},
      {"classifier eval", {{{"--model", "classifier-fashion"}, {"--json", "out:eval.json"}}, {}}},
      {"ddpm train",
       {{{"--checkpoint", "out:train.ckpt"}, {"--log", "out:train.jsonl"}, {"--out", "out:model.pt"}},
        {}}},
      {"ddpm sample", {{{"--model", "ddpm"}, {"--out", "out:grid.png"}}, {"--count", "1", "--sample-steps", "2"}}},
      {"ddpm eval",
       {{{"--model", "ddpm"}, {"--classifier", "classifier-fashion"}, {"--grid", "out:grid.png"},
         {"--json", "out:eval.json"}},
        {"--count", "2", "--sample-steps", "2"}}},
      {"tracformer train",
       {{{"--checkpoint", "out:train.ckpt"}, {"--log", "out:train.jsonl"}, {"--out", "out:model.pt"}},
        {}}},
      {"tracformer eval",
       {{{"--model", "tracformer"}, {"--json", "out:eval.json"}, {"--text", "kjv"}}, {"--crops", "1"}}},
      {"tracformer infill", {{{"--model", "tracformer"}}, {"In the ___ God"}}},
      {"unn train",
       {{{"--out", "out:model.pt"}, {"--checkpoint", "out:train.ckpt"}, {"--log", "out:train.jsonl"}},
        {}}},
      {"unn eval", {{{"--model", "unn"}, {"--json", "out:eval.json"}}, {}}},
      {"unn generate",
       {{{"--model", "unn"}, {"--out", "out:grid.png"}, {"--classifier", "classifier-mnist"},
         {"--json", "out:eval.json"}},
        {"--class", "0", "--iterations", "1"}}},
      {"export", {{{"--model", "sorting"}, {"--out", "out:exported.pt"}}, {}}},
      {"model info", {{{"model", "sorting"}}, {}}},
  };
  return lines;
}

std::string value_of(const std::string& spec) {
  return spec.rfind("out:", 0) == 0 ? temp_path("outputs/" + spec.substr(4)) : fixtures().path.at(spec);
}

// The command's base line with `option` set to `value` (added when the base line lacks it; none
// when `option` is empty).
std::vector<std::string> command_line(const std::string& command, const std::string& option,
                                      const std::string& value) {
  std::vector<std::string> words;
  std::istringstream split(command);
  for (std::string word; split >> word;) words.push_back(word);
  const BaseLine& base = base_lines().at(command);
  bool set = false;
  // A positional argument ("model", no dashes) is its value alone.
  auto add = [&words](const std::string& name, const std::string& value) {
    if (name.rfind("-", 0) == 0) words.push_back(name);
    words.push_back(value);
  };
  for (const auto& [name, spec] : base.options) {
    add(name, name == option ? value : value_of(spec));
    set = set || name == option;
  }
  if (!set && !option.empty()) add(option, value);
  words.insert(words.end(), base.tail.begin(), base.tail.end());
  return words;
}

std::string quoted(const std::string& word) {
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

TEST(PathFuzz, EveryCommandWithFileOptionsHasABaseLine) {
  fs::create_directories(temp_path("outputs"));
  std::set<std::string> missing;
  ASSERT_GT(file_options().size(), 50u);
  for (const FileOption& option : file_options()) {
    if (base_lines().count(option.command) == 0) missing.insert(option.command);
  }
  EXPECT_TRUE(missing.empty()) << "no base line for: "
                               << [&] { std::string s; for (const auto& m : missing) s += m + "; "; return s; }();
  // Each base line parses as it stands.
  const std::string lines = temp_path("base-lines");
  std::ofstream out(lines);
  for (const auto& [command, base] : base_lines()) {
    std::string line;
    for (const std::string& word : command_line(command, "--threads", "1")) line += word + "\x1f";
    out << line.substr(0, line.size() - 1) << "\n";
  }
  out.close();
  const Result r = run("--dry-run-lines " + lines);
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

TEST(PathFuzz, OutputsRefuseDevicesDirectoriesMissingDirectoriesAndEachOtherFile) {
  fs::create_directories(temp_path("outputs"));
  const std::string lines = temp_path("hostile-outputs");
  std::ofstream out(lines);
  const std::vector<FileOption> options = file_options();
  int cases = 0;
  for (const FileOption& output : options) {
    if (!output.output || base_lines().count(output.command) == 0) continue;
    std::vector<std::string> values = {fixtures().path.at("directory"), "/dev/zero", "/dev/null",
                                       fixtures().path.at("regular") + "/under-a-file.pt",
                                       temp_path("no-such-directory/out.pt")};
    // The path of each other file option of the command, as its base line (or a fixture) gives it.
    for (const FileOption& other : options) {
      if (other.command != output.command || other.name == output.name) continue;
      std::string other_value = fixtures().path.at("regular");
      for (const auto& [name, spec] : base_lines().at(output.command).options) {
        if (name == other.name) other_value = value_of(spec);
      }
      std::vector<std::string> words = command_line(output.command, other.name, other_value);
      // Both options on the same path.
      for (size_t i = 0; i + 1 < words.size(); ++i) {
        if (words[i] == output.name) words[i + 1] = other_value;
      }
      if (std::find(words.begin(), words.end(), output.name) == words.end()) {
        words.push_back(output.name);
        words.push_back(other_value);
      }
      std::string line;
      for (const std::string& word : words) line += word + "\x1f";
      out << line.substr(0, line.size() - 1) << "\n";
      ++cases;
    }
    for (const std::string& value : values) {
      std::string line;
      for (const std::string& word : command_line(output.command, output.name, value)) line += word + "\x1f";
      out << line.substr(0, line.size() - 1) << "\n";
      ++cases;
    }
  }
  out.close();
  EXPECT_GT(cases, 150);
  const Result r = run("--refused-lines " + lines);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(contains(r.output, "NOT REFUSED")) << r.output;
  fixtures().expect_unchanged();
}

// Text that only a library, not this program, would print.
const std::vector<std::string>& raw_text() {
  static const std::vector<std::string> markers = {
      "PytorchStreamReader", "enforce fail", "bad_alloc", "terminate called", "what()",
      "Exception raised from", "c10::", "std::", "json.exception", "Segmentation", "Aborted",
      "basic_string", "core dumped"};
  return markers;
}

// One run of `input`'s command with `value` in place of its file, as a process, time-limited.
Result run_with_input(const FileOption& input, const std::string& value) {
  std::string line = "timeout 120 " + std::string(STRUCTDIFF_BINARY) + " --threads 1";
  for (const std::string& word : command_line(input.command, input.name, value)) {
    line += " " + quoted(word);
  }
  return run_shell(line + " 2>&1");
}

size_t line_count_of_errors(const std::string& output) {
  size_t count = 0;
  std::istringstream lines(output);
  for (std::string text; std::getline(lines, text);) count += text.rfind("structdiff: error: ", 0) == 0;
  return count;
}

// Exit 1 or 2, and none of the text only a library would print.
void expect_refused_in_our_words(const Result& r, const std::string& shown) {
  EXPECT_TRUE(r.exit_code == 1 || r.exit_code == 2) << "exit " << r.exit_code << ", " << shown;
  for (const std::string& marker : raw_text()) {
    EXPECT_FALSE(contains(r.output, marker)) << marker << " in " << shown;
  }
}

TEST(PathFuzz, InputsRefuseDirectoriesEmptyRandomEndlessAndTruncatedFiles) {
  fs::create_directories(temp_path("outputs"));
  int cases = 0;
  for (const FileOption& input : file_options()) {
    if (input.output || input.directory || base_lines().count(input.command) == 0) continue;
    for (const char* kind : {"directory", "empty", "random", "truncated"}) {
      const Result r = run_with_input(input, fixtures().path.at(kind));
      ++cases;
      const std::string shown = input.command + " " + input.name + " " + kind + ": " + r.output;
      expect_refused_in_our_words(r, shown);
      EXPECT_EQ(line_count_of_errors(r.output), 1u) << shown;
    }
  }
  EXPECT_GT(cases, 60);
  fixtures().expect_unchanged();
}

// Input directories (--data-dir) get a regular file, an empty directory and a directory whose IDX
// files are random bytes: a regular file is refused at parse time; the others stop with one line
// naming the missing or damaged file, or run where the command does not read the directory
// (difformer on its default CSBM graph).
TEST(PathFuzz, InputDirectoriesRefuseFilesAndEmptyOrDamagedData) {
  fs::create_directories(temp_path("outputs"));
  int cases = 0;
  for (const FileOption& input : file_options()) {
    if (!input.directory) continue;
    ASSERT_EQ(base_lines().count(input.command), 1u) << "no base line for " << input.command;
    for (const char* kind : {"regular", "directory", "random-idx"}) {
      const Result r = run_with_input(input, fixtures().path.at(kind));
      ++cases;
      const std::string shown = input.command + " " + input.name + " " + kind + ": " + r.output;
      if (std::string(kind) == "regular") {
        EXPECT_EQ(r.exit_code, 2) << shown;
        EXPECT_TRUE(contains(r.output, "Directory is actually a file")) << shown;
      }
      if (r.exit_code != 0) expect_refused_in_our_words(r, shown);
      EXPECT_LE(line_count_of_errors(r.output), 1u) << shown;
    }
  }
  EXPECT_GE(cases, 21);  // seven --data-dir options, three values each
  fixtures().expect_unchanged();
}

TEST(PathFuzz, EndlessInputsAreReadWithinABound) {
  fs::create_directories(temp_path("outputs"));
  for (const FileOption& input : file_options()) {
    if (input.output || input.directory || base_lines().count(input.command) == 0) continue;
    const Result r = run_with_input(input, "/dev/zero");
    const std::string shown = input.command + " " + input.name + " /dev/zero: " + r.output;
    expect_refused_in_our_words(r, shown);
    EXPECT_TRUE(contains(r.output, "structdiff: error: ")) << shown;
  }
  fixtures().expect_unchanged();
}

// Numbers at the edges, run for real: every numeric option of every command gets 0 and 10^12 in
// its command's base line, made cheap (one training step, a few seconds of budget, small sizes).
// Each run must finish within its time limit and exit 0, or 1 or 2 with one error line and no
// library text; every pre-existing file is unchanged. The normal suite runs a seeded quarter of
// the options; with STRUCTDIFF_FUZZ_ALL=1 (the `slow` entry NumberFuzz.All) every one.
const std::map<std::string, std::vector<std::string>>& cheap_settings() {
  static const std::map<std::string, std::vector<std::string>> settings = {
      {"bench gsdm", {"--problem", "sorting", "--size", "5", "--train-steps", "1", "--sample-examples",
                      "1", "--sample-steps", "2", "--attention", "sparse"}},
      {"bench difformer", {"--kernel", "simple", "--nodes", "100", "--min-reps", "1", "--max-seconds", "0"}},
      {"bench ddpm", {"--batch", "2", "--attention", "linear", "--base-channels", "8",
                      "--attention-resolutions", "7", "--min-reps", "1", "--max-seconds", "0"}},
      {"bench tracformer", {"--parts", "encoder", "--architectures", "tracformer", "--lengths", "64",
                            "--block-size", "64", "--d-model", "16", "--heads", "1", "--layers", "1",
                            "--budget", "0.1", "--train-steps", "1", "--sample-sequences", "1"}},
      {"gsdm train", {"--train-steps", "1", "--max-minutes", "0.05"}},
      {"sudoku train", {"--train-steps", "1", "--max-minutes", "0.05"}},
      {"difformer train", {"--epochs", "1", "--runs", "1"}},
      {"classifier train", {"--dataset", "mnist", "--epochs", "1"}},
      {"ddpm train", {"--train-steps", "1", "--max-minutes", "0.05", "--batch", "2",
                      "--validation-images", "8", "--base-channels", "8"}},
      {"tracformer train", {"--train-steps", "1", "--max-minutes", "0.05"}},
      {"unn train", {"--train-steps", "1", "--max-minutes", "0.05"}},
      {"gsdm eval", {"--count", "1"}},
      {"gsdm sample", {"--count", "1"}},
      {"sudoku solve", {"--samples", "1"}},
      {"sudoku eval", {"--count", "1"}},
  };
  return settings;
}

// `words` with `name` set to `value`, replacing the value it had (or appended).
void set_option(std::vector<std::string>& words, const std::string& name, const std::string& value) {
  for (size_t i = 0; i + 1 < words.size(); ++i) {
    if (words[i] == name) {
      words[i + 1] = value;
      return;
    }
  }
  words.push_back(name);
  words.push_back(value);
}

struct NumberCase {
  std::string command, option, value;
};

std::vector<NumberCase> number_cases() {
  std::vector<NumberCase> cases;
  for (const auto& fields : value_option_rows()) {
    const std::string& type = fields[2];
    if (type != "FLOAT" && type != "INT" && type != "UINT") continue;
    for (const std::string value : {"0", type == "FLOAT" ? "1e12" : "1000000000000"}) {
      cases.push_back({fields[0], fields[1], value});
    }
  }
  return cases;
}

Result run_number_case(const NumberCase& c) {
  // Global options ride on the cheapest command.
  const std::string command = c.command.empty() ? "pattern" : c.command;
  std::vector<std::string> words = command_line(command, "", "");
  const auto cheap = cheap_settings().find(command);
  if (cheap != cheap_settings().end()) {
    for (size_t i = 0; i + 1 < cheap->second.size(); i += 2) set_option(words, cheap->second[i], cheap->second[i + 1]);
  }
  std::string line = "timeout 60 " + std::string(STRUCTDIFF_BINARY);
  if (c.option != "--threads") line += " --threads 1";
  if (c.command.empty()) {
    line += " " + c.option + " " + c.value;
  } else {
    set_option(words, c.option, c.value);
  }
  if (command == "sudoku solve") set_option(words, "--file", fixtures().path.at("puzzle"));
  for (const std::string& word : words) line += " " + quoted(word);
  return run_shell(line + " 2>&1");
}

TEST(NumberFuzz, ZeroAndTenToTheTwelveRunForRealOnEveryNumericOption) {
  fs::create_directories(temp_path("outputs"));
  const bool all = std::getenv("STRUCTDIFF_FUZZ_ALL") != nullptr;
  std::mt19937 rng(2026);
  int cases = 0, ran = 0;
  for (const NumberCase& c : number_cases()) {
    ++cases;
    if (!all && rng() % 4 != 0) continue;
    ++ran;
    const Result r = run_number_case(c);
    const std::string shown = (c.command.empty() ? "(global)" : c.command) + " " + c.option + " " +
                              c.value + ": exit " + std::to_string(r.exit_code) + ": " + r.output;
    EXPECT_NE(r.exit_code, 124) << "did not finish within 60 s: " << shown;
    EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 1 || r.exit_code == 2) << shown;
    if (r.exit_code != 0) {
      EXPECT_EQ(line_count_of_errors(r.output), 1u) << shown;
      for (const std::string& marker : raw_text()) EXPECT_FALSE(contains(r.output, marker)) << marker << " in " << shown;
    }
  }
  EXPECT_GT(cases, 400);
  EXPECT_GT(ran, all ? 400 : 80);
  fixtures().expect_unchanged();
}

}  // namespace
