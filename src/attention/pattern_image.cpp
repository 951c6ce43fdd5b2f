#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "structdiff/pattern.h"
#include "util/png.h"


namespace structdiff {

void AttentionPattern::write_png(const std::string& path, int64_t max_side) const {
  if (max_side < 1) {
    throw std::invalid_argument("write_png: max_side must be >= 1, got " +
                                std::to_string(max_side));
  }
  if (num_queries_ == 0 || num_keys_ == 0) {
    throw std::invalid_argument("write_png: cannot write an empty " +
                                std::to_string(num_queries_) + "x" + std::to_string(num_keys_) +
                                " pattern to " + path);
  }
  // One integer factor for both axes keeps the aspect ratio; each pixel then shows the fraction
  // of allowed entries in its factor x factor block, so density stays visible when shrunk.
  const int64_t longest_side = std::max(num_queries_, num_keys_);
  const int64_t factor = (longest_side + max_side - 1) / max_side;
  const int64_t height = (num_queries_ + factor - 1) / factor;
  const int64_t width = (num_keys_ + factor - 1) / factor;

  std::vector<int64_t> allowed_in_block(height * width, 0);
  for (int64_t row = 0; row < num_queries_; ++row) {
    for (int64_t index = row_offsets_[row]; index < row_offsets_[row + 1]; ++index) {
      ++allowed_in_block[(row / factor) * width + col_indices_[index] / factor];
    }
  }
  std::vector<uint8_t> pixels(height * width);
  for (int64_t y = 0; y < height; ++y) {
    // Blocks on the bottom and right edges may be cut short by the pattern's border.
    const int64_t block_rows = std::min(factor, num_queries_ - y * factor);
    for (int64_t x = 0; x < width; ++x) {
      const int64_t block_cols = std::min(factor, num_keys_ - x * factor);
      const double fraction = static_cast<double>(allowed_in_block[y * width + x]) /
                              static_cast<double>(block_rows * block_cols);
      pixels[y * width + x] = static_cast<uint8_t>(std::lround(255.0 * fraction));
    }
  }
  write_png_file(path, width, height, /*channels=*/1, pixels);
}

}  // namespace structdiff
