#ifndef MEMPLAN_PLANNER_PLAN_STEP_H_
#define MEMPLAN_PLANNER_PLAN_STEP_H_

/// One plan from one schedule: the step simulated, its allocator events
/// replayed, the figures read off them.

#include <cstdint>

#include "planner/graph.h"
#include "planner/options.h"
#include "planner/plan.h"
#include "planner/schedule.h"
#include "planner/status.h"

namespace memplan {

/// Plans one step of schedule `s` of `g` (one variant of the options);
/// kPeaks leaves the per-module peaks and the kernel shapes out.
/// `in_place_matters` (may be null) is set to Simulator::in_place_matters:
/// false when planning with the other options.inplace would give this plan.
/// With `reserved_limit` >= 0, a plan whose reserved peak is sure to be
/// above it stops early (Plan::over_limit; see MakePlanFrom).
[[nodiscard]] Result<Plan> PlanSchedule(const Graph& g, int64_t batch, const PlanOptions& options,
                                        const Schedule& s, PlanDetail detail = PlanDetail::kFull,
                                        bool* in_place_matters = nullptr,
                                        int64_t reserved_limit = -1);

}  // namespace memplan

#endif  // MEMPLAN_PLANNER_PLAN_STEP_H_
