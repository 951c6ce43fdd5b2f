// PNG output through stb, for pattern images and image grids.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace structdiff {

// Writes `pixels` (row-major, `channels` = 1 grey or 3 RGB bytes per pixel); throws
// std::runtime_error naming the path if it cannot.
void write_png_file(const std::string& path, int64_t width, int64_t height, int channels,
                    const std::vector<uint8_t>& pixels);

}  // namespace structdiff
