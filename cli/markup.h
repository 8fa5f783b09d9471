#ifndef MEMPLAN_CLI_MARKUP_H_
#define MEMPLAN_CLI_MARKUP_H_

/// Markup building blocks shared by the reports and the chart: XML, Markdown
/// and HTML tables, JUnit XML, GitHub Actions annotations.

#include <string>
#include <vector>

namespace memplan {

/// Escapes & < > " ' and drops characters XML 1.0 forbids.
std::string XmlEscape(const std::string& text);
/// A Markdown table cell: escapes '|' and turns newlines into spaces.
std::string MarkdownCell(const std::string& text);
/// A GitHub-flavoured Markdown table; `right` marks right-aligned columns.
std::string MarkdownTable(const std::vector<std::string>& header,
                          const std::vector<std::vector<std::string>>& rows,
                          const std::vector<bool>& right = {});
/// An HTML table (cells escaped); `right` marks right-aligned columns.
std::string HtmlTable(const std::vector<std::string>& header,
                      const std::vector<std::vector<std::string>>& rows,
                      const std::vector<bool>& right = {});
/// A self-contained HTML page around `body_html` (no external resources).
std::string HtmlPage(const std::string& title, const std::string& body_html);

/// One JUnit test case; a non-empty failure_message makes it a <failure>.
struct JUnitCase {
  std::string name;
  std::string classname;
  double seconds = 0;
  std::string failure_type;
  std::string failure_message;
  std::string failure_text;
  std::string system_out;
};
/// A JUnit XML document with one <testsuite>.
std::string JUnitXml(const std::string& suite, const std::vector<JUnitCase>& cases);

/// One GitHub Actions workflow command line: `::error file=F,title=T::message`.
std::string GithubAnnotation(const std::string& level, const std::string& file,
                             const std::string& title, const std::string& message);
/// True when the environment says we run in GitHub Actions (GITHUB_ACTIONS=true).
bool InGithubActions();

}  // namespace memplan

#endif  // MEMPLAN_CLI_MARKUP_H_
