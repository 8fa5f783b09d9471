#include "planner/op_registry.h"

namespace memplan {

void RegisterShapeOps(OpTable* /*t*/) {}

}  // namespace memplan
