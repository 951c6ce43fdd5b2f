// Wall-clock timing for benchmarks, and how a time scales with a size.
#pragma once

#include <functional>
#include <vector>

namespace structdiff {

// Median wall-clock milliseconds of `run` over at least `min_runs` runs; after those, further
// runs while one more still fits within `budget_seconds` of the first run's start.
double median_ms(const std::function<void()>& run, int min_runs, double budget_seconds);

// Least-squares slope of log(y) against log(x): the exponent k of y ~ x^k.
double log_log_slope(const std::vector<double>& x, const std::vector<double>& y);

}  // namespace structdiff
