// `memplan plan`: the peak memory of one configuration.
#include <chrono>
#include <iostream>

#include "cli/allocator_report.h"
#include "cli/commands.h"
#include "cli/files.h"
#include "cli/format.h"
#include "cli/options.h"
#include "cli/report.h"
#include "cli/run_trace.h"

namespace memplan {
namespace {

struct PlanArgs {
  ModelFlags model;
  PlanFlags plan;
  std::string format;
  std::string timeline;
  std::string compare;  ///< A recorded run (memplan_torch trace) to compare with.
  size_t compare_rows = 20;
  std::vector<std::string> reports;
  bool allocator_advice = false;
};

// One format of the plan (json and table with the --compare side when there
// is one); md, junit and html reuse the check report with no budget.
std::string RenderPlan(const std::string& format, const std::string& model, const ReportCase& c,
                       const Result<RunTrace>& run, const Comparison& cmp, size_t rows,
                       const AllocatorAdvice* advice) {
  const std::string title = "memplan plan: " + c.name;
  if (format == "json") {
    nlohmann::json j = PlanJson(model, c.plan);
    if (run.ok()) j["compare"] = ComparisonJson(cmp, run.value());
    if (advice != nullptr) j["allocator_advice"] = AllocatorAdviceJson(*advice, c.plan.options);
    return j.dump(2) + "\n";
  }
  if (format == "md") return PlanMarkdown(model, c.plan);
  if (format == "junit") return CheckJUnit(title, {c});
  if (format == "html") return CheckHtml(title, {c});
  std::string out = PlanTable(model, c.plan);
  if (advice != nullptr) out += AllocatorAdviceText(*advice, c.plan.options);
  if (run.ok()) out += ComparisonTable(cmp, run.value(), rows);
  return out;
}

int RunPlan(const PlanArgs& a) {
  if (!a.compare.empty() && a.format != "table" && a.format != "json") {
    return Fail("--compare: works with --format table or json, not " + a.format);
  }
  if (a.allocator_advice) {
    auto advisable = [](const std::string& f) { return f == "table" || f == "json"; };
    bool ok = advisable(a.format);
    for (const std::string& r : a.reports) {
      auto f = FormatOfPath(r);
      ok &= !f.ok() || advisable(f.value());
    }
    if (!ok)
      return Fail(
          "--allocator-advice: works with --format table or json (and such --report files)");
  }
  std::vector<std::string> formats;
  for (const std::string& r : a.reports) {
    auto f = FormatOfPath(r);
    if (!f.ok()) return Fail(f.message());
    formats.push_back(f.value());
  }
  std::vector<std::string> outputs = a.reports;
  outputs.push_back(a.timeline);
  Status outputs_ok = CheckOutputs(outputs, {a.model.model, a.compare});
  if (!outputs_ok.ok()) return Fail(outputs_ok.message());
  const auto t0 = std::chrono::steady_clock::now();
  auto plan = PlanFromFlags(a.model, a.plan, false);
  if (!plan.ok()) {
    return Fail(plan.message());
  }
  AllocatorAdvice advice;
  if (a.allocator_advice) {
    auto g = LoadGraph(a.model.model, a.model.max_nodes);
    auto b = ToBindings(a.model);
    auto o = ToPlanOptions(a.plan);
    if (!g.ok() || !b.ok() || !o.ok()) return Fail("--allocator-advice: the plan's inputs changed");
    auto adv = AdviseAllocator(g.value(), b.value(), o.value());
    if (!adv.ok()) return Fail(a.model.model + ": --allocator-advice: " + adv.message());
    advice = adv.value();
  }
  const AllocatorAdvice* advice_ptr = a.allocator_advice ? &advice : nullptr;
  ReportCase c;
  c.model = c.file = a.model.model;
  c.plan = plan.value();
  c.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const size_t slash = a.model.model.find_last_of('/');
  c.name = (slash == std::string::npos ? a.model.model : a.model.model.substr(slash + 1)) + " " +
           ConfigLabel(c.plan);
  Result<RunTrace> run = Status::Error("");
  Comparison cmp;
  if (!a.compare.empty()) {
    run = ReadRunTrace(a.compare);
    if (!run.ok()) {
      return Fail(run.message());
    }
    cmp = ComparePlanWithRun(plan.value(), run.value());
    c.measured = MeasuredSamplesOf(run.value(), cmp.steady_step);
    c.measured_label = "run " + a.compare + ", step " + std::to_string(cmp.steady_step);
  }
  if (!a.timeline.empty()) {
    Status s = WriteFileAtomically(a.timeline, CheckTimelineSvg({c}));
    if (!s.ok()) {
      return Fail(s.message());
    }
  }
  for (size_t i = 0; i < a.reports.size(); ++i) {
    Status s = WriteFileAtomically(a.reports[i], RenderPlan(formats[i], a.model.model, c, run, cmp,
                                                            a.compare_rows, advice_ptr));
    if (!s.ok()) return Fail(s.message());
  }
  PrintWarnings(c.plan.warnings);
  std::cout << RenderPlan(a.format, a.model.model, c, run, cmp, a.compare_rows, advice_ptr);
  return kExitOk;
}

}  // namespace

void AddPlanCommand(CLI::App* app, CliState* state) {
  auto* cmd = app->add_subcommand("plan", "Peak GPU memory of a training step or inference pass");
  auto args = std::make_shared<PlanArgs>();
  AddModelFlags(cmd, &args->model);
  AddPlanFlags(cmd, &args->plan, true);
  AddDistFlags(cmd, &args->plan);
  AddFormatFlag(cmd, &args->format, {"table", "json", "md", "junit", "html"});
  cmd->add_option("--timeline", args->timeline, "Writes the memory timeline SVG here");
  cmd->add_option("--compare", args->compare,
                  "A recorded run (memplan_torch trace JSON): plan and run side by side per "
                  "step, phase and module; --timeline draws both");
  cmd->add_option("--compare-rows", args->compare_rows,
                  "Module rows --compare prints, largest differences first (0: all)");
  cmd->add_option("--report", args->reports,
                  "Also writes the plan to FILE, in the format of its extension (.json, .md, "
                  ".xml = junit, .html, .txt = table; repeatable)");
  cmd->add_flag("--allocator-advice", args->allocator_advice,
                "Adds what expandable_segments, max_split_size_mb, empty_cache() and no_grad "
                "evaluation change for this step (table and json)");
  cmd->callback([args, state] { state->exit_code = RunPlan(*args); });
}

}  // namespace memplan
