#ifndef MEMPLAN_PLANNER_KERNELS_H_
#define MEMPLAN_PLANNER_KERNELS_H_

/// The kernels a step runs, as the plan reports them: representative shapes
/// for GPU validation, and the tensors past PyTorch's 32-bit indexing.

#include <vector>

#include "planner/graph.h"
#include "planner/plan.h"
#include "planner/schedule.h"

namespace memplan {

/// The largest GEMM and convolution (by flops) and the largest floating
/// elementwise output of `s`, at most one of each.
void KernelsOf(const Graph& g, const Schedule& s, std::vector<KernelShape>* out);

// The largest tensor of the step, and the largest one over the 32-bit limit
// that an op with a 32-bit-indexing kernel reads or writes (backward's
// gradients have the same shapes).
void KernelLimitsOf(const Schedule& s, Plan* plan);

}  // namespace memplan

#endif  // MEMPLAN_PLANNER_KERNELS_H_
