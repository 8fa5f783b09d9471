#include "cli/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "cli/escape.h"
#include "cli/format.h"
#include "cli/timeline_svg.h"
#include "planner/text.h"

namespace memplan {

// ---- Generic building blocks ----

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

// ---- Budget checks ----

const char* MetricName(Metric m) {
  switch (m) {
    case Metric::kAllocated:
      return "allocated";
    case Metric::kReserved:
      return "reserved";
    case Metric::kDevice:
      return "device";
  }
  return "?";
}

Result<Metric> ParseMetric(const std::string& s) {
  if (s == "allocated") {
    return Metric::kAllocated;
  }
  if (s == "reserved") {
    return Metric::kReserved;
  }
  if (s == "device") {
    return Metric::kDevice;
  }
  return Status::Error("unknown metric '" + s + "' (allocated, reserved, device)");
}

int64_t MetricBytes(const Peak& p, Metric m) {
  switch (m) {
    case Metric::kAllocated:
      return p.allocated_bytes;
    case Metric::kReserved:
      return p.reserved_bytes;
    case Metric::kDevice:
      return p.device_bytes;
  }
  return 0;
}

const char* CheckStatusName(CheckStatus s) {
  switch (s) {
    case CheckStatus::kPass:
      return "pass";
    case CheckStatus::kNoBudget:
      return "no_budget";
    case CheckStatus::kOverBudget:
      return "over_budget";
    case CheckStatus::kRegression:
      return "regression";
  }
  return "?";
}

double ReportCase::increase_pct() const {
  if (baseline_bytes <= 0) {
    return 0;
  }
  return 100.0 * (static_cast<double>(value()) - static_cast<double>(baseline_bytes)) /
         static_cast<double>(baseline_bytes);
}

CheckStatus ReportCase::status() const {
  if (budget_bytes >= 0 && value() > budget_bytes) {
    return CheckStatus::kOverBudget;
  }
  if (baseline_bytes >= 0) {
    const double limit = static_cast<double>(baseline_bytes) * (1.0 + max_increase_pct / 100.0);
    if (static_cast<double>(value()) > limit) {
      return CheckStatus::kRegression;
    }
  }
  return budget_bytes >= 0 ? CheckStatus::kPass : CheckStatus::kNoBudget;
}

bool ReportCase::near_miss() const {
  return status() == CheckStatus::kPass && budget_bytes > 0 &&
         static_cast<double>(headroom()) <
             static_cast<double>(budget_bytes) * kNearMissPercent / 100.0;
}

std::string ReportCase::near_miss_text() const {
  if (!near_miss()) return "";
  char pct[16];
  std::snprintf(pct, sizeof pct, "%g%%", kNearMissPercent);
  return std::string("within ") + pct + " of the budget (headroom " + FormatBytes(headroom()) + ")";
}

std::string ConfigLabel(const Plan& plan) {
  const PlanOptions& o = plan.options;
  std::ostringstream os;
  os << ModeName(o.mode);
  if (plan.batch > 0) {
    os << " b" << plan.batch;
  }
  os << " " << PrecisionName(o.precision);
  if (o.mode == Mode::kTrain) {
    os << " " << OptimizerName(o.optimizer);
    if (o.step == StepKind::kFirst) {
      os << " first-step";
    }
    if (!o.checkpoint_segments.empty()) {
      os << " ckpt" << o.checkpoint_segments.size();
    }
  }
  if (o.attention == Attention::kEager) {
    os << " eager-attn";
  }
  if (o.allocator.expandable_segments) {
    os << " expandable";
  }
  return os.str();
}

namespace {

bool Failed(const ReportCase& c) {
  const CheckStatus s = c.status();
  return s == CheckStatus::kOverBudget || s == CheckStatus::kRegression;
}

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

int CheckExitCode(const std::vector<ReportCase>& cases) {
  for (const ReportCase& c : cases) {
    if (Failed(c)) {
      return 1;
    }
  }
  return 0;
}

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
    if (!Failed(c)) {
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
      const bool in_range =
          peak.contains(key) &&
          ((peak[key].is_number_unsigned() &&
            peak[key].get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX)) ||
           (peak[key].is_number_integer() && !peak[key].is_number_unsigned() &&
            peak[key].get<int64_t>() >= 0));
      if (!in_range) {
        return Status::Error(where + ": 'plan.peak." + key +
                             "' is not a byte count (an integer from 0 to 2^63-1)");
      }
    }
    out[c["name"].get<std::string>()] = peak;
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
    failed += Failed(c) ? 1 : 0;
  }
  os << "\n"
     << (cases.size() - failed) << " of " << cases.size() << " within budget"
     << (cases.empty() ? "" : std::string(" (metric: ") + MetricName(cases[0].metric) + ")")
     << "\n";
  for (const ReportCase& c : cases) {
    if (Failed(c)) {
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
    failed += Failed(c) ? 1 : 0;
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
      if (Failed(c)) {
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
    if (Failed(c)) {
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
    if (Failed(c)) {
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
    failed += Failed(c) ? 1 : 0;
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

}  // namespace memplan
