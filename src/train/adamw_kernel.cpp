#include "train/adamw_kernel.h"

#include <cmath>

namespace structdiff::kernels {

template <typename T>
void adamw_update(const AdamWUpdate& update, int64_t size, T* __restrict param,
                  const T* __restrict grad, T* __restrict exp_avg, T* __restrict exp_avg_sq) {
  // Scalars rounded to T once, as libtorch's tensor operations round them.
  const T decay = static_cast<T>(1 - update.learning_rate * update.weight_decay);
  const T beta1 = static_cast<T>(update.beta1), one_minus_beta1 = static_cast<T>(1 - update.beta1);
  const T beta2 = static_cast<T>(update.beta2), one_minus_beta2 = static_cast<T>(1 - update.beta2);
  const T sqrt_correction2 = static_cast<T>(std::sqrt(update.bias_correction2));
  const T eps = static_cast<T>(update.eps);
  const T step_size = static_cast<T>(-update.learning_rate / update.bias_correction1);
  const bool decays = update.weight_decay != 0;
#pragma omp simd
  for (int64_t i = 0; i < size; ++i) {
    const T g = grad[i];
    const T m = exp_avg[i] * beta1 + g * one_minus_beta1;
    const T v = exp_avg_sq[i] * beta2 + one_minus_beta2 * g * g;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    const T p = decays ? param[i] * decay : param[i];
    param[i] = p + step_size * m / (std::sqrt(v) / sqrt_correction2 + eps);
  }
}

template <typename T>
double sum_of_squares(int64_t size, const T* values) {
  double sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < size; ++i) sum += static_cast<double>(values[i]) * values[i];
  return sum;
}

template void adamw_update<float>(const AdamWUpdate&, int64_t, float*, const float*, float*,
                                  float*);
template void adamw_update<double>(const AdamWUpdate&, int64_t, double*, const double*, double*,
                                   double*);
template double sum_of_squares<float>(int64_t, const float*);
template double sum_of_squares<double>(int64_t, const double*);

}  // namespace structdiff::kernels
