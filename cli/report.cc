#include "cli/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "cli/escape.h"
#include "cli/format.h"
#include "cli/markup.h"
#include "cli/timeline_svg.h"
#include "planner/text.h"

namespace memplan {

namespace {

std::string Basename(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string Pct(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.1f%%", v);
  return buf;
}

// "+1.20 GiB" / "-300.0 MiB": signed headroom.
std::string SignedBytes(int64_t b) { return (b < 0 ? "-" : "+") + FormatBytes(b < 0 ? -b : b); }

std::string StatusText(const ReportCase& c) {
  switch (c.status()) {
    case CheckStatus::kPass:
      return c.near_miss() ? "pass, WARNING: " + c.near_miss_text() : "pass";
    case CheckStatus::kNoBudget:
      return "-";
    case CheckStatus::kOverBudget:
      return "OVER BUDGET";
    case CheckStatus::kRegression:
      return "REGRESSION";
  }
  return "?";
}

std::string BudgetCell(const ReportCase& c) {
  if (c.budget_bytes < 0) {
    return "-";
  }
  std::string s = FormatBytes(c.budget_bytes);
  if (!c.budget_text.empty() && c.budget_text != s) {
    s += " (" + c.budget_text + ")";
  }
  return s;
}

std::string BaselineCell(const ReportCase& c) {
  if (c.baseline_bytes < 0) {
    return "-";
  }
  return FormatBytes(c.baseline_bytes) + " (" + Pct(c.increase_pct()) + ")";
}

// The numbers behind a failure, one line.
std::string FailureText(const ReportCase& c) {
  std::ostringstream os;
  os << c.name << ": " << MetricName(c.metric) << " peak " << FormatBytes(c.value()) << " ("
     << c.value() << " bytes)";
  if (c.status() == CheckStatus::kOverBudget) {
    os << " exceeds the budget " << FormatBytes(c.budget_bytes) << " (" << c.budget_bytes
       << " bytes) by " << FormatBytes(-c.headroom());
  } else {
    char lim[32];
    std::snprintf(lim, sizeof lim, "%.1f%%", c.max_increase_pct);
    os << " grew " << Pct(c.increase_pct()) << " over the baseline "
       << FormatBytes(c.baseline_bytes) << " (allowed " << lim << ")";
  }
  if (c.measured_from.empty()) {
    os << "; peak at " << c.plan.peak.node << " (" << PhaseName(c.plan.peak.phase) << ")";
  } else {
    os << "; measured in " << c.measured_from << " (planned "
       << FormatBytes(c.plan.peak.*(c.metric == Metric::kAllocated  ? &Peak::allocated_bytes
                                    : c.metric == Metric::kReserved ? &Peak::reserved_bytes
                                                                    : &Peak::device_bytes))
       << ")";
  }
  return os.str();
}

}  // namespace

nlohmann::json CheckJson(const std::vector<ReportCase>& cases) {
  nlohmann::json doc;
  int passed = 0, over = 0, regressed = 0;
  nlohmann::json list = nlohmann::json::array();
  for (const ReportCase& c : cases) {
    const CheckStatus s = c.status();
    if (s == CheckStatus::kOverBudget) {
      ++over;
    }
    if (s == CheckStatus::kRegression) {
      ++regressed;
    }
    if (!CaseFailed(c)) {
      ++passed;
    }
    nlohmann::json j;
    j["name"] = c.name;
    j["model"] = c.model;
    j["status"] = CheckStatusName(s);
    j["near_miss"] = c.near_miss();
    if (c.near_miss()) j["warning"] = c.near_miss_text();
    j["metric"] = MetricName(c.metric);
    j["value_bytes"] = c.value();
    if (!c.measured_from.empty()) j["measured_from"] = c.measured_from;
    if (c.budget_bytes >= 0) {
      j["budget_bytes"] = c.budget_bytes;
      j["budget"] = c.budget_text;
      j["headroom_bytes"] = c.headroom();
    } else {
      j["budget_bytes"] = nullptr;
    }
    if (c.baseline_bytes >= 0) {
      j["baseline_bytes"] = c.baseline_bytes;
      j["increase_pct"] = c.increase_pct();
      j["max_increase_pct"] = c.max_increase_pct;
    }
    j["plan"] = PlanJson(c.model, c.plan);
    list.push_back(j);
  }
  doc["memplan_check"] = 1;
  doc["ok"] = CheckExitCode(cases) == 0;
  doc["summary"] = {
      {"total", cases.size()}, {"passed", passed}, {"over_budget", over}, {"regressed", regressed}};
  doc["checks"] = list;
  return doc;
}

Result<std::map<std::string, nlohmann::json>> ParseBaseline(const nlohmann::json& doc) {
  std::map<std::string, nlohmann::json> out;
  if (!doc.is_object() || !doc.contains("checks") || !doc["checks"].is_array()) {
    return Status::Error("not a 'memplan check --format json' document (no 'checks' list)");
  }
  // The document's version (CheckJson writes 1): a later one may mean other things.
  if (doc.contains("memplan_check") &&
      !(doc["memplan_check"].is_number_integer() && doc["memplan_check"].get<int64_t>() == 1)) {
    return Status::Error("'memplan_check' is " + Clip(doc["memplan_check"].dump(), 40) +
                         ": this memplan reads version 1");
  }
  const auto& checks = doc["checks"];
  for (size_t i = 0; i < checks.size(); ++i) {
    const auto& c = checks[i];
    const std::string where = "checks[" + std::to_string(i) + "]";
    if (!c.is_object() || !c.contains("name") || !c["name"].is_string()) {
      return Status::Error(where + ": no 'name'");
    }
    if (!c.contains("plan") || !c["plan"].is_object() || !c["plan"].contains("peak") ||
        !c["plan"]["peak"].is_object()) {
      return Status::Error(where + ": no 'plan.peak'");
    }
    const auto& peak = c["plan"]["peak"];
    for (const char* key : {"allocated_bytes", "reserved_bytes", "device_bytes"}) {
      // A byte count: 0 to 2^63-1 (-1 or 2^64-1 would disable the gate).
      const bool in_range = peak.contains(key) &&
                            ((peak[key].is_number_unsigned() &&
                              peak[key].get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX)) ||
                             (peak[key].is_number_integer() && !peak[key].is_number_unsigned() &&
                              peak[key].get<int64_t>() >= 0));
      if (!in_range) {
        return Status::Error(where + ": 'plan.peak." + key +
                             "' is not a byte count (an integer from 0 to 2^63-1)");
      }
    }
    const std::string& name = c["name"].get_ref<const std::string&>();
    if (out.count(name)) {
      return Status::Error(where + ": the name '" + PrintableText(Clip(name, 80)) +
                           "' is in the baseline twice (which one gates is not clear)");
    }
    out[name] = peak;
  }
  return out;
}

std::string CheckTable(const std::vector<ReportCase>& cases) {
  std::vector<std::vector<std::string>> rows;
  bool any_baseline = false;
  for (const ReportCase& c : cases) {
    any_baseline |= c.baseline_bytes >= 0;
  }
  std::vector<std::string> header = {"check",  "allocated", "reserved", "device",
                                     "budget", "headroom",  "status"};
  if (any_baseline) {
    header.insert(header.end() - 1, "baseline");
  }
  for (const ReportCase& c : cases) {
    const Peak& p = c.gated_peak();
    std::vector<std::string> r = {
        c.measured_from.empty() ? c.name : c.name + " (run " + c.measured_from + ")",

        FormatBytes(p.allocated_bytes),
        FormatBytes(p.reserved_bytes),
        FormatBytes(p.device_bytes),
        c.budget_bytes >= 0 ? FormatBytes(c.budget_bytes) : "-",
        c.budget_bytes >= 0 ? SignedBytes(c.headroom()) : "-",
        StatusText(c)};
    if (any_baseline) {
      r.insert(r.end() - 1, BaselineCell(c));
    }
    rows.push_back(r);
  }
  std::vector<size_t> width(header.size());
  for (size_t i = 0; i < header.size(); ++i) {
    width[i] = header[i].size();
  }
  for (const auto& r : rows) {
    for (size_t i = 0; i < r.size(); ++i) {
      width[i] = std::max(width[i], r[i].size());
    }
  }
  std::ostringstream os;
  auto line = [&](const std::vector<std::string>& r) {
    std::string s;
    for (size_t i = 0; i < r.size(); ++i) {
      const std::string pad(width[i] - r[i].size(), ' ');
      s += (i == 0 || i + 1 == r.size()) ? r[i] + pad : pad + r[i];
      if (i + 1 < r.size()) {
        s += "  ";
      }
    }
    while (!s.empty() && s.back() == ' ') {
      s.pop_back();
    }
    os << s << "\n";
  };
  line(header);
  for (const auto& r : rows) {
    line(r);
  }
  int failed = 0;
  for (const ReportCase& c : cases) {
    failed += CaseFailed(c) ? 1 : 0;
  }
  os << "\n"
     << (cases.size() - failed) << " of " << cases.size() << " within budget"
     << (cases.empty() ? "" : std::string(" (metric: ") + MetricName(cases[0].metric) + ")")
     << "\n";
  for (const ReportCase& c : cases) {
    if (CaseFailed(c)) {
      os << "  " << FailureText(c) << "\n";
    }
  }
  for (const ReportCase& c : cases) {
    if (c.plan.coverage.unbacked_bytes > 0) {
      os << "  " << c.name << ": " << EvidenceLine(c.plan) << "\n";
    }
  }
  return os.str();
}

std::string CheckMarkdown(const std::string& title, const std::vector<ReportCase>& cases) {
  std::ostringstream os;
  int failed = 0;
  bool any_budget = false, any_baseline = false;
  for (const ReportCase& c : cases) {
    failed += CaseFailed(c) ? 1 : 0;
    any_budget |= c.budget_bytes >= 0;
    any_baseline |= c.baseline_bytes >= 0;
  }
  os << "## " << (failed ? "\u274c " : "\u2705 ") << MarkdownCell(title) << "\n\n";
  if (any_budget) {
    os << "**" << (cases.size() - failed) << " of " << cases.size()
       << "** configurations within budget (metric: `"
       << (cases.empty() ? "device" : MetricName(cases[0].metric)) << "`).\n\n";
  }
  // One table per model, in order of first appearance.
  std::vector<std::string> models;
  for (const ReportCase& c : cases) {
    if (std::find(models.begin(), models.end(), c.model) == models.end()) {
      models.push_back(c.model);
    }
  }
  for (const std::string& m : models) {
    os << "### " << MarkdownCell(Basename(m)) << "\n\n";
    std::vector<std::string> header = {"configuration", "allocated", "reserved", "device",
                                       "budget",        "headroom",  "status"};
    std::vector<bool> right = {false, true, true, true, true, true, false};
    if (any_baseline) {
      header.insert(header.end() - 1, "baseline");
      right.insert(right.end() - 1, true);
    }
    std::vector<std::vector<std::string>> rows;
    for (const ReportCase& c : cases) {
      if (c.model != m) {
        continue;
      }
      const Peak& p = c.plan.peak;
      std::string status;
      switch (c.status()) {
        case CheckStatus::kPass:
          status = c.near_miss() ? "\u26a0\ufe0f pass, " + c.near_miss_text() : "\u2705 pass";
          break;
        case CheckStatus::kNoBudget:
          status = "-";
          break;
        case CheckStatus::kOverBudget:
          status = "\u274c over budget";
          break;
        case CheckStatus::kRegression:
          status = "\u274c regression";
          break;
      }
      const std::string prefix = Basename(m) + " ";
      const std::string shown =
          c.name.compare(0, prefix.size(), prefix) == 0 ? c.name.substr(prefix.size()) : c.name;
      std::vector<std::string> r = {shown,
                                    FormatBytes(p.allocated_bytes),
                                    FormatBytes(p.reserved_bytes),
                                    FormatBytes(p.device_bytes),
                                    BudgetCell(c),
                                    c.budget_bytes >= 0 ? SignedBytes(c.headroom()) : "-",
                                    status};
      if (any_baseline) {
        r.insert(r.end() - 1, BaselineCell(c));
      }
      rows.push_back(r);
    }
    os << MarkdownTable(header, rows, right) << "\n";
    for (const ReportCase& c : cases) {
      if (c.model == m) {
        os << "- " << MarkdownCell(c.name) << ": " << MarkdownCell(EvidenceLine(c.plan)) << "\n";
      }
    }
    os << "\n";
  }
  if (failed) {
    os << "<details><summary>Failures</summary>\n\n";
    for (const ReportCase& c : cases) {
      if (CaseFailed(c)) {
        os << "- " << MarkdownText(FailureText(c), 1000) << "\n";
      }
    }
    os << "\n</details>\n";
  }
  return os.str();
}

std::string CheckJUnit(const std::string& suite, const std::vector<ReportCase>& cases) {
  std::vector<JUnitCase> out;
  for (const ReportCase& c : cases) {
    JUnitCase j;
    j.name = c.name;
    std::string cls = Basename(c.model);
    const size_t dot = cls.rfind(".onnx");
    if (dot != std::string::npos) {
      cls = cls.substr(0, dot);
    }
    j.classname = "memplan." + cls;
    j.seconds = c.seconds;
    const Peak& p = c.plan.peak;
    std::ostringstream numbers;
    numbers << "metric: " << MetricName(c.metric) << "\n"
            << "allocated: " << FormatBytes(p.allocated_bytes) << " (" << p.allocated_bytes
            << " bytes)\n"
            << "reserved: " << FormatBytes(p.reserved_bytes) << " (" << p.reserved_bytes
            << " bytes)\n"
            << "device: " << FormatBytes(p.device_bytes) << " (" << p.device_bytes << " bytes)\n";
    if (c.budget_bytes >= 0) {
      numbers << "budget: " << FormatBytes(c.budget_bytes) << " (" << c.budget_bytes << " bytes)\n"
              << "headroom: " << SignedBytes(c.headroom()) << "\n";
    }
    if (c.baseline_bytes >= 0) {
      numbers << "baseline: " << FormatBytes(c.baseline_bytes) << " (" << c.baseline_bytes
              << " bytes), " << Pct(c.increase_pct()) << "\n";
    }
    numbers << "peak at: " << p.node << " (" << PhaseName(p.phase) << ")\n";
    numbers << "evidence: " << EvidenceLine(c.plan) << "\n";
    if (CaseFailed(c)) {
      j.failure_type = CheckStatusName(c.status());
      j.failure_message = FailureText(c);
      j.failure_text = numbers.str();
    } else {
      j.system_out = (c.near_miss() ? "WARNING: " + c.near_miss_text() + "\n" : "") + numbers.str();
    }
    out.push_back(j);
  }
  return JUnitXml(suite, out);
}

std::string CheckAnnotations(const std::vector<ReportCase>& cases) {
  std::string out;
  for (const ReportCase& c : cases) {
    if (CaseFailed(c)) {
      out += GithubAnnotation(
          "error", c.file, "memplan: " + std::string(CheckStatusName(c.status())), FailureText(c));
    } else if (c.near_miss()) {
      out += GithubAnnotation("warning", c.file, "memplan: close to budget",
                              c.name + ": " + MetricName(c.metric) + " peak " +
                                  FormatBytes(c.value()) + " is within 5% of the budget " +
                                  FormatBytes(c.budget_bytes) + " (headroom " +
                                  FormatBytes(c.headroom()) + ")");
    }
  }
  return out;
}

TimelineStyle TimelineStyleFor(const ReportCase& c) {
  TimelineStyle style;
  style.title = c.name;
  style.measured = c.measured;
  style.measured_label = c.measured_label;
  if (c.budget_bytes < 0) {
    return style;
  }
  style.budget_bytes = c.budget_bytes;
  if (c.metric == Metric::kDevice) {
    // device = reserved + context: the line the reserved memory must stay under.
    style.budget_bytes = std::max<int64_t>(0, c.budget_bytes - c.plan.context_bytes);
    style.budget_label = "budget " + FormatBytes(c.budget_bytes) + " - " +
                         FormatBytes(c.plan.context_bytes) + " context (for reserved)";
  } else {
    style.budget_label =
        "budget " + FormatBytes(c.budget_bytes) + " (for " + MetricName(c.metric) + ")";
  }
  return style;
}

std::string CheckHtml(const std::string& title, const std::vector<ReportCase>& cases) {
  std::ostringstream body;
  int failed = 0;
  for (const ReportCase& c : cases) {
    failed += CaseFailed(c) ? 1 : 0;
  }
  body << "<h1>" << XmlEscape(title) << "</h1>\n";
  bool any_budget = false;
  for (const ReportCase& c : cases) {
    any_budget |= c.budget_bytes >= 0;
  }
  if (any_budget) {
    body << "<p class=\"" << (failed ? "fail" : "pass") << "\">" << (cases.size() - failed)
         << " of " << cases.size()
         << " within budget (metric: " << (cases.empty() ? "device" : MetricName(cases[0].metric))
         << ")</p>\n";
  }
  std::vector<std::vector<std::string>> rows;
  for (const ReportCase& c : cases) {
    const Peak& p = c.plan.peak;
    rows.push_back({c.name, FormatBytes(p.allocated_bytes), FormatBytes(p.reserved_bytes),
                    FormatBytes(p.device_bytes), BudgetCell(c),
                    c.budget_bytes >= 0 ? SignedBytes(c.headroom()) : "-", StatusText(c)});
  }
  body << HtmlTable(
      {"configuration", "allocated", "reserved", "device", "budget", "headroom", "status"}, rows,
      {false, true, true, true, true, true, false});
  for (const ReportCase& c : cases) {
    const Peak& p = c.plan.peak;
    body << "<h2>" << XmlEscape(c.name) << "</h2>\n";
    body << "<p>peak at <code>" << XmlEscape(p.node) << "</code> (" << PhaseName(p.phase)
         << ")</p>\n";
    body << "<p>evidence: " << XmlEscape(EvidenceLine(c.plan)) << "</p>\n";
    std::vector<std::vector<std::string>> brows;
    for (int k = 0; k < kNumCategories; ++k) {
      const int64_t b = p.breakdown.bytes[k];
      char pct[32];
      std::snprintf(pct, sizeof pct, "%.1f%%",
                    p.allocated_bytes > 0 ? 100.0 * b / p.allocated_bytes : 0.0);
      brows.push_back({CategoryName(static_cast<Category>(k)), FormatBytes(b), pct});
    }
    body << HtmlTable({"category at the peak", "bytes", "share"}, brows, {false, true, true});
    body << TimelineChart(c.plan, TimelineStyleFor(c)) << "\n";
  }
  return HtmlPage(title, body.str());
}

std::string CheckTimelineSvg(const std::vector<ReportCase>& cases) {
  TimelineStyle style;
  std::vector<std::string> charts;
  int y = 0;
  for (const ReportCase& c : cases) {
    style = TimelineStyleFor(c);
    charts.push_back(TimelineChart(c.plan, style, y));
    y += style.height;
  }
  return TimelineDocument(charts, style.width, std::max(y, style.height));
}

// Renders `cases` in `format`.
std::string Render(const std::string& format, const std::vector<ReportCase>& cases,
                   const std::string& title) {
  if (format == "json") {
    return CheckJson(cases).dump(2) + "\n";
  }
  if (format == "md") {
    return CheckMarkdown(title, cases);
  }
  if (format == "junit") {
    return CheckJUnit(title, cases);
  }
  if (format == "html") {
    return CheckHtml(title, cases);
  }
  return CheckTable(cases);
}

Result<std::string> FormatOfPath(const std::string& path) {
  auto ends = [&](const std::string& ext) {
    return path.size() >= ext.size() &&
           path.compare(path.size() - ext.size(), ext.size(), ext) == 0;
  };
  if (ends(".json")) {
    return std::string("json");
  }
  if (ends(".md")) {
    return std::string("md");
  }
  if (ends(".xml")) {
    return std::string("junit");
  }
  if (ends(".html") || ends(".htm")) {
    return std::string("html");
  }
  if (ends(".txt")) {
    return std::string("table");
  }
  return Status::Error("--report " + path + ": unknown extension (.json, .md, .xml, .html, .txt)");
}

}  // namespace memplan
