// A one-line progress bar with steps/s and ETA, for every long command.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>

namespace structdiff::train {

// A one-line progress display on stderr: step/total, named values, steps/s and ETA.
// Redraws in place at most 10 times a second on a terminal; elsewhere prints a line every
// `log_seconds`.
class ProgressBar {
 public:
  ProgressBar(std::string label, int64_t total, int64_t start = 0, double log_seconds = 10.0);
  void update(int64_t step, const std::map<std::string, double>& values = {});
  // A run that also stops after `seconds`: the ETA is the sooner of the two ends.
  void set_time_limit(double seconds) { time_limit_ = seconds; }
  void finish();  // final line with totals
  double steps_per_second() const;

 private:
  std::string label_;
  int64_t total_, start_, step_;
  double log_seconds_;
  double time_limit_ = 0;
  bool terminal_;
  std::chrono::steady_clock::time_point started_, last_print_;
  std::map<std::string, double> values_;
  void print(bool final_line);
};

// A short human-readable duration: "42s", "18m34s", "2h05m".
std::string format_duration(double seconds);

}  // namespace structdiff::train
