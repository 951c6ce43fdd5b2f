#include "util/png.h"

#include <stdexcept>

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

void write_png_file(const std::string& path, int64_t width, int64_t height, int channels,
                    const std::vector<uint8_t>& pixels) {
  if (width < 1 || height < 1 || (channels != 1 && channels != 3) ||
      static_cast<int64_t>(pixels.size()) != width * height * channels) {
    throw std::invalid_argument("write_png_file: " + std::to_string(pixels.size()) +
                                " bytes do not make a " + std::to_string(width) + "x" +
                                std::to_string(height) + " image with " + std::to_string(channels) +
                                " channels (" + path + ")");
  }
  const int written = stbi_write_png(path.c_str(), static_cast<int>(width), static_cast<int>(height),
                                     channels, pixels.data(), static_cast<int>(width * channels));
  if (written == 0) throw std::runtime_error("cannot write PNG " + path);
}

}  // namespace structdiff
