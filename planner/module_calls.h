#pragma once
/// Module calls and the tensors their Python frames keep alive.

#include "planner/graph.h"
#include "planner/schedule.h"

namespace memplan {

/// Sets Val::held_until for every tensor passed into a module call: PyTorch
/// runs `module(x)` with `x` referenced by the caller's argument tuple until
/// the call returns, even where the module's forward has read it for the last
/// time. A call is a maximal run of ops inside the module (Node::modules);
/// synthetic ops and nodes without module information belong to the op
/// that follows them.
void MarkModuleArguments(const Graph& g, Schedule* s);

}  // namespace memplan
