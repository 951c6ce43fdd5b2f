// The CUDA entry points of a build without CUDA (CMake links this file instead of
// sparse_kernel_cuda.cu): callers check cuda_kernels_built() first, so these only guard misuse.
#include <stdexcept>

#include "attention/sparse_kernel.h"

namespace structdiff::kernels {
namespace {

[[noreturn]] void no_cuda() {
  throw std::invalid_argument(
      "this build of structdiff has no CUDA kernels (build it against a CUDA libtorch with nvcc "
      "on the PATH)");
}

}  // namespace

bool cuda_kernels_built() { return false; }

template <typename T>
void sparse_attention_forward_cuda(const SparseAttentionProblem&, int, const T*, const T*,
                                   const T*, T*, T*) {
  no_cuda();
}

template <typename T>
void sparse_attention_backward_cuda(const SparseAttentionProblem&, int, const int64_t*,
                                    const int64_t*, const T*, const T*, const T*, const T*,
                                    const T*, const T*, T*, T*, T*, T*) {
  no_cuda();
}

template void sparse_attention_forward_cuda<float>(const SparseAttentionProblem&, int,
                                                   const float*, const float*, const float*,
                                                   float*, float*);
template void sparse_attention_forward_cuda<double>(const SparseAttentionProblem&, int,
                                                    const double*, const double*, const double*,
                                                    double*, double*);
template void sparse_attention_backward_cuda<float>(const SparseAttentionProblem&, int,
                                                    const int64_t*, const int64_t*, const float*,
                                                    const float*, const float*, const float*,
                                                    const float*, const float*, float*, float*,
                                                    float*, float*);
template void sparse_attention_backward_cuda<double>(const SparseAttentionProblem&, int,
                                                     const int64_t*, const int64_t*,
                                                     const double*, const double*, const double*,
                                                     const double*, const double*, const double*,
                                                     double*, double*, double*, double*);

}  // namespace structdiff::kernels
