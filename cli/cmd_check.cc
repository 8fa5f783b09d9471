// `memplan check`: not built yet in this version.
#include <iostream>

#include "cli/commands.h"

namespace memplan {

void AddCheckCommand(CLI::App* app, CliState* state) {
  auto* cmd = app->add_subcommand("check", "(not available in this build yet)");
  cmd->allow_extras();
  cmd->callback([state] {
    std::cerr << "memplan: error: 'check' is not available in this build yet\n";
    state->exit_code = kExitBadInput;
  });
}

}  // namespace memplan
