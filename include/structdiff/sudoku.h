// Sudoku of any size n^2 x n^2 (n = 2..5): complete-grid generation, puzzles, parsing and
// checking. Digits are stored 0-based (0 .. n^2-1); kBlank marks an empty cell.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace structdiff::sudoku {

constexpr int kBlank = -1;

struct Grid {
  int n = 3;               // block size; the grid is n^2 x n^2
  std::vector<int> cells;  // row-major, n^4 entries, each kBlank or 0 .. n^2-1
  int side() const { return n * n; }
  int size() const { return n * n * n * n; }
  int at(int row, int col) const { return cells[row * side() + col]; }
};

// The complete grids a generator draws from.
enum class GridFamily {
  // Randomised backtracking from an empty grid, then random validity-preserving symmetries (digit
  // relabelling, rows within bands, bands, columns within stacks, stacks, transposition): the
  // whole space of grids. The default everywhere.
  broad,
  // The GSDM authors' generator, behind the paper's 98 % / 96 %: one shifted-row pattern
  // (row i of band b holds (column + shift[b] + n*i) mod n^2), digits relabelled, rows shuffled
  // within bands and columns within stacks. Every row of a band holds the same mini-row digit sets,
  // so it is a narrow, much easier distribution; it exists to reproduce the paper's numbers.
  pattern,
};
GridFamily parse_grid_family(const std::string& name);  // "broad" or "pattern"
std::vector<std::string> grid_family_names();
std::string grid_family_name(GridFamily family);

// A random complete grid of `family`.
Grid generate_solution(int n, std::mt19937_64& rng, GridFamily family = GridFamily::broad);

// Parses a puzzle: n^4 characters, '.' or '0' for blanks, digits '1'-'9' then letters 'A'...
// for larger grids (so 16x16 uses 1-9A-G); whitespace is ignored. n is inferred from the
// length (16, 81, 256, 625 cells). Throws std::invalid_argument naming the position and
// character for malformed input, and the two clashing cells for a puzzle that contradicts
// itself.
Grid parse(const std::string& text);
// The inverse of parse ('.' for blanks); with `pretty`, one row per line with block separators.
std::string format(const Grid& grid, bool pretty = false);

// Pairs of cells in a common row, column or block holding the same digit, counted once per
// pair; blanks are ignored.
int64_t violated_pairs(const Grid& grid);
// All constrained pairs of the grid (the denominator of the paper's Figure 5b metric).
int64_t constrained_pairs(int n);
// Complete, no violated pair, and agrees with every given of `puzzle`.
bool is_valid_solution(const Grid& grid, const Grid& puzzle);

// Number of solutions of `puzzle`, counting up to `limit`.
int64_t count_solutions(const Grid& puzzle, int64_t limit = 2);
// A puzzle with a unique solution equal to `solution` and a number of givens in
// [min_givens, max_givens] if reachable by removing cells in random order while uniqueness holds
// (throws std::runtime_error if it cannot get down to max_givens within `attempts` tries).
Grid make_unique_puzzle(const Grid& solution, int min_givens, int max_givens,
                        std::mt19937_64& rng, int attempts = 20);
// Keeps `observed` uniformly chosen cells of `solution` and blanks the rest.
Grid observe_random_cells(const Grid& solution, int observed, std::mt19937_64& rng);

}  // namespace structdiff::sudoku
