#ifndef MEMPLAN_PLANNER_ALLOCATOR_SIM_H_
#define MEMPLAN_PLANNER_ALLOCATOR_SIM_H_

#include <cstdint>
#include <limits>
#include <vector>

#include "planner/status.h"

namespace memplan {

/// One allocator request: allocate `bytes` under `id`, or free `id`.
struct MemEvent {
  int64_t id = 0;
  int64_t bytes = 0;  ///< Requested size (alloc only; ignored for free).
  bool is_alloc = true;
};

/// Knobs of PyTorch's CUDA caching allocator that change the numbers.
struct AllocatorConfig {
  bool expandable_segments = false;  ///< PYTORCH_CUDA_ALLOC_CONF expandable_segments:True
  int64_t max_split_size = std::numeric_limits<int64_t>::max();  ///< max_split_size_mb
  int64_t device_limit = 0;  ///< cudaMalloc fails past this many reserved bytes; 0 = none.
};

/// Where one allocation landed.
struct Placement {
  int segment = -1;    ///< Index into SimResult::segment_bytes.
  int64_t offset = 0;  ///< Byte offset inside the segment.
  int64_t block = 0;   ///< Block size taken (rounded; may exceed the request).
};

/// The replay's outcome.
struct SimResult {
  int64_t peak_allocated = 0;  ///< max memory_allocated (block sizes).
  int64_t peak_reserved = 0;   ///< max memory_reserved.
  size_t peak_event = 0;       ///< Event index at which allocated peaked.
  int64_t reserved_at_peak = 0;
  std::vector<int64_t> allocated_after;  ///< Per event.
  std::vector<int64_t> reserved_after;   ///< Per event.
  std::vector<int64_t> segment_bytes;    ///< Every segment ever created.
  std::vector<size_t> segment_created;   ///< Event index that created it.
  std::vector<Placement> placements;     ///< Per event (alloc events only).
  bool oom = false;                      ///< A request could not be served.
  size_t oom_event = 0;
};

/// Request size rounding of the caching allocator (512 B multiples).
int64_t RoundAllocation(int64_t bytes);

/// Replays `events` through a model of c10/cuda/CUDACachingAllocator.cpp:
/// small (<= 1 MiB) and large pools, 2 MiB / 20 MiB / 2 MiB-rounded segments,
/// best fit, split rules, coalescing on free, release of cached segments and
/// retry when `device_limit` would be exceeded. Fails on a free of an unknown
/// id or a double allocation of one id.
Result<SimResult> SimulateCachingAllocator(const std::vector<MemEvent>& events,
                                           const AllocatorConfig& config);

}  // namespace memplan

#endif  // MEMPLAN_PLANNER_ALLOCATOR_SIM_H_
