// EXPECT_THROW_WITH: a statement throws the given exception type with a message containing a
// fragment. Free of torch so that every test can use it.
#pragma once

#include <string>

#include <gtest/gtest.h>

// Expects `statement` to throw an exception of type E whose message contains `fragment`.
#define EXPECT_THROW_WITH(statement, E, fragment)                                    \
  do {                                                                               \
    try {                                                                            \
      statement;                                                                     \
      ADD_FAILURE() << "expected " #E " containing \"" << (fragment) << "\"";        \
    } catch (const E& error) {                                                       \
      EXPECT_NE(std::string(error.what()).find(fragment), std::string::npos)         \
          << "message was: " << error.what();                                        \
    }                                                                                \
  } while (0)
