// Random tensors for any device from structdiff's generators. Every generator structdiff makes is
// a CPU generator (checkpoints save it; its stream is the same on every machine), so each draw is
// made on the CPU and the result moves to the device asked for: a run draws the same numbers
// whether its model lives on the CPU or on a GPU.
#pragma once

#include <cstdint>

#include <ATen/core/Generator.h>
#include <torch/types.h>

namespace structdiff::random {

// Standard normal, uniform on [0, 1), and integers in [low, high).
torch::Tensor normal(at::IntArrayRef sizes, const at::Generator& generator,
                     const torch::TensorOptions& options);
torch::Tensor uniform(at::IntArrayRef sizes, const at::Generator& generator,
                      const torch::TensorOptions& options);
torch::Tensor integers(int64_t low, int64_t high, at::IntArrayRef sizes,
                       const at::Generator& generator, const torch::TensorOptions& options);
// 1 with probability p, else 0, in options' dtype.
torch::Tensor bernoulli(at::IntArrayRef sizes, double p, const at::Generator& generator,
                        const torch::TensorOptions& options);
// Standard Gumbel, -log(-log U): added to scores, it makes their ranking a random order that
// keeps scores far apart in order and shuffles those within a few scales of each other.
torch::Tensor gumbel(at::IntArrayRef sizes, const at::Generator& generator,
                     const torch::TensorOptions& options);
// softmax(logits / temperature) over the last dimension, for any finite temperature > 0: the
// largest logit is shifted to 0 before dividing, so a tiny temperature gives the most probable
// value(s) all the mass instead of inf / inf.
torch::Tensor tempered_softmax(const torch::Tensor& logits, double temperature);
// One category per row of `probabilities` (rows, categories), as (rows,) int64 on its device.
torch::Tensor categorical(const torch::Tensor& probabilities, const at::Generator& generator);

}  // namespace structdiff::random
