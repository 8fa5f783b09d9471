#ifndef MEMPLAN_PLANNER_STATUS_H_
#define MEMPLAN_PLANNER_STATUS_H_

#include <string>
#include <utility>

namespace memplan {

/// Outcome of an operation that can fail on bad input: ok, or a one-line
/// message that names the place (file, node, tensor).
class Status {
 public:
  Status() = default;
  /// A failed status carrying `message`.
  static Status Error(std::string message) { return Status(std::move(message)); }
  bool ok() const { return !failed_; }
  const std::string& message() const { return message_; }

 private:
  explicit Status(std::string m) : failed_(true), message_(std::move(m)) {}
  bool failed_ = false;
  std::string message_;
};

/// A value or an error message.
template <typename T>
class Result {
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
