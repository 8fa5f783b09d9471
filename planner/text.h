#ifndef MEMPLAN_PLANNER_TEXT_H_
#define MEMPLAN_PLANNER_TEXT_H_

#include <cstddef>
#include <string>
#include <vector>

namespace memplan {

/// True when `s` is well-formed UTF-8 (no overlong forms, surrogates or
/// code points past U+10FFFF).
[[nodiscard]] bool ValidUtf8(const std::string& s);

/// True when `s` holds a C0 or C1 control character or DEL (U+0000-U+001F,
/// U+007F, U+0080-U+009F as UTF-8): what a terminal may read as a command;
/// or a bidi control or line separator (U+061C, U+200E-U+200F,
/// U+2028-U+202E, U+2066-U+2069), which reorders what is displayed.
[[nodiscard]] bool HasControlChar(const std::string& s);

/// `s` cut to at most `max_bytes` bytes (at a UTF-8 character boundary)
/// with "..." appended when it was longer: for echoing input in messages.
[[nodiscard]] std::string Clip(const std::string& s, size_t max_bytes = 200);

/// `s` with control characters (as HasControlChar finds them) and bytes that
/// are not UTF-8 written as \xNN: safe to print on a terminal.
[[nodiscard]] std::string PrintableText(const std::string& s);

/// True when `s` ends with `suffix`.
[[nodiscard]] bool EndsWith(const std::string& s, const std::string& suffix);

/// The non-empty items of a comma-separated list ("a,,b," -> a, b).
[[nodiscard]] std::vector<std::string> SplitList(const std::string& s);

/// Levenshtein distance between a and b (for "did you mean" suggestions).
[[nodiscard]] size_t EditDistance(const std::string& a, const std::string& b);

}  // namespace memplan

#endif  // MEMPLAN_PLANNER_TEXT_H_
