// Facts about this build, for `structdiff --version` and the provenance recorded in model and
// results files.
#pragma once

#include <string>

namespace structdiff {

// The git commit the library was built from, "-modified" appended when the checkout had
// uncommitted changes to tracked files; "unknown" outside a git checkout.
const char* git_commit();

// Whether the CUDA kernels were compiled in (libtorch a CUDA build and its nvcc found).
bool cuda_kernels_compiled();

// One line: "structdiff <commit> libtorch <version> cuda-kernels yes|no".
std::string version_line();

}  // namespace structdiff
