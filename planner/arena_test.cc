#include "planner/arena.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace memplan {
namespace {

// step:    0    1    2    3
// b0(32): +0 ------ -0
// b1(16):      +1 ------------ -1
// b2(32):           +2 ------- -2
// b0 and b2 never meet, so b2 reuses offset 0; b1 sits above both.
TEST(ArenaGreedy, ReusesSpaceOfDeadBuffers) {
  std::vector<ArenaBuffer> buffers = {{32, 0, 1}, {16, 1, 3}, {32, 2, 3}};
  ArenaResult r = PackGreedyBySize(buffers, 1);
  EXPECT_EQ(r.offsets, (std::vector<int64_t>{0, 32, 0}));
  EXPECT_EQ(r.arena_size, 48);
  EXPECT_EQ(r.lower_bound, 48);
  EXPECT_TRUE(VerifyNoOverlap(buffers, r));
  ArenaResult naive = PackNaive(buffers, 1);
  EXPECT_EQ(naive.offsets, (std::vector<int64_t>{0, 32, 48}));
  EXPECT_EQ(naive.arena_size, 80);
  EXPECT_EQ(naive.lower_bound, 48);
  EXPECT_TRUE(VerifyNoOverlap(buffers, naive));
}

// step:      0    1    2    3
// A(100):   +A -A                    [0,100)
// B(90):    +B ------------------ -B [100,190)
// C(80):         +C -C               [0,80)    (A is dead at 1)
// D(70):    +D -D                    [190,260)
// E(60):    +E ------------------ -E [260,320)
// F(55):              +F -------- -F  gaps at steps 2-3: [0,100) of 100 and
//                                     [190,260) of 70: best fit takes 190.
TEST(ArenaGreedy, PicksSmallestGapThatFits) {
  std::vector<ArenaBuffer> buffers = {{100, 0, 0}, {90, 0, 3}, {80, 1, 1},
                                      {70, 0, 0},  {60, 0, 3}, {55, 2, 3}};
  ArenaResult r = PackGreedyBySize(buffers, 1);
  EXPECT_EQ(r.offsets, (std::vector<int64_t>{0, 100, 0, 190, 260, 190}));
  EXPECT_EQ(r.arena_size, 320);
  EXPECT_EQ(r.lower_bound, 320);
  EXPECT_TRUE(VerifyNoOverlap(buffers, r));
  EXPECT_EQ(PackNaive(buffers, 1).arena_size, 455);
}

// Equal sizes: earlier first use is placed first, then lower index.
// step:    0    1    2
// x(10):  +x ------ -x
// y(10):       +y ------ -y
// z(10):  +z -z
TEST(ArenaGreedy, TieBreaksAreDeterministic) {
  std::vector<ArenaBuffer> buffers = {{10, 0, 1}, {10, 1, 2}, {10, 0, 0}};
  ArenaResult r = PackGreedyBySize(buffers, 1);
  // Order: x (first 0, index 0), z (first 0, index 2), y.
  EXPECT_EQ(r.offsets, (std::vector<int64_t>{0, 10, 10}));
  EXPECT_EQ(r.arena_size, 20);
  EXPECT_EQ(r.lower_bound, 20);
  EXPECT_TRUE(VerifyNoOverlap(buffers, r));
}

// Alignment 64: a 10-byte buffer still pushes the next one to 64.
TEST(ArenaGreedy, OffsetsAreAligned) {
  std::vector<ArenaBuffer> buffers = {{100, 0, 1}, {10, 0, 1}, {10, 0, 1}};
  ArenaResult r = PackGreedyBySize(buffers, 64);
  EXPECT_EQ(r.offsets, (std::vector<int64_t>{0, 128, 192}));
  EXPECT_EQ(r.arena_size, 202);
  EXPECT_TRUE(VerifyNoOverlap(buffers, r));
  ArenaResult naive = PackNaive(buffers, 64);
  EXPECT_EQ(naive.offsets, (std::vector<int64_t>{0, 128, 192}));
}

TEST(ArenaGreedy, ZeroSizeAndEmpty) {
  ArenaResult empty = PackGreedyBySize({}, 8);
  EXPECT_EQ(empty.arena_size, 0);
  EXPECT_EQ(empty.lower_bound, 0);
  std::vector<ArenaBuffer> buffers = {{0, 0, 5}, {8, 0, 5}};
  ArenaResult r = PackGreedyBySize(buffers, 8);
  EXPECT_EQ(r.offsets, (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(r.arena_size, 8);
  EXPECT_TRUE(VerifyNoOverlap(buffers, r));
}

TEST(ArenaVerify, DetectsOverlap) {
  std::vector<ArenaBuffer> buffers = {{32, 0, 1}, {16, 1, 3}};
  ArenaResult r;
  r.offsets = {0, 16};
  r.arena_size = 32;
  EXPECT_FALSE(VerifyNoOverlap(buffers, r));
  r.offsets = {0, 32};
  r.arena_size = 48;
  EXPECT_TRUE(VerifyNoOverlap(buffers, r));
  r.arena_size = 40;  // buffer 1 sticks out of the arena
  EXPECT_FALSE(VerifyNoOverlap(buffers, r));
  buffers[1].first = 2;  // no longer live together: any offsets are fine
  r.offsets = {0, 0};
  r.arena_size = 32;
  EXPECT_TRUE(VerifyNoOverlap(buffers, r));
}

TEST(ArenaGreedy, RandomBuffersNeverOverlap) {
  std::mt19937 rng(20240531);
  std::uniform_int_distribution<int64_t> size(1, 1 << 20);
  std::uniform_int_distribution<int> first(0, 999);
  std::uniform_int_distribution<int> length(0, 120);
  std::vector<ArenaBuffer> buffers(2000);
  for (ArenaBuffer& b : buffers) {
    b.size = size(rng);
    b.first = first(rng);
    b.last = b.first + length(rng);
  }
  buffers[7].last = 1200;  // a few long-lived ones (weights)
  buffers[8].first = 0;
  buffers[8].last = 1200;
  ArenaResult r = PackGreedyBySize(buffers, 64);
  ASSERT_TRUE(VerifyNoOverlap(buffers, r));
  for (int64_t off : r.offsets) ASSERT_EQ(off % 64, 0);
  ArenaResult naive = PackNaive(buffers, 64);
  ASSERT_TRUE(VerifyNoOverlap(buffers, naive));
  EXPECT_GE(r.arena_size, r.lower_bound);
  EXPECT_LT(r.arena_size, naive.arena_size);
  EXPECT_EQ(naive.lower_bound, r.lower_bound);
  // Greedy by size is usually close to the bound; 25% leaves margin.
  EXPECT_LT(static_cast<double>(r.arena_size), 1.25 * static_cast<double>(r.lower_bound));
}

}  // namespace
}  // namespace memplan
