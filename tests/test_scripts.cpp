// The experiment scripts still run the commands they record: every structdiff command line in
// them parses (options known, values valid), checked with `structdiff --dry-run` through a stand-in
// binary that also creates the files each command would write, so later commands find them.
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>
#include <sys/wait.h>

#include <gtest/gtest.h>

#include "support/temporary_files.h"

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
  const std::string log = scratch.file("calls.log"), stand_in = scratch.file("structdiff");
  std::ofstream(stand_in) << "#!/usr/bin/env bash\n"
                          << "if error=$(" << STRUCTDIFF_BINARY << " --dry-run \"$@\" 2>&1); then\n"
                          << "  echo \"ok $*\" >> " << log << "\n"
                          << "else\n"
                          << "  echo \"FAILED $* -> $error\" >> " << log << "\n"
                          << "fi\n"
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
  const std::string calls = read_file(log);
  EXPECT_FALSE(calls.empty()) << script.name << " ran no structdiff command";
  EXPECT_EQ(calls.find("FAILED"), std::string::npos) << calls;
}

INSTANTIATE_TEST_SUITE_P(
    Scripts, ExperimentScript,
    ::testing::Values(Script{"gsdm_ablation.sh", "1"},
                      Script{"gsdm_boolean_fit.sh", "--depths 2 --cap 4 --every 2"},
                      Script{"gsdm_sorting_masks.sh", "--size 3 --steps 2"},
                      Script{"ddpm_experiments.sh", "--minutes 1 --samples 10"},
                      Script{"difformer_experiments.sh", "--runs 1 --epochs 1"},
                      Script{"tracformer_kjv.sh", ""},
                      Script{"tracformer_experiments.sh", "--minutes 1 --seeds 1 --crops 2"},
                      Script{"tracformer_experiments.sh", "--train-steps 2 --seeds 1 --crops 2"},
                      Script{"unn_experiments.sh", "--cells \"a1 a2-k2 a3-k2 a4-k2\""}),
    [](const ::testing::TestParamInfo<Script>& info) {
      std::string name = info.param.name.substr(0, info.param.name.find('.'));
      for (char& c : name) {
        if (c == '_') c = 'X';
      }
      return name + std::to_string(info.index);  // a script may appear with several options
    });

}  // namespace
