#ifndef MEMPLAN_CLI_TIMELINE_SVG_H_
#define MEMPLAN_CLI_TIMELINE_SVG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "planner/plan.h"

namespace memplan {

/// A measured point of a real run, drawn over the plan (memplan_torch trace).
struct MeasuredSample {
  int phase = -1;         ///< Phase as int; -1: unknown (spread over the whole step).
  double seconds = 0;     ///< Since the step began.
  int64_t allocated = 0;  ///< Peak allocated of the interval ending here.
  int64_t reserved = 0;
};

/// What a chart shows besides the plan.
struct TimelineStyle {
  int width = 1200;
  int height = 540;
  std::string title;          ///< Defaults to nothing: the caller names the model.
  int64_t budget_bytes = -1;  ///< Draws a budget line when >= 0 (off-chart note when far above).
  std::string budget_label;   ///< Text at the line; defaults to "budget <size>".
  /// A measured run drawn over the plan: each phase's samples spread over the
  /// plan's band of that phase by their time within it.
  std::vector<MeasuredSample> measured;
  std::string measured_label;  ///< Legend text, e.g. "run trace.json, step 4".
};

/// Axis ticks in binary units: values in bytes and their labels ("2 GiB").
struct AxisTicks {
  std::vector<int64_t> values;
  std::vector<std::string> labels;
  int64_t top = 0;  ///< The axis maximum (the last tick).
};
/// Nice ticks (1, 2, 2.5, 5 x 10^k of MiB/GiB) from 0 up to at least `max_bytes`.
AxisTicks BytesTicks(int64_t max_bytes, int target_count = 6);
/// Nice integer ticks from 0 up to at least `max_value`.
std::vector<int64_t> CountTicks(int64_t max_value, int target_count = 8);

/// Colour of a category's area ("#4e79a7").
const char* CategoryColor(Category c);

/// One chart as an <svg> element (stacked areas by category, allocated and reserved
/// lines, phase bands, the peak, the budget), `y` pixels down in an outer document.
std::string TimelineChart(const Plan& plan, const TimelineStyle& style, int y = 0);
/// A standalone SVG document with the charts stacked vertically.
std::string TimelineDocument(const std::vector<std::string>& charts, int width, int height);

}  // namespace memplan

#endif  // MEMPLAN_CLI_TIMELINE_SVG_H_
