#include "planner/allocator_sim.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

namespace memplan {
namespace {

constexpr int64_t KiB = 1024;
constexpr int64_t MiB = 1024 * 1024;

MemEvent A(int64_t id, int64_t bytes) { return {id, bytes, true}; }
MemEvent F(int64_t id) { return {id, 0, false}; }

SimResult Replay(const std::vector<MemEvent>& events, const AllocatorConfig& config = {}) {
  Result<SimResult> r = SimulateCachingAllocator(events, config);
  EXPECT_TRUE(r.ok()) << r.message();
  return r.value();
}

TEST(AllocRound, Rounding) {
  EXPECT_EQ(RoundAllocation(0), 0);
  EXPECT_EQ(RoundAllocation(1), 512);
  EXPECT_EQ(RoundAllocation(512), 512);
  EXPECT_EQ(RoundAllocation(513), 1024);
  EXPECT_EQ(RoundAllocation(MiB), MiB);
  EXPECT_EQ(RoundAllocation(MiB + 1), MiB + 512);
}

TEST(AllocRound, SegmentSizes) {
  EXPECT_EQ(SegmentAllocationSize(512), 2 * MiB);
  EXPECT_EQ(SegmentAllocationSize(MiB), 2 * MiB);
  EXPECT_EQ(SegmentAllocationSize(MiB + 512), 20 * MiB);
  EXPECT_EQ(SegmentAllocationSize(10 * MiB - 512), 20 * MiB);
  EXPECT_EQ(SegmentAllocationSize(10 * MiB), 10 * MiB);
  EXPECT_EQ(SegmentAllocationSize(12 * MiB + 1), 14 * MiB);
}

// +0(19.5 MiB): a 20 MiB segment; the 0.5 MiB rest is not split off in the
// large pool, so allocated grows by the whole 20 MiB.
TEST(AllocSim, NearlyFullLargeSegmentIsNotSplit) {
  SimResult r = Replay({A(0, 19 * MiB + 512 * KiB)});
  ASSERT_EQ(r.segment_bytes.size(), 1u);
  EXPECT_EQ(r.segment_bytes[0], 20 * MiB);
  EXPECT_EQ(r.placements[0].block, 20 * MiB);
  EXPECT_EQ(r.allocated_after[0], 20 * MiB);
  EXPECT_EQ(r.reserved_after[0], 20 * MiB);
}

// +0(1.5 MiB) takes a split 20 MiB segment; +1(19 MiB) finds only 18.5 MiB
// free and gets its own 20 MiB segment, unsplit (1 MiB rest is not > 1 MiB).
TEST(AllocSim, MidSizeRequestSplitsTwentyMiBSegment) {
  SimResult r = Replay({A(0, 3 * MiB / 2), A(1, 19 * MiB)});
  EXPECT_EQ(r.placements[0].block, 3 * MiB / 2);
  EXPECT_EQ(r.allocated_after[0], 3 * MiB / 2);
  EXPECT_EQ(r.reserved_after[0], 20 * MiB);
  EXPECT_EQ(r.placements[1].segment, 1);
  EXPECT_EQ(r.placements[1].block, 20 * MiB);
  EXPECT_EQ(r.allocated_after[1], 3 * MiB / 2 + 20 * MiB);
  EXPECT_EQ(r.reserved_after[1], 40 * MiB);
}

// +0(600 KiB) +1(600 KiB): both in one 2 MiB small segment.
TEST(AllocSim, SmallAllocationsShareASegment) {
  SimResult r = Replay({A(0, 600 * KiB), A(1, 600 * KiB)});
  ASSERT_EQ(r.segment_bytes.size(), 1u);
  EXPECT_EQ(r.segment_bytes[0], 2 * MiB);
  EXPECT_EQ(r.placements[0].segment, 0);
  EXPECT_EQ(r.placements[0].offset, 0);
  EXPECT_EQ(r.placements[1].segment, 0);
  EXPECT_EQ(r.placements[1].offset, 600 * KiB);
  EXPECT_EQ(r.allocated_after[1], 1200 * KiB);
  EXPECT_EQ(r.reserved_after[1], 2 * MiB);
}

// A 1 MiB + 1 B request rounds past 1 MiB: large pool, 20 MiB segment.
TEST(AllocSim, JustOverOneMiBGoesToLargePool) {
  SimResult r = Replay({A(0, MiB), A(1, MiB + 1)});
  ASSERT_EQ(r.segment_bytes.size(), 2u);
  EXPECT_EQ(r.segment_bytes[0], 2 * MiB);
  EXPECT_EQ(r.segment_bytes[1], 20 * MiB);
  EXPECT_EQ(r.placements[1].block, MiB + 512);
  EXPECT_EQ(r.reserved_after[1], 22 * MiB);
}

// +0(12 MiB) -0 +1(12 MiB): a 12 MiB segment, reused from the cache.
TEST(AllocSim, FreeThenReallocReusesCachedBlock) {
  SimResult r = Replay({A(0, 12 * MiB), F(0), A(1, 12 * MiB)});
  ASSERT_EQ(r.segment_bytes.size(), 1u);
  EXPECT_EQ(r.segment_bytes[0], 12 * MiB);
  EXPECT_EQ(r.allocated_after[1], 0);
  EXPECT_EQ(r.reserved_after[1], 12 * MiB);
  EXPECT_EQ(r.reserved_after[2], 12 * MiB);
  EXPECT_EQ(r.placements[2].segment, 0);
  EXPECT_EQ(r.placements[2].offset, 0);
}

// Equal free blocks: the lowest address wins. The driver maps segments over
// 20 MiB below the earlier ones, smaller ones above.
TEST(AllocSim, TiesGoToTheNewestLargeSegmentAndTheOldestSmallOne) {
  SimResult large = Replay({A(0, 100 * MiB), A(1, 100 * MiB), F(0), F(1), A(2, 50 * MiB)});
  ASSERT_EQ(large.segment_bytes.size(), 2u);
  EXPECT_EQ(large.placements[4].segment, 1);
  SimResult small = Replay({A(0, 15 * MiB), A(1, 15 * MiB), F(0), F(1), A(2, 8 * MiB)});
  ASSERT_EQ(small.segment_bytes.size(), 2u);
  EXPECT_EQ(small.placements[4].segment, 0);
}

// +0(4) +1(4) +2(12) fill a 20 MiB segment; -0 -1 merge into 8 MiB at 0,
// which then serves +3(8) without a new segment.
TEST(AllocSim, CoalescedNeighboursServeDoubleRequest) {
  SimResult r = Replay({A(0, 4 * MiB), A(1, 4 * MiB), A(2, 12 * MiB), F(0), F(1), A(3, 8 * MiB)});
  ASSERT_EQ(r.segment_bytes.size(), 1u);
  EXPECT_EQ(r.placements[2].offset, 8 * MiB);
  EXPECT_EQ(r.placements[5].segment, 0);
  EXPECT_EQ(r.placements[5].offset, 0);
  EXPECT_EQ(r.placements[5].block, 8 * MiB);
  EXPECT_EQ(r.allocated_after[5], 20 * MiB);
  EXPECT_EQ(r.reserved_after[5], 20 * MiB);
}

// +0(6) +1(6) -0 +2(10): free pieces of 6 and 8 MiB cannot hold 10 MiB, so
// a new 10 MiB segment: reserved 30 MiB for 16 MiB allocated.
TEST(AllocSim, FragmentationReservesMoreThanAllocated) {
  SimResult r = Replay({A(0, 6 * MiB), A(1, 6 * MiB), F(0), A(2, 10 * MiB)});
  ASSERT_EQ(r.segment_bytes.size(), 2u);
  EXPECT_EQ(r.segment_bytes[1], 10 * MiB);
  EXPECT_EQ(r.allocated_after[3], 16 * MiB);
  EXPECT_EQ(r.reserved_after[3], 30 * MiB);
  EXPECT_EQ(r.peak_reserved, 30 * MiB);
  EXPECT_EQ(r.peak_allocated, 16 * MiB);
  EXPECT_EQ(r.peak_event, 3u);
  EXPECT_EQ(r.reserved_at_peak, 30 * MiB);
}

TEST(AllocSim, PeakIsFirstEventAtMaximum) {
  SimResult r = Replay({A(0, 4 * MiB), A(1, 4 * MiB), F(1), A(2, 4 * MiB), F(0)});
  EXPECT_EQ(r.peak_allocated, 8 * MiB);
  EXPECT_EQ(r.peak_event, 1u);
  EXPECT_EQ(r.reserved_at_peak, 20 * MiB);
  EXPECT_EQ(r.allocated_after[4], 4 * MiB);
}

TEST(AllocSim, ZeroSizeTakesNothing) {
  SimResult r = Replay({A(0, 0), A(1, 0), F(0), F(1)});
  EXPECT_TRUE(r.segment_bytes.empty());
  EXPECT_EQ(r.placements[0].segment, -1);
  EXPECT_EQ(r.peak_allocated, 0);
  EXPECT_EQ(r.peak_reserved, 0);
}

// Limit 50 MiB. -0 leaves a cached 2 MiB small segment; +2(8 MiB) needs a
// 20 MiB segment: 32 + 20 > 50, so the cached segment is released (30 MiB)
// and the retry fits (50 MiB). +3(14 MiB) fits nowhere (12 MiB free) and
// nothing is left to release: OOM at event 4.
TEST(AllocSim, DeviceLimitReleasesCacheThenOoms) {
  AllocatorConfig config;
  config.device_limit = 50 * MiB;
  SimResult r = Replay(
      {A(0, 512 * KiB), F(0), A(1, 30 * MiB), A(2, 8 * MiB), A(3, 14 * MiB), A(4, MiB)}, config);
  EXPECT_EQ(r.reserved_after[2], 32 * MiB);
  EXPECT_EQ(r.reserved_after[3], 50 * MiB);
  EXPECT_EQ(r.allocated_after[3], 38 * MiB);
  EXPECT_EQ(r.alloc_retries, 2);
  EXPECT_TRUE(r.oom);
  EXPECT_EQ(r.oom_event, 4u);
  ASSERT_EQ(r.allocated_after.size(), 5u);
  EXPECT_EQ(r.reserved_after[4], 50 * MiB);
  EXPECT_EQ(r.placements[4].segment, -1);
  EXPECT_EQ(r.peak_reserved, 50 * MiB);
}

// Without a limit the same trace just grows.
TEST(AllocSim, NoLimitNoOom) {
  SimResult r = Replay({A(0, 512 * KiB), F(0), A(1, 30 * MiB), A(2, 8 * MiB), A(3, 14 * MiB)});
  EXPECT_FALSE(r.oom);
  EXPECT_EQ(r.reserved_after[4], 66 * MiB);
}

// max_split_size 32 MiB: a cached 40 MiB block is oversize, so a 24 MiB
// request does not take it (new segment) while a 34 MiB one does, whole.
TEST(AllocSim, MaxSplitSizeKeepsOversizeBlocksWhole) {
  AllocatorConfig config;
  config.max_split_size = 32 * MiB;
  SimResult r = Replay({A(0, 40 * MiB), F(0), A(1, 24 * MiB), A(2, 34 * MiB)}, config);
  EXPECT_EQ(r.placements[2].segment, 1);
  EXPECT_EQ(r.reserved_after[2], 64 * MiB);
  EXPECT_EQ(r.placements[3].segment, 0);
  EXPECT_EQ(r.placements[3].block, 40 * MiB);
  EXPECT_EQ(r.allocated_after[3], 64 * MiB);
}

// Oversize request: a cached block >= request + 20 MiB is not taken.
TEST(AllocSim, MaxSplitSizeLimitsRoundingOfOversizeRequests) {
  std::vector<MemEvent> trace = {A(0, 80 * MiB), F(0), A(1, 34 * MiB)};
  SimResult plain = Replay(trace);
  EXPECT_EQ(plain.placements[2].segment, 0);
  EXPECT_EQ(plain.placements[2].block, 34 * MiB);  // split: 46 MiB rest
  EXPECT_EQ(plain.reserved_after[2], 80 * MiB);
  AllocatorConfig config;
  config.max_split_size = 32 * MiB;
  SimResult capped = Replay(trace, config);
  EXPECT_EQ(capped.placements[2].segment, 1);
  EXPECT_EQ(capped.reserved_after[2], 114 * MiB);
}

// With max_split_size set and a limit, the cached oversize segment is
// released first (release_available_cached_blocks).
TEST(AllocSim, MaxSplitSizeReleasesOversizeSegmentOnLimit) {
  AllocatorConfig config;
  config.max_split_size = 32 * MiB;
  config.device_limit = 100 * MiB;
  SimResult r = Replay({A(0, 80 * MiB), F(0), A(1, 34 * MiB)}, config);
  EXPECT_FALSE(r.oom);
  EXPECT_EQ(r.alloc_retries, 0);
  EXPECT_EQ(r.reserved_after[2], 34 * MiB);
}

// Growing requests, each freed before the next: the default allocator keeps
// every segment (12+14+16+18+22 = 82 MiB); expandable segments reuse and
// extend one segment mapped in 20 MiB pages (40 MiB).
TEST(AllocSim, ExpandableSegmentsReserveLessWhenSizesGrow) {
  std::vector<MemEvent> trace = {A(0, 12 * MiB), F(0), A(1, 14 * MiB), F(1), A(2, 16 * MiB), F(2),
                                 A(3, 18 * MiB), F(3), A(4, 22 * MiB)};
  SimResult plain = Replay(trace);
  EXPECT_EQ(plain.peak_reserved, 82 * MiB);
  AllocatorConfig config;
  config.expandable_segments = true;
  SimResult exp = Replay(trace, config);
  EXPECT_EQ(exp.reserved_after[0], 20 * MiB);
  EXPECT_EQ(exp.reserved_after[6], 20 * MiB);
  EXPECT_EQ(exp.peak_reserved, 40 * MiB);
  ASSERT_EQ(exp.segment_bytes.size(), 1u);
  EXPECT_EQ(exp.segment_bytes[0], 40 * MiB);
  EXPECT_EQ(exp.placements[8].offset, 0);
  EXPECT_EQ(exp.placements[8].block, 22 * MiB);
  EXPECT_EQ(exp.allocated_after[8], 22 * MiB);
}

// Expandable: the large pool splits at 512 B granularity (a 19.5 MiB
// request keeps 0.5 MiB free), and small allocations map 2 MiB pages.
TEST(AllocSim, ExpandableSplitsFinely) {
  AllocatorConfig config;
  config.expandable_segments = true;
  SimResult r = Replay({A(0, 19 * MiB + 512 * KiB), A(1, 600 * KiB), A(2, 1500 * KiB)}, config);
  EXPECT_EQ(r.placements[0].block, 19 * MiB + 512 * KiB);
  EXPECT_EQ(r.reserved_after[0], 20 * MiB);
  EXPECT_EQ(r.reserved_after[1], 22 * MiB);
  EXPECT_EQ(r.placements[2].segment, 0);  // large pool again: maps 20 MiB more
  EXPECT_EQ(r.placements[2].offset, 19 * MiB + 512 * KiB);
  EXPECT_EQ(r.reserved_after[2], 42 * MiB);
}

// Expandable with a limit of 60 MiB: +2(12 MiB) needs one more 20 MiB page
// (62 > 60); the free 2 MiB small page is unmapped and the retry fits.
TEST(AllocSim, ExpandableUnmapsFreePagesOnLimit) {
  AllocatorConfig config;
  config.expandable_segments = true;
  config.device_limit = 60 * MiB;
  SimResult r = Replay({A(0, 512 * KiB), F(0), A(1, 30 * MiB), A(2, 12 * MiB)}, config);
  EXPECT_EQ(r.reserved_after[2], 42 * MiB);
  EXPECT_FALSE(r.oom);
  EXPECT_EQ(r.alloc_retries, 1);
  EXPECT_EQ(r.reserved_after[3], 60 * MiB);
  EXPECT_EQ(r.placements[3].offset, 30 * MiB);
  EXPECT_EQ(r.allocated_after[3], 42 * MiB);
}

TEST(AllocSim, ErrorFreeOfUnknownId) {
  Result<SimResult> r = SimulateCachingAllocator({A(1, 100), F(9)}, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.message(), "event 1: free of unknown id 9");
}

TEST(AllocSim, ErrorDoubleFree) {
  Result<SimResult> r = SimulateCachingAllocator({A(1, 100), F(1), F(1)}, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.message(), "event 2: free of unknown id 1");
}

TEST(AllocSim, ErrorDoubleAlloc) {
  Result<SimResult> r = SimulateCachingAllocator({A(1, 100), A(1, 200)}, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.message(), "event 1: id 1 is allocated twice without a free");
}

TEST(AllocSim, ErrorNegativeSize) {
  Result<SimResult> r = SimulateCachingAllocator({A(3, -5)}, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.message(), "event 0: negative size -5 for id 3");
}

TEST(AllocSim, ErrorMaxSplitSizeTooSmall) {
  AllocatorConfig config;
  config.max_split_size = 8 * MiB;
  Result<SimResult> r = SimulateCachingAllocator({}, config);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.message(),
            "max_split_size 8388608 is below 20 MiB (PyTorch rejects max_split_size_mb < 20)");
}

// A training-like trace: ~20k events of mixed sizes with nested lifetimes.
std::vector<MemEvent> SyntheticTrace(int n_alloc, bool keep_some) {
  std::mt19937_64 rng(1234);
  std::vector<MemEvent> events;
  std::vector<int64_t> live;
  int64_t next_id = 0;
  std::uniform_int_distribution<int> kind(0, 99);
  std::uniform_int_distribution<int64_t> small(1, MiB);
  std::uniform_int_distribution<int64_t> large(MiB + 1, 64 * MiB);
  while (next_id < n_alloc) {
    if (live.empty() || kind(rng) < 55) {
      const int64_t bytes = kind(rng) < 60 ? small(rng) : large(rng);
      events.push_back(A(next_id, bytes));
      live.push_back(next_id++);
    } else {
      std::uniform_int_distribution<size_t> pick(0, live.size() - 1);
      const size_t k = pick(rng);
      events.push_back(F(live[k]));
      live[k] = live.back();
      live.pop_back();
    }
  }
  if (!keep_some) {
    for (int64_t id : live) events.push_back(F(id));
  }
  return events;
}

// Invariants on a random trace for both modes: reserved >= allocated, the
// final state after freeing everything has allocated 0, and allocated equals
// the sum of live blocks.
TEST(AllocSim, RandomTraceInvariants) {
  std::vector<MemEvent> trace = SyntheticTrace(10000, false);
  for (bool expandable : {false, true}) {
    AllocatorConfig config;
    config.expandable_segments = expandable;
    SimResult r = Replay(trace, config);
    ASSERT_EQ(r.allocated_after.size(), trace.size());
    std::vector<int64_t> block_of(10000, 0);
    int64_t sum = 0;
    for (size_t i = 0; i < trace.size(); ++i) {
      if (trace[i].is_alloc) {
        ASSERT_GE(r.placements[i].block, RoundAllocation(trace[i].bytes));
        block_of[trace[i].id] = r.placements[i].block;
        sum += r.placements[i].block;
      } else {
        sum -= block_of[trace[i].id];
      }
      ASSERT_EQ(r.allocated_after[i], sum) << "event " << i;
      ASSERT_GE(r.reserved_after[i], r.allocated_after[i]) << "event " << i;
    }
    EXPECT_EQ(r.allocated_after.back(), 0);
  }
}

// Ids are names only: the planner's dense ids (0, 1, 2, ...) and a
// recorded trace's (addresses, negative numbers) replay the same way, and
// the errors name the same events.
TEST(AllocSim, SparseIdsReplayLikeDenseOnes) {
  const std::vector<MemEvent> dense = SyntheticTrace(5000, true);
  std::vector<MemEvent> sparse = dense;
  for (MemEvent& e : sparse) e.id = e.id % 2 ? (e.id << 36) + 7 : -e.id - 1;
  for (bool expandable : {false, true}) {
    AllocatorConfig config;
    config.expandable_segments = expandable;
    const SimResult a = Replay(dense, config);
    const SimResult b = Replay(sparse, config);
    ASSERT_EQ(a.allocated_after, b.allocated_after);
    ASSERT_EQ(a.reserved_after, b.reserved_after);
    ASSERT_EQ(a.placements.size(), b.placements.size());
    for (size_t i = 0; i < a.placements.size(); ++i) {
      ASSERT_EQ(a.placements[i].block, b.placements[i].block) << "event " << i;
      ASSERT_EQ(a.placements[i].offset, b.placements[i].offset) << "event " << i;
    }
    EXPECT_EQ(a.peak_allocated, b.peak_allocated);
    EXPECT_EQ(a.peak_reserved, b.peak_reserved);
  }
  for (int64_t big : {int64_t{1} << 40, int64_t{-5}}) {
    Result<SimResult> twice = SimulateCachingAllocator({A(big, 100), A(big, 10)}, {});
    ASSERT_FALSE(twice.ok());
    EXPECT_EQ(twice.message(),
              "event 1: id " + std::to_string(big) + " is allocated twice without a free");
    Result<SimResult> unknown = SimulateCachingAllocator({A(big, 100), F(big), F(big)}, {});
    ASSERT_FALSE(unknown.ok());
    EXPECT_EQ(unknown.message(), "event 2: free of unknown id " + std::to_string(big));
  }
  // A dense trace freeing an id past every one it allocated.
  Result<SimResult> past = SimulateCachingAllocator({A(1, 100), F(3)}, {});
  ASSERT_FALSE(past.ok());
  EXPECT_EQ(past.message(), "event 1: free of unknown id 3");
}

// A replay in parts (the events growing in between, ids turning sparse
// half-way) gives what one replay of all of them gives.
TEST(AllocReplay, InPartsLikeAtOnce) {
  std::vector<MemEvent> all = SyntheticTrace(6000, true);
  // Ids first allocated after the first part turn sparse (their frees too).
  int64_t first_part_ids = 0;
  for (size_t i = 0; i < all.size() / 5; ++i) first_part_ids = std::max(first_part_ids, all[i].id);
  for (MemEvent& e : all) {
    if (e.id > first_part_ids && e.id % 3 == 0) e.id = -e.id - 1;
  }
  for (bool expandable : {false, true}) {
    AllocatorConfig config;
    config.expandable_segments = expandable;
    const SimResult once = Replay(all, config);
    CachingAllocatorReplay parts(config);
    std::vector<MemEvent> grown;
    for (size_t cut : {all.size() / 5, all.size() / 2, all.size()}) {
      grown.assign(all.begin(), all.begin() + cut);
      ASSERT_TRUE(parts.Replay(grown, cut).ok());
      EXPECT_EQ(parts.replayed(), cut);
    }
    const SimResult& r = parts.result();
    EXPECT_EQ(r.allocated_after, once.allocated_after);
    EXPECT_EQ(r.reserved_after, once.reserved_after);
    ASSERT_EQ(r.placements.size(), once.placements.size());
    for (size_t i = 0; i < r.placements.size(); ++i) {
      ASSERT_EQ(r.placements[i].block, once.placements[i].block) << "event " << i;
      ASSERT_EQ(r.placements[i].offset, once.placements[i].offset) << "event " << i;
      ASSERT_EQ(r.placements[i].segment, once.placements[i].segment) << "event " << i;
    }
    EXPECT_EQ(r.segment_bytes, once.segment_bytes);
    EXPECT_EQ(r.peak_event, once.peak_event);
  }
}

// State() tells states apart by what decides later requests: a stretch that
// frees what it allocated and reuses cached blocks leaves the state as it was;
// one that makes a new segment, keeps a block, or hands the same block to
// another id does not.
TEST(AllocReplay, StateSaysWhetherAStretchLeftTheAllocatorAsItFoundIt) {
  // Two steps of the same work: the first makes the segments, the second
  // only reuses them.
  std::vector<MemEvent> ev = {A(1, 4 * MiB)};
  int64_t id = 2;
  for (int step = 0; step < 3; ++step) {
    ev.push_back(A(id, 3 * MiB));
    ev.push_back(A(id + 1, 512 * KiB));
    ev.push_back(F(id));
    ev.push_back(F(id + 1));
    id += 2;
  }
  CachingAllocatorReplay r({});
  ASSERT_TRUE(r.Replay(ev, 1).ok());
  const std::vector<int64_t> before_first = r.State();
  ASSERT_TRUE(r.Replay(ev, 5).ok());
  const std::vector<int64_t> before_second = r.State();
  EXPECT_NE(before_first, before_second);  // the first step made segments
  EXPECT_FALSE(r.StateEquals(before_first));
  EXPECT_TRUE(r.StateEquals(before_second));
  ASSERT_TRUE(r.Replay(ev, 9).ok());
  EXPECT_EQ(r.State(), before_second);  // the second one reused them
  EXPECT_TRUE(r.StateEquals(before_second));
  ASSERT_TRUE(r.Replay(ev, 13).ok());
  EXPECT_EQ(r.State(), before_second);
  EXPECT_TRUE(r.StateEquals(before_second));
  // StateEquals compares every value and the length: a prefix, a longer
  // state or one changed value is not equal.
  std::vector<int64_t> longer = before_second;
  longer.push_back(0);
  EXPECT_FALSE(r.StateEquals(longer));
  EXPECT_FALSE(r.StateEquals({before_second.begin(), before_second.end() - 1}));
  for (size_t k = 0; k < before_second.size(); ++k) {
    std::vector<int64_t> changed = before_second;
    ++changed[k];
    EXPECT_FALSE(r.StateEquals(changed)) << "value " << k;
  }
  // A block kept, or the live block held by another id: a different state.
  std::vector<MemEvent> kept = ev;
  kept.push_back(A(100, 3 * MiB));
  ASSERT_TRUE(r.Replay(kept, kept.size()).ok());
  EXPECT_NE(r.State(), before_second);
  EXPECT_FALSE(r.StateEquals(before_second));
  CachingAllocatorReplay a({}), b({});
  ASSERT_TRUE(a.Replay({A(1, MiB)}, 1).ok());
  ASSERT_TRUE(b.Replay({A(2, MiB)}, 1).ok());
  EXPECT_NE(a.State(), b.State());
  EXPECT_FALSE(a.StateEquals(b.State()));
  EXPECT_TRUE(a.StateEquals(a.State()));
  // A bad config is an error from the first replay on.
  AllocatorConfig bad;
  bad.max_split_size = 8 * MiB;
  CachingAllocatorReplay c(bad);
  EXPECT_FALSE(c.Replay(ev, ev.size()).ok());
  EXPECT_TRUE(c.State().empty());
  EXPECT_TRUE(c.StateEquals({}));
}

// A fit test's replay stops at the first event, before the given one, after
// which more than the limit is reserved; later events are not replayed.
TEST(AllocReplay, StopsOnceReservedIsOverTheLimit) {
  const std::vector<MemEvent> events = {A(1, 30 * MiB), A(2, 30 * MiB), F(1), A(3, 40 * MiB),
                                        A(4, 8 * MiB)};
  CachingAllocatorReplay full({});
  ASSERT_TRUE(full.Replay(events, events.size()).ok());
  EXPECT_FALSE(full.result().stopped_above);
  // 30 + 30 + 40 MiB segments; the 8 MiB request splits the freed 30 MiB block.
  EXPECT_EQ(full.result().peak_reserved, 100 * MiB);
  CachingAllocatorReplay stop({});
  stop.StopAbove(70 * MiB, events.size());
  ASSERT_TRUE(stop.Replay(events, 2).ok());  // 60 MiB: not yet
  EXPECT_FALSE(stop.result().stopped_above);
  ASSERT_TRUE(stop.Replay(events, events.size()).ok());
  EXPECT_TRUE(stop.result().stopped_above);
  EXPECT_EQ(stop.replayed(), 4u);  // ends with the 40 MiB allocation that went over
  EXPECT_EQ(stop.result().peak_reserved, 100 * MiB);
  // The crossing at event 3 is not before event 3: no stop.
  CachingAllocatorReplay late({});
  late.StopAbove(70 * MiB, 3);
  ASSERT_TRUE(late.Replay(events, events.size()).ok());
  EXPECT_FALSE(late.result().stopped_above);
  EXPECT_EQ(late.replayed(), events.size());
}

}  // namespace
}  // namespace memplan
