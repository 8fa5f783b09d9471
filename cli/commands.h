#ifndef MEMPLAN_CLI_COMMANDS_H_
#define MEMPLAN_CLI_COMMANDS_H_

#include <CLI/CLI.hpp>

namespace memplan {

/// Exit codes of the memplan binary.
enum ExitCode { kExitOk = 0, kExitOverBudget = 1, kExitBadInput = 2, kExitGpu = 3 };

/// Shared by the subcommands: where each writes its exit code.
struct CliState {
  int exit_code = kExitOk;
};

/// Each adds one subcommand to `app`; its callback sets state->exit_code.
void AddInspectCommand(CLI::App* app, CliState* state);
void AddPlanCommand(CLI::App* app, CliState* state);
void AddAdviseCommand(CLI::App* app, CliState* state);
void AddCheckCommand(CLI::App* app, CliState* state);
void AddProbeCommand(CLI::App* app, CliState* state);
void AddValidateCommand(CLI::App* app, CliState* state);
void AddSweepCommand(CLI::App* app, CliState* state);
void AddCompareCommand(CLI::App* app, CliState* state);
void AddEstimateCommand(CLI::App* app, CliState* state);

}  // namespace memplan

#endif  // MEMPLAN_CLI_COMMANDS_H_
