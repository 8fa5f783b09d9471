#include "cli/markup.h"

#include <cstdlib>
#include <sstream>

#include "cli/escape.h"
#include "cli/format.h"
#include "planner/text.h"

namespace memplan {

std::string XmlEscape(const std::string& text) {
  // Control characters and bytes that are not UTF-8 first become \xNN
  // (XML 1.0 forbids most C0 characters, and the page says UTF-8).
  const std::string printable =
      ValidUtf8(text) && !HasControlChar(text) ? text : PrintableText(text);
  std::string out;
  out.reserve(printable.size());
  for (unsigned char ch : printable) {
    switch (ch) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out += static_cast<char>(ch);
    }
  }
  return out;
}

std::string MarkdownCell(const std::string& text) { return MarkdownText(text); }

std::string MarkdownTable(const std::vector<std::string>& header,
                          const std::vector<std::vector<std::string>>& rows,
                          const std::vector<bool>& right) {
  std::ostringstream os;
  os << "|";
  for (const std::string& h : header) {
    os << " " << MarkdownCell(h) << " |";
  }
  os << "\n|";
  for (size_t i = 0; i < header.size(); ++i) {
    os << (i < right.size() && right[i] ? " ---: |" : " --- |");
  }
  os << "\n";
  for (const auto& row : rows) {
    os << "|";
    for (size_t i = 0; i < header.size(); ++i) {
      os << " " << (i < row.size() ? MarkdownCell(row[i]) : std::string()) << " |";
    }
    os << "\n";
  }
  return os.str();
}

std::string HtmlTable(const std::vector<std::string>& header,
                      const std::vector<std::vector<std::string>>& rows,
                      const std::vector<bool>& right) {
  std::ostringstream os;
  os << "<table>\n<thead><tr>";
  for (size_t i = 0; i < header.size(); ++i) {
    os << (i < right.size() && right[i] ? "<th class=\"num\">" : "<th>") << XmlEscape(header[i])
       << "</th>";
  }
  os << "</tr></thead>\n<tbody>\n";
  for (const auto& row : rows) {
    os << "<tr>";
    for (size_t i = 0; i < header.size(); ++i) {
      os << (i < right.size() && right[i] ? "<td class=\"num\">" : "<td>")
         << XmlEscape(i < row.size() ? row[i] : std::string()) << "</td>";
    }
    os << "</tr>\n";
  }
  os << "</tbody>\n</table>\n";
  return os.str();
}

std::string HtmlPage(const std::string& title, const std::string& body_html) {
  std::ostringstream os;
  os << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>"
     << XmlEscape(title) << "</title>\n<style>\n"
     << "body{font-family:'DejaVu Sans',Arial,sans-serif;margin:24px;color:#222;"
        "max-width:1260px}\n"
     << "h1{font-size:22px}h2{font-size:18px;margin-top:32px}\n"
     << "table{border-collapse:collapse;margin:8px 0 16px}\n"
     << "th,td{border:1px solid #ccc;padding:4px 10px;text-align:left}\n"
     << "th{background:#f0f0f0}td.num,th.num{text-align:right;"
        "font-variant-numeric:tabular-nums}\n"
     << ".pass{color:#1a7f37;font-weight:bold}.fail{color:#cf222e;font-weight:bold}\n"
     << "svg{max-width:100%;height:auto}\n"
     << "</style>\n</head>\n<body>\n"
     << body_html << "</body>\n</html>\n";
  return os.str();
}

std::string JUnitXml(const std::string& suite, const std::vector<JUnitCase>& cases) {
  int failures = 0;
  double total = 0;
  for (const JUnitCase& c : cases) {
    if (!c.failure_message.empty()) {
      ++failures;
    }
    total += c.seconds;
  }
  char t[32];
  std::ostringstream os;
  std::snprintf(t, sizeof t, "%.3f", total);
  os << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  os << "<testsuites name=\"" << XmlEscape(suite) << "\" tests=\"" << cases.size()
     << "\" failures=\"" << failures << "\" errors=\"0\" time=\"" << t << "\">\n";
  os << "  <testsuite name=\"" << XmlEscape(suite) << "\" tests=\"" << cases.size()
     << "\" failures=\"" << failures << "\" errors=\"0\" skipped=\"0\" time=\"" << t << "\">\n";
  for (const JUnitCase& c : cases) {
    std::snprintf(t, sizeof t, "%.3f", c.seconds);
    os << "    <testcase name=\"" << XmlEscape(c.name) << "\" classname=\""
       << XmlEscape(c.classname) << "\" time=\"" << t << "\"";
    if (c.failure_message.empty() && c.system_out.empty()) {
      os << "/>\n";
      continue;
    }
    os << ">\n";
    if (!c.failure_message.empty()) {
      os << "      <failure type=\"" << XmlEscape(c.failure_type) << "\" message=\""
         << XmlEscape(c.failure_message) << "\">" << XmlEscape(c.failure_text) << "</failure>\n";
    }
    if (!c.system_out.empty()) {
      os << "      <system-out>" << XmlEscape(c.system_out) << "</system-out>\n";
    }
    os << "    </testcase>\n";
  }
  os << "  </testsuite>\n</testsuites>\n";
  return os.str();
}

namespace {

// Workflow command escaping: data escapes % CR LF; properties also ':' and ','.
std::string GithubEscape(const std::string& text, bool property) {
  // Line breaks stay (as %0A); other control characters (an ESC sequence in
  // a name) and bytes that are not UTF-8 become \xNN.
  std::string s;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find_first_of("\r\n", start);
    if (end == std::string::npos) end = text.size();
    s += PrintableText(text.substr(start, end - start));
    if (end < text.size()) s += text[end];
    start = end + 1;
  }
  std::string out;
  for (char ch : s) {
    if (ch == '%') {
      out += "%25";
    } else if (ch == '\r') {
      out += "%0D";
    } else if (ch == '\n') {
      out += "%0A";
    } else if (property && ch == ':') {
      out += "%3A";
    } else if (property && ch == ',') {
      out += "%2C";
    } else {
      out += ch;
    }
  }
  return out;
}

}  // namespace

std::string GithubAnnotation(const std::string& level, const std::string& file,
                             const std::string& title, const std::string& message) {
  std::string props;
  if (!file.empty()) {
    props += "file=" + GithubEscape(file, true);
  }
  if (!title.empty()) {
    props += (props.empty() ? "" : ",") + ("title=" + GithubEscape(title, true));
  }
  return "::" + level + (props.empty() ? "" : " " + props) + "::" + GithubEscape(message, false) +
         "\n";
}

bool InGithubActions() {
  const char* v = std::getenv("GITHUB_ACTIONS");
  return v != nullptr && std::string(v) == "true";
}
}  // namespace memplan
