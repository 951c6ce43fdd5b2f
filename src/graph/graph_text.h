// Message helpers of the graph's two halves (the model and compilation, graph_json.cpp's JSON I/O).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "structdiff/graph.h"

namespace structdiff::graph {

// Paths are shown whole: a shortened one would not say which file is meant.
inline constexpr size_t kWholePath = 4096;

// "WHAT takes the attention mask past N entries".
std::string past_mask_limit(const std::string& what);
// "x[1,2]", the array's name printable.
std::string element_text(const Element& e);
// Shape {} and {1} both denote a scalar.
bool is_scalar(const Array& a);
// A whole decimal integer: an optional '-' and digits, nothing else (no '+', spaces, "0x" or
// trailing text). nullopt if `text` is not one; one too large for 64 bits throws, `where` first.
std::optional<int64_t> whole_integer(const std::string& text, const std::string& where);

}  // namespace structdiff::graph
