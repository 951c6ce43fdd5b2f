#include "structdiff/timing.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

namespace structdiff {

double median_ms(const std::function<void()>& run, int min_runs, double budget_seconds) {
  using Clock = std::chrono::steady_clock;
  std::vector<double> times;
  const auto start = Clock::now();
  while (static_cast<int>(times.size()) < std::max(min_runs, 1) ||
         std::chrono::duration<double>(Clock::now() - start).count() + 1e-3 * times.back() <
             budget_seconds) {
    const auto t0 = Clock::now();
    run();
    times.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// Least-squares fit of log(y) = k log(x) + c.
double log_log_slope(const std::vector<double>& x, const std::vector<double>& y) {
  const double n = static_cast<double>(x.size());
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double lx = std::log(x[i]), ly = std::log(y[i]);
    sx += lx;
    sy += ly;
    sxx += lx * lx;
    sxy += lx * ly;
  }
  return (n * sxy - sx * sy) / (n * sxx - sx * sx);
}

}  // namespace structdiff
