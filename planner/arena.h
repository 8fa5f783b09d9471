#ifndef MEMPLAN_PLANNER_ARENA_H_
#define MEMPLAN_PLANNER_ARENA_H_

#include <cstdint>
#include <vector>

namespace memplan {

/// A buffer to place: live from step `first` to step `last`, inclusive.
struct ArenaBuffer {
  int64_t size = 0;
  int first = 0;
  int last = 0;
};

/// Offsets in one arena, its size, and the no-fragmentation lower bound
/// (the largest sum of sizes live at one step).
struct ArenaResult {
  std::vector<int64_t> offsets;
  int64_t arena_size = 0;
  int64_t lower_bound = 0;
};

/// Greedy by size (TFLite's offline planner): larger buffers first (ties:
/// earlier first use, then index); each goes into the smallest gap that fits
/// between the already placed buffers it overlaps in time (ties: the lower
/// offset), else above the highest of them (best fit). Not optimal; usually
/// within a few percent of the lower bound. Offsets are multiples of
/// `alignment` (> 0). Buffers of size <= 0 take no space and get offset 0.
/// Worst case O(n^2); placed buffers are kept sorted by first use so only
/// those that can overlap in time are visited.
ArenaResult PackGreedyBySize(const std::vector<ArenaBuffer>& buffers, int64_t alignment);

/// Baseline without reuse: every buffer at its own offset.
ArenaResult PackNaive(const std::vector<ArenaBuffer>& buffers, int64_t alignment);

/// True when no two buffers that are live at the same step overlap in space
/// and every buffer lies inside [0, arena_size).
bool VerifyNoOverlap(const std::vector<ArenaBuffer>& buffers, const ArenaResult& r);

}  // namespace memplan

#endif  // MEMPLAN_PLANNER_ARENA_H_
