#ifndef MEMPLAN_PLANNER_TIMELINE_H_
#define MEMPLAN_PLANNER_TIMELINE_H_

/// The memory-over-time picture of a simulated step, one point per step.

#include <cstddef>
#include <vector>

#include "planner/allocator_sim.h"
#include "planner/plan.h"
#include "planner/simulator.h"

namespace memplan {

/// One point per step of events [e0, e1) of `sim` replayed as `res`, at the
/// step's highest moment (workspaces and temporaries come and go inside an
/// op), so the curve reaches the peak the numbers report.
[[nodiscard]] std::vector<TimelinePoint> TimelineOf(const Simulator& sim, const SimResult& res,
                                                    size_t e0, size_t e1);

/// Gives `timeline` (of one variant) the reserved line of `kept` (another
/// variant's timeline of the same step, whose reserved figure is reported).
/// `kept` may be `*timeline` itself: it is read in full before any write.
void MergeReservedLine(const std::vector<TimelinePoint>& kept,
                       std::vector<TimelinePoint>* timeline);

}  // namespace memplan

#endif  // MEMPLAN_PLANNER_TIMELINE_H_
