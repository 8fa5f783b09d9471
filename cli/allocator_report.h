#ifndef MEMPLAN_CLI_ALLOCATOR_REPORT_H_
#define MEMPLAN_CLI_ALLOCATOR_REPORT_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "planner/options.h"
#include "planner/whatif.h"

namespace memplan {

/// The recommendations, one line each, with their figures
/// ("expandable_segments:True: reserved 7.71 -> 7.21 GiB (-0.50 GiB) ...").
std::vector<std::string> AllocatorRecommendations(const AllocatorAdvice& a, const PlanOptions& o);
/// The advice as a table section (after the plan).
std::string AllocatorAdviceText(const AllocatorAdvice& a, const PlanOptions& o);
/// The advice as the plan JSON's "allocator_advice" object.
nlohmann::json AllocatorAdviceJson(const AllocatorAdvice& a, const PlanOptions& o);

}  // namespace memplan

#endif  // MEMPLAN_CLI_ALLOCATOR_REPORT_H_
