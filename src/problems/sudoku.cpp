#include "structdiff/sudoku.h"
#include "util/text.h"

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <stdexcept>

#include "structdiff/enum_names.h"

namespace structdiff::sudoku {
namespace {

constexpr int kMinBlockSize = 2;
constexpr int kMaxBlockSize = 5;

void check_block_size(int n) {
  if (n < kMinBlockSize || n > kMaxBlockSize) {
    throw std::invalid_argument("sudoku: n must be in 2..5, got " + std::to_string(n));
  }
}

std::string dimensions(int side) { return std::to_string(side) + "x" + std::to_string(side); }

void check_grid(const Grid& grid) {
  check_block_size(grid.n);
  if (static_cast<int>(grid.cells.size()) != grid.size()) {
    throw std::invalid_argument("sudoku: grid has " + std::to_string(grid.cells.size()) +
                                " cells; a " + dimensions(grid.side()) + " grid needs " +
                                std::to_string(grid.size()));
  }
  for (size_t cell = 0; cell < grid.cells.size(); ++cell) {
    const int digit = grid.cells[cell];
    if (digit != kBlank && (digit < 0 || digit >= grid.side())) {
      throw std::invalid_argument("sudoku: cell " + std::to_string(cell) + " holds " +
                                  std::to_string(digit) + "; expected kBlank or 0.." +
                                  std::to_string(grid.side() - 1));
    }
  }
}

bool is_complete(const Grid& grid) {
  return std::find(grid.cells.begin(), grid.cells.end(), kBlank) == grid.cells.end();
}

// Unbiased integer in [0, bound) by rejection sampling: unlike std::uniform_int_distribution its
// results are the same with every standard library.
uint64_t uniform_below(std::mt19937_64& rng, uint64_t bound) {
  const uint64_t rejected_below = (0 - bound) % bound;  // 2^64 mod bound
  for (;;) {
    const uint64_t value = rng();
    if (value >= rejected_below) return value % bound;
  }
}

// Fisher-Yates with uniform_below, for the same reason as above (std::shuffle is not portable).
template <class T>
void shuffle(std::vector<T>& items, std::mt19937_64& rng) {
  for (size_t i = items.size(); i > 1; --i) std::swap(items[i - 1], items[uniform_below(rng, i)]);
}

std::vector<int> random_permutation(int count, std::mt19937_64& rng) {
  std::vector<int> order(count);
  std::iota(order.begin(), order.end(), 0);
  shuffle(order, rng);
  return order;
}

// Calls visit(peer) for every cell after `cell` in row-major order that shares its row, column or
// block, so that iterating over all cells visits each constrained pair exactly once.
template <class Visit>
void for_each_later_peer(int n, int cell, Visit visit) {
  const int side = n * n, row = cell / side, col = cell % side;
  for (int c = col + 1; c < side; ++c) visit(row * side + c);
  for (int r = row + 1; r < side; ++r) visit(r * side + col);
  // Block cells in the same row or column were visited above.
  const int block_col = col / n * n;
  for (int r = row + 1; r < row / n * n + n; ++r) {
    for (int c = block_col; c < block_col + n; ++c) {
      if (c != col) visit(r * side + c);
    }
  }
}

// A grid under construction plus, per row, column and block, the bitmask of digits it holds, so
// that a cell's candidates are one mask operation.
class Board {
 public:
  explicit Board(int n)
      : n_(n), side_(n * n), all_digits_((1u << side_) - 1), cells_(side_ * side_, kBlank),
        row_digits_(side_), col_digits_(side_), block_digits_(side_) {}

  const std::vector<int>& cells() const { return cells_; }

  uint32_t candidates(int cell) const {
    return all_digits_ & ~(row_digits_[row(cell)] | col_digits_[col(cell)] | block_digits_[block(cell)]);
  }

  void place(int cell, int digit) {
    cells_[cell] = digit;
    toggle(cell, digit);
  }

  void clear(int cell) {
    toggle(cell, cells_[cell]);
    cells_[cell] = kBlank;
  }

  // The blank cell with the fewest candidates (-1 when the grid is full): branching there keeps
  // the search tree small and finds dead ends (zero candidates) at once.
  int most_constrained_blank() const {
    int best = -1, best_count = side_ + 1;
    for (int cell = 0; cell < static_cast<int>(cells_.size()); ++cell) {
      if (cells_[cell] != kBlank) continue;
      const int count = __builtin_popcount(candidates(cell));
      if (count < best_count) {
        best = cell;
        best_count = count;
        if (count <= 1) break;
      }
    }
    return best;
  }

 private:
  int row(int cell) const { return cell / side_; }
  int col(int cell) const { return cell % side_; }
  int block(int cell) const { return row(cell) / n_ * n_ + col(cell) / n_; }

  void toggle(int cell, int digit) {
    const uint32_t bit = 1u << digit;
    row_digits_[row(cell)] ^= bit;
    col_digits_[col(cell)] ^= bit;
    block_digits_[block(cell)] ^= bit;
  }

  int n_, side_;
  uint32_t all_digits_;
  std::vector<int> cells_;
  std::vector<uint32_t> row_digits_, col_digits_, block_digits_;
};

void count_completions(Board& board, int64_t limit, int64_t& found) {
  const int cell = board.most_constrained_blank();
  if (cell < 0) {
    ++found;
    return;
  }
  for (uint32_t options = board.candidates(cell); options != 0 && found < limit; options &= options - 1) {
    board.place(cell, __builtin_ctz(options));
    count_completions(board, limit, found);
    board.clear(cell);
  }
}

// Randomised depth-first completion. Returns false on a dead end or once `budget` placements are
// spent: the search time is heavy-tailed, so restarting beats digging on.
bool complete_randomly(Board& board, std::mt19937_64& rng, int64_t& budget) {
  const int cell = board.most_constrained_blank();
  if (cell < 0) return true;
  std::vector<int> digits;
  for (uint32_t options = board.candidates(cell); options != 0; options &= options - 1) {
    digits.push_back(__builtin_ctz(options));
  }
  shuffle(digits, rng);
  for (int digit : digits) {
    if (--budget < 0) return false;
    board.place(cell, digit);
    if (complete_randomly(board, rng, budget)) return true;
    board.clear(cell);
  }
  return false;
}

std::vector<int> random_complete_cells(int n, std::mt19937_64& rng) {
  const int side = n * n;
  // Generous for a typical fill (about 1.4 tries per 25x25 grid, fewer for smaller ones).
  const int64_t placements_per_try = 20 * int64_t{side} * side;
  for (;;) {
    Board board(n);
    // The diagonal blocks share no row, column or block, so any permutations fit; starting from
    // them gives the search a random, always consistent head start (essential for 25x25).
    for (int diagonal = 0; diagonal < n; ++diagonal) {
      const std::vector<int> digits = random_permutation(side, rng);
      for (int k = 0; k < side; ++k) {
        board.place((diagonal * n + k / n) * side + diagonal * n + k % n, digits[k]);
      }
    }
    int64_t budget = placements_per_try;
    if (complete_randomly(board, rng, budget)) return board.cells();
  }
}

// Row order for a random validity-preserving row shuffle: bands permuted, rows within each band
// permuted independently.
std::vector<int> random_line_order(int n, std::mt19937_64& rng) {
  std::vector<int> order;
  for (int band : random_permutation(n, rng)) {
    for (int line : random_permutation(n, rng)) order.push_back(band * n + line);
  }
  return order;
}

char symbol(int digit) {
  if (digit == kBlank) return '.';
  return static_cast<char>(digit < 9 ? '1' + digit : 'A' + digit - 9);
}

constexpr int kNotADigit = kBlank - 1;

// The 0-based digit of a puzzle character, kBlank for a blank, kNotADigit for anything else.
int digit_of(char c, int side) {
  if (c == '.' || c == '0') return kBlank;
  int digit = kNotADigit;
  if (c >= '1' && c <= '9') {
    digit = c - '1';
  } else if (c >= 'A' && c <= 'Z') {
    digit = 9 + c - 'A';
  } else if (c >= 'a' && c <= 'z') {
    digit = 9 + c - 'a';
  }
  return digit < side ? digit : kNotADigit;
}

// The digits a grid of this side takes, as a message lists them: "1-4", "1-9 and A-G".
std::string digit_range(int side) {
  if (side <= 9) return "1-" + std::to_string(side);
  return "1-9 and A-" + std::string(1, symbol(side - 1));
}

// Names the character at text[at] for a message that must stay one readable line: 'x' for
// printable ASCII, U+00E9 for anything else that is UTF-8, "byte 0xE9" for a byte that is not.
std::string character_name(const std::string& text, size_t at) {
  const auto byte = static_cast<unsigned char>(text[at]);
  if (byte >= 0x20 && byte < 0x7F) return "character '" + std::string(1, text[at]) + "'";
  const size_t length = utf8_sequence_length(text, at);
  uint32_t code_point = length == 1 ? byte : byte & (0x7F >> length);
  for (size_t k = 1; k < length; ++k) {
    code_point = code_point << 6 | (static_cast<unsigned char>(text[at + k]) & 0x3F);
  }
  char name[24];
  if (length == 0) {
    std::snprintf(name, sizeof name, "byte 0x%02X", byte);
  } else {
    std::snprintf(name, sizeof name, "character U+%04X", static_cast<unsigned>(code_point));
  }
  return name;
}

bool is_ascii_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

bool is_cell_symbol(char c) {
  return c == '.' || (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}

std::string cell_name(int cell, int side) {
  return "row " + std::to_string(cell / side + 1) + " column " + std::to_string(cell % side + 1);
}

}  // namespace

namespace {
const auto kFamilyNames = enum_names<GridFamily>("grid family", {
    {GridFamily::broad, "broad"},
    {GridFamily::pattern, "pattern"},
});
}  // namespace

GridFamily parse_grid_family(const std::string& name) { return kFamilyNames.parse(name); }

std::vector<std::string> grid_family_names() { return kFamilyNames.choices(); }

std::string grid_family_name(GridFamily family) { return kFamilyNames.name(family); }

namespace {

Grid generate_pattern_solution(int n, std::mt19937_64& rng) {
  const int side = n * n;
  const std::vector<int> relabel = random_permutation(side, rng);
  const std::vector<int> band_shift = random_permutation(n, rng);
  Grid grid{n, std::vector<int>(side * side)};
  for (int band = 0; band < n; ++band) {
    const std::vector<int> rows = random_permutation(n, rng);
    for (int i = 0; i < n; ++i) {
      for (int c = 0; c < side; ++c) {
        grid.cells[(band * n + rows[i]) * side + c] = (c + band_shift[band] + n * i) % side;
      }
    }
  }
  // Columns within stacks: moves whole columns, so rows, columns and blocks stay permutations.
  Grid shuffled = grid;
  for (int stack = 0; stack < n; ++stack) {
    const std::vector<int> cols = random_permutation(n, rng);
    for (int k = 0; k < n; ++k) {
      for (int r = 0; r < side; ++r) {
        shuffled.cells[r * side + stack * n + cols[k]] = relabel[grid.cells[r * side + stack * n + k]];
      }
    }
  }
  return shuffled;
}

}  // namespace

Grid generate_solution(int n, std::mt19937_64& rng, GridFamily family) {
  check_block_size(n);
  if (family == GridFamily::pattern) return generate_pattern_solution(n, rng);
  const int side = n * n;
  const std::vector<int> base = random_complete_cells(n, rng);
  // The backtracking order leaves traces (e.g. the diagonal blocks); the symmetries spread the
  // result over the grid's whole orbit.
  const std::vector<int> relabel = random_permutation(side, rng);
  const std::vector<int> rows = random_line_order(n, rng);
  const std::vector<int> cols = random_line_order(n, rng);
  const bool transpose = uniform_below(rng, 2) == 1;
  Grid grid{n, std::vector<int>(side * side)};
  for (int r = 0; r < side; ++r) {
    for (int c = 0; c < side; ++c) {
      const int target = transpose ? c * side + r : r * side + c;
      grid.cells[target] = relabel[base[rows[r] * side + cols[c]]];
    }
  }
  return grid;
}

Grid parse(const std::string& text) {
  // Which symbols are digits depends on the size, known only once all are counted; anything that
  // is no symbol at all is reported first, so that it is not miscounted as a cell.
  std::string symbols;
  for (size_t at = 0; at < text.size(); ++at) {
    if (is_ascii_space(text[at])) continue;
    if (!is_cell_symbol(text[at])) {
      throw std::invalid_argument("puzzle: " + character_name(text, at) + " at position " +
                                  std::to_string(symbols.size() + 1) +
                                  " is not a cell: '.' or '0' for a blank, digits 1-9, letters "
                                  "A-P for larger grids, ASCII whitespace between");
    }
    symbols += text[at];
  }
  if (symbols.empty()) {
    throw std::invalid_argument("puzzle is empty; expected 16, 81, 256 or 625 cells");
  }
  Grid grid;
  grid.n = 0;  // until a size matches
  for (int n = kMinBlockSize; n <= kMaxBlockSize; ++n) {
    if (static_cast<int>(symbols.size()) == n * n * n * n) grid.n = n;
  }
  if (grid.n == 0) {
    throw std::invalid_argument("puzzle has " + std::to_string(symbols.size()) +
                                " cells; expected 16, 81, 256 or 625");
  }
  const int side = grid.side();
  for (int cell = 0; cell < grid.size(); ++cell) {
    const int digit = digit_of(symbols[cell], side);
    if (digit == kNotADigit) {
      throw std::invalid_argument("puzzle: character '" + std::string(1, symbols[cell]) +
                                  "' at position " + std::to_string(cell + 1) + " (row " +
                                  std::to_string(cell / side + 1) + ", column " +
                                  std::to_string(cell % side + 1) + ") is not a digit for a " +
                                  dimensions(side) + " grid (" + digit_range(side) +
                                  ", '.' or '0' for a blank)");
    }
    grid.cells.push_back(digit);
  }
  for (int cell = 0; cell < grid.size(); ++cell) {
    if (grid.cells[cell] == kBlank) continue;
    for_each_later_peer(grid.n, cell, [&](int peer) {
      if (grid.cells[peer] != grid.cells[cell]) return;
      throw std::invalid_argument("puzzle contradicts itself: " + cell_name(cell, side) + " and " +
                                  cell_name(peer, side) + " both hold " + symbol(grid.cells[cell]));
    });
  }
  return grid;
}

std::string format(const Grid& grid, bool pretty) {
  check_grid(grid);
  const int n = grid.n, side = grid.side();
  std::string text;
  for (int r = 0; r < side; ++r) {
    if (pretty && r > 0) text += r % n == 0 ? "\n\n" : "\n";
    for (int c = 0; c < side; ++c) {
      if (pretty && c > 0 && c % n == 0) text += ' ';
      text += symbol(grid.at(r, c));
    }
  }
  return text;
}

int64_t violated_pairs(const Grid& grid) {
  check_grid(grid);
  int64_t violated = 0;
  for (int cell = 0; cell < grid.size(); ++cell) {
    if (grid.cells[cell] == kBlank) continue;
    for_each_later_peer(grid.n, cell, [&](int peer) { violated += grid.cells[peer] == grid.cells[cell]; });
  }
  return violated;
}

int64_t constrained_pairs(int n) {
  check_block_size(n);
  const int64_t side = n * n;
  // Each cell has side - 1 peers in its row, its column and its block, but 2 (n - 1) of the block
  // peers also share the row or the column.
  const int64_t peers_per_cell = 3 * (side - 1) - 2 * (n - 1);
  return side * side * peers_per_cell / 2;
}

bool is_valid_solution(const Grid& grid, const Grid& puzzle) {
  check_grid(grid);
  check_grid(puzzle);
  if (grid.n != puzzle.n || !is_complete(grid) || violated_pairs(grid) != 0) return false;
  for (int cell = 0; cell < grid.size(); ++cell) {
    if (puzzle.cells[cell] != kBlank && puzzle.cells[cell] != grid.cells[cell]) return false;
  }
  return true;
}

int64_t count_solutions(const Grid& puzzle, int64_t limit) {
  check_grid(puzzle);
  if (limit < 1) throw std::invalid_argument("count_solutions: limit must be >= 1, got " + std::to_string(limit));
  Board board(puzzle.n);
  for (int cell = 0; cell < puzzle.size(); ++cell) {
    const int digit = puzzle.cells[cell];
    if (digit == kBlank) continue;
    if ((board.candidates(cell) >> digit & 1u) == 0) return 0;  // clashing givens
    board.place(cell, digit);
  }
  int64_t found = 0;
  count_completions(board, limit, found);
  return found;
}

Grid make_unique_puzzle(const Grid& solution, int min_givens, int max_givens, std::mt19937_64& rng,
                        int attempts) {
  check_grid(solution);
  if (!is_complete(solution) || violated_pairs(solution) != 0) {
    throw std::invalid_argument("make_unique_puzzle: the solution must be a complete valid grid");
  }
  if (min_givens < 0 || min_givens > max_givens || max_givens > solution.size()) {
    throw std::invalid_argument("make_unique_puzzle: need 0 <= min_givens <= max_givens <= " +
                                std::to_string(solution.size()) + ", got " + std::to_string(min_givens) +
                                " and " + std::to_string(max_givens));
  }
  if (attempts < 1) throw std::invalid_argument("make_unique_puzzle: attempts must be >= 1");
  int fewest_givens = solution.size();
  for (int attempt = 0; attempt < attempts; ++attempt) {
    const int target = min_givens + static_cast<int>(uniform_below(rng, max_givens - min_givens + 1));
    Grid puzzle = solution;
    int givens = puzzle.size();
    for (int cell : random_permutation(puzzle.size(), rng)) {
      if (givens <= target) break;
      puzzle.cells[cell] = kBlank;
      if (count_solutions(puzzle, 2) == 1) {
        --givens;
      } else {
        puzzle.cells[cell] = solution.cells[cell];
      }
    }
    if (givens <= max_givens) return puzzle;
    fewest_givens = std::min(fewest_givens, givens);
  }
  throw std::runtime_error("make_unique_puzzle: could not get below " + std::to_string(fewest_givens) +
                           " givens (wanted at most " + std::to_string(max_givens) + ") in " +
                           std::to_string(attempts) + " attempts");
}

Grid observe_random_cells(const Grid& solution, int observed, std::mt19937_64& rng) {
  check_grid(solution);
  if (observed < 0 || observed > solution.size()) {
    throw std::invalid_argument("observe_random_cells: observed must be in 0.." +
                                std::to_string(solution.size()) + ", got " + std::to_string(observed));
  }
  Grid puzzle{solution.n, std::vector<int>(solution.size(), kBlank)};
  const std::vector<int> order = random_permutation(solution.size(), rng);
  for (int k = 0; k < observed; ++k) puzzle.cells[order[k]] = solution.cells[order[k]];
  return puzzle;
}

}  // namespace structdiff::sudoku
