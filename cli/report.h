#ifndef MEMPLAN_CLI_REPORT_H_
#define MEMPLAN_CLI_REPORT_H_

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/timeline_svg.h"
#include "planner/plan.h"
#include "planner/status.h"

namespace memplan {

// ---- Generic building blocks (shared by plan, check and advise) ----

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

// ---- Budget checks ----

/// Which peak a budget is compared with.
enum class Metric { kAllocated, kReserved, kDevice };
const char* MetricName(Metric m);
Result<Metric> ParseMetric(const std::string& s);
/// The bytes of `p` that `m` names.
int64_t MetricBytes(const Peak& p, Metric m);

/// The verdict on one configuration.
enum class CheckStatus { kPass, kNoBudget, kOverBudget, kRegression };
/// "pass", "no_budget", "over_budget", "regression".
const char* CheckStatusName(CheckStatus s);

/// One planned configuration, its budget and its baseline.
/// A pass with less than this share of the budget left is a near miss.
constexpr double kNearMissPercent = 5.0;

struct ReportCase {
  std::string name;   ///< Stable id, used to match baselines.
  std::string model;  ///< Model path as given.
  std::string file;   ///< Where annotations point (config file, else model).
  Plan plan;
  Metric metric = Metric::kDevice;
  int64_t budget_bytes = -1;             ///< -1: no budget.
  std::string budget_text;               ///< How the budget was written ("40GiB", "H100 - 10%").
  int64_t baseline_bytes = -1;           ///< The previous run's metric; -1: none.
  double max_increase_pct = 0;           ///< Allowed growth over the baseline.
  double seconds = 0;                    ///< Time spent planning.
  std::vector<MeasuredSample> measured;  ///< A recorded run drawn over the timeline.
  std::string measured_label;

  /// A recorded run's peaks (check --trace), gated instead of the plan's.
  std::string measured_from;  ///< The trace file; empty: gate the plan.
  Peak measured_peak;         ///< allocated, reserved, device (reserved + context).

  const Peak& gated_peak() const { return measured_from.empty() ? plan.peak : measured_peak; }
  int64_t value() const { return MetricBytes(gated_peak(), metric); }
  int64_t headroom() const { return budget_bytes - value(); }
  CheckStatus status() const;
  /// Passes with less than kNearMissPercent of the budget left: shown as a
  /// warning in every format.
  bool near_miss() const;
  /// "within 5% of the budget (headroom 197 MiB)" when near_miss(), else "".
  std::string near_miss_text() const;
  /// Percent growth over the baseline (0 when there is none).
  double increase_pct() const;
};

/// Writes `text` to `path`; the error names the path.

/// `cases` in a --format: table, json, md, junit or html.
std::string Render(const std::string& format, const std::vector<ReportCase>& cases,
                   const std::string& title);
/// The --report format of a file name (.json, .md, .xml, .html, .txt).
Result<std::string> FormatOfPath(const std::string& path);

/// "train b8 amp_bf16 adamw": the configuration in a few words.
std::string ConfigLabel(const Plan& plan);
/// Exit status of a set of cases: 1 if any failed, else 0.
int CheckExitCode(const std::vector<ReportCase>& cases);

/// The `check --format json` document (each case embeds its PlanJson).
nlohmann::json CheckJson(const std::vector<ReportCase>& cases);
/// Reads a previous `check --format json` document: name -> peak JSON.
Result<std::map<std::string, nlohmann::json>> ParseBaseline(const nlohmann::json& doc);
/// The terminal table of `check`.
std::string CheckTable(const std::vector<ReportCase>& cases);
/// Markdown for a PR comment or $GITHUB_STEP_SUMMARY: a table per model.
std::string CheckMarkdown(const std::string& title, const std::vector<ReportCase>& cases);
/// JUnit XML: one <testcase> per case, a <failure> when over budget or regressed.
std::string CheckJUnit(const std::string& suite, const std::vector<ReportCase>& cases);
/// GitHub Actions annotation lines (errors for failures, warnings near the budget).
std::string CheckAnnotations(const std::vector<ReportCase>& cases);
/// The chart style of a case: its name, and the budget line in the chart's terms
/// (a device budget minus the context is the limit for the reserved line).
TimelineStyle TimelineStyleFor(const ReportCase& c);
/// One HTML page: the summary table, then each case's breakdown and timeline SVG.
std::string CheckHtml(const std::string& title, const std::vector<ReportCase>& cases);
/// The timeline SVG document of the cases (one chart each, stacked).
std::string CheckTimelineSvg(const std::vector<ReportCase>& cases);

}  // namespace memplan

#endif  // MEMPLAN_CLI_REPORT_H_
