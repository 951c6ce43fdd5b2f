// The CLI's output policy (src/cli/output_policy.cpp): several outputs of one command are replaced
// together or not at all.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "cli/output_policy.h"
#include "support/temporary_files.h"

namespace {

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

TEST(OutputSet, AFailureBeforeCommitLeavesEveryOldOutputAndNoTemporary) {
  const TemporaryDirectory directory;
  const std::string grid = directory.file("grid.png"), json = directory.file("eval.json");
  std::ofstream(grid) << "old grid";
  std::ofstream(json) << "old json";
  try {
    structdiff::cli::OutputSet outputs;
    std::ofstream(outputs.staged(grid)) << "new grid";
    throw std::runtime_error("the run fails before its JSON is ready");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(read(grid), "old grid");
  EXPECT_EQ(read(json), "old json");
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(directory.path()), {}), 2);

  structdiff::cli::OutputSet outputs;
  std::ofstream(outputs.staged(grid)) << "new grid";
  std::ofstream(outputs.staged(json)) << "new json";
  EXPECT_EQ(outputs.staged(""), "");
  EXPECT_EQ(read(grid), "old grid");
  outputs.commit();
  EXPECT_EQ(read(grid), "new grid");
  EXPECT_EQ(read(json), "new json");
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(directory.path()), {}), 2);
}

}  // namespace
