// Rotary position embedding (RoPE, Su et al. 2021), for any model's attention: each feature pair
// of a head is rotated by an angle proportional to its token's position, so that the score
// q_m . k_n depends on the positions only through n - m.
#pragma once

#include <torch/types.h>

namespace structdiff {

constexpr double kRopeBase = 10000.0;

// x: (batch, heads, tokens, head_dim) with an even head_dim; positions: (tokens) or
// (batch, tokens) integers. Rotate-half convention (GPT-NeoX, LLaMA): feature i pairs with
// feature i + head_dim/2 and turns by position * base^(-2i/head_dim). The angles are computed in
// float64, so large positions keep their precision. Throws std::invalid_argument on bad shapes.
torch::Tensor apply_rope(const torch::Tensor& x, const torch::Tensor& positions,
                         double base = kRopeBase);

}  // namespace structdiff
