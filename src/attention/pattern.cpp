#include "structdiff/pattern.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace structdiff {
namespace {

std::invalid_argument pattern_error(const std::string& what) {
  return std::invalid_argument("AttentionPattern: " + what);
}

}  // namespace

AttentionPattern::AttentionPattern(int64_t num_queries, int64_t num_keys,
                                   std::vector<int64_t> row_offsets,
                                   std::vector<int64_t> col_indices)
    : num_queries_(num_queries),
      num_keys_(num_keys),
      row_offsets_(std::move(row_offsets)),
      col_indices_(std::move(col_indices)) {
  if (num_queries_ < 0 || num_keys_ < 0) {
    throw pattern_error("negative shape " + std::to_string(num_queries_) + "x" +
                        std::to_string(num_keys_));
  }
  if (static_cast<int64_t>(row_offsets_.size()) != num_queries_ + 1) {
    throw pattern_error("row_offsets has " + std::to_string(row_offsets_.size()) +
                        " entries, expected num_queries + 1 = " +
                        std::to_string(num_queries_ + 1));
  }
  if (row_offsets_.front() != 0) {
    throw pattern_error("row_offsets[0] is " + std::to_string(row_offsets_.front()) +
                        ", expected 0");
  }
  if (row_offsets_.back() != num_entries()) {
    throw pattern_error("row_offsets[" + std::to_string(num_queries_) + "] is " +
                        std::to_string(row_offsets_.back()) +
                        ", expected col_indices.size() = " + std::to_string(num_entries()));
  }
  // Offsets must be checked in full before any row is read, so every row stays in bounds.
  for (int64_t row = 0; row < num_queries_; ++row) {
    if (row_offsets_[row + 1] < row_offsets_[row]) {
      throw pattern_error("row_offsets decrease at row " + std::to_string(row) + " (" +
                          std::to_string(row_offsets_[row]) + " then " +
                          std::to_string(row_offsets_[row + 1]) + ")");
    }
  }
  for (int64_t row = 0; row < num_queries_; ++row) {
    const int64_t begin = row_offsets_[row];
    const int64_t end = row_offsets_[row + 1];
    for (int64_t index = begin; index < end; ++index) {
      const int64_t col = col_indices_[index];
      if (col < 0 || col >= num_keys_) {
        throw pattern_error("row " + std::to_string(row) + " has column " + std::to_string(col) +
                            " out of range [0, " + std::to_string(num_keys_) + ")");
      }
      if (index > begin && col <= col_indices_[index - 1]) {
        throw pattern_error("row " + std::to_string(row) + ": columns not sorted or duplicated (" +
                            std::to_string(col) + " after " +
                            std::to_string(col_indices_[index - 1]) + ")");
      }
    }
    max_degree_ = std::max(max_degree_, end - begin);
  }

  symmetric_ = num_queries_ == num_keys_;
  for (int64_t row = 0; symmetric_ && row < num_queries_; ++row) {
    for (int64_t index = row_offsets_[row]; index < row_offsets_[row + 1]; ++index) {
      if (!contains(col_indices_[index], row)) {
        symmetric_ = false;
        break;
      }
    }
  }
}

int64_t AttentionPattern::degree(int64_t row) const {
  if (row < 0 || row >= num_queries_) {
    throw std::out_of_range("AttentionPattern::degree: row " + std::to_string(row) +
                            " out of range [0, " + std::to_string(num_queries_) + ")");
  }
  return row_offsets_[row + 1] - row_offsets_[row];
}

bool AttentionPattern::contains(int64_t row, int64_t col) const {
  if (row < 0 || row >= num_queries_) return false;
  const auto begin = col_indices_.begin() + row_offsets_[row];
  const auto end = col_indices_.begin() + row_offsets_[row + 1];
  return std::binary_search(begin, end, col);
}

PatternStats AttentionPattern::stats() const {
  PatternStats stats;
  stats.rows = num_queries_;
  stats.cols = num_keys_;
  stats.entries = num_entries();
  stats.max_degree = max_degree_;
  stats.symmetric = symmetric_;
  if (num_queries_ > 0) {
    stats.min_degree = max_degree_;
    for (int64_t row = 0; row < num_queries_; ++row) {
      stats.min_degree = std::min(stats.min_degree, degree(row));
    }
    stats.mean_degree = static_cast<double>(stats.entries) / static_cast<double>(num_queries_);
  }
  if (num_queries_ > 0 && num_keys_ > 0) {
    stats.density = static_cast<double>(stats.entries) /
                    (static_cast<double>(num_queries_) * static_cast<double>(num_keys_));
  }
  return stats;
}

torch::Tensor AttentionPattern::to_dense_mask() const {
  torch::Tensor mask = torch::zeros({num_queries_, num_keys_}, torch::kBool);
  auto cells = mask.accessor<bool, 2>();
  for (int64_t row = 0; row < num_queries_; ++row) {
    for (int64_t index = row_offsets_[row]; index < row_offsets_[row + 1]; ++index) {
      cells[row][col_indices_[index]] = true;
    }
  }
  return mask;
}

bool AttentionPattern::operator==(const AttentionPattern& other) const {
  return num_queries_ == other.num_queries_ && num_keys_ == other.num_keys_ &&
         row_offsets_ == other.row_offsets_ && col_indices_ == other.col_indices_;
}

}  // namespace structdiff
