// `memplan check`: the CI gate. Plans one or more configurations and compares each
// peak with its budget (and optionally with a previous run); exit 1 when any fails.
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "cli/check_config.h"
#include "cli/commands.h"
#include "cli/files.h"
#include "cli/format.h"
#include "cli/options.h"
#include "cli/report.h"
#include "cli/run_trace.h"
#include "cli/timeline_svg.h"
#include "planner/text.h"

#if __has_include("planner/devices.h")
#include "planner/devices.h"
#define MEMPLAN_HAVE_DEVICES 1
#endif

namespace memplan {
namespace {

struct CheckArgs {
  ModelFlags model;
  PlanFlags plan;
  std::string budget;
  std::string device;
  double margin = kDefaultMarginPercent;
  std::string config;
  std::string metric = "device";
  std::string baseline;
  double max_increase = 0;
  std::string format;
  std::string timeline;
  std::vector<std::string> reports;
  std::string trace;  ///< A recorded run gated instead of the plan.
  CLI::App* cmd = nullptr;
};

// Prints "[i/n] label" on stderr when it is a terminal and the work has run for
// about a second; silent otherwise.
class Progress {
 public:
  Progress() : tty_(isatty(2) == 1), start_(std::chrono::steady_clock::now()) {}
  ~Progress() { Clear(); }
  void Step(size_t i, size_t n, const std::string& label) {
    if (!tty_) {
      return;
    }
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    if (s < 1.0 && !shown_) {
      return;
    }
    std::cerr << "\r\033[K[" << i << "/" << n << "] " << label << std::flush;
    shown_ = true;
  }
  void Clear() {
    if (shown_) {
      std::cerr << "\r\033[K" << std::flush;
    }
    shown_ = false;
  }

 private:
  bool tty_;
  bool shown_ = false;
  std::chrono::steady_clock::time_point start_;
};

Result<std::pair<int64_t, std::string>> DeviceBudget(const std::string& device, double margin) {
  if (!(margin >= 0 && margin < 100)) {
    return Status::Error("margin must be a percent in [0, 100)");
  }
#ifdef MEMPLAN_HAVE_DEVICES
  const DevicePreset* d = FindDevice(device);
  if (d == nullptr) {
    std::string names;
    for (const DevicePreset& p : ListDevices()) {
      names += (names.empty() ? "" : ", ") + p.name;
    }
    return Status::Error("unknown device '" + device + "' (known: " + names + ")");
  }
  const int64_t bytes =
      static_cast<int64_t>(static_cast<double>(d->memory_bytes) * (100.0 - margin) / 100.0);
  char text[128];
  std::snprintf(text, sizeof text, "%s - %g%%", d->name.c_str(), margin);
  return std::make_pair(bytes, std::string(margin > 0 ? text : d->name.c_str()));
#else
  return Status::Error("device budgets ('" + device +
                       "') need device presets, which this build lacks; give a size");
#endif
}

std::string Dirname(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash + 1);
}

std::string Basename(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// A JSON value as text for messages.
std::string Show(const nlohmann::json& v) {
  std::string s = v.dump();
  return s.size() > 40 ? s.substr(0, 37) + "..." : s;
}

const std::set<std::string> kCheckKeys = {
    "name", "model", "mode",      "batch",   "dims",       "precision", "optimizer", "attention",
    "loss", "step",  "allocator", "reserve", "checkpoint", "budget",    "device",    "margin"};

Status Choice(const nlohmann::json& v, const std::string& key,
              const std::vector<std::string>& allowed, std::string* out) {
  if (!v.is_string()) {
    return Status::Error("'" + key + "' must be a string, got " + Show(v));
  }
  const std::string s = v.get<std::string>();
  for (const std::string& a : allowed) {
    if (s == a) {
      *out = s;
      return Status();
    }
  }
  std::string list;
  for (const std::string& a : allowed) {
    list += (list.empty() ? "" : ", ") + a;
  }
  return Status::Error("'" + key + "': '" + Clip(s, 200) + "' is not one of " + list);
}

// Applies one key of a check (or of "defaults") to `spec`.
Status ApplyKey(const std::string& key, const nlohmann::json& v, CheckSpec* spec,
                std::string* device, double* margin, bool* has_margin) {
  if (key == "name") {
    if (!v.is_string() || v.get<std::string>().empty()) {
      return Status::Error("'name' must be a non-empty string");
    }
    if (HasControlChar(v.get<std::string>()) || v.get<std::string>().size() > 1000) {
      return Status::Error("'name' must be printable text of at most 1000 bytes");
    }
    spec->name = v.get<std::string>();
  } else if (key == "model") {
    if (!v.is_string() || v.get<std::string>().empty()) {
      return Status::Error("'model' must be a path string");
    }
    if (HasControlChar(v.get<std::string>())) {
      return Status::Error("'model' contains a control character");
    }
    spec->model = v.get<std::string>();
  } else if (key == "mode") {
    return Choice(v, key, EnumNames<Mode>(), &spec->plan_flags.mode);
  } else if (key == "batch") {
    if (!v.is_number_integer() || v.get<int64_t>() <= 0) {
      return Status::Error("'batch' must be a positive integer, got " + Show(v));
    }
    spec->model_flags.batch = v.get<int64_t>();
  } else if (key == "dims") {
    if (!v.is_object()) {
      return Status::Error("'dims' must be an object {\"NAME\": VALUE}");
    }
    spec->model_flags.dims.clear();
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (!it.value().is_number_integer() || it.value().get<int64_t>() <= 0) {
        return Status::Error("'dims." + it.key() + "' must be a positive integer");
      }
      spec->model_flags.dims.push_back(it.key() + "=" + std::to_string(it.value().get<int64_t>()));
    }
  } else if (key == "precision") {
    return Choice(v, key, EnumNames<Precision>(), &spec->plan_flags.precision);
  } else if (key == "optimizer") {
    return Choice(v, key, EnumNames<Optimizer>(), &spec->plan_flags.optimizer);
  } else if (key == "attention") {
    return Choice(v, key, EnumNames<Attention>(), &spec->plan_flags.attention);
  } else if (key == "loss") {
    return Choice(v, key, EnumNames<Loss>(), &spec->plan_flags.loss);
  } else if (key == "step") {
    return Choice(v, key, EnumNames<StepKind>(), &spec->plan_flags.step);
  } else if (key == "allocator") {
    return Choice(v, key, EnumNames<AllocatorKind>(), &spec->plan_flags.allocator);
  } else if (key == "reserve") {
    if (!v.is_string()) {
      return Status::Error("'reserve' must be a size string like \"767MiB\"");
    }
    auto r = ParseSize(v.get<std::string>());
    if (!r.ok()) {
      return Status::Error("'reserve': " + r.message());
    }
    spec->plan_flags.reserve = v.get<std::string>();
  } else if (key == "checkpoint") {
    spec->plan_flags.checkpoint.clear();
    if (v.is_string()) {
      spec->plan_flags.checkpoint.push_back(v.get<std::string>());
    } else if (v.is_array()) {
      for (const auto& e : v) {
        if (!e.is_string()) {
          return Status::Error("'checkpoint' must list module names");
        }
        spec->plan_flags.checkpoint.push_back(e.get<std::string>());
      }
    } else {
      return Status::Error("'checkpoint' must be a module name or a list of them");
    }
  } else if (key == "budget") {
    if (v.is_number_integer() && v.get<int64_t>() >= 0) {
      spec->budget = v.get<int64_t>();
      spec->budget_text = std::to_string(spec->budget);
    } else if (v.is_string()) {
      auto r = ParseSize(v.get<std::string>());
      if (!r.ok()) {
        return Status::Error("'budget': " + r.message());
      }
      spec->budget = r.value();
      spec->budget_text = v.get<std::string>();
    } else {
      return Status::Error("'budget' must be a size like \"40GiB\" or a byte count");
    }
    device->clear();
  } else if (key == "device") {
    if (!v.is_string()) {
      return Status::Error("'device' must be a device name string");
    }
    *device = v.get<std::string>();
    spec->budget = -1;
  } else if (key == "margin") {
    if (!v.is_number() || v.get<double>() < 0 || v.get<double>() >= 100) {
      return Status::Error("'margin' must be a percent in [0, 100), got " + Show(v));
    }
    *margin = v.get<double>();
    *has_margin = true;
  } else {
    return Status::Error("unknown key '" + key + "'");
  }
  return Status();
}

}  // namespace

Result<std::vector<CheckSpec>> ParseCheckConfig(const std::string& text, const std::string& path,
                                                std::string* metric) {
  auto parsed = ParseJsonDocument(text, path);
  if (!parsed.ok()) {
    return parsed.status();
  }
  const nlohmann::json& doc = parsed.value();
  nlohmann::json checks, defaults = nlohmann::json::object();
  if (doc.is_array()) {
    checks = doc;
  } else if (doc.is_object()) {
    for (auto it = doc.begin(); it != doc.end(); ++it) {
      if (it.key() == "checks") {
        checks = it.value();
      } else if (it.key() == "defaults") {
        defaults = it.value();
      } else if (it.key() == "metric") {
        if (!it.value().is_string() || !ParseMetric(it.value().get<std::string>()).ok()) {
          return Status::Error(path + ": 'metric' must be allocated, reserved or device");
        }
        *metric = it.value().get<std::string>();
      } else if (it.key() == "version") {
        if (!it.value().is_number_integer() || it.value().get<int>() != 1) {
          return Status::Error(path + ": 'version' must be 1");
        }
      } else {
        return Status::Error(path + ": unknown key '" + it.key() + "'");
      }
    }
    if (!defaults.is_object()) {
      return Status::Error(path + ": 'defaults' must be an object");
    }
  } else {
    return Status::Error(path + ": expected an object with 'checks' or a list of checks");
  }
  if (!checks.is_array() || checks.empty()) {
    return Status::Error(path + ": 'checks' must be a non-empty list");
  }
  std::vector<CheckSpec> specs;
  std::string dev0;
  double margin0 = kDefaultMarginPercent;
  bool has_margin0 = false;
  CheckSpec base;
  for (auto it = defaults.begin(); it != defaults.end(); ++it) {
    if (it.key() == "name" || it.key() == "model" || !kCheckKeys.count(it.key())) {
      return Status::Error(path + ": defaults: unknown key '" + it.key() + "'");
    }
    Status s = ApplyKey(it.key(), it.value(), &base, &dev0, &margin0, &has_margin0);
    if (!s.ok()) {
      return Status::Error(path + ": defaults: " + s.message());
    }
  }
  for (size_t i = 0; i < checks.size(); ++i) {
    const std::string where = path + ": checks[" + std::to_string(i) + "]";
    if (!checks[i].is_object()) {
      return Status::Error(where + ": expected an object");
    }
    CheckSpec spec = base;
    std::string device = dev0;
    double margin = margin0;
    bool has_margin = has_margin0;
    for (auto it = checks[i].begin(); it != checks[i].end(); ++it) {
      Status s = ApplyKey(it.key(), it.value(), &spec, &device, &margin, &has_margin);
      if (!s.ok()) {
        return Status::Error(where + ": " + s.message());
      }
    }
    if (spec.model.empty()) {
      return Status::Error(where + ": missing 'model'");
    }
    if (!device.empty()) {
      auto b = DeviceBudget(device, margin);
      if (!b.ok()) {
        return Status::Error(where + ": " + b.message());
      }
      spec.budget = b->first;
      spec.budget_text = b->second;
    } else if (has_margin && spec.budget >= 0 && checks[i].contains("margin")) {
      return Status::Error(where + ": 'margin' needs 'device'");
    }
    spec.where = where;
    spec.model_path = spec.model[0] == '/' ? spec.model : Dirname(path) + spec.model;
    spec.file = path;
    specs.push_back(spec);
  }
  return specs;
}

namespace {

Result<std::vector<CheckSpec>> LoadConfig(const std::string& path, std::string* metric) {
  auto text = ReadRegularFile(path, "the budget file", kMaxJsonBytes);
  if (!text.ok()) {
    return text.status();
  }
  return ParseCheckConfig(text.value(), path, metric);
}

int Bad(const std::string& message) {
  if (InGithubActions()) {
    std::cerr << GithubAnnotation("error", "", "memplan", message);
  }
  return Fail(message);
}

}  // namespace

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

namespace {

int RunCheck(const CheckArgs& a) {
  auto metric_r = ParseMetric(a.metric);
  if (!metric_r.ok()) {
    return Bad("--metric: " + metric_r.message());
  }
  std::string metric_name = a.metric;
  // What to check.
  std::vector<CheckSpec> specs;
  if (!a.config.empty()) {
    if (!a.model.model.empty()) {
      return Bad("give either MODEL or --config " + a.config + ", not both");
    }
    for (const char* flag : {"--batch", "--dim", "--mode", "--precision", "--optimizer",
                             "--attention", "--loss", "--step", "--allocator", "--reserve",
                             "--checkpoint", "--budget", "--device", "--margin"}) {
      if (a.cmd->count(flag) > 0) {
        return Bad(std::string(flag) + " cannot be combined with --config (set it in " + a.config +
                   ")");
      }
    }
    const std::string cli_metric = a.cmd->count("--metric") > 0 ? a.metric : "";
    auto loaded = LoadConfig(a.config, &metric_name);
    if (!loaded.ok()) {
      return Bad(loaded.message());
    }
    if (!cli_metric.empty()) {
      metric_name = cli_metric;
    }
    specs = loaded.value();
    if (!a.trace.empty()) {
      return Bad("--trace: needs a MODEL on the command line, not --config");
    }
  } else {
    if (a.model.model.empty()) {
      return Bad("check needs MODEL or --config FILE");
    }
    CheckSpec spec;
    spec.where = a.model.model;
    spec.model = spec.model_path = spec.file = a.model.model;
    spec.model_flags = a.model;
    spec.plan_flags = a.plan;
    if (!a.budget.empty() && !a.device.empty()) {
      return Bad("give --budget or --device, not both");
    }
    if (a.device.empty() && a.cmd->count("--margin") > 0) {
      return Bad("--margin needs --device");
    }
    if (!a.budget.empty()) {
      auto b = ParseSize(a.budget);
      if (!b.ok()) {
        return Bad("--budget: " + b.message());
      }
      spec.budget = b.value();
      spec.budget_text = a.budget;
    } else if (!a.device.empty()) {
      auto b = DeviceBudget(a.device, a.margin);
      if (!b.ok()) {
        return Bad("--device: " + b.message());
      }
      spec.budget = b->first;
      spec.budget_text = b->second;
    }
    specs.push_back(spec);
  }
  const Metric metric = ParseMetric(metric_name).value();
  for (const CheckSpec& s : specs) {
    if (s.budget < 0 && a.baseline.empty()) {
      return Bad(s.where +
                 ": no budget (give --budget SIZE or --device NAME; in a config, "
                 "'budget' or 'device')");
    }
  }
  if (!(a.max_increase >= 0)) {
    return Bad("--max-increase must be a percent >= 0");
  }
  // The previous run.
  std::map<std::string, nlohmann::json> baseline;
  if (!a.baseline.empty()) {
    auto text = ReadRegularFile(a.baseline, "the baseline", kMaxJsonBytes);
    if (!text.ok()) {
      return Bad(text.message());
    }
    auto parsed = ParseJsonDocument(text.value(), a.baseline);
    if (!parsed.ok()) {
      return Bad(parsed.message());
    }
    const nlohmann::json& doc = parsed.value();
    auto b = ParseBaseline(doc);
    if (!b.ok()) {
      return Bad(a.baseline + ": " + b.message());
    }
    baseline = b.value();
  }
  std::vector<std::string> formats;
  for (const std::string& r : a.reports) {
    auto f = FormatOfPath(r);
    if (!f.ok()) {
      return Bad(f.message());
    }
    formats.push_back(f.value());
  }

  // No output may replace an input.
  std::vector<std::string> inputs = {a.config, a.baseline};
  for (const CheckSpec& s : specs) {
    inputs.push_back(s.model_path);
  }
  std::vector<std::string> outputs = a.reports;
  if (!a.timeline.empty()) {
    outputs.push_back(a.timeline);
  }
  for (const std::string& out : outputs) {
    Status s = CheckOutputIsNotInput(out, inputs);
    if (!s.ok()) {
      return Bad(s.message());
    }
  }

  // Plan each configuration (each model imported once).
  std::map<std::string, Graph> graphs;
  std::vector<ReportCase> cases;
  std::set<std::string> names;
  Progress progress;
  std::set<std::string> printed;
  auto bad = [&progress](const std::string& message) {
    progress.Clear();
    return Bad(message);
  };
  for (size_t i = 0; i < specs.size(); ++i) {
    const CheckSpec& s = specs[i];
    progress.Step(i + 1, specs.size(),
                  Basename(s.model) + (s.model_flags.batch > 0
                                           ? " batch " + std::to_string(s.model_flags.batch)
                                           : std::string()));
    const auto t0 = std::chrono::steady_clock::now();
    auto g = graphs.find(s.model_path);
    if (g == graphs.end()) {
      auto loaded = LoadGraph(s.model_path);
      if (!loaded.ok()) {
        return bad(s.where == s.model ? loaded.message() : s.where + ": " + loaded.message());
      }
      g = graphs.emplace(s.model_path, std::move(loaded.value())).first;
    }
    const std::string where = s.where == s.model ? s.model : s.where + " (" + s.model + ")";
    auto bindings = ToBindings(s.model_flags);
    if (!bindings.ok()) {
      return bad(where + ": " + bindings.message());
    }
    auto options = ToPlanOptions(s.plan_flags);
    if (!options.ok()) {
      return bad(where + ": " + options.message());
    }
    auto plan = PlanModel(g->second, bindings.value(), options.value());
    if (!plan.ok()) {
      return bad(where + ": " + plan.message());
    }
    // Each distinct warning once (a model checked at several batches repeats them).
    std::vector<std::string> fresh;
    for (const std::string& w : plan->warnings) {
      if (printed.insert(w).second) {
        fresh.push_back(w);
      }
    }
    if (!fresh.empty()) {
      progress.Clear();
      PrintWarnings(fresh);
    }
    ReportCase c;
    c.model = s.model;
    c.file = s.file;
    c.plan = std::move(plan.value());
    c.name = s.name;
    if (c.name.empty()) {
      // Model, configuration and any --dim bindings: stable across runs for baselines.
      c.name = Basename(s.model) + " " + ConfigLabel(c.plan);
      for (const std::string& d : s.model_flags.dims) {
        c.name += " " + d;
      }
    }
    if (!names.insert(c.name).second) {
      return bad(s.where + ": two checks are named '" + c.name +
                 "' (set 'name' to tell them apart)");
    }
    c.metric = metric;
    c.budget_bytes = s.budget;
    c.budget_text = s.budget_text;
    c.max_increase_pct = a.max_increase;
    auto b = baseline.find(c.name);
    if (b != baseline.end()) {
      c.baseline_bytes = b->second[std::string(MetricName(metric)) + "_bytes"].get<int64_t>();
    } else if (!a.baseline.empty()) {
      // Names hold the batch and the configuration: a changed batch is a new
      // check, not a regression of the old one. Say so rather than skip quietly.
      progress.Clear();
      PrintWarnings({a.baseline + ": no entry named '" + c.name +
                     "' (names include the batch and configuration; set 'name' to keep one "
                     "across changes): its regression check is skipped"});
    }
    if (!a.trace.empty()) {
      // The recorded run's highest step is what is gated (the plan stays in the report).
      auto run = ReadRunTrace(a.trace);
      if (!run.ok()) {
        return bad(run.message());
      }
      Peak m;
      int top = 0;
      for (const RunStep& st : run->steps) {
        m.allocated_bytes = std::max(m.allocated_bytes, st.peak_allocated);
        if (st.peak_reserved > m.reserved_bytes) {
          m.reserved_bytes = st.peak_reserved;
          top = st.index;
        }
      }
      m.device_bytes = m.reserved_bytes + c.plan.context_bytes;
      c.measured_from = a.trace;
      c.measured_peak = m;
      c.measured = MeasuredSamplesOf(run.value(), top);
      c.measured_label = "run " + a.trace + ", step " + std::to_string(top);
    }
    c.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    cases.push_back(std::move(c));
  }
  progress.Clear();

  const std::string title =
      a.config.empty() ? "memplan check: " + Basename(a.model.model) : "memplan check: " + a.config;
  for (size_t i = 0; i < a.reports.size(); ++i) {
    Status s = WriteFileAtomically(a.reports[i], Render(formats[i], cases, title));
    if (!s.ok()) {
      return Bad(s.message());
    }
  }
  if (!a.timeline.empty()) {
    Status s = WriteFileAtomically(a.timeline, CheckTimelineSvg(cases));
    if (!s.ok()) {
      return Bad(s.message());
    }
  }
  std::cout << Render(a.format, cases, title) << std::flush;
  if (InGithubActions()) {
    std::cerr << CheckAnnotations(cases);
  }
  return CheckExitCode(cases);
}

}  // namespace

void AddCheckCommand(CLI::App* app, CliState* state) {
  auto* cmd = app->add_subcommand(
      "check", "CI gate: exit 1 when a configuration's peak exceeds its budget or regresses");
  auto args = std::make_shared<CheckArgs>();
  args->cmd = cmd;
  cmd->add_option("model", args->model.model, "ONNX model file (or use --config)");
  cmd->add_option("--batch,-b", args->model.batch,
                  "Binds the batch symbol (dim 0 of the first input)")
      ->default_str("");
  cmd->add_option("--dim", args->model.dims, "Binds a symbolic dim: NAME=VALUE (repeatable)");
  AddPlanFlags(cmd, &args->plan, true);
  cmd->add_option("--budget", args->budget, "The limit, e.g. 40GiB, 80GB, 24000MiB");
  cmd->add_option("--device", args->device, "The limit is this GPU's memory (minus --margin)");
  cmd->add_option("--margin", args->margin,
                  "Percent of the device kept free (with --device; default 5, as advise)");
  cmd->add_option("--config", args->config, "A JSON budget file with several checks");
  cmd->add_option("--metric", args->metric,
                  "Peak compared with the budget: device (reserved + context, default), "
                  "reserved or allocated")
      ->check(CLI::IsMember({"allocated", "reserved", "device"}));
  cmd->add_option("--baseline", args->baseline,
                  "A previous `check --format json` output: fail on regressions");
  cmd->add_option("--max-increase", args->max_increase,
                  "Percent growth over the baseline allowed (default 0)");
  AddFormatFlag(cmd, &args->format, {"table", "json", "md", "junit", "html"});
  cmd->add_option("--timeline", args->timeline, "Writes the memory timeline SVG here");
  cmd->add_option("--trace", args->trace,
                  "Gates a recorded run (memplan_torch trace) instead of the plan: its highest "
                  "step's peak (device = reserved + the plan's context)");
  cmd->add_option("--report", args->reports,
                  "Also writes a report; format by extension: .json .md .xml (JUnit) .html "
                  ".txt (repeatable)");
  cmd->callback([args, state] { state->exit_code = RunCheck(*args); });
}

}  // namespace memplan
