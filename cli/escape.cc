#include "cli/escape.h"

#include <cstdio>

#include "planner/text.h"

namespace memplan {

std::string PythonString(const std::string& s) {
  std::string out = "\"";
  char buf[16];
  for (size_t i = 0; i < s.size();) {
    const unsigned char b0 = static_cast<unsigned char>(s[i]);
    if (b0 == '"' || b0 == '\\') {
      out += '\\';
      out += static_cast<char>(b0);
      ++i;
      continue;
    }
    // A backtick could end a Markdown code block around the snippet.
    if (b0 >= 0x20 && b0 < 0x7f && b0 != '`') {
      out += static_cast<char>(b0);
      ++i;
      continue;
    }
    // Decode one UTF-8 character when well formed; else escape the byte.
    size_t n = b0 < 0x80 ? 1 : b0 >= 0xf0 ? 4 : b0 >= 0xe0 ? 3 : b0 >= 0xc0 ? 2 : 1;
    if (n > 1 && i + n <= s.size() && ValidUtf8(s.substr(i, n))) {
      unsigned cp = b0 & (n == 2 ? 0x1f : n == 3 ? 0x0f : 0x07);
      for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3f);
      if (cp <= 0xffff) {
        std::snprintf(buf, sizeof buf, "\\u%04x", cp);
      } else {
        std::snprintf(buf, sizeof buf, "\\U%08x", cp);
      }
      i += n;
    } else {
      std::snprintf(buf, sizeof buf, "\\x%02x", b0);
      ++i;
    }
    out += buf;
  }
  return out + "\"";
}

std::string MarkdownText(const std::string& s, size_t max_bytes) {
  const std::string text = Clip(PrintableText(s), max_bytes);
  std::string out;
  out.reserve(text.size());
  // '>' is harmless once '<' is escaped; the text never starts a line.
  for (char ch : text) {
    switch (ch) {
      case '\\':
      case '`':
      case '*':
      case '_':
      case '[':
      case ']':
      case '<':
      case '|':
      case '~':
      case '&':
        out += '\\';
        out += ch;
        break;
      default:
        out += ch;
    }
  }
  return out;
}

}  // namespace memplan
