// The command-line tool as a user meets it: help, one-line errors, pattern and bench commands.
#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace {

struct Result {
  int exit_code;
  std::string output;  // stdout and stderr together
};

Result run(const std::string& arguments) {
  const std::string command = std::string(STRUCTDIFF_BINARY) + " " + arguments + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return {-1, "popen failed"};
  std::string output;
  std::array<char, 4096> buffer{};
  while (fgets(buffer.data(), buffer.size(), pipe) != nullptr) output += buffer.data();
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

int line_count(const std::string& text) {
  int lines = 0;
  for (char c : text) lines += c == '\n';
  return lines;
}

std::string temp_path(const std::string& name) { return ::testing::TempDir() + name; }

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
                           "pattern --builder causal --workload sudoku9"}) {
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
  nlohmann::json rows = nlohmann::json::parse(file);
  ASSERT_EQ(rows.size(), 3u);
  for (const auto& row : rows) {
    for (const char* field : {"workload", "mechanism", "ms", "gflops", "peak_mb"}) {
      EXPECT_TRUE(row.contains(field)) << field;
    }
    EXPECT_EQ(row["workload"], "sudoku9");
    EXPECT_GT(row["ms"].get<double>(), 0.0);
    EXPECT_GT(row["peak_mb"].get<double>(), 0.0);
    EXPECT_LT(row["max_abs_error_vs_dense"].get<double>(), 1e-4);
  }
}

}  // namespace
