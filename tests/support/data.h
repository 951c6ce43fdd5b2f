// Tests that read a data set scripts/setup.sh prepares skip, and say so, where it is missing (a
// checkout that never ran the setup, such as the source tree copied to a GPU machine).
#pragma once

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#define SKIP_WITHOUT_DATA(path)                                                      \
  if (!std::filesystem::exists(path)) {                                              \
    GTEST_SKIP() << std::string(path) << " is missing (scripts/setup.sh prepares it)"; \
  }
