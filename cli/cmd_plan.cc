// `memplan plan`: the peak memory of one configuration.
#include <iostream>

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
};

int RunPlan(const PlanArgs& a) {
  if (!a.compare.empty() && a.format != "table" && a.format != "json") {
    return Fail("--compare: works with --format table or json, not " + a.format);
  }
  if (!a.timeline.empty()) {
    Status s = CheckOutputIsNotInput(a.timeline, {a.model.model, a.compare});
    if (!s.ok()) {
      return Fail(s.message());
    }
  }
  auto plan = PlanFromFlags(a.model, a.plan, false);
  if (!plan.ok()) {
    return Fail(plan.message());
  }
  Result<RunTrace> run = Status::Error("");
  Comparison cmp;
  if (!a.compare.empty()) {
    run = ReadRunTrace(a.compare);
    if (!run.ok()) {
      return Fail(run.message());
    }
    cmp = ComparePlanWithRun(plan.value(), run.value());
  }
  // md, junit and html reuse the check report with no budget.
  ReportCase c;
  if (a.format == "md" || a.format == "junit" || a.format == "html" || !a.timeline.empty()) {
    c.model = c.file = a.model.model;
    c.plan = plan.value();
    const size_t slash = a.model.model.find_last_of('/');
    c.name = (slash == std::string::npos ? a.model.model : a.model.model.substr(slash + 1)) + " " +
             ConfigLabel(c.plan);
    if (run.ok()) {
      c.measured = MeasuredSamplesOf(run.value(), cmp.steady_step);
      c.measured_label = "run " + a.compare + ", step " + std::to_string(cmp.steady_step);
    }
  }
  if (!a.timeline.empty()) {
    Status s = WriteFileAtomically(a.timeline, CheckTimelineSvg({c}));
    if (!s.ok()) {
      return Fail(s.message());
    }
  }
  const std::string title = "memplan plan: " + c.name;
  if (a.format == "json") {
    nlohmann::json j = PlanJson(a.model.model, plan.value());
    if (run.ok()) j["compare"] = ComparisonJson(cmp, run.value());
    std::cout << j.dump(2) << "\n";
  } else if (a.format == "md") {
    std::cout << CheckMarkdown(title, {c});
  } else if (a.format == "junit") {
    std::cout << CheckJUnit(title, {c});
  } else if (a.format == "html") {
    std::cout << CheckHtml(title, {c});
  } else {
    std::cout << PlanTable(a.model.model, plan.value());
    if (run.ok()) std::cout << ComparisonTable(cmp, run.value(), a.compare_rows);
  }
  return kExitOk;
}

}  // namespace

void AddPlanCommand(CLI::App* app, CliState* state) {
  auto* cmd = app->add_subcommand("plan", "Peak GPU memory of a training step or inference pass");
  auto args = std::make_shared<PlanArgs>();
  AddModelFlags(cmd, &args->model);
  AddPlanFlags(cmd, &args->plan, true);
  AddFormatFlag(cmd, &args->format, {"table", "json", "md", "junit", "html"});
  cmd->add_option("--timeline", args->timeline, "Writes the memory timeline SVG here");
  cmd->add_option("--compare", args->compare,
                  "A recorded run (memplan_torch trace JSON): plan and run side by side per "
                  "step, phase and module; --timeline draws both");
  cmd->add_option("--compare-rows", args->compare_rows,
                  "Module rows --compare prints, largest differences first (0: all)")
      ->check(CLI::NonNegativeNumber);
  cmd->callback([args, state] { state->exit_code = RunPlan(*args); });
}

}  // namespace memplan
