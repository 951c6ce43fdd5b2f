// Comparing trained modules in tests: resumed runs must equal uninterrupted ones to the bit.
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

// Parameters, then buffers, of two modules of one architecture are equal to the bit.
inline void expect_identical(torch::nn::Module& expected, torch::nn::Module& actual) {
  const auto a = expected.named_parameters(), b = actual.named_parameters();
  ASSERT_EQ(a.size(), b.size());
  for (const auto& item : a) EXPECT_TRUE(torch::equal(item.value(), b[item.key()])) << item.key();
  const auto c = expected.named_buffers(), d = actual.named_buffers();
  ASSERT_EQ(c.size(), d.size());
  for (const auto& item : c) EXPECT_TRUE(torch::equal(item.value(), d[item.key()])) << item.key();
}
