#ifndef MEMPLAN_PLANNER_ALLOCATOR_SIM_H_
#define MEMPLAN_PLANNER_ALLOCATOR_SIM_H_

#include <cstdint>
#include <functional>
#include <limits>
#include <utility>
#include <vector>

#include "planner/options.h"
#include "planner/status.h"

namespace memplan {

/// One allocator request: allocate `bytes` under `id`, or free `id`.
struct MemEvent {
  int64_t id = 0;
  int64_t bytes = 0;  ///< Requested size (alloc only; ignored for free).
  bool is_alloc = true;
  bool empty_cache = false;  ///< torch.cuda.empty_cache(): id and bytes unused.
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
  /// Per event, index = event index. Set for alloc events; a free event or a
  /// size-0 alloc keeps the default (segment -1, block 0).
  std::vector<Placement> placements;
  /// The replay stopped at its StopAbove limit (reserved over it): the
  /// per-event vectors end with the event that went over.
  bool stopped_above = false;
  bool oom = false;           ///< A request could not be served.
  size_t oom_event = 0;       ///< The failed event; the per-event vectors end with it.
  int64_t alloc_retries = 0;  ///< Like num_alloc_retries: requests that hit release_cached_blocks.
};

/// Request size rounding of the caching allocator (512 B multiples, at least
/// 512 B). 0 (and anything negative) gives 0: PyTorch hands out no block for
/// an empty tensor.
int64_t RoundAllocation(int64_t bytes);

/// Size of the cudaMalloc segment made for a rounded request that found no
/// cached block: <= 1 MiB -> 2 MiB, < 10 MiB -> 20 MiB, else rounded up to 2 MiB.
int64_t SegmentAllocationSize(int64_t rounded_bytes);

/// Replays `events` through a model of c10/cuda/CUDACachingAllocator.cpp
/// (PyTorch 2.x).
///
/// Modelled:
/// - rounding to 512 B; small pool for rounded sizes <= 1 MiB, large otherwise;
/// - new segments of 2 MiB / 20 MiB / request rounded up to 2 MiB;
/// - best fit: smallest free block >= request in the pool, ties to the lowest
///   address; segments over 20 MiB are mapped below all earlier ones, smaller
///   ones above (as the driver does: bench/trace_replay on real traces);
/// - splitting: small pool when the remainder is >= 512 B, large pool when the
///   request is < max_split_size and the remainder is > 1 MiB;
/// - max_split_size: a request below it never takes a block >= it, a request
///   at or above it never takes a block >= request + 20 MiB (kLargeBuffer);
///   like PyTorch only the best-fit candidate is checked;
/// - coalescing of a freed block with free neighbours of its segment;
/// - device_limit (a failing cudaMalloc / cuMemCreate): first release the
///   cached oversize segments (release_available_cached_blocks, only when
///   max_split_size is set), then all fully free segments (release_cached_blocks),
///   then retry; if it still does not fit, oom = true and the replay stops;
/// - expandable_segments: one growing virtual segment per pool, mapped in
///   pages of 2 MiB (small pool) or 20 MiB (large pool); blocks split at
///   512 B in both pools; best fit that prefers blocks not at the growing end;
///   new pages are mapped at the lowest address that can hold the request
///   (merging with a free block before it); on release, whole free pages are
///   unmapped. segment_bytes holds the most bytes ever mapped in the segment.
///
/// Not modelled: streams (one stream; no cross-stream reuse rules, no
/// record_stream, no CUDA events delaying frees), CUDA graph private pools,
/// garbage_collection_threshold, roundup_power2_divisions,
/// set_per_process_memory_fraction (device_limit acts like the driver running
/// out), empty_cache() calls inside the trace, and the virtual address space
/// running out (so never a second expandable segment per pool).
///
/// Fails on a negative size, a free of an unknown id, a double allocation of
/// one live id, a size past 2^50 (or a total past 2^60), or max_split_size below 20 MiB.
Result<SimResult> SimulateCachingAllocator(const std::vector<MemEvent>& events,
                                           const AllocatorConfig& config);

/// Called after each event a CachingAllocatorReplay replays once Observe()d:
/// the event's index, the block its allocation took (0 for a free, an
/// empty_cache or a size-0 request), and memory_allocated and
/// memory_reserved after it; false stops the replay there for good.
using ReplayObserver =
    std::function<bool(size_t event, int64_t block, int64_t allocated, int64_t reserved)>;

/// SimulateCachingAllocator in parts: Replay(events, end) goes on from the
/// last event replayed to `end` (events may have grown in between), and
/// State() is the allocator's state between two events, so that a caller can
/// tell that a stretch of events left it as it found it.
class CachingAllocatorReplay {
 public:
  explicit CachingAllocatorReplay(const AllocatorConfig& config);
  ~CachingAllocatorReplay();
  CachingAllocatorReplay(const CachingAllocatorReplay&) = delete;
  CachingAllocatorReplay& operator=(const CachingAllocatorReplay&) = delete;

  /// Replays events [replayed(), end); an error as SimulateCachingAllocator
  /// gives it (the replay then stops for good). Stops at an out-of-memory.
  [[nodiscard]] Status Replay(const std::vector<MemEvent>& events, size_t end);
  /// From now on the replay stops, for good, at the first event before
  /// `before_event` after which more than `reserved` bytes are reserved
  /// (SimResult::stopped_above). Without an empty_cache event the reserved
  /// bytes never fall, so the peak of any stretch ending at or after that
  /// event is above `reserved` too: a fit test stops there.
  void StopAbove(int64_t reserved, size_t before_event) {
    stop_reserved_ = reserved;
    stop_before_ = before_event;
  }
  /// From now on nothing is kept per event (result()'s per-event vectors
  /// stay as they are): each event's outcome goes to `after` as it comes
  /// (a stop by `after` sets SimResult::stopped_above).
  void Observe(ReplayObserver after) { observer_ = std::move(after); }
  /// Events replayed so far (the per-event vectors of result() have as many,
  /// less those observed).
  [[nodiscard]] size_t replayed() const { return result_.placements.size() + observed_; }
  /// Every segment with its mapped bytes and address rank, every block of
  /// each (offset, size, allocated, mapped, the live id holding it), the
  /// allocated and reserved totals and the retries so far: two equal states
  /// replay equal events (ids aside) into equal placements and totals.
  /// Also the next address ranks, since a new segment takes one.
  [[nodiscard]] std::vector<int64_t> State() const;
  /// State() == state, without building the state (a large graph's holds
  /// five values per block).
  [[nodiscard]] bool StateEquals(const std::vector<int64_t>& state) const;
  [[nodiscard]] const SimResult& result() const { return result_; }
  [[nodiscard]] SimResult TakeResult() { return std::move(result_); }

 private:
  struct Impl;
  AllocatorConfig config_;
  SimResult result_;
  Status error_;
  ReplayObserver observer_;     ///< Observe()'s (empty: keep per event).
  size_t observed_ = 0;         ///< Events replayed since.
  int64_t stop_reserved_ = -1;  ///< StopAbove's limit (-1: none).
  size_t stop_before_ = 0;
  Impl* impl_ = nullptr;
};

}  // namespace memplan

#endif  // MEMPLAN_PLANNER_ALLOCATOR_SIM_H_
