#include "cli/command.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <vector>
#include <stdexcept>

namespace structdiff::cli {

void write_json_file(const std::string& path, const nlohmann::json& value) {
  std::ofstream out(path);
  out << value.dump(2) << "\n";
  if (!out) throw std::runtime_error("cannot write " + path);
}

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

}  // namespace structdiff::cli
