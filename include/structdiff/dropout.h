// Dropout that draws its mask from a generator passed in (the training loop's), never from
// libtorch's default generator: a run's trajectory then depends on its seed alone and resumes
// exactly from the generator state its checkpoint holds.
#pragma once

#include <ATen/core/Generator.h>
#include <torch/types.h>

#include "structdiff/random.h"

namespace structdiff {

// Inverted dropout with keep probability 1 - p. No generator (evaluation, sampling) or p = 0:
// the identity.
inline torch::Tensor dropout(const torch::Tensor& x, double p, at::Generator* generator) {
  if (generator == nullptr || p <= 0) return x;
  const torch::Tensor keep = random::bernoulli(x.sizes(), 1.0 - p, *generator, x.options());
  return x * keep * (1.0 / (1.0 - p));
}

}  // namespace structdiff
