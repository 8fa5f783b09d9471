#include "planner/reduce_kernel.h"

#include <gtest/gtest.h>

namespace memplan {
namespace {

// Measured on the H200 (bench/results/traces/families): the Linear head's
// bias gradient in backward allocates, beside a semaphore of 4 bytes per
// output block, 141,312,000 B for lstm_lm at batch 32 x 128 tokens and
// vocabulary 12,000 (fp32 and bf16 alike), 143,360,000 B for lstm_lm_b at
// 16 x 64 tokens and 20,000.
TEST(ReduceKernel, ColumnSumStagingMatchesTheTraces) {
  EXPECT_EQ(ColumnSumStagingBytes(4096, 12000, 4), 141312000);
  EXPECT_EQ(ColumnSumStagingBytes(1024, 20000, 4), 143360000);
}

// Few rows: one block per output, no staging buffer.
TEST(ReduceKernel, NoStagingForFewRows) {
  EXPECT_EQ(ColumnSumStagingBytes(64, 1000, 4), 0);
  EXPECT_EQ(ColumnSumStagingBytes(1000, 768, 4), 0);  // under 256 values a thread
  EXPECT_EQ(ColumnSumStagingBytes(0, 768, 4), 0);
}

// Many outputs fill the GPU with blocks already: no split across blocks.
TEST(ReduceKernel, NoStagingWhenOutputsFillTheGpu) {
  // 4 outputs a thread, 32 lanes: 1,000,000 outputs make 7,813 blocks, more
  // than 132 x 16 = 2,112.
  EXPECT_EQ(ColumnSumStagingBytes(8192, 1000000, 4), 0);
}

// An odd column count cannot be vectorized: one output a thread.
TEST(ReduceKernel, OddColumnsUseScalarOutputs) {
  // vec 1: block 32 x 16, grid = ceil(1001 / 32) = 32 blocks, 4,096 / 16 =
  // 256 values a thread; 2,048 / 512 = 4 blocks an SM: a target of 528;
  // ctas = max(min(ceil(528 / 32) = 17, ceil(256 / 16) = 16), 1) = 16.
  EXPECT_EQ(ColumnSumStagingBytes(4096, 1001, 4), int64_t{4} * 1001 * 16 * 32 * 1);
}

}  // namespace
}  // namespace memplan
