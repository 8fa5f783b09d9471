#include "cli/progress.h"

#include <unistd.h>

#include <cstdlib>
#include <iostream>

namespace memplan {
namespace {

/// The delay before the first line: MEMPLAN_PROGRESS_DELAY_MS, else 1 s.
double DelaySeconds() {
  const char* env = std::getenv("MEMPLAN_PROGRESS_DELAY_MS");
  if (env != nullptr && *env != '\0') {
    char* end = nullptr;
    const long ms = std::strtol(env, &end, 10);
    if (end != nullptr && *end == '\0' && ms >= 0) return static_cast<double>(ms) / 1000.0;
  }
  return 1.0;
}

}  // namespace

Progress::Progress() : Progress(&std::cerr, isatty(2) == 1, DelaySeconds()) {}

Progress::Progress(std::ostream* out, bool tty, double delay_seconds)
    : out_(out), tty_(tty), delay_s_(delay_seconds), start_(std::chrono::steady_clock::now()) {}

double Progress::Elapsed() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void Progress::Show(const std::string& text) {
  if (!tty_) return;
  const double s = Elapsed();
  if (s < delay_s_) return;
  if (shown_ && s - last_draw_s_ < 0.1) return;
  *out_ << "\r\033[K" << text << std::flush;
  shown_ = true;
  last_draw_s_ = s;
}

void Progress::Step(size_t i, size_t n, const std::string& label) {
  if (!tty_) return;
  // Each step is drawn (a check's steps are few and slow).
  last_draw_s_ = -1;
  Show("[" + std::to_string(i) + "/" + std::to_string(n) + "] " + label);
}

void Progress::Clear() {
  if (shown_) *out_ << "\r\033[K" << std::flush;
  shown_ = false;
}

}  // namespace memplan
