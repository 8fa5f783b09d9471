#ifndef MEMPLAN_CLI_XML_TEST_UTIL_H_
#define MEMPLAN_CLI_XML_TEST_UTIL_H_

// Test helper: a small XML well-formedness checker (tags nest and match, attributes
// are quoted, '&' starts a known entity, '<' never appears in text or attributes).
#include <cctype>
#include <string>
#include <vector>

namespace memplan {
namespace testing {

/// True when `xml` is well-formed; otherwise `err` says where it breaks.
inline bool XmlWellFormed(const std::string& xml, std::string* err) {
  std::vector<std::string> stack;
  size_t i = 0;
  int roots = 0;
  auto fail = [&](const std::string& m) {
    *err = m + " at byte " + std::to_string(i);
    return false;
  };
  auto entity_ok = [&](size_t at) {
    static const char* kNames[] = {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"};
    for (const char* n : kNames) {
      if (xml.compare(at, std::char_traits<char>::length(n), n) == 0) return true;
    }
    if (xml.compare(at, 2, "&#") == 0) return xml.find(';', at) != std::string::npos;
    return false;
  };
  auto name_char = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == ':' ||
           c == '.';
  };
  while (i < xml.size()) {
    if (xml[i] == '&') {
      if (!entity_ok(i)) return fail("bad entity");
      ++i;
      continue;
    }
    if (xml[i] != '<') {
      if (stack.empty() && !std::isspace(static_cast<unsigned char>(xml[i])))
        return fail("text outside the root");
      ++i;
      continue;
    }
    if (xml.compare(i, 4, "<!--") == 0) {
      const size_t end = xml.find("-->", i);
      if (end == std::string::npos) return fail("open comment");
      i = end + 3;
      continue;
    }
    if (xml.compare(i, 2, "<?") == 0) {
      const size_t end = xml.find("?>", i);
      if (end == std::string::npos) return fail("open declaration");
      i = end + 2;
      continue;
    }
    if (xml.compare(i, 2, "</") == 0) {
      size_t j = i + 2;
      while (j < xml.size() && name_char(xml[j])) ++j;
      const std::string name = xml.substr(i + 2, j - i - 2);
      while (j < xml.size() && std::isspace(static_cast<unsigned char>(xml[j]))) ++j;
      if (j >= xml.size() || xml[j] != '>') return fail("bad end tag");
      if (stack.empty() || stack.back() != name) return fail("mismatched </" + name + ">");
      stack.pop_back();
      i = j + 1;
      continue;
    }
    size_t j = i + 1;
    while (j < xml.size() && name_char(xml[j])) ++j;
    const std::string name = xml.substr(i + 1, j - i - 1);
    if (name.empty()) return fail("bad tag");
    std::vector<std::string> attrs;
    while (true) {
      while (j < xml.size() && std::isspace(static_cast<unsigned char>(xml[j]))) ++j;
      if (j >= xml.size()) return fail("open tag");
      if (xml[j] == '>' || xml.compare(j, 2, "/>") == 0) break;
      size_t k = j;
      while (k < xml.size() && name_char(xml[k])) ++k;
      if (k == j) return fail("bad attribute in <" + name + ">");
      const std::string attr = xml.substr(j, k - j);
      for (const std::string& a : attrs) {
        if (a == attr) return fail("duplicate attribute " + attr);
      }
      attrs.push_back(attr);
      if (k + 1 >= xml.size() || xml[k] != '=' || (xml[k + 1] != '"' && xml[k + 1] != '\''))
        return fail("unquoted attribute " + attr);
      const char q = xml[k + 1];
      size_t e = k + 2;
      while (e < xml.size() && xml[e] != q) {
        if (xml[e] == '<') return fail("'<' in attribute " + attr);
        if (xml[e] == '&' && !entity_ok(e)) return fail("bad entity in attribute " + attr);
        ++e;
      }
      if (e >= xml.size()) return fail("open attribute");
      j = e + 1;
    }
    if (stack.empty()) ++roots;
    if (roots > 1) return fail("two roots");
    if (xml[j] == '>') {
      stack.push_back(name);
      i = j + 1;
    } else {
      i = j + 2;
    }
  }
  if (!stack.empty()) {
    *err = "unclosed <" + stack.back() + ">";
    return false;
  }
  if (roots != 1) {
    *err = "no root element";
    return false;
  }
  return true;
}

}  // namespace testing
}  // namespace memplan

#endif  // MEMPLAN_CLI_XML_TEST_UTIL_H_
