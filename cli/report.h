#ifndef MEMPLAN_CLI_REPORT_H_
#define MEMPLAN_CLI_REPORT_H_

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/check_verdict.h"
#include "cli/markup.h"
#include "cli/timeline_svg.h"
#include "planner/plan.h"
#include "planner/status.h"

namespace memplan {

/// The renderers of `check`'s cases: terminal table, JSON, Markdown, JUnit,
/// GitHub annotations, HTML with the timelines.

/// `cases` in a --format: table, json, md, junit or html.
std::string Render(const std::string& format, const std::vector<ReportCase>& cases,
                   const std::string& title);
/// The --report format of a file name (.json, .md, .xml, .html, .txt).
Result<std::string> FormatOfPath(const std::string& path);

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
