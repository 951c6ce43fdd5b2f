#include "structdiff/sudoku.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <stdexcept>
#include <string>

#include "support/expect_throw.h"

namespace structdiff::sudoku {
namespace {

// A well-known puzzle with a unique solution (the Wikipedia "Sudoku" article's example).
const char* const kPublishedPuzzle =
    "53..7...."
    "6..195..."
    ".98....6."
    "8...6...3"
    "4..8.3..1"
    "7...2...6"
    ".6....28."
    "...419..5"
    "....8..79";
const char* const kPublishedSolution =
    "534678912"
    "672195348"
    "198342567"
    "859761423"
    "426853791"
    "713924856"
    "961537284"
    "287419635"
    "345286179";

int givens(const Grid& grid) {
  return static_cast<int>(std::count_if(grid.cells.begin(), grid.cells.end(),
                                        [](int digit) { return digit != kBlank; }));
}

Grid blank_grid(int n) { return Grid{n, std::vector<int>(n * n * n * n, kBlank)}; }

// A 4x4 grid holding the digit 1 at the given cells and blanks elsewhere (parse would reject the
// clashes these tests need).
Grid ones_at(const std::vector<int>& cells) {
  Grid grid = blank_grid(2);
  for (int cell : cells) grid.cells[cell] = 0;
  return grid;
}

// The grid relabelled so that its first row reads 1, 2, 3, ...: equal for grids that differ only
// by digit names.
std::vector<int> relabelled_by_first_row(const Grid& grid) {
  std::vector<int> name_of(grid.side());
  for (int c = 0; c < grid.side(); ++c) name_of[grid.at(0, c)] = c;
  std::vector<int> cells;
  for (int digit : grid.cells) cells.push_back(name_of[digit]);
  return cells;
}

TEST(Sudoku, GeneratedGridsAreValidForEverySize) {
  std::mt19937_64 rng(1);
  for (int n = 2; n <= 5; ++n) {
    for (int i = 0; i < 5; ++i) {
      const Grid grid = generate_solution(n, rng);
      ASSERT_EQ(grid.n, n);
      ASSERT_EQ(static_cast<int>(grid.cells.size()), grid.size());
      EXPECT_TRUE(is_valid_solution(grid, blank_grid(n))) << format(grid, true);
    }
  }
}

TEST(Sudoku, Generates25x25GridsFast) {
  std::mt19937_64 rng(2);
  for (int i = 0; i < 10; ++i) {
    const auto start = std::chrono::steady_clock::now();
    const Grid grid = generate_solution(5, rng);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LT(seconds, 1.0) << "the typical time is a few milliseconds";
    EXPECT_EQ(violated_pairs(grid), 0);
  }
}

TEST(Sudoku, GenerationIsDeterministicPerSeedAndVariesAcrossSeeds) {
  for (int n = 2; n <= 5; ++n) {
    std::mt19937_64 first(7), second(7), other(8);
    const Grid grid = generate_solution(n, first);
    EXPECT_EQ(grid.cells, generate_solution(n, second).cells);
    EXPECT_NE(grid.cells, generate_solution(n, other).cells);
  }
}

TEST(Sudoku, CoversMostOfThe288FourByFourGrids) {
  std::mt19937_64 rng(3);
  std::set<std::vector<int>> distinct;
  for (int i = 0; i < 200; ++i) distinct.insert(generate_solution(2, rng).cells);
  // A uniform sampler would show 144 distinct grids on average (288 (1 - e^{-200/288})).
  EXPECT_GE(distinct.size(), 120u);
}

TEST(Sudoku, NineByNineGridsDifferBeyondDigitNames) {
  std::mt19937_64 rng(4);
  std::set<std::vector<int>> grids;
  std::set<std::vector<int>> first_block_second_rows;
  for (int i = 0; i < 50; ++i) {
    const std::vector<int> cells = relabelled_by_first_row(generate_solution(3, rng));
    grids.insert(cells);
    first_block_second_rows.insert({cells.begin() + 9, cells.begin() + 12});
  }
  EXPECT_EQ(grids.size(), 50u);
  EXPECT_GT(first_block_second_rows.size(), 10u);
}

// The mini-row digit sets (row within one block) of every row of band `band`, each row's
// collection sorted so that rows holding the same sets compare equal.
std::vector<std::vector<std::vector<int>>> mini_rows_of_band(const Grid& grid, int band) {
  const int n = grid.n;
  std::vector<std::vector<std::vector<int>>> rows;
  for (int r = band * n; r < (band + 1) * n; ++r) {
    std::vector<std::vector<int>> sets;
    for (int stack = 0; stack < n; ++stack) {
      std::vector<int> digits;
      for (int k = 0; k < n; ++k) digits.push_back(grid.at(r, stack * n + k));
      std::sort(digits.begin(), digits.end());
      sets.push_back(digits);
    }
    std::sort(sets.begin(), sets.end());
    rows.push_back(sets);
  }
  return rows;
}

bool rows_of_each_band_share_mini_rows(const Grid& grid) {
  for (int band = 0; band < grid.n; ++band) {
    const auto rows = mini_rows_of_band(grid, band);
    for (const auto& row : rows) {
      if (row != rows.front()) return false;
    }
  }
  return true;
}

TEST(Sudoku, PatternGridsAreValidVariedAndFromTheNarrowFamily) {
  std::mt19937_64 rng(11);
  for (int n = 2; n <= 5; ++n) {
    std::set<std::vector<int>> distinct;
    for (int i = 0; i < 20; ++i) {
      const Grid grid = generate_solution(n, rng, GridFamily::pattern);
      ASSERT_EQ(grid.n, n);
      EXPECT_TRUE(is_valid_solution(grid, blank_grid(n))) << format(grid, true);
      EXPECT_TRUE(rows_of_each_band_share_mini_rows(grid)) << format(grid, true);
      distinct.insert(grid.cells);
    }
    EXPECT_GE(distinct.size(), n == 2 ? 15u : 20u) << "n = " << n;  // 4x4 has only 288 grids
  }
  // The broad generator almost never lands in that family on 9x9.
  int in_family = 0;
  for (int i = 0; i < 100; ++i) in_family += rows_of_each_band_share_mini_rows(generate_solution(3, rng));
  EXPECT_LT(in_family, 10);
}

TEST(Sudoku, GridFamilyNamesRoundTripAndUnknownOnesAreRejected) {
  for (GridFamily family : {GridFamily::broad, GridFamily::pattern}) {
    EXPECT_EQ(parse_grid_family(grid_family_name(family)), family);
  }
  EXPECT_THROW_WITH(parse_grid_family("uniform"), std::invalid_argument,
                    "unknown grid family 'uniform' (choose broad or pattern)");
}

TEST(Sudoku, RejectsUnsupportedSizes) {
  std::mt19937_64 rng(5);
  EXPECT_THROW_WITH(generate_solution(1, rng), std::invalid_argument, "n must be in 2..5, got 1");
  EXPECT_THROW_WITH(generate_solution(6, rng), std::invalid_argument, "n must be in 2..5, got 6");
  EXPECT_THROW_WITH(generate_solution(1, rng, GridFamily::pattern), std::invalid_argument,
                    "n must be in 2..5, got 1");
  EXPECT_THROW_WITH(constrained_pairs(6), std::invalid_argument, "n must be in 2..5");
  EXPECT_THROW_WITH(format(Grid{3, std::vector<int>(80, kBlank)}), std::invalid_argument,
                    "grid has 80 cells; a 9x9 grid needs 81");
  EXPECT_THROW_WITH(violated_pairs(Grid{2, std::vector<int>(16, 4)}), std::invalid_argument,
                    "cell 0 holds 4");
}

TEST(Sudoku, ParseAndFormatRoundTrip) {
  const Grid puzzle = parse(kPublishedPuzzle);
  EXPECT_EQ(puzzle.n, 3);
  EXPECT_EQ(puzzle.at(0, 0), 4);
  EXPECT_EQ(puzzle.at(0, 2), kBlank);
  EXPECT_EQ(format(puzzle), kPublishedPuzzle);
  const std::string pretty = format(puzzle, /*pretty=*/true);
  EXPECT_EQ(pretty.substr(0, 24), "53. .7. ...\n6.. 195 ...\n");
  EXPECT_NE(pretty.find(".98 ... .6.\n\n8.. .6. ..3\n"), std::string::npos);
  EXPECT_EQ(parse(pretty).cells, puzzle.cells);

  std::mt19937_64 rng(6);
  for (int n = 2; n <= 5; ++n) {
    const Grid grid = observe_random_cells(generate_solution(n, rng), n * n * n, rng);
    EXPECT_EQ(parse(format(grid)).cells, grid.cells);
    EXPECT_EQ(parse(format(grid, true)).cells, grid.cells);
  }
}

TEST(Sudoku, ParseAcceptsZeroBlanksLettersAndWhitespace) {
  const Grid grid = parse("12 34\n34 12\n\t21 43\n0000");
  EXPECT_EQ(grid.n, 2);
  EXPECT_EQ(grid.at(1, 0), 2);
  EXPECT_EQ(grid.at(3, 3), kBlank);
  std::string sixteen(256, '.');
  sixteen[0] = 'G';
  sixteen[1] = 'a';
  const Grid big = parse(sixteen);
  EXPECT_EQ(big.at(0, 0), 15);
  EXPECT_EQ(big.at(0, 1), 9);
  EXPECT_EQ(format(big)[0], 'G');
  std::string twenty_five(625, '.');
  twenty_five[0] = 'p';
  EXPECT_EQ(parse(twenty_five).at(0, 0), 24);
}

TEST(Sudoku, ParseErrorsNameTheProblem) {
  EXPECT_THROW_WITH(parse(std::string(80, '.')), std::invalid_argument,
                    "puzzle has 80 cells; expected 16, 81, 256 or 625");
  std::string bad(81, '.');
  bad[12] = 'x';
  EXPECT_THROW_WITH(parse(bad), std::invalid_argument,
                    "puzzle: character 'x' at position 13 (row 2, column 4) is not a digit for a 9x9 grid");
  bad[12] = 'A';
  EXPECT_THROW_WITH(parse(bad), std::invalid_argument, "character 'A' at position 13");
  std::string small(16, '.');
  small[15] = '5';
  EXPECT_THROW_WITH(parse(small), std::invalid_argument,
                    "character '5' at position 16 (row 4, column 4) is not a digit for a 4x4 grid");
  std::string sixteen(256, '.');
  sixteen[20] = 'H';
  EXPECT_THROW_WITH(parse(sixteen), std::invalid_argument, "is not a digit for a 16x16 grid");
  std::string twenty_five(625, '.');
  twenty_five[0] = 'Q';
  EXPECT_THROW_WITH(parse(twenty_five), std::invalid_argument, "is not a digit for a 25x25 grid");

  std::string clash(81, '.');
  clash[2] = clash[6] = '5';
  EXPECT_THROW_WITH(parse(clash), std::invalid_argument,
                    "puzzle contradicts itself: row 1 column 3 and row 1 column 7 both hold 5");
  clash = std::string(81, '.');
  clash[4] = clash[8 * 9 + 4] = '9';
  EXPECT_THROW_WITH(parse(clash), std::invalid_argument, "row 1 column 5 and row 9 column 5 both hold 9");
  clash = std::string(81, '.');
  clash[0] = clash[2 * 9 + 2] = '1';
  EXPECT_THROW_WITH(parse(clash), std::invalid_argument, "row 1 column 1 and row 3 column 3 both hold 1");
}

TEST(Sudoku, ParseNamesDigitsOutOfRangeWithTheRangeTheSizeTakes) {
  std::string small(16, '.');
  small[15] = '5';
  EXPECT_THROW_WITH(parse(small), std::invalid_argument,
                    "character '5' at position 16 (row 4, column 4) is not a digit for a 4x4 grid "
                    "(1-4, '.' or '0' for a blank)");
  std::string sixteen(256, '.');
  sixteen[20] = 'h';
  EXPECT_THROW_WITH(
      parse(sixteen), std::invalid_argument,
      "character 'h' at position 21 (row 2, column 5) is not a digit for a 16x16 grid "
      "(1-9 and A-G, '.' or '0' for a blank)");
  std::string twenty_five(625, '.');
  twenty_five[0] = 'Z';
  EXPECT_THROW_WITH(parse(twenty_five), std::invalid_argument, "for a 25x25 grid (1-9 and A-P,");
}

TEST(Sudoku, ParseRejectsTextThatHoldsNoCellsOrNonCellCharacters) {
  EXPECT_THROW_WITH(parse(""), std::invalid_argument,
                    "puzzle is empty; expected 16, 81, 256 or 625 cells");
  EXPECT_THROW_WITH(parse(" \n\t\r\n"), std::invalid_argument, "puzzle is empty");
  const std::string accepted =
      "cell: '.' or '0' for a blank, digits 1-9, letters A-P for larger grids, "
      "ASCII whitespace between";
  // Each used to be counted as a cell (or as two, for UTF-8), giving a wrong cell count or a
  // message holding a raw byte.
  EXPECT_THROW_WITH(parse("1.3..4.2.1.3...-"), std::invalid_argument,
                    "puzzle: character '-' at position 16 is not a " + accepted);
  EXPECT_THROW_WITH(parse("1.|3.|.4|.2|.1|.3|..|.."), std::invalid_argument,
                    "puzzle: character '|' at position 3 is not a cell");
  EXPECT_THROW_WITH(parse("1.3..4.2.1.3..\u00e9"), std::invalid_argument,
                    "puzzle: character U+00E9 at position 15 is not a cell");
  EXPECT_THROW_WITH(parse("1.3..4.2.1.3...\uff11"), std::invalid_argument,  // a full-width 1
                    "puzzle: character U+FF11 at position 16 is not a cell");
  EXPECT_THROW_WITH(parse("1.3..4.2\u00a0.1.3...."), std::invalid_argument,  // no-break space
                    "puzzle: character U+00A0 at position 9 is not a cell");
  EXPECT_THROW_WITH(parse("\ufeff1.3..4.2.1.3...."), std::invalid_argument,  // byte order mark
                    "puzzle: character U+FEFF at position 1 is not a cell");
  EXPECT_THROW_WITH(parse("1.3..4.2.1.3...\xe9"), std::invalid_argument,  // Latin-1, not UTF-8
                    "puzzle: byte 0xE9 at position 16 is not a cell");
  EXPECT_THROW_WITH(parse("1.3..4.2.1.3...\xc3"), std::invalid_argument,  // UTF-8 cut short
                    "puzzle: byte 0xC3 at position 16 is not a cell");
  EXPECT_THROW_WITH(parse(std::string("1.3..4.2.1.3...\0", 16)), std::invalid_argument,
                    "puzzle: character U+0000 at position 16 is not a cell");
  EXPECT_THROW_WITH(parse("1.3..4.2.1.3...\x7f"), std::invalid_argument,
                    "puzzle: character U+007F at position 16 is not a cell");
  EXPECT_THROW_WITH(parse("1.3..4.2.1.3...." + std::string(1, '.')), std::invalid_argument,
                    "puzzle has 17 cells; expected 16, 81, 256 or 625");
}

TEST(Sudoku, ParseAcceptsEveryAsciiWhitespace) {
  const Grid plain = parse("1.3..4.2.1.3....");
  EXPECT_EQ(parse(" 1.3.\t.4.2\r\n.1.3\v..\f..\n").cells, plain.cells);
}

TEST(Sudoku, ViolatedPairsOnHandMadeGrids) {
  EXPECT_EQ(violated_pairs(blank_grid(3)), 0);
  EXPECT_EQ(violated_pairs(parse(kPublishedSolution)), 0);
  EXPECT_EQ(violated_pairs(ones_at({0, 1})), 1);  // row and block, counted once
  EXPECT_EQ(violated_pairs(ones_at({0, 8})), 1);  // column
  EXPECT_EQ(violated_pairs(ones_at({0, 5})), 1);  // block only
  EXPECT_EQ(violated_pairs(ones_at({0, 7})), 0);  // no common unit
  EXPECT_EQ(violated_pairs(ones_at({0, 1, 2})), 3);
  EXPECT_EQ(violated_pairs(ones_at({0, 1, 4, 5})), 6);  // a whole block
  Grid wrong = parse(kPublishedSolution);
  std::swap(wrong.cells[0], wrong.cells[1]);
  // Row and block keep their digits; each swapped digit meets its copy in its new column.
  EXPECT_EQ(violated_pairs(wrong), 2);
}

TEST(Sudoku, ConstrainedPairsMatchAGridOfOneDigit) {
  EXPECT_EQ(constrained_pairs(2), 56);
  EXPECT_EQ(constrained_pairs(3), 810);
  for (int n = 2; n <= 5; ++n) {
    EXPECT_EQ(violated_pairs(Grid{n, std::vector<int>(n * n * n * n, 0)}), constrained_pairs(n));
  }
}

TEST(Sudoku, IsValidSolutionChecksCompletenessConstraintsAndGivens) {
  const Grid puzzle = parse(kPublishedPuzzle);
  const Grid solution = parse(kPublishedSolution);
  EXPECT_TRUE(is_valid_solution(solution, puzzle));
  EXPECT_FALSE(is_valid_solution(puzzle, puzzle));
  Grid with_blank = solution;
  with_blank.cells[40] = kBlank;
  EXPECT_FALSE(is_valid_solution(with_blank, blank_grid(3)));
  Grid relabelled = solution;  // still a valid grid, but not the puzzle's
  for (int& digit : relabelled.cells) digit = (digit + 1) % 9;
  EXPECT_TRUE(is_valid_solution(relabelled, blank_grid(3)));
  EXPECT_FALSE(is_valid_solution(relabelled, puzzle));
  Grid swapped = solution;
  std::swap(swapped.cells[0], swapped.cells[1]);
  EXPECT_FALSE(is_valid_solution(swapped, blank_grid(3)));
  EXPECT_FALSE(is_valid_solution(solution, blank_grid(2)));
}

TEST(Sudoku, CountSolutions) {
  EXPECT_EQ(count_solutions(parse(kPublishedPuzzle)), 1);
  EXPECT_EQ(count_solutions(parse(kPublishedPuzzle), 1000), 1);
  EXPECT_EQ(count_solutions(blank_grid(2), 1000), 288);
  EXPECT_EQ(count_solutions(blank_grid(2)), 2);
  EXPECT_EQ(count_solutions(blank_grid(3), 50), 50);
  EXPECT_EQ(count_solutions(parse(kPublishedSolution)), 1);
  Grid clashing = blank_grid(2);
  clashing.cells[0] = clashing.cells[5] = 1;  // same block
  EXPECT_EQ(count_solutions(clashing), 0);
  Grid under_determined = parse(kPublishedPuzzle);
  under_determined.cells[0] = kBlank;
  under_determined.cells[1] = kBlank;
  under_determined.cells[4] = kBlank;
  EXPECT_GE(count_solutions(under_determined, 1000), 1);
  EXPECT_THROW_WITH(count_solutions(blank_grid(2), 0), std::invalid_argument, "limit must be >= 1");
}

TEST(Sudoku, MakeUniquePuzzleKeepsTheSolutionUnique) {
  std::mt19937_64 rng(9);
  for (int i = 0; i < 5; ++i) {
    const Grid solution = generate_solution(3, rng);
    const Grid puzzle = make_unique_puzzle(solution, 25, 35, rng);
    EXPECT_GE(givens(puzzle), 25);
    EXPECT_LE(givens(puzzle), 35);
    EXPECT_EQ(count_solutions(puzzle, 2), 1);
    EXPECT_TRUE(is_valid_solution(solution, puzzle));  // so the unique solution is `solution`
  }
  const Grid small = generate_solution(2, rng);
  const Grid small_puzzle = make_unique_puzzle(small, 4, 8, rng);
  EXPECT_EQ(count_solutions(small_puzzle, 2), 1);
  EXPECT_TRUE(is_valid_solution(small, small_puzzle));
}

TEST(Sudoku, MakeUniquePuzzleReportsUnreachableTargetsAndBadArguments) {
  std::mt19937_64 rng(10);
  const Grid solution = generate_solution(3, rng);
  // No 9x9 puzzle with fewer than 17 givens has a unique solution.
  EXPECT_THROW_WITH(make_unique_puzzle(solution, 5, 10, rng, 2), std::runtime_error,
                    "(wanted at most 10) in 2 attempts");
  EXPECT_THROW_WITH(make_unique_puzzle(solution, 30, 20, rng), std::invalid_argument,
                    "need 0 <= min_givens <= max_givens <= 81");
  EXPECT_THROW_WITH(make_unique_puzzle(parse(kPublishedPuzzle), 25, 35, rng), std::invalid_argument,
                    "must be a complete valid grid");
  EXPECT_THROW_WITH(make_unique_puzzle(solution, 25, 35, rng, 0), std::invalid_argument,
                    "attempts must be >= 1");
}

TEST(Sudoku, ObserveRandomCellsKeepsExactlyTheRequestedCount) {
  std::mt19937_64 rng(11);
  const Grid solution = generate_solution(3, rng);
  for (int observed : {0, 1, 16, 40, 81}) {
    const Grid puzzle = observe_random_cells(solution, observed, rng);
    EXPECT_EQ(givens(puzzle), observed);
    EXPECT_TRUE(is_valid_solution(solution, puzzle));
  }
  EXPECT_NE(observe_random_cells(solution, 40, rng).cells, observe_random_cells(solution, 40, rng).cells);
  EXPECT_THROW_WITH(observe_random_cells(solution, -1, rng), std::invalid_argument,
                    "observed must be in 0..81, got -1");
  EXPECT_THROW_WITH(observe_random_cells(solution, 82, rng), std::invalid_argument,
                    "observed must be in 0..81, got 82");
}

}  // namespace
}  // namespace structdiff::sudoku
