// The sinusoidal code of scalar positions shared by the models: diffusion times (GSDM, the DDPM
// U-Net) and array indices (GSDM's node embeddings).
#pragma once

#include <cstdint>

#include <torch/types.h>

namespace structdiff {

// Where the geometric ladder of frequencies ends for `half` = dim / 2 frequencies.
enum class FrequencySpacing {
  transformer,  // 10000^(-i / half), as in the Transformer paper; GSDM uses it
  endpoint      // 10000^(-i / (half - 1)): the last is exactly 1/10000, as in Ho et al.'s DDPM code
};

// (batch, dim) float: [sin(p f_0), ..., sin(p f_{half-1}), cos(p f_0), ..., cos(p f_{half-1})]
// for each position p of the 1-D `positions`; an odd dim gets a zero last column.
torch::Tensor sinusoidal_embedding(const torch::Tensor& positions, int64_t dim,
                                   FrequencySpacing spacing);

}  // namespace structdiff
