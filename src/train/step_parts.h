// A training step split into parts of its batch, run at once on the CPU's threads (the loop's
// LoopTask::loss_parts). Compiled with OpenMP: at::parallel_for is serial in a translation unit
// without it.
#pragma once

#include <vector>

#include "structdiff/training_loop.h"

namespace structdiff::train {

// This process's shard split into one part per CPU thread (one part on a GPU).
std::vector<Shard> step_parts(torch::nn::Module& model, Shard shard);

// Forward and backward passes of the step's parts; returns the shard's mean loss. Several parts
// run at once, one per thread, each single-threaded inside; each part's gradients come back from
// its own backward pass and are added in part order, so the numbers do not depend on which thread
// finishes first.
double forward_backward(const std::vector<LossPart>& parts, torch::nn::Module& model);

}  // namespace structdiff::train
