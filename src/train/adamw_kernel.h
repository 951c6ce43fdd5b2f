// One AdamW update of a parameter tensor as a single pass over its values, for the CPU: plain
// pointers, so the translation unit is compiled with the kernels' flags and no torch headers
// (FusedAdamW in optimizer.cpp calls it; libtorch's AdamW takes eight tensor operations, each a
// full pass, per parameter tensor).
#pragma once

#include <cstdint>

namespace structdiff::kernels {

struct AdamWUpdate {
  double learning_rate = 0, weight_decay = 0, beta1 = 0, beta2 = 0, eps = 0;
  double bias_correction1 = 1, bias_correction2 = 1;  // 1 - beta^step
};

// param *= 1 - lr * weight_decay; m = beta1 m + (1 - beta1) g; v = beta2 v + (1 - beta2) g^2;
// param -= lr / bias_correction1 * m / (sqrt(v) / sqrt(bias_correction2) + eps),
// the same operations in the same order as torch::optim::AdamW.
template <typename T>
void adamw_update(const AdamWUpdate& update, int64_t size, T* param, const T* grad, T* exp_avg,
                  T* exp_avg_sq);

// Sum of squares, accumulated in double (the gradient norm for clipping).
template <typename T>
double sum_of_squares(int64_t size, const T* values);

}  // namespace structdiff::kernels
