#include "planner/text.h"

#include <algorithm>
#include <vector>

namespace memplan {
namespace {

// Length of the well-formed UTF-8 sequence at s[i], or 0 when it is not one.
size_t Utf8Length(const std::string& s, size_t i, unsigned* code_point) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char b0 = byte(i);
  if (b0 < 0x80) {
    *code_point = b0;
    return 1;
  }
  size_t n = 0;
  unsigned cp = 0;
  unsigned min = 0;
  if ((b0 & 0xe0) == 0xc0) {
    n = 2;
    cp = b0 & 0x1f;
    min = 0x80;
  } else if ((b0 & 0xf0) == 0xe0) {
    n = 3;
    cp = b0 & 0x0f;
    min = 0x800;
  } else if ((b0 & 0xf8) == 0xf0) {
    n = 4;
    cp = b0 & 0x07;
    min = 0x10000;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  *code_point = cp;
  return n;
}

// C0, DEL and C1 controls, and the characters that reorder or break the text
// around them on display: the bidi embeddings, overrides, isolates and marks
// (U+061C, U+200E-U+200F, U+202A-U+202E, U+2066-U+2069: "Trojan Source") and
// the Unicode line and paragraph separators (U+2028, U+2029).
bool IsControl(unsigned cp) {
  return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || cp == 0x61c || cp == 0x200e || cp == 0x200f ||
         (cp >= 0x2028 && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

}  // namespace

bool ValidUtf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    unsigned cp = 0;
    const size_t n = Utf8Length(s, i, &cp);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

bool HasControlChar(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    unsigned cp = 0;
    const size_t n = Utf8Length(s, i, &cp);
    if (n == 0) {
      ++i;
      continue;
    }
    if (IsControl(cp)) return true;
    i += n;
  }
  return false;
}

std::string Clip(const std::string& s, size_t max_bytes) {
  if (s.size() <= max_bytes) return s;
  size_t cut = max_bytes;
  // Back up to the start of a UTF-8 character.
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xc0) == 0x80) --cut;
  return s.substr(0, cut) + "...";
}

std::string PrintableText(const std::string& s) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    unsigned cp = 0;
    const size_t n = Utf8Length(s, i, &cp);
    if (n != 0 && !IsControl(cp)) {
      out.append(s, i, n);
      i += n;
      continue;
    }
    const size_t bad = n == 0 ? 1 : n;
    for (size_t k = 0; k < bad; ++k) {
      const unsigned char u = static_cast<unsigned char>(s[i + k]);
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    }
    i += bad;
  }
  return out;
}

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::vector<std::string> SplitList(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t comma = s.find(',', start);
    if (comma == std::string::npos) comma = s.size();
    if (comma > start) out.push_back(s.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

}  // namespace memplan
