#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <utility>

#include "structdiff/progress.h"

namespace structdiff::train {
namespace {

constexpr int kBarWidth = 20;
constexpr double kTerminalRedrawSeconds = 0.1;

double seconds_between(std::chrono::steady_clock::time_point from,
                       std::chrono::steady_clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

std::string format_number(const char* format, double value) {
  char text[64];
  std::snprintf(text, sizeof(text), format, value);
  return text;
}

}  // namespace

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "--";
  const long long total = std::llround(seconds);
  const long long hours = total / 3600, minutes = total % 3600 / 60, rest = total % 60;
  char text[64];
  if (hours > 0) {
    std::snprintf(text, sizeof(text), "%lldh%02lldm", hours, minutes);
  } else if (minutes > 0) {
    std::snprintf(text, sizeof(text), "%lldm%02llds", minutes, rest);
  } else {
    std::snprintf(text, sizeof(text), "%llds", rest);
  }
  return text;
}

ProgressBar::ProgressBar(std::string label, int64_t total, int64_t start, double log_seconds)
    : label_(std::move(label)),
      total_(total),
      start_(start),
      step_(start),
      log_seconds_(log_seconds),
      terminal_(::isatty(::fileno(stderr)) != 0),
      started_(std::chrono::steady_clock::now()),
      last_print_(started_) {}

void ProgressBar::update(int64_t step, const std::map<std::string, double>& values) {
  step_ = step;
  // Merged rather than replaced, so values reported less often than every step stay visible.
  for (const auto& [name, value] : values) values_[name] = value;
  const auto now = std::chrono::steady_clock::now();
  const double interval = terminal_ ? kTerminalRedrawSeconds : log_seconds_;
  if (seconds_between(last_print_, now) < interval) return;
  last_print_ = now;
  print(/*final_line=*/false);
}

void ProgressBar::finish() { print(/*final_line=*/true); }

// Measured from `start`, so a resumed run reports its own speed, not that of the steps it skipped.
double ProgressBar::steps_per_second() const {
  const double elapsed = seconds_between(started_, std::chrono::steady_clock::now());
  return elapsed > 0 ? static_cast<double>(step_ - start_) / elapsed : 0.0;
}

void ProgressBar::print(bool final_line) {
  const double fraction =
      total_ > 0 ? std::clamp(static_cast<double>(step_) / static_cast<double>(total_), 0.0, 1.0)
                 : 0.0;
  const int filled = static_cast<int>(fraction * kBarWidth);
  std::string line = label_ + " [" + std::string(filled, '#') +
                     std::string(kBarWidth - filled, '.') + "] " + std::to_string(step_) + "/" +
                     std::to_string(total_);
  for (const auto& [name, value] : values_) line += " " + name + " " + format_number("%.4g", value);
  const double rate = steps_per_second();
  line += " | " + format_number("%.3g", rate) + " steps/s | ";
  if (final_line) {
    line += format_duration(seconds_between(started_, std::chrono::steady_clock::now())) + " total";
  } else {
    const double remaining = static_cast<double>(std::max<int64_t>(total_ - step_, 0));
    double eta = rate > 0 ? remaining / rate : -1;
    if (time_limit_ > 0) {
      const double left = std::max(0.0, time_limit_ - seconds_between(started_, std::chrono::steady_clock::now()));
      eta = eta < 0 ? left : std::min(eta, left);
    }
    line += "ETA " + (eta >= 0 ? format_duration(eta) : std::string("--"));
  }
  // A terminal redraws one line in place (\r, then clear to end of line); logs get whole lines.
  const std::string text =
      terminal_ ? "\r" + line + "\x1b[K" + (final_line ? "\n" : "") : line + "\n";
  std::fputs(text.c_str(), stderr);
  std::fflush(stderr);
}

}  // namespace structdiff::train
