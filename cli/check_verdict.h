#ifndef MEMPLAN_CLI_CHECK_VERDICT_H_
#define MEMPLAN_CLI_CHECK_VERDICT_H_

/// The CI gate's logic: which peak a budget is compared with, the verdict on
/// one configuration (pass, over budget, regression, near miss), the exit
/// status of a run.

#include <cstdint>
#include <string>
#include <vector>

#include "cli/timeline_svg.h"
#include "planner/plan.h"
#include "planner/status.h"

namespace memplan {

/// Which peak a budget is compared with.
enum class Metric { kAllocated, kReserved, kDevice };
const char* MetricName(Metric m);
Result<Metric> ParseMetric(const std::string& s);
/// The bytes of `p` that `m` names.
int64_t MetricBytes(const Peak& p, Metric m);

/// The verdict on one configuration.
enum class CheckStatus { kPass, kNoBudget, kOverBudget, kRegression };
/// "pass", "no_budget", "over_budget", "regression".
const char* CheckStatusName(CheckStatus s);

/// One planned configuration, its budget and its baseline.
/// A pass with less than this share of the budget left is a near miss.
constexpr double kNearMissPercent = 5.0;

struct ReportCase {
  std::string name;   ///< Stable id, used to match baselines.
  std::string model;  ///< Model path as given.
  std::string file;   ///< Where annotations point (config file, else model).
  Plan plan;
  Metric metric = Metric::kDevice;
  int64_t budget_bytes = -1;             ///< -1: no budget.
  std::string budget_text;               ///< How the budget was written ("40GiB", "H100 - 10%").
  int64_t baseline_bytes = -1;           ///< The previous run's metric; -1: none.
  double max_increase_pct = 0;           ///< Allowed growth over the baseline.
  double seconds = 0;                    ///< Time spent planning.
  std::vector<MeasuredSample> measured;  ///< A recorded run drawn over the timeline.
  std::string measured_label;

  /// A recorded run's peaks (check --trace), gated instead of the plan's.
  std::string measured_from;  ///< The trace file; empty: gate the plan.
  Peak measured_peak;         ///< allocated, reserved, device (reserved + context).

  const Peak& gated_peak() const { return measured_from.empty() ? plan.peak : measured_peak; }
  int64_t value() const { return MetricBytes(gated_peak(), metric); }
  int64_t headroom() const { return budget_bytes - value(); }
  CheckStatus status() const;
  /// Passes with less than kNearMissPercent of the budget left: shown as a
  /// warning in every format.
  bool near_miss() const;
  /// "within 5% of the budget (headroom 197 MiB)" when near_miss(), else "".
  std::string near_miss_text() const;
  /// Percent growth over the baseline (0 when there is none).
  double increase_pct() const;
};

/// "train b8 amp_bf16 adamw": the configuration in a few words.
std::string ConfigLabel(const Plan& plan);
/// True when the case is over its budget or regressed.
bool CaseFailed(const ReportCase& c);
/// Exit status of a set of cases: 1 if any failed, else 0.
int CheckExitCode(const std::vector<ReportCase>& cases);

}  // namespace memplan

#endif  // MEMPLAN_CLI_CHECK_VERDICT_H_
