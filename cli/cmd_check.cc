// `memplan check`: the CI gate. Plans one or more configurations and compares each
// peak with its budget (and optionally with a previous run); exit 1 when any fails.
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
#include "cli/progress.h"
#include "cli/report.h"
#include "cli/run_trace.h"
#include "cli/timeline_svg.h"
#include "planner/devices.h"
#include "planner/text.h"

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

std::string Basename(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

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

namespace {

// The configurations to check: from --config, or the one on the command
// line (MODEL and its flags, --budget or --device). Sets *metric_name when
// the budget file names one and --metric does not.
Result<std::vector<CheckSpec>> SpecsOf(const CheckArgs& a, std::string* metric_name) {
  if (!a.config.empty()) {
    if (!a.model.model.empty()) {
      return Status::Error("give either MODEL or --config " + a.config + ", not both");
    }
    for (const char* flag :
         {"--batch",     "--batch-dim",  "--dim",    "--mode",       "--precision",
          "--optimizer", "--attention",  "--loss",   "--step",       "--allocator",
          "--reserve",   "--checkpoint", "--freeze", "--train-only", "--lora",
          "--weights",   "--model-load", "--budget", "--device",     "--margin"}) {
      if (a.cmd->count(flag) > 0) {
        return Status::Error(std::string(flag) + " cannot be combined with --config (set it in " +
                             a.config + ")");
      }
    }
    const std::string cli_metric = a.cmd->count("--metric") > 0 ? a.metric : "";
    auto loaded = LoadConfig(a.config, metric_name);
    if (!loaded.ok()) {
      return Status::Error(loaded.message());
    }
    if (!cli_metric.empty()) {
      *metric_name = cli_metric;
    }
    if (!a.trace.empty()) {
      return Status::Error("--trace: needs a MODEL on the command line, not --config");
    }
    std::vector<CheckSpec> specs = std::move(loaded.value());
    for (CheckSpec& s : specs) s.plan_flags.no_warn = a.plan.no_warn;  // output, not the plan
    return specs;
  }
  if (a.model.model.empty()) {
    return Status::Error("check needs MODEL or --config FILE");
  }
  CheckSpec spec;
  spec.where = a.model.model;
  spec.model = spec.model_path = spec.file = a.model.model;
  spec.model_flags = a.model;
  spec.plan_flags = a.plan;
  if (!a.budget.empty() && !a.device.empty()) {
    return Status::Error("give --budget or --device, not both");
  }
  if (a.device.empty() && a.cmd->count("--margin") > 0) {
    return Status::Error("--margin needs --device");
  }
  if (!a.budget.empty()) {
    auto b = ParseSize(a.budget);
    if (!b.ok()) {
      return Status::Error("--budget: " + b.message());
    }
    spec.budget = b.value();
    spec.budget_text = a.budget;
  } else if (!a.device.empty()) {
    auto b = DeviceBudget(a.device, a.margin);
    if (!b.ok()) {
      return Status::Error("--device: " + b.message());
    }
    spec.budget = b->first;
    spec.budget_text = b->second;
  }
  return std::vector<CheckSpec>{spec};
}

// A previous `check --format json` run: name -> peak JSON.
Result<std::map<std::string, nlohmann::json>> LoadBaseline(const std::string& path) {
  auto text = ReadRegularFile(path, "the baseline", kMaxJsonBytes);
  if (!text.ok()) {
    return text.status();
  }
  auto parsed = ParseJsonDocument(text.value(), path);
  if (!parsed.ok()) {
    return parsed.status();
  }
  auto b = ParseBaseline(parsed.value());
  if (!b.ok()) {
    return Status::Error(path + ": " + b.message());
  }
  return b.value();
}

// Gates the recorded run of `trace` instead of the plan: its highest step's
// peaks (the plan stays in the report, the run drawn over its timeline).
Status GateRecordedRun(const std::string& trace, ReportCase* c) {
  auto run = ReadRunTrace(trace);
  if (!run.ok()) {
    return run.status();
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
  m.device_bytes = m.reserved_bytes + c->plan.context_bytes;
  c->measured_from = trace;
  c->measured_peak = m;
  c->measured = MeasuredSamplesOf(run.value(), top);
  c->measured_label = "run " + trace + ", step " + std::to_string(top);
  return Status();
}

int RunCheck(const CheckArgs& a) {
  auto metric_r = ParseMetric(a.metric);
  if (!metric_r.ok()) {
    return Bad("--metric: " + metric_r.message());
  }
  std::string metric_name = a.metric;
  auto specs_r = SpecsOf(a, &metric_name);
  if (!specs_r.ok()) {
    return Bad(specs_r.message());
  }
  const std::vector<CheckSpec>& specs = specs_r.value();
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
    auto b = LoadBaseline(a.baseline);
    if (!b.ok()) {
      return Bad(b.message());
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
  std::vector<std::string> inputs = {a.config, a.baseline, a.trace};
  for (const CheckSpec& s : specs) {
    inputs.push_back(s.model_path);
  }
  std::vector<std::string> outputs = a.reports;
  if (!a.timeline.empty()) {
    outputs.push_back(a.timeline);
  }
  Status outputs_ok = CheckOutputs(outputs, inputs);
  if (!outputs_ok.ok()) {
    return Bad(outputs_ok.message());
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
      auto loaded = LoadGraph(s.model_path, a.model.max_nodes);
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
    Status load = CheckModelLoad(options.value(), {options->precision});
    if (!load.ok()) return bad(where + ": " + load.message());
    auto plan = PlanModel(g->second, bindings.value(), options.value());
    if (!plan.ok()) {
      return bad(where + ": " + plan.message());
    }
    for (std::string& w : ModelWarnings(g->second, s.plan_flags, options->mode)) {
      plan->warnings.push_back(std::move(w));
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
      Status st = GateRecordedRun(a.trace, &c);
      if (!st.ok()) {
        return bad(st.message());
      }
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
                  "Binds the batch symbol (the input symbol called 'batch', else dim 0 of the "
                  "first input)")
      ->default_str("")
      ->each([a = args.get()](const std::string&) { a->model.batch_given = true; });
  cmd->add_option("--batch-dim", args->model.batch_dim, "Names the symbol --batch binds");
  cmd->add_option("--dim", args->model.dims, "Binds a symbolic dim: NAME=VALUE (repeatable)");
  AddMaxNodesFlag(cmd, &args->model.max_nodes);
  AddPlanFlags(cmd, &args->plan, true);
  AddDistFlags(cmd, &args->plan);
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
