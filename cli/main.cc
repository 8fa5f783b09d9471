// memplan: predicts the GPU memory of a PyTorch model from its ONNX export.
#include <exception>
#include <new>
#include <iostream>

#include "cli/commands.h"
#include "cli/files.h"

int main(int argc, char** argv) {
  CLI::App app{"memplan: GPU memory planning for PyTorch models, from their ONNX export",
               "memplan"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "memplan 0.1.0");
  memplan::CliState state;
  memplan::AddInspectCommand(&app, &state);
  memplan::AddPlanCommand(&app, &state);
  memplan::AddAdviseCommand(&app, &state);
  memplan::AddCheckCommand(&app, &state);
  memplan::AddProbeCommand(&app, &state);
  memplan::AddValidateCommand(&app, &state);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "memplan: " << e.what() << "\n";
    return memplan::kExitBadInput;
  } catch (const std::bad_alloc&) {
    std::cerr << "memplan: error: " << memplan::OutOfMemoryMessage() << "\n";
    return memplan::kExitBadInput;
  } catch (const std::exception& e) {
    std::cerr << "memplan: error: " << memplan::Status::Error(e.what()).message() << "\n";
    return memplan::kExitBadInput;
  }
  return state.exit_code;
}
