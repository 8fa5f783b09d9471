#ifndef MEMPLAN_CLI_FILES_H_
#define MEMPLAN_CLI_FILES_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "planner/status.h"

namespace memplan {

/// Reads `path` whole when it is a regular file of at most `max_bytes`;
/// `what` names it in errors ("the budget file"). A FIFO, a device or a
/// directory is refused without blocking (opened non-blocking, checked
/// with fstat before any read).
[[nodiscard]] Result<std::string> ReadRegularFile(const std::string& path, const std::string& what,
                                                  int64_t max_bytes);

/// Refuses an output path that names the same file (device and inode) as
/// one of `inputs`: writing it would destroy the input.
[[nodiscard]] Status CheckOutputIsNotInput(const std::string& output,
                                           const std::vector<std::string>& inputs);

/// Checks the outputs of one run before anything is planned: none names an
/// input (CheckOutputIsNotInput), none is an existing FIFO, socket or
/// directory, and no two name the same file (the second would silently
/// replace the first).
[[nodiscard]] Status CheckOutputs(const std::vector<std::string>& outputs,
                                  const std::vector<std::string>& inputs);

/// Writes `text` to `path` atomically: a temporary file in the same folder,
/// then rename, so a failed run never leaves a half-written file. A
/// character device (/dev/null, /dev/stdout) is written directly; a FIFO,
/// socket or directory is refused.
[[nodiscard]] Status WriteFileAtomically(const std::string& path, const std::string& text);

/// Remembers `path` as the input being read, for the out-of-memory message.
void NoteInput(const std::string& path);
/// The out-of-memory message: names the input being read (if any) and the
/// memory limit of this process.
[[nodiscard]] std::string OutOfMemoryMessage();

/// Most levels of nesting accepted in a JSON input (budget file, baseline).
constexpr int kMaxJsonDepth = 64;
/// Largest JSON input read (budget file, baseline).
constexpr int64_t kMaxJsonBytes = int64_t{64} << 20;

/// Parses `text`, the contents of `path`: errors are one line with the
/// path, line and column. A NUL byte, nesting deeper than kMaxJsonDepth or
/// anything after the value is an error; no value is echoed in full.
[[nodiscard]] Result<nlohmann::json> ParseJsonDocument(const std::string& text,
                                                       const std::string& path);

}  // namespace memplan

#endif  // MEMPLAN_CLI_FILES_H_
