#ifndef MEMPLAN_CLI_RUN_TRACE_H_
#define MEMPLAN_CLI_RUN_TRACE_H_

/// A recorded run (memplan_torch's trace, docs/trace-schema.md) and its
/// comparison with a plan: per step, phase and module, predicted vs measured.

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/timeline_svg.h"
#include "planner/plan.h"
#include "planner/status.h"

namespace memplan {

/// One boundary the monitor saw (or one allocator action of a snapshot).
struct RunSample {
  double seconds = 0;
  int phase = -1;              ///< Phase as int; -1: unknown.
  int64_t peak_allocated = 0;  ///< Peak of the interval ending here.
  int64_t allocated = 0;       ///< memory_allocated() here.
  int64_t reserved = 0;        ///< memory_reserved() here.
};

/// A module's figures in one step; -1 (kept: INT64_MIN): not measured.
struct RunModule {
  int64_t forward = -1;  ///< Peak allocated during its forward calls.
  int64_t backward = -1;
  int64_t forward_rise = -1;         ///< Most a call rose above its start.
  int64_t forward_kept = INT64_MIN;  ///< Allocated at calls' ends minus at their starts.
  int64_t backward_rise = -1;
};

/// One optimizer step of the run.
struct RunStep {
  int index = 0;
  int64_t peak_allocated = 0;
  int64_t peak_reserved = 0;
  int64_t phase_allocated[3] = {-1, -1, -1};  ///< -1: phase not recorded.
  int64_t phase_reserved[3] = {-1, -1, -1};
  std::map<std::string, RunModule> modules;
  std::vector<RunSample> samples;
};

/// A trace file, as read.
struct RunTrace {
  std::string path;
  std::string producer;
  std::string device_name;
  int64_t device_total = 0;
  std::vector<RunStep> steps;
  int leaks = 0;
  std::vector<std::string> warnings;  ///< The run's own warnings (messages).
};

/// Reads and checks a trace file; errors name the file and the field.
[[nodiscard]] Result<RunTrace> ReadRunTrace(const std::string& path);
/// The same from a parsed document (`path` names it in errors).
[[nodiscard]] Result<RunTrace> ParseRunTrace(const nlohmann::json& doc, const std::string& path);

/// One compared figure.
struct CompareRow {
  std::string what;    ///< "step", "phase" or "module".
  std::string name;    ///< "steady", "forward", "transformer.h.3".
  std::string phase;   ///< "forward", "backward", "" for a whole step.
  std::string metric;  ///< "allocated", "reserved"; modules: "rise", "kept".
  int64_t predicted = 0;
  int64_t measured = 0;
  int64_t diff() const { return measured - predicted; }
  /// Percent of the measured figure the plan is off by (+: the plan is short).
  double pct() const;
};

/// The plan and the run side by side.
struct Comparison {
  int steady_step = -1;             ///< The trace step compared with the plan's steady step.
  std::vector<CompareRow> steps;    ///< First and steady step peaks.
  std::vector<CompareRow> phases;   ///< The steady step's phases.
  std::vector<CompareRow> modules;  ///< Largest |diff| first.
  int modules_planned = 0;
  int modules_measured = 0;
  int modules_matched = 0;
  /// Leading name components dropped from the plan's module names to match
  /// the run's ("m." when the export wrapped the model): 0 or 1.
  int stripped_components = 0;
};

/// Compares `plan` with `run`: step 0 with the first step, the last step with
/// the steady one (train), or the last step with the pass (inference).
[[nodiscard]] Comparison ComparePlanWithRun(const Plan& plan, const RunTrace& run);

/// The samples of the run's step `index` for drawing over the plan's timeline.
std::vector<MeasuredSample> MeasuredSamplesOf(const RunTrace& run, int index);

/// The `--compare` table; at most `max_modules` module rows (0: all).
std::string ComparisonTable(const Comparison& c, const RunTrace& run, size_t max_modules);
/// The `--compare` JSON (the plan JSON's "compare" key).
nlohmann::json ComparisonJson(const Comparison& c, const RunTrace& run);

}  // namespace memplan

#endif  // MEMPLAN_CLI_RUN_TRACE_H_
