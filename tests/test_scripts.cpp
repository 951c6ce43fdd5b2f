// The experiment scripts still run the commands they record: every structdiff command line in
// them parses (options known, values valid). A stand-in binary records each command line and
// creates the files it would write, so later commands find them; `structdiff --dry-run-lines`
// then checks them all in one process, as --dry-run checks one.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "support/cli.h"

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

struct Script {
  std::string name, arguments;  // arguments before OUT_DIR
};

class ExperimentScript : public ::testing::TestWithParam<Script> {};

TEST_P(ExperimentScript, EveryStructdiffCommandParses) {
  const Script& script = GetParam();
  TemporaryDirectory scratch;
  const std::string lines = scratch.file("calls"), stand_in = scratch.file("structdiff");
  std::ofstream(stand_in) << "#!/usr/bin/env bash\n"
                          << "(IFS=$'\\x1f'; printf '%s\\n' \"$*\") >> " << lines << "\n"
                          << "previous=\n"
                          << "for word in \"$@\"; do\n"
                          << "  case $previous in --out|--json|--grid|--log) : > \"$word\" ;; esac\n"
                          << "  previous=$word\n"
                          << "done\n";
  std::filesystem::permissions(stand_in, std::filesystem::perms::owner_all);
  // The scripts' own exit status is not the point (a summary step may find no results).
  const std::string command = "cd " + std::string(STRUCTDIFF_SOURCE_DIR) + " && STRUCTDIFF=" +
                              stand_in + " bash scripts/" + script.name + " " + script.arguments +
                              " " + scratch.file("out") + " > /dev/null 2>&1";
  std::system(command.c_str());
  ASSERT_FALSE(read_file(lines).empty()) << script.name << " ran no structdiff command";
  // From where the scripts ran: their paths are relative to the repository root.
  const Result checked = run_shell("cd " + std::string(STRUCTDIFF_SOURCE_DIR) + " && " +
                                   STRUCTDIFF_BINARY + " --dry-run-lines " + lines + " 2>&1");
  EXPECT_EQ(checked.exit_code, 0) << checked.output;
  EXPECT_FALSE(contains(checked.output, "FAILED")) << checked.output;
}

TEST(DryRunLines, NamesEveryLineThatDoesNotParse) {
  TemporaryDirectory scratch;
  const std::string lines = scratch.file("calls");
  const auto line = [](const std::vector<std::string>& words) {
    std::string joined;
    for (const std::string& word : words) joined += (joined.empty() ? "" : "\x1f") + word;
    return joined + "\n";
  };
  std::ofstream(lines) << line({"pattern", "--workload", "sudoku9"})
                       << line({"sudoku", "train", "--sead", "1"})
                       << line({"gsdm", "mask", "--problem", "sorting", "--size", "20"});
  const Result r = run("--dry-run-lines " + lines);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "did you mean '--seed'?")) << r.output;
  EXPECT_TRUE(contains(r.output, "FAILED: structdiff sudoku train --sead 1")) << r.output;
  EXPECT_TRUE(contains(r.output, "2 of 3 command lines parse")) << r.output;
}

INSTANTIATE_TEST_SUITE_P(
    Scripts, ExperimentScript,
    ::testing::Values(Script{"gsdm_ablation.sh", "1"}, Script{"gsdm_ablation.sh", "--sizes 25 1"},
                      Script{"gsdm_boolean_fit.sh", "--depths 2 --cap 4 --every 2"},
                      Script{"gsdm_sorting_masks.sh", "--size 3 --steps 2"},
                      Script{"gsdm_embeddings.sh", "--minutes 1"},
                      Script{"gsdm_bcmf_structure.sh", "--minutes 1"},
                      Script{"ddpm_experiments.sh", "--minutes 1 --samples 10"},
                      Script{"difformer_experiments.sh", "--runs 1 --epochs 1"},
                      Script{"difformer_citation.sh", ""},
                      Script{"difformer_table9.sh", "--epochs 2"},
                      Script{"tracformer_kjv.sh", ""},
                      Script{"tracformer_experiments.sh", "--minutes 1 --seeds 1 --crops 2"},
                      Script{"tracformer_experiments.sh", "--train-steps 2 --seeds 1 --crops 2"},
                      Script{"tracformer_experiments.sh",
                             "--train-steps 600 --equal-time tf-car --seeds 1 --crops 2"},
                      Script{"unn_experiments.sh", "--cells \"a1 a2-k2 a3-k2 a4-k2\""},
                      Script{"unn_ud_table4.sh", "--treebanks \"te_mtg en_partut\" --iterations \"1 2\""}),
    [](const ::testing::TestParamInfo<Script>& info) {
      std::string name = info.param.name.substr(0, info.param.name.find('.'));
      for (char& c : name) {
        if (c == '_') c = 'X';
      }
      return name + std::to_string(info.index);  // a script may appear with several options
    });

}  // namespace
