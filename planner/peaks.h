#ifndef MEMPLAN_PLANNER_PEAKS_H_
#define MEMPLAN_PLANNER_PEAKS_H_

/// Figures of a simulated step read from its allocator events: the peaks and
/// what they are made of, the per-module peaks, the inference arena bound,
/// the measured coverage.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "planner/allocator_sim.h"
#include "planner/graph.h"
#include "planner/options.h"
#include "planner/plan.h"
#include "planner/rules.h"
#include "planner/schedule.h"
#include "planner/simulator.h"

namespace memplan {

/// A rule's share, without bytes: whether measurements back it under `o`.
[[nodiscard]] RuleShare ShareOf(const RuleRef& r, const PlanOptions& o);

/// The peak over events [e0, e1) of `sim` replayed as `r`.
[[nodiscard]] Peak PeakOf(const Simulator& sim, const SimResult& r, size_t e0, size_t e1,
                          const PlanOptions& o);

/// The allocated peak of each module over events [e0, e1).
[[nodiscard]] std::vector<ModulePeak> ModulePeaksOf(const Graph& g, const Schedule& s,
                                                    const Simulator& sim, const SimResult& r,
                                                    size_t e0, size_t e1);

/// Inference: the most activation bytes live at once over events [e0, e1)
/// (the lower bound of packing them into one arena).
[[nodiscard]] int64_t ArenaLowerBoundOf(const Simulator& sim, size_t e0, size_t e1);

/// Fills the bytes of plan->coverage from the peak's rules.
void FillCoverage(Plan* plan);

}  // namespace memplan

#endif  // MEMPLAN_PLANNER_PEAKS_H_
