#ifndef MEMPLAN_PLANNER_STATUS_H_
#define MEMPLAN_PLANNER_STATUS_H_

#include <cstddef>
#include <string>
#include <utility>

#include "planner/text.h"

namespace memplan {

/// Outcome of an operation that can fail on bad input: ok, or a one-line
/// message that names the place (file, node, tensor).
class [[nodiscard]] Status {
 public:
  Status() = default;
  /// A failed status carrying `message`. Control characters (which a
  /// hostile model can put in its names) and bytes that are not UTF-8 are
  /// escaped as \xNN, so a message is always one printable line; a message
  /// longer than kMaxMessageBytes keeps its start (the file, the node) and
  /// its end (what is wrong) around "...".
  static Status Error(std::string message) { return Status(OneLine(std::move(message))); }
  static constexpr size_t kMaxMessageBytes = 1000;
  bool ok() const { return !failed_; }
  const std::string& message() const { return message_; }

 private:
  explicit Status(std::string m) : failed_(true), message_(std::move(m)) {}
  static std::string OneLine(std::string m) {
    std::string line = PrintableText(m);
    if (line.size() <= kMaxMessageBytes) return line;
    const std::string head = Clip(line, 600);
    size_t tail = line.size() - 300;
    while (tail < line.size() && (static_cast<unsigned char>(line[tail]) & 0xc0) == 0x80) ++tail;
    return head + " " + line.substr(tail);
  }
  bool failed_ = false;
  std::string message_;
};

/// A value or an error message.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}          // NOLINT(runtime/explicit)
  Result(Status status) : status_(std::move(status)) {}  // NOLINT
  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  const std::string& message() const { return status_.message(); }
  T& value() { return value_; }
  const T& value() const { return value_; }
  T* operator->() { return &value_; }
  const T* operator->() const { return &value_; }

 private:
  T value_{};
  Status status_;
};

}  // namespace memplan

#endif  // MEMPLAN_PLANNER_STATUS_H_
