// The rotation of RoPE as one pass over the tensor, for the CPU: plain pointers and sizes, so the
// translation unit is compiled with the kernels' flags and no torch headers (rope.cpp wraps it
// as an autograd function).
#pragma once

#include <cstdint>

namespace structdiff::kernels {

struct RopeProblem {
  int64_t batch = 0, heads = 0, tokens = 0, half = 0;  // head_dim = 2 * half
  // Strides in elements over (batch, head, token) of the input; the head dimension is contiguous.
  int64_t stride[3] = {0, 0, 0};
  // cos and sin of every angle, (tokens, half), or (batch, tokens, half) with per_element.
  bool per_element = false;
  // Rotate by minus the angles: the rotation's inverse and transpose, i.e. its backward pass.
  bool inverse = false;
};

// out (batch, heads, tokens, 2 * half), contiguous: feature i and i + half of each head turned
// by the angle of (its token, i) (rotate-half convention).
template <typename T>
void rope_rotate(const RopeProblem& problem, const T* x, const T* cos, const T* sin, T* out);

}  // namespace structdiff::kernels
