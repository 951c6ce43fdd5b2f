// Covering a square pattern by cliques, so that the CPU kernel can compute most of its entries as
// small dense blocks (micro-GEMMs) instead of one neighbour at a time.
#include <algorithm>
#include <vector>

#include "attention/sparse_kernel.h"

namespace structdiff::kernels {
namespace {

// A tile computes its whole padded score block; it is kept when the entries it newly owns fill at
// least this share of the block, and it has at least kMinTileMembers members. Calibrated on Sudoku
// against the vectorised neighbour lists (bench_kernels sudoku_tiles / sudoku_lists): 25-member
// tiles fill 0.5 to 0.78 and run about twice as fast; 9-member tiles (Sudoku 9x9 rows and
// columns fill 0.51 of their 10 x 16 blocks) run no faster overall and their forward pass about
// 1.4x slower, at head dimensions 16 and 32.
constexpr double kMinFilledShare = 0.45;
constexpr int64_t kMinTileMembers = 10;
// Each clique grows over a row's neighbours, so planning costs grow with the degree; rows this long
// are far from the clique sizes a tile holds, and such patterns get no tiles.
constexpr int64_t kMaxDegree = 4 * kMaxTileMembers;

class SortedRows {
 public:
  SortedRows(int64_t n, const int64_t* row_offsets, const int64_t* col_indices)
      : offsets_(row_offsets, row_offsets + n + 1),
        cols_(col_indices + row_offsets[0], col_indices + row_offsets[n]) {
    const int64_t base = offsets_[0];
    for (int64_t& offset : offsets_) offset -= base;
    for (int64_t row = 0; row < n; ++row) {
      std::sort(cols_.begin() + offsets_[row], cols_.begin() + offsets_[row + 1]);
    }
  }
  const int64_t* begin(int64_t row) const { return cols_.data() + offsets_[row]; }
  const int64_t* end(int64_t row) const { return cols_.data() + offsets_[row + 1]; }
  // Index of entry (row, col) in the sorted CSR, or -1.
  int64_t find(int64_t row, int64_t col) const {
    const int64_t* it = std::lower_bound(begin(row), end(row), col);
    return it != end(row) && *it == col ? it - cols_.data() : -1;
  }
  bool mutual(int64_t a, int64_t b) const { return find(a, b) >= 0 && find(b, a) >= 0; }
  int64_t entries() const { return static_cast<int64_t>(cols_.size()); }

 private:
  std::vector<int64_t> offsets_, cols_;
};

// Greedy: the clique grows from the edge (first, second) by every common mutual neighbour, in
// index order, that is mutually adjacent to all members so far. On unions of cliques (Sudoku's
// rows, columns and boxes; GSDM's factors) this recovers the cliques themselves.
std::vector<int64_t> grow_clique(const SortedRows& rows, int64_t first, int64_t second) {
  std::vector<int64_t> members{first, second};
  for (const int64_t* it = rows.begin(first); it != rows.end(first); ++it) {
    const int64_t candidate = *it;
    if (candidate == first || candidate == second) continue;
    if (static_cast<int64_t>(members.size()) == kMaxTileMembers) break;
    if (std::all_of(members.begin(), members.end(),
                    [&](int64_t member) { return rows.mutual(candidate, member); })) {
      members.push_back(candidate);
    }
  }
  std::sort(members.begin(), members.end());
  return members;
}

}  // namespace

TilePlan plan_clique_tiles(int64_t n, const int64_t* row_offsets, const int64_t* col_indices) {
  TilePlan plan;
  plan.tile_offsets.push_back(0);
  plan.mask_offsets.push_back(0);
  for (int64_t row = 0; row < n; ++row) {
    if (row_offsets[row + 1] - row_offsets[row] > kMaxDegree) return plan;
  }
  const SortedRows rows(n, row_offsets, col_indices);
  std::vector<char> covered(rows.entries(), 0);
  // Entries tried as a clique's seed edge and left to the neighbour lists.
  std::vector<char> tried(rows.entries(), 0);
  for (int64_t row = 0; row < n; ++row) {
    for (const int64_t* it = rows.begin(row); it != rows.end(row); ++it) {
      const int64_t entry = it - rows.begin(0);
      if (*it == row || covered[entry] || tried[entry] || !rows.mutual(row, *it)) continue;
      tried[entry] = 1;
      const std::vector<int64_t> members = grow_clique(rows, row, *it);
      const int64_t size = static_cast<int64_t>(members.size());
      if (size < kMinTileMembers) continue;
      std::vector<uint8_t> owned(size * size, 0);
      int64_t new_entries = 0;
      for (int64_t a = 0; a < size; ++a) {
        for (int64_t b = 0; b < size; ++b) {
          const int64_t e = rows.find(members[a], members[b]);
          if (e >= 0 && !covered[e]) {
            owned[a * size + b] = 1;
            ++new_entries;
          }
        }
      }
      const int64_t block = tile_padded_rows(size) * tile_padded_columns(size);
      if (new_entries < kMinFilledShare * static_cast<double>(block)) continue;
      for (int64_t a = 0; a < size; ++a) {
        for (int64_t b = 0; b < size; ++b) {
          if (owned[a * size + b]) covered[rows.find(members[a], members[b])] = 1;
        }
      }
      plan.tile_nodes.insert(plan.tile_nodes.end(), members.begin(), members.end());
      plan.tile_offsets.push_back(static_cast<int64_t>(plan.tile_nodes.size()));
      plan.owned.insert(plan.owned.end(), owned.begin(), owned.end());
      plan.mask_offsets.push_back(static_cast<int64_t>(plan.owned.size()));
    }
  }
  plan.residual_offsets.assign(n + 1, 0);
  for (int64_t row = 0; row < n; ++row) {
    for (const int64_t* it = rows.begin(row); it != rows.end(row); ++it) {
      if (!covered[it - rows.begin(0)]) plan.residual_cols.push_back(*it);
    }
    plan.residual_offsets[row + 1] = static_cast<int64_t>(plan.residual_cols.size());
  }
  return plan;
}

TilePlanView view_packed_tiles(const int64_t* index, const uint8_t* owned, int64_t num_nodes) {
  TilePlanView view;
  view.num_tiles = index[0];
  view.tile_offsets = index + 1;
  view.tile_nodes = view.tile_offsets + view.num_tiles + 1;
  view.mask_offsets = view.tile_nodes + view.tile_offsets[view.num_tiles];
  view.owned = owned;
  view.residual_offsets = view.mask_offsets + view.num_tiles + 1;
  view.residual_cols = view.residual_offsets + num_nodes + 1;
  return view;
}

}  // namespace structdiff::kernels
