#ifndef MEMPLAN_PLANNER_STATUS_H_
#define MEMPLAN_PLANNER_STATUS_H_

#include <string>
#include <utility>

namespace memplan {

/// Outcome of an operation that can fail on bad input: ok, or a one-line
/// message that names the place (file, node, tensor).
class [[nodiscard]] Status {
 public:
  Status() = default;
  /// A failed status carrying `message`. Control characters (which a
  /// hostile model can put in its names) are escaped as \xNN, so a message
  /// is always one printable line.
  static Status Error(std::string message) { return Status(OneLine(std::move(message))); }
  bool ok() const { return !failed_; }
  const std::string& message() const { return message_; }

 private:
  explicit Status(std::string m) : failed_(true), message_(std::move(m)) {}
  static std::string OneLine(std::string m) {
    size_t bad = 0;
    for (char c : m) bad += IsControl(c) ? 1 : 0;
    if (bad == 0) return m;
    static const char kHex[] = "0123456789abcdef";
    std::string out;
    out.reserve(m.size() + 3 * bad);
    for (char c : m) {
      if (!IsControl(c)) {
        out += c;
        continue;
      }
      const unsigned char u = static_cast<unsigned char>(c);
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    }
    return out;
  }
  static bool IsControl(char c) {
    const unsigned char u = static_cast<unsigned char>(c);
    return u < 0x20 || u == 0x7f;
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
