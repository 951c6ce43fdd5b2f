// Tests that read a data set scripts/setup.sh prepares skip, and say so, where it is missing (a
// checkout that never ran the setup, such as the source tree copied to a GPU machine).
#pragma once

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#define SKIP_WITHOUT_DATA(path)                                                  \
  if (const std::string required_data = (path);                                  \
      !std::filesystem::exists(required_data)) {                                 \
    GTEST_SKIP() << required_data << " is missing (scripts/setup.sh prepares it)"; \
  }
