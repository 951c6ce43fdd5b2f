// A pattern as its rows: for each query, the sorted keys it attends to (what tests compare).
#pragma once

#include <cstdint>
#include <vector>

#include "structdiff/pattern.h"

namespace structdiff {

using Rows = std::vector<std::vector<int64_t>>;

inline Rows rows_of(const AttentionPattern& pattern) {
  Rows rows(pattern.num_queries());
  for (int64_t row = 0; row < pattern.num_queries(); ++row) {
    rows[row].assign(pattern.col_indices().begin() + pattern.row_offsets()[row],
                     pattern.col_indices().begin() + pattern.row_offsets()[row + 1]);
  }
  return rows;
}

}  // namespace structdiff
