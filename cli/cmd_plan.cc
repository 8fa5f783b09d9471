// `memplan plan`: the peak memory of one configuration.
#include <iostream>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/options.h"

namespace memplan {
namespace {

struct PlanArgs {
  ModelFlags model;
  PlanFlags plan;
  std::string format;
};

int RunPlan(const PlanArgs& a) {
  auto loaded = LoadGraph(a.model.model);
  if (!loaded.ok()) return Fail(loaded.message());
  auto bindings = ToBindings(a.model);
  if (!bindings.ok()) return Fail(bindings.message());
  auto options = ToPlanOptions(a.plan);
  if (!options.ok()) return Fail(options.message());
  std::vector<std::string> warnings;
  auto g = BindShapes(loaded.value(), bindings.value(), &warnings);
  if (!g.ok()) return Fail(g.message());
  PrintWarnings(warnings);
  auto plan = MakePlan(g.value(), bindings->batch, options.value());
  if (!plan.ok()) return Fail(plan.message());
  PrintWarnings(plan->warnings);
  if (a.format == "json") {
    std::cout << PlanJson(a.model.model, plan.value()).dump(2) << "\n";
  } else {
    std::cout << PlanTable(a.model.model, plan.value());
  }
  return kExitOk;
}

}  // namespace

void AddPlanCommand(CLI::App* app, CliState* state) {
  auto* cmd = app->add_subcommand("plan", "Peak GPU memory of a training step or inference pass");
  auto args = std::make_shared<PlanArgs>();
  AddModelFlags(cmd, &args->model);
  AddPlanFlags(cmd, &args->plan, true);
  AddFormatFlag(cmd, &args->format, {"table", "json"});
  cmd->callback([args, state] { state->exit_code = RunPlan(*args); });
}

}  // namespace memplan
