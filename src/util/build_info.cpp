#include "util/build_info.h"

#include <torch/version.h>

namespace structdiff {

bool cuda_kernels_compiled() {
#ifdef STRUCTDIFF_CUDA_KERNELS
  return true;
#else
  return false;
#endif
}

std::string version_line() {
  return std::string("structdiff ") + git_commit() + " libtorch " + TORCH_VERSION +
         " cuda-kernels " + (cuda_kernels_compiled() ? "yes" : "no");
}

}  // namespace structdiff
