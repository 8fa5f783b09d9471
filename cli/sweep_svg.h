#ifndef MEMPLAN_CLI_SWEEP_SVG_H_
#define MEMPLAN_CLI_SWEEP_SVG_H_

#include <string>
#include <vector>

#include "planner/whatif.h"

namespace memplan {

/// What a sweep chart shows besides the curves.
struct SweepChartStyle {
  std::string title;         ///< The model and the configuration.
  std::string dim;           ///< The swept symbol (x axis).
  bool log_x = false;        ///< A geometric range: x on a log scale.
  int64_t budget_bytes = 0;  ///< > 0: the budget line.
  int64_t usable_bytes = 0;  ///< > 0: the usable line (budget less the margin).
  int width = 1100;
  int height = 560;
};

/// A standalone SVG: per precision the device (solid), reserved (dashed) and
/// allocated (dotted) peaks against the dim, the budget line, and a marker at
/// each precision's largest fitting value.
std::string SweepSvg(const std::vector<SweepCurve>& curves, const SweepChartStyle& style);

}  // namespace memplan

#endif  // MEMPLAN_CLI_SWEEP_SVG_H_
