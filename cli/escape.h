#ifndef MEMPLAN_CLI_ESCAPE_H_
#define MEMPLAN_CLI_ESCAPE_H_

#include <string>

namespace memplan {

/// `s` as a double-quoted Python string literal: quotes, backslashes and
/// every character outside printable ASCII escaped (\xNN, \uNNNN,
/// \UNNNNNNNN), so no model-supplied text can end the literal.
[[nodiscard]] std::string PythonString(const std::string& s);

/// `s` as literal Markdown text inside a line (table cells, after "## " or "- "):
/// Markdown and HTML punctuation backslash-escaped, control characters and
/// bytes that are not UTF-8 shown as \xNN, newlines as spaces, and cut to
/// `max_bytes` with "..." so that a long name cannot break a table row.
[[nodiscard]] std::string MarkdownText(const std::string& s, size_t max_bytes = 160);

}  // namespace memplan

#endif  // MEMPLAN_CLI_ESCAPE_H_
