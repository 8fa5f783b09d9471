#include "planner/op_registry.h"

namespace memplan {

void RegisterNnOps(OpTable* /*t*/) {}

}  // namespace memplan
