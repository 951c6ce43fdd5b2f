#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "structdiff/pattern.h"

// Static linkage keeps stb's symbols private to this file, so no other part of the program can
// clash with them. Third-party code: its warnings (unused writers, brace init) are not ours.
#define STB_IMAGE_WRITE_STATIC
#define STB_IMAGE_WRITE_IMPLEMENTATION
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wunused-function"
#include <stb_image_write.h>
#pragma GCC diagnostic pop

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
  const int written = stbi_write_png(path.c_str(), static_cast<int>(width),
                                     static_cast<int>(height), /*comp=*/1, pixels.data(),
                                     /*stride_in_bytes=*/static_cast<int>(width));
  if (written == 0) throw std::runtime_error("write_png: could not write " + path);
}

}  // namespace structdiff
