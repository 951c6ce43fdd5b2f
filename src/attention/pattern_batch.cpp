#include <algorithm>
#include <array>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "attention/sparse_kernel.h"
#include "structdiff/attention.h"
#include "structdiff/sparse_attention.h"

namespace structdiff {

enum class PatternBatch::Form {
  row_offsets,
  col_indices,
  dense_mask,
  padded_indices,
  padded_valid,
  key_offsets,
  key_queries,
  count
};

// Several threads may run attention over one PatternBatch at once (a model shared by worker
// threads): each cached form is built exactly once, and a thread asking while another builds it
// waits for it.
struct PatternBatch::Cache {
  std::once_flag dense_mask_built, padded_built, transposed_built, tiles_built;
  torch::Tensor dense_mask, padded_indices, padded_valid, key_offsets, key_queries, tile_index,
      tile_owned;
  // Copies on other devices, keyed by (device type, index); std::map keeps references stable.
  std::mutex copies_mutex;
  std::map<std::pair<int, int>, std::array<torch::Tensor, static_cast<size_t>(Form::count)>>
      copies;
};

const torch::Tensor& PatternBatch::on_device(const torch::Tensor& cpu, Form form,
                                             torch::Device device) const {
  if (device.is_cpu()) return cpu;
  const std::lock_guard<std::mutex> lock(cache_->copies_mutex);
  torch::Tensor& copy = cache_->copies[{static_cast<int>(device.type()), device.index()}]
                                      [static_cast<size_t>(form)];
  if (!copy.defined()) copy = cpu.to(device);
  return copy;
}

const torch::Tensor& PatternBatch::row_offsets(torch::Device device) const {
  return on_device(row_offsets_, Form::row_offsets, device);
}

const torch::Tensor& PatternBatch::col_indices(torch::Device device) const {
  return on_device(col_indices_, Form::col_indices, device);
}

PatternBatch::PatternBatch(const AttentionPattern& shared)
    : PatternBatch(std::vector<AttentionPattern>{shared}) {}

PatternBatch::PatternBatch(const std::vector<AttentionPattern>& per_element)
    : cache_(std::make_shared<Cache>()) {
  if (per_element.empty()) throw std::invalid_argument("PatternBatch: no patterns given");
  size_ = static_cast<int64_t>(per_element.size());
  num_queries_ = per_element.front().num_queries();
  num_keys_ = per_element.front().num_keys();
  int64_t total = 0;
  for (int64_t i = 0; i < size_; ++i) {
    const AttentionPattern& pattern = per_element[i];
    if (pattern.num_queries() != num_queries_ || pattern.num_keys() != num_keys_) {
      throw std::invalid_argument(
          "PatternBatch: pattern " + std::to_string(i) + " is " +
          std::to_string(pattern.num_queries()) + "x" + std::to_string(pattern.num_keys()) +
          " but pattern 0 is " + std::to_string(num_queries_) + "x" +
          std::to_string(num_keys_));
    }
    total += pattern.num_entries();
    max_degree_ = std::max(max_degree_, pattern.max_degree());
  }
  row_offsets_ = torch::empty({size_, num_queries_ + 1}, torch::kLong);
  col_indices_ = torch::empty({total}, torch::kLong);
  int64_t* offsets = row_offsets_.data_ptr<int64_t>();
  int64_t* cols = col_indices_.data_ptr<int64_t>();
  int64_t base = 0;
  for (const AttentionPattern& pattern : per_element) {
    for (int64_t offset : pattern.row_offsets()) *offsets++ = base + offset;
    cols = std::copy(pattern.col_indices().begin(), pattern.col_indices().end(), cols);
    base += pattern.num_entries();
  }
}

void PatternBatch::build_dense_mask() const {
  torch::Tensor mask = torch::zeros({size_, num_queries_, num_keys_}, torch::kBool);
  auto mask_data = mask.accessor<bool, 3>();
  auto offsets = row_offsets_.accessor<int64_t, 2>();
  const int64_t* cols = col_indices_.data_ptr<int64_t>();
  for (int64_t p = 0; p < size_; ++p) {
    for (int64_t row = 0; row < num_queries_; ++row) {
      for (int64_t e = offsets[p][row]; e < offsets[p][row + 1]; ++e) {
        mask_data[p][row][cols[e]] = true;
      }
    }
  }
  cache_->dense_mask = mask;
}

const torch::Tensor& PatternBatch::dense_mask(torch::Device device) const {
  std::call_once(cache_->dense_mask_built, [this] { build_dense_mask(); });
  return on_device(cache_->dense_mask, Form::dense_mask, device);
}

void PatternBatch::build_padded() const {
  const int64_t width = std::max<int64_t>(max_degree_, 1);
  torch::Tensor indices = torch::zeros({size_, num_queries_, width}, torch::kLong);
  torch::Tensor valid = torch::zeros({size_, num_queries_, width}, torch::kBool);
  auto index_data = indices.accessor<int64_t, 3>();
  auto valid_data = valid.accessor<bool, 3>();
  auto offsets = row_offsets_.accessor<int64_t, 2>();
  const int64_t* cols = col_indices_.data_ptr<int64_t>();
  for (int64_t p = 0; p < size_; ++p) {
    for (int64_t row = 0; row < num_queries_; ++row) {
      for (int64_t e = offsets[p][row], slot = 0; e < offsets[p][row + 1]; ++e, ++slot) {
        index_data[p][row][slot] = cols[e];
        valid_data[p][row][slot] = true;
      }
    }
  }
  cache_->padded_indices = indices;
  cache_->padded_valid = valid;
}

const torch::Tensor& PatternBatch::padded_indices(torch::Device device) const {
  std::call_once(cache_->padded_built, [this] { build_padded(); });
  return on_device(cache_->padded_indices, Form::padded_indices, device);
}

const torch::Tensor& PatternBatch::padded_valid(torch::Device device) const {
  std::call_once(cache_->padded_built, [this] { build_padded(); });
  return on_device(cache_->padded_valid, Form::padded_valid, device);
}

void PatternBatch::build_transposed() const {
  std::tie(cache_->key_offsets, cache_->key_queries) =
      transpose_csr(row_offsets_, col_indices_, num_queries_, num_keys_);
}

const torch::Tensor& PatternBatch::key_offsets(torch::Device device) const {
  std::call_once(cache_->transposed_built, [this] { build_transposed(); });
  return on_device(cache_->key_offsets, Form::key_offsets, device);
}

const torch::Tensor& PatternBatch::key_queries(torch::Device device) const {
  std::call_once(cache_->transposed_built, [this] { build_transposed(); });
  return on_device(cache_->key_queries, Form::key_queries, device);
}

void PatternBatch::build_tiles() const {
  cache_->tile_index = torch::empty({0}, torch::kLong);
  cache_->tile_owned = torch::empty({0}, torch::kByte);
  if (size_ != 1 || num_queries_ != num_keys_) return;
  const kernels::TilePlan plan = kernels::plan_clique_tiles(
      num_queries_, row_offsets_.data_ptr<int64_t>(), col_indices_.data_ptr<int64_t>());
  if (plan.num_tiles() == 0) return;
  std::vector<int64_t> packed{plan.num_tiles()};
  for (const auto* part : {&plan.tile_offsets, &plan.tile_nodes, &plan.mask_offsets,
                           &plan.residual_offsets, &plan.residual_cols}) {
    packed.insert(packed.end(), part->begin(), part->end());
  }
  cache_->tile_index = torch::tensor(packed, torch::kLong);
  cache_->tile_owned = torch::from_blob(const_cast<uint8_t*>(plan.owned.data()),
                                        {static_cast<int64_t>(plan.owned.size())}, torch::kByte)
                           .clone();
}

const torch::Tensor& PatternBatch::tile_index() const {
  std::call_once(cache_->tiles_built, [this] { build_tiles(); });
  return cache_->tile_index;
}

const torch::Tensor& PatternBatch::tile_owned() const {
  std::call_once(cache_->tiles_built, [this] { build_tiles(); });
  return cache_->tile_owned;
}

int64_t PatternBatch::tiled_entries() const {
  return tile_owned().sum().item<int64_t>();
}

void PatternBatch::check_compatible(const torch::Tensor& q, const torch::Tensor& k) const {
  if (q.size(2) != num_queries_ || k.size(2) != num_keys_) {
    throw std::invalid_argument("pattern is " + std::to_string(num_queries_) + "x" +
                                std::to_string(num_keys_) + " but the inputs have " +
                                std::to_string(q.size(2)) + " queries and " +
                                std::to_string(k.size(2)) + " keys");
  }
  if (size_ != 1 && size_ != q.size(0)) {
    throw std::invalid_argument("pattern batch holds " + std::to_string(size_) +
                                " patterns but the inputs have batch size " +
                                std::to_string(q.size(0)) + " (give 1 shared or one per element)");
  }
}

}  // namespace structdiff
