// Tests that need a GPU skip, with the reason in the report, where libtorch sees none (Debian's
// libtorch is CPU-only: CI reports them skipped; the GPU machine runs them).
#pragma once

#include <gtest/gtest.h>
#include <torch/cuda.h>

#define SKIP_WITHOUT_GPU()                             \
  if (!torch::cuda::is_available()) {                  \
    GTEST_SKIP() << "no GPU visible to this libtorch"; \
  }
