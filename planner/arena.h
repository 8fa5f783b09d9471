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

/// Greedy by size: larger buffers first (ties: earlier first use, then
/// index), each at the lowest-offset gap that fits among the buffers it
/// overlaps in time (best fit). Not optimal; usually within a few percent of
/// the lower bound. Offsets are multiples of `alignment`.
ArenaResult PackGreedyBySize(const std::vector<ArenaBuffer>& buffers, int64_t alignment);

/// Baseline without reuse: every buffer at its own offset.
ArenaResult PackNaive(const std::vector<ArenaBuffer>& buffers, int64_t alignment);

/// True when no two buffers that are live at the same step overlap in space.
bool VerifyNoOverlap(const std::vector<ArenaBuffer>& buffers, const ArenaResult& r);

}  // namespace memplan

#endif  // MEMPLAN_PLANNER_ARENA_H_
