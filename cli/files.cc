#include "cli/files.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>

#include "planner/text.h"

namespace memplan {
namespace {

std::string KindOf(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  return "not a regular file";
}

bool WriteAll(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// "path:LINE:COL" of byte `offset` of `text`.
std::string Where(const std::string& path, const std::string& text, size_t offset) {
  size_t line = 1, col = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return path + ":" + std::to_string(line) + ":" + std::to_string(col);
}

std::string& NotedInput() {
  static std::string path;
  return path;
}

}  // namespace

void NoteInput(const std::string& path) { NotedInput() = path; }

std::string OutOfMemoryMessage() {
  std::string limit;
  struct rlimit rl;
  if (::getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    limit = "the address-space limit (ulimit -v) of " + std::to_string(rl.rlim_cur >> 20) + " MiB";
  } else {
    const long pages = ::sysconf(_SC_PHYS_PAGES);
    const long page = ::sysconf(_SC_PAGESIZE);
    limit = "this machine's " +
            std::to_string((static_cast<int64_t>(pages) * static_cast<int64_t>(page)) >> 20) +
            " MiB";
  }
  const std::string& path = NotedInput();
  return (path.empty() ? std::string() : path + ": ") +
         "out of memory: planning it needs more than " + limit;
}

Result<nlohmann::json> ParseJsonDocument(const std::string& text, const std::string& path) {
  // Pre-scan: NUL bytes and the nesting depth (the parser and the value's
  // destructor recurse, so a deep document must never reach them).
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\0') return Status::Error(Where(path, text, i) + ": invalid JSON: a NUL byte");
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) {
        return Status::Error(Where(path, text, i) + ": invalid JSON: nested deeper than " +
                             std::to_string(kMaxJsonDepth) + " levels");
      }
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  // Duplicate keys: the parser would keep the last silently.
  std::vector<std::set<std::string>> keys;  // Per open object.
  std::string duplicate;
  const nlohmann::json::parser_callback_t on_event = [&](int, nlohmann::json::parse_event_t event,
                                                         nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    if (event == E::object_start) {
      keys.emplace_back();
    } else if (event == E::object_end) {
      if (!keys.empty()) keys.pop_back();
    } else if (event == E::key && !keys.empty() && duplicate.empty() &&
               !keys.back().insert(parsed.get<std::string>()).second) {
      duplicate = parsed.get<std::string>();
    }
    return true;
  };
  try {
    nlohmann::json doc = nlohmann::json::parse(text, on_event);
    if (!duplicate.empty()) {
      return Status::Error(path + ": invalid JSON: the key '" + PrintableText(Clip(duplicate, 60)) +
                           "' appears twice in one object");
    }
    return doc;
  } catch (const nlohmann::json::parse_error& e) {
    std::string what = e.what();
    const size_t colon = what.rfind(": ");
    if (colon != std::string::npos) what = what.substr(colon + 2);
    return Status::Error(Where(path, text, e.byte == 0 ? 0 : e.byte - 1) +
                         ": invalid JSON: " + Clip(what, 200));
  } catch (const nlohmann::json::exception& e) {
    // A number too large for a double ("number overflow parsing '1E400'"):
    // the parser names the literal, not its place; find it in the text.
    std::string what = e.what();
    const size_t close = what.rfind('\'');
    const size_t open = close == std::string::npos ? close : what.rfind('\'', close - 1);
    size_t at = 0;
    if (open != std::string::npos && close > open + 1) {
      const size_t found = text.find(what.substr(open + 1, close - open - 1));
      if (found != std::string::npos) at = found;
    }
    const size_t bracket = what.find("] ");
    if (bracket != std::string::npos) what = what.substr(bracket + 2);
    return Status::Error(Where(path, text, at) + ": invalid JSON: " + Clip(what, 200));
  }
}

Result<std::string> ReadRegularFile(const std::string& path, const std::string& what,
                                    int64_t max_bytes) {
  NoteInput(path);
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    return Status::Error(path + ": cannot open " + what + " (" + std::strerror(errno) + ")");
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return Status::Error(path + ": cannot read " + what);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::Error(path + ": " + what + " is " + KindOf(st.st_mode) + ", not a regular file");
  }
  if (st.st_size > max_bytes) {
    ::close(fd);
    return Status::Error(path + ": " + what + " is larger than " + std::to_string(max_bytes) +
                         " bytes");
  }
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::read(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ::close(fd);
      return Status::Error(path + ": cannot read " + what + " (" + std::strerror(errno) + ")");
    }
    if (n == 0) break;  // Shrank while reading: keep what is there.
    done += static_cast<size_t>(n);
  }
  text.resize(done);
  ::close(fd);
  return text;
}

Status CheckOutputIsNotInput(const std::string& output, const std::vector<std::string>& inputs) {
  struct stat out;
  if (::stat(output.c_str(), &out) != 0) return Status();  // Does not exist yet.
  for (const std::string& in : inputs) {
    struct stat st;
    if (in.empty() || ::stat(in.c_str(), &st) != 0) continue;
    if (st.st_dev == out.st_dev && st.st_ino == out.st_ino && S_ISREG(out.st_mode)) {
      return Status::Error(output + ": this output is the input " + in +
                           "; writing it would destroy the input");
    }
  }
  return Status();
}

Status CheckOutputs(const std::vector<std::string>& outputs,
                    const std::vector<std::string>& inputs) {
  std::vector<std::pair<std::string, std::string>> seen;  // Outputs so far: normalised, given.
  for (const std::string& out : outputs) {
    if (out.empty()) continue;
    Status s = CheckOutputIsNotInput(out, inputs);
    if (!s.ok()) return s;
    struct stat st;
    if (::stat(out.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISCHR(st.st_mode)) {
      return Status::Error(out + ": cannot write: it is " + KindOf(st.st_mode));
    }
    // A device (/dev/null) may take several outputs.
    if (::stat(out.c_str(), &st) == 0 && S_ISCHR(st.st_mode)) continue;
    std::error_code ec;
    const std::string norm =
        std::filesystem::weakly_canonical(std::filesystem::absolute(out, ec), ec).string();
    for (const auto& [earlier_norm, earlier] : seen) {
      if (earlier_norm == norm || !CheckOutputIsNotInput(out, {earlier}).ok()) {
        return Status::Error(out + ": named twice as an output (also '" + earlier +
                             "'): one would replace the other");
      }
    }
    seen.emplace_back(norm, out);
  }
  return Status();
}

Status WriteFileAtomically(const std::string& path, const std::string& text) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    if (!S_ISCHR(st.st_mode)) {
      return Status::Error(path + ": cannot write: it is " + KindOf(st.st_mode));
    }
    const int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return Status::Error(path + ": cannot write (" + std::strerror(errno) + ")");
    const bool ok = WriteAll(fd, text);
    ::close(fd);
    return ok ? Status() : Status::Error(path + ": write failed");
  }
  std::string tmp = path + ".tmp.XXXXXX";
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) return Status::Error(path + ": cannot write (" + std::strerror(errno) + ")");
  // mkstemp makes the file 0600: give it the mode a new file would get.
  const mode_t mask = ::umask(0);
  ::umask(mask);
  bool ok = ::fchmod(fd, 0666 & ~mask) == 0 && WriteAll(fd, text);
  ok = (::close(fd) == 0) && ok;
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(tmp.c_str());
    return Status::Error(path + ": write failed (" + why + ")");
  }
  return Status();
}

}  // namespace memplan
