#include "planner/op_registry.h"

namespace memplan {

void RegisterElementwiseOps(OpTable* /*t*/) {}

}  // namespace memplan
