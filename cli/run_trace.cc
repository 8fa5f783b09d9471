#include "cli/run_trace.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "cli/files.h"
#include "cli/format.h"

namespace memplan {
namespace {

constexpr int64_t kMaxTraceBytes = 1LL << 30;
constexpr int kMaxDepth = 64;
const char* const kSampleColumns[] = {"seconds", "phase", "peak_allocated", "allocated",
                                      "reserved"};

int PhaseIndex(const std::string& s) {
  if (s == "forward") return 0;
  if (s == "backward") return 1;
  if (s == "optimizer") return 2;
  return -1;
}

// A byte count: an integer in [0, 2^63).
Status Bytes(const nlohmann::json& j, const std::string& where, int64_t* out) {
  if (!j.is_number_integer() || (j.is_number_unsigned() && j.get<uint64_t>() > INT64_MAX) ||
      (!j.is_number_unsigned() && j.get<int64_t>() < 0)) {
    return Status::Error(where + ": expected a byte count (an integer >= 0), got " +
                         j.dump().substr(0, 40));
  }
  *out = j.get<int64_t>();
  return Status();
}

Status BytesKey(const nlohmann::json& obj, const char* key, const std::string& where,
                int64_t* out) {
  auto it = obj.find(key);
  if (it == obj.end()) return Status::Error(where + ": " + key + ": missing");
  return Bytes(*it, where + ": " + key, out);
}

// Nesting deeper than kMaxDepth is refused before parsing (the parser recurses).
bool TooDeep(const std::string& text) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxDepth) return true;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return false;
}

Status ParseStep(const nlohmann::json& s, const std::string& where, RunStep* out) {
  if (!s.is_object()) return Status::Error(where + ": expected an object");
  Status st = BytesKey(s, "peak_allocated", where, &out->peak_allocated);
  if (st.ok()) st = BytesKey(s, "peak_reserved", where, &out->peak_reserved);
  if (!st.ok()) return st;
  if (s.contains("step")) {
    int64_t idx = 0;
    st = Bytes(s["step"], where + ": step", &idx);
    if (!st.ok()) return st;
    out->index = static_cast<int>(std::min<int64_t>(idx, 1 << 30));
  }
  if (s.contains("phases")) {
    const auto& ph = s["phases"];
    if (!ph.is_object()) return Status::Error(where + ": phases: expected an object");
    for (auto it = ph.begin(); it != ph.end(); ++it) {
      const int p = PhaseIndex(it.key());
      const std::string w = where + ": phases: " + it.key();
      if (p < 0) return Status::Error(w + ": unknown phase (forward, backward, optimizer)");
      if (!it->is_object()) return Status::Error(w + ": expected an object");
      st = BytesKey(*it, "peak_allocated", w, &out->phase_allocated[p]);
      if (st.ok()) st = BytesKey(*it, "peak_reserved", w, &out->phase_reserved[p]);
      if (!st.ok()) return st;
    }
  }
  if (s.contains("modules")) {
    const auto& mods = s["modules"];
    if (!mods.is_object()) return Status::Error(where + ": modules: expected an object");
    for (auto it = mods.begin(); it != mods.end(); ++it) {
      const std::string w = where + ": modules: " + it.key();
      if (!it->is_object()) return Status::Error(w + ": expected an object");
      RunModule m;
      for (auto p = it->begin(); p != it->end(); ++p) {
        const std::string& k = p.key();
        if (k == "forward_kept") {  // may be negative: a call can free more than it makes
          if (!p->is_number_integer() ||
              (p->is_number_unsigned() && p->get<uint64_t>() > INT64_MAX)) {
            return Status::Error(w + ": forward_kept: expected an integer");
          }
          m.forward_kept = p->get<int64_t>();
          continue;
        }
        int64_t* slot = k == "forward"         ? &m.forward
                        : k == "backward"      ? &m.backward
                        : k == "forward_rise"  ? &m.forward_rise
                        : k == "backward_rise" ? &m.backward_rise
                                               : nullptr;
        if (slot == nullptr) return Status::Error(w + ": " + k + ": unknown figure");
        st = Bytes(*p, w + ": " + k, slot);
        if (!st.ok()) return st;
      }
      out->modules[it.key()] = m;
    }
  }
  if (s.contains("samples")) {
    const auto& sm = s["samples"];
    if (!sm.is_array()) return Status::Error(where + ": samples: expected a list");
    out->samples.reserve(sm.size());
    for (size_t i = 0; i < sm.size(); ++i) {
      const std::string w = where + ": samples[" + std::to_string(i) + "]";
      const auto& r = sm[i];
      if (!r.is_array() || r.size() != 5 || !r[0].is_number()) {
        return Status::Error(w +
                             ": expected [seconds, phase, peak_allocated, allocated, reserved]");
      }
      RunSample x;
      x.seconds = r[0].get<double>();
      if (r[1].is_string()) {
        x.phase = PhaseIndex(r[1].get<std::string>());
        if (x.phase < 0) return Status::Error(w + ": unknown phase");
      } else if (!r[1].is_null()) {
        return Status::Error(w + ": phase: expected a phase name or null");
      }
      st = Bytes(r[2], w + ": peak_allocated", &x.peak_allocated);
      if (st.ok()) st = Bytes(r[3], w + ": allocated", &x.allocated);
      if (st.ok()) st = Bytes(r[4], w + ": reserved", &x.reserved);
      if (!st.ok()) return st;
      out->samples.push_back(x);
    }
  }
  return Status();
}

std::string Signed(int64_t b) { return (b >= 0 ? "+" : "-") + FormatBytes(b >= 0 ? b : -b); }

std::string Pct(double p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.1f%%", p);
  return buf;
}

}  // namespace

double CompareRow::pct() const {
  return measured == 0 ? 0.0 : 100.0 * static_cast<double>(diff()) / static_cast<double>(measured);
}

Result<RunTrace> ParseRunTrace(const nlohmann::json& doc, const std::string& path) {
  const std::string& p = path;
  if (!doc.is_object()) return Status::Error(p + ": not a memplan trace (not a JSON object)");
  if (!doc.contains("schema") || doc["schema"] != "memplan-trace") {
    return Status::Error(p + ": schema: expected \"memplan-trace\" (a memplan_torch trace)");
  }
  if (!doc.contains("version") || !doc["version"].is_number_integer() || doc["version"] != 1) {
    return Status::Error(
        p + ": version: this memplan reads trace version 1, got " +
        (doc.contains("version") ? doc["version"].dump().substr(0, 20) : std::string("none")));
  }
  if (doc.contains("sample_columns")) {
    const auto& c = doc["sample_columns"];
    bool ok = c.is_array() && c.size() == 5;
    for (size_t i = 0; ok && i < 5; ++i) ok = c[i] == kSampleColumns[i];
    if (!ok) {
      return Status::Error(p +
                           ": sample_columns: expected [seconds, phase, peak_allocated, "
                           "allocated, reserved]");
    }
  }
  if (!doc.contains("steps") || !doc["steps"].is_array() || doc["steps"].empty()) {
    return Status::Error(p + ": steps: expected a non-empty list");
  }
  RunTrace t;
  t.path = path;
  if (doc.contains("producer") && doc["producer"].is_string()) t.producer = doc["producer"];
  if (doc.contains("device") && doc["device"].is_object()) {
    const auto& d = doc["device"];
    if (d.contains("name") && d["name"].is_string()) t.device_name = d["name"];
    if (d.contains("total_bytes")) {
      Status st = Bytes(d["total_bytes"], p + ": device: total_bytes", &t.device_total);
      if (!st.ok()) return st;
    }
  }
  const auto& steps = doc["steps"];
  for (size_t i = 0; i < steps.size(); ++i) {
    RunStep s;
    s.index = static_cast<int>(i);
    Status st = ParseStep(steps[i], p + ": steps[" + std::to_string(i) + "]", &s);
    if (!st.ok()) return st;
    t.steps.push_back(std::move(s));
  }
  if (doc.contains("leaks") && doc["leaks"].is_array()) {
    t.leaks = static_cast<int>(doc["leaks"].size());
  }
  if (doc.contains("warnings") && doc["warnings"].is_array()) {
    for (const auto& w : doc["warnings"]) {
      if (w.is_object() && w.contains("message") && w["message"].is_string()) {
        t.warnings.push_back(w["message"]);
      }
    }
  }
  return t;
}

Result<RunTrace> ReadRunTrace(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return Status::Error(path + ": cannot read: a directory, not a trace file");
  }
  // Regular files only: a FIFO would block the read.
  auto read = ReadRegularFile(path, "the trace file", kMaxTraceBytes);
  if (!read.ok()) return read.status();
  const std::string& text = read.value();
  if (TooDeep(text)) {
    return Status::Error(path + ": not a memplan trace (nested deeper than " +
                         std::to_string(kMaxDepth) + " levels)");
  }
  // The budget files' parser: NUL bytes, duplicate keys and numbers past a
  // double ("1e400", which escaped as a message naming no file) are errors.
  auto doc = ParseJsonDocument(text, path);
  if (!doc.ok()) {
    // "PATH:LINE:COL: invalid JSON: WHAT" -> "PATH: not JSON: WHAT (line LINE, column COL)".
    const std::string& m = doc.message();
    const size_t at = m.find(": invalid JSON: ");
    if (at == std::string::npos || m.compare(0, path.size(), path) != 0) return doc.status();
    std::string where = m.substr(path.size(), at - path.size());  // ":LINE:COL" or ""
    const std::string what = m.substr(at + 16);
    const size_t colon = where.rfind(':');
    if (colon != std::string::npos && colon > 0) {
      where = " (line " + where.substr(1, colon - 1) + ", column " + where.substr(colon + 1) + ")";
    }
    return Status::Error(path + ": not JSON: " + what + where);
  }
  return ParseRunTrace(doc.value(), path);
}

Comparison ComparePlanWithRun(const Plan& plan, const RunTrace& run) {
  Comparison c;
  const bool train = plan.options.mode == Mode::kTrain;
  auto step_rows = [&](const std::string& name, const Peak& pk, const RunStep& s) {
    c.steps.push_back({"step", name, "", "allocated", pk.allocated_bytes, s.peak_allocated});
    c.steps.push_back({"step", name, "", "reserved", pk.reserved_bytes, s.peak_reserved});
  };
  const RunStep* steady = nullptr;
  if (train) {
    step_rows("first step", plan.first_step, run.steps.front());
    if (run.steps.size() > 1) steady = &run.steps.back();
    if (steady != nullptr) step_rows("steady step", plan.steady, *steady);
  } else {
    steady = &run.steps.back();
    step_rows("pass", plan.peak, *steady);
  }
  const Peak& planned = train ? plan.steady : plan.peak;
  const RunStep* phase_step = steady != nullptr ? steady : &run.steps.front();
  const Peak& phase_plan = steady != nullptr ? planned : plan.first_step;
  c.steady_step = phase_step->index;
  for (int ph = 0; ph < 3; ++ph) {
    if (phase_step->phase_allocated[ph] < 0 || phase_plan.phase_allocated[ph] <= 0) continue;
    const std::string name = PhaseName(static_cast<Phase>(ph));
    c.phases.push_back({"phase", name, name, "allocated", phase_plan.phase_allocated[ph],
                        phase_step->phase_allocated[ph]});
    c.phases.push_back({"phase", name, name, "reserved", phase_plan.phase_reserved[ph],
                        phase_step->phase_reserved[ph]});
  }
  // Modules: by name, or by the name without its first component when that
  // matches more (the export wrapped the model: "m.layer1.0" vs "layer1.0").
  const auto& measured = phase_step->modules;
  c.modules_planned = static_cast<int>(plan.modules.size());
  c.modules_measured = static_cast<int>(measured.size());
  auto strip = [](const std::string& s) {
    const size_t dot = s.find('.');
    return dot == std::string::npos ? std::string() : s.substr(dot + 1);
  };
  int exact = 0;
  int stripped = 0;
  for (const ModulePeak& m : plan.modules) {
    exact += measured.count(m.module) ? 1 : 0;
    const std::string s = strip(m.module);
    stripped += !s.empty() && measured.count(s) ? 1 : 0;
  }
  c.stripped_components = stripped > exact ? 1 : 0;
  std::set<std::string> seen;
  for (const ModulePeak& m : plan.modules) {
    const std::string key = c.stripped_components ? strip(m.module) : m.module;
    auto it = measured.find(key);
    if (key.empty() || it == measured.end() || !seen.insert(key).second) continue;
    ++c.modules_matched;
    // Relative to each call's start, so a difference before a module does not
    // show up in every module after it.
    const RunModule& r = it->second;
    if (r.forward_rise >= 0) {
      c.modules.push_back({"module", key, "forward", "rise", m.forward_rise, r.forward_rise});
    }
    if (r.forward_kept != INT64_MIN) {
      c.modules.push_back({"module", key, "forward", "kept", m.forward_kept, r.forward_kept});
    }
    if (r.backward_rise >= 0) {
      c.modules.push_back({"module", key, "backward", "rise", m.backward_rise, r.backward_rise});
    }
  }
  std::stable_sort(c.modules.begin(), c.modules.end(),
                   [](const CompareRow& a, const CompareRow& b) {
                     const int64_t da = std::llabs(a.diff());
                     const int64_t db = std::llabs(b.diff());
                     if (da != db) return da > db;
                     if (a.name != b.name) return a.name < b.name;
                     return a.phase < b.phase;
                   });
  return c;
}

std::string ComparisonTable(const Comparison& c, const RunTrace& run, size_t max_modules) {
  std::ostringstream os;
  os << "\ncompared with " << run.path << " (" << (run.producer.empty() ? "?" : run.producer);
  if (!run.device_name.empty()) os << ", " << run.device_name;
  os << ", " << run.steps.size() << (run.steps.size() == 1 ? " step" : " steps");
  if (c.steady_step >= 0) os << "; run step " << c.steady_step << " vs the planned step";
  os << ")\n\n";
  char line[320];
  auto row = [&](const std::string& a, const std::string& b, const CompareRow& r) {
    std::snprintf(line, sizeof line, "  %-34s %-14s %12s %12s %13s %8s\n", a.c_str(), b.c_str(),
                  FormatBytes(r.predicted).c_str(), FormatBytes(r.measured).c_str(),
                  Signed(r.diff()).c_str(), Pct(r.pct()).c_str());
    os << line;
  };
  std::snprintf(line, sizeof line, "  %-34s %-14s %12s %12s %13s %8s\n", "", "", "plan", "run",
                "run - plan", "of run");
  os << line;
  for (const CompareRow& r : c.steps) row(r.name, r.metric, r);
  for (const CompareRow& r : c.phases) row(r.name, r.metric, r);
  os << "\n  modules: " << c.modules_matched << " of " << c.modules_planned << " planned found in "
     << "the run (" << c.modules_measured << " measured)";
  if (c.stripped_components) os << ", matched without the plan's first name component";
  os << "; largest differences first. rise: the most a call's allocated memory rises above "
        "its start; kept: what forward calls leave allocated (saved for backward)\n";
  if (c.modules.empty() && c.modules_measured == 0) {
    os << "  (the run has no module figures: give the Monitor the model)\n";
  } else if (c.modules.empty()) {
    os << "  (no module names in common: the run's are model.named_modules() paths plus the "
          "Monitor's prefix=)\n";
  }
  const size_t n = max_modules == 0 ? c.modules.size() : std::min(max_modules, c.modules.size());
  for (size_t i = 0; i < n; ++i) {
    row(c.modules[i].name, c.modules[i].phase + " " + c.modules[i].metric, c.modules[i]);
  }
  if (n < c.modules.size()) {
    os << "  ... " << c.modules.size() - n << " more rows (--compare-rows 0 shows all)\n";
  }
  if (run.leaks > 0) os << "\n  the run reports " << run.leaks << " leak(s): see the trace\n";
  return os.str();
}

std::vector<MeasuredSample> MeasuredSamplesOf(const RunTrace& run, int index) {
  std::vector<MeasuredSample> out;
  for (const RunStep& s : run.steps) {
    if (s.index != index) continue;
    for (const RunSample& x : s.samples) {
      out.push_back(MeasuredSample{x.phase, x.seconds, x.peak_allocated, x.reserved});
    }
  }
  return out;
}

nlohmann::json ComparisonJson(const Comparison& c, const RunTrace& run) {
  auto rows = [](const std::vector<CompareRow>& v) {
    nlohmann::json a = nlohmann::json::array();
    for (const CompareRow& r : v) {
      nlohmann::json j = {{"name", r.name},
                          {"metric", r.metric},
                          {"predicted_bytes", r.predicted},
                          {"measured_bytes", r.measured},
                          {"diff_bytes", r.diff()},
                          {"diff_pct_of_measured", r.pct()}};
      if (!r.phase.empty()) j["phase"] = r.phase;
      a.push_back(j);
    }
    return a;
  };
  return {{"trace", run.path},
          {"producer", run.producer},
          {"steps_recorded", run.steps.size()},
          {"run_step", c.steady_step},
          {"steps", rows(c.steps)},
          {"phases", rows(c.phases)},
          {"modules", rows(c.modules)},
          {"modules_planned", c.modules_planned},
          {"modules_measured", c.modules_measured},
          {"modules_matched", c.modules_matched},
          {"stripped_components", c.stripped_components},
          {"leaks", run.leaks}};
}

}  // namespace memplan
