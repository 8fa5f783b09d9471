#ifndef MEMPLAN_CLI_CHECK_CONFIG_H_
#define MEMPLAN_CLI_CHECK_CONFIG_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "cli/options.h"
#include "planner/status.h"

namespace memplan {

/// The schema of `check --config` budget files: one check per entry, with
/// defaults shared by all.

/// One configuration to check, before planning.
struct CheckSpec {
  std::string where;       ///< "budgets.json: checks[1]" or the model path.
  std::string name;        ///< Given name, or empty (derived after planning).
  std::string model;       ///< As written (shown in reports).
  std::string model_path;  ///< Resolved against the config file's folder.
  std::string file;        ///< Annotation target.
  ModelFlags model_flags;
  PlanFlags plan_flags;
  int64_t budget = -1;
  std::string budget_text;
};

/// A device preset's memory less `margin` percent, and how to show it
/// ("H100 - 10%"); an error for an unknown device or a margin outside [0, 100).
[[nodiscard]] Result<std::pair<int64_t, std::string>> DeviceBudget(const std::string& device,
                                                                   double margin);

/// The checks of a `check --config` budget file: `text` is its contents and
/// `path` its name (for messages and to resolve model paths). Sets *metric
/// when the file names one.
[[nodiscard]] Result<std::vector<CheckSpec>> ParseCheckConfig(const std::string& text,
                                                              const std::string& path,
                                                              std::string* metric);

}  // namespace memplan

#endif  // MEMPLAN_CLI_CHECK_CONFIG_H_
