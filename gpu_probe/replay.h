#ifndef MEMPLAN_GPU_PROBE_REPLAY_H_
#define MEMPLAN_GPU_PROBE_REPLAY_H_

// The GPU-free half of validation: what to cudaMalloc when, where each block
// and kernel operand goes, which kernels to run, FLOPs, and the verdict. The
// CUDA half (gpu_probe_cuda.cc) only executes what these functions decide.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "gpu_probe/gpu_probe.h"
#include "planner/allocator_sim.h"
#include "planner/plan.h"
#include "planner/status.h"

namespace memplan {

/// One thing the replay does, in order.
struct ReplayStep {
  enum Kind { kSegment, kAlloc, kFree, kKernel } kind = kAlloc;
  size_t event = 0;    ///< Event index (kernels: the event they follow).
  int segment = -1;    ///< kSegment: the new segment; kAlloc/kFree: its segment.
  int64_t offset = 0;  ///< kAlloc/kFree: byte offset in the segment.
  int64_t bytes = 0;   ///< kSegment: segment size; kAlloc/kFree: block size.
  int64_t id = 0;      ///< kAlloc/kFree: the event's id.
  size_t kernel = 0;   ///< kKernel: index into the request's kernels.
};

/// For each event: the segments the simulation created at it, then the
/// alloc or free, then the kernels that follow it (in kernel order). An empty
/// `kernel_event` puts every kernel after the last event. Fails when the
/// simulation and the events disagree (unknown id, placement outside its
/// segment, kernel_event out of range).
Result<std::vector<ReplayStep>> BuildReplaySchedule(const std::vector<MemEvent>& events,
                                                    const SimResult& sim,
                                                    const std::vector<size_t>& kernel_event,
                                                    size_t num_kernels);

/// The dtype a kernel runs in. GEMM/conv: `compute` unless undefined, then
/// the shape's. Elementwise: the shape's if we have a kernel for it, else
/// `compute`, else fp32.
DType KernelDType(const KernelShape& shape, DType compute);

/// Bytes per element for fp32/bf16/fp16; 0 for anything we cannot run.
int KernelElementBytes(DType t);

/// Conv output height and width; false for bad dims.
bool ConvOutputHw(const KernelShape& conv, int64_t* ho, int64_t* wo);

/// FLOPs of one pass: GEMM 2mnk*batch; each conv pass 2*n*k*ho*wo*c*r*s;
/// elementwise 5 per element (a layernorm-like row kernel). Error on bad dims.
Result<int64_t> KernelFlops(const KernelShape& shape);

/// Operand sizes in bytes, elements of `t`: GEMM A, B, C; conv x, w, y(=dy),
/// dx, dw; elementwise in, out. Error on bad dims or overflow.
Result<std::vector<int64_t>> KernelOperandBytes(const KernelShape& shape, DType t);

/// Compulsory DRAM bytes of one pass (operands read + written once).
int64_t KernelTrafficBytes(const KernelShape& shape, const std::string& pass,
                           const std::vector<int64_t>& operand_bytes);

/// Which kernels run: one per distinct (kind, dims, dtype), at most
/// `max_kernels`, heaviest first with the kinds taken in turn so each kind is
/// represented. result[i] = index of the kernel whose measurement kernel i
/// reuses (itself when it runs), or -1 when it is not run.
std::vector<int> SelectKernels(const std::vector<KernelShape>& kernels, int max_kernels);

/// Where an operand goes: inside segment `segment` at `offset`, or on top
/// (segment -1: a temporary cudaMalloc).
struct OperandSlot {
  int segment = -1;
  int64_t offset = 0;
};

/// Packs operands (largest first, `align`-byte aligned, no two overlapping)
/// into the given segments, first fit; an operand that fits nowhere goes on
/// top. Live blocks hold only filler data, so operands may cover them.
std::vector<OperandSlot> CarveOperands(const std::vector<int64_t>& segment_bytes,
                                       const std::vector<int64_t>& operand_bytes,
                                       int64_t align = 256);

/// True when `bytes` more can be cudaMalloc'd leaving `margin` free.
bool MarginAllows(int64_t free_bytes, int64_t margin, int64_t bytes);

/// |measured - predicted| <= tolerance * predicted (a prediction of 0 passes).
bool WithinTolerance(int64_t measured, int64_t predicted, double tolerance);

/// Sets within_tolerance and message from the numbers already in `report`.
void FinishReport(double tolerance, ValidationReport* report);

/// Refuses, before anything is allocated, a replay whose segments
/// (`reserved_peak`) cannot fit in `free_bytes` minus `margin_bytes`: the
/// error says both in GiB. OK when it can.
Status RefuseBeyondDevice(int64_t reserved_peak, int64_t free_bytes, int64_t margin_bytes,
                          int device);

}  // namespace memplan

#endif  // MEMPLAN_GPU_PROBE_REPLAY_H_
