#ifndef MEMPLAN_PLANNER_RULES_H_
#define MEMPLAN_PLANNER_RULES_H_

// Which rule (evidence.h) an executed op of the schedule belongs to.

#include <string>

#include "planner/evidence.h"
#include "planner/schedule.h"

namespace memplan {

/// The rule an executed op's outputs belong to: its ONNX op, or the mechanism
/// a synthetic op stands for.
struct RuleRef {
  std::string name;  ///< "Conv", "autocast weight cache", ...
  bool is_op = false;
  Evidence evidence;
};
[[nodiscard]] RuleRef RuleOfOp(const Schedule& s, const ExecOp& op);
[[nodiscard]] RuleRef RuleOfMechanism(Mechanism m);

}  // namespace memplan

#endif  // MEMPLAN_PLANNER_RULES_H_
