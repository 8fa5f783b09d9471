#ifndef MEMPLAN_CLI_PROGRESS_H_
#define MEMPLAN_CLI_PROGRESS_H_

#include <chrono>
#include <ostream>
#include <string>

namespace memplan {

/// A one-line progress report on stderr, redrawn in place ("\r", erase line),
/// only when stderr is a terminal and the work has run for a while (one
/// second; MEMPLAN_PROGRESS_DELAY_MS sets another); silent when stderr is a
/// pipe or a file, so that piped and captured output never carries it.
class Progress {
 public:
  Progress();
  /// The same on `out`, a terminal when `tty` (for tests).
  Progress(std::ostream* out, bool tty, double delay_seconds);
  ~Progress() { Clear(); }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  /// Shows `text` (redrawn at most ten times a second) once the delay has passed.
  void Show(const std::string& text);
  /// Shows "[i/n] label".
  void Step(size_t i, size_t n, const std::string& label);
  /// Erases the line, if one is shown (before anything else is printed).
  void Clear();
  /// Seconds since the work started.
  [[nodiscard]] double Elapsed() const;

 private:
  std::ostream* out_;
  bool tty_;
  double delay_s_;
  bool shown_ = false;
  double last_draw_s_ = -1;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace memplan

#endif  // MEMPLAN_CLI_PROGRESS_H_
