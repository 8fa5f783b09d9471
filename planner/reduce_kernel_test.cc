#include "planner/reduce_kernel.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

namespace memplan {
namespace {

// Measured on the H200 (bench/results/traces/families): the Linear head's
// bias gradient in backward allocates, beside a semaphore of 4 bytes per
// output block, 141,312,000 B for lstm_lm at batch 32 x 128 tokens and
// vocabulary 12,000 (fp32 and bf16 alike), 143,360,000 B for lstm_lm_b at
// 16 x 64 tokens and 20,000.
TEST(ReduceKernel, ColumnSumStagingMatchesTheTraces) {
  EXPECT_EQ(ColumnSumStagingBytes(4096, 12000, 4, 4), 141312000);
  EXPECT_EQ(ColumnSumStagingBytes(1024, 20000, 2, 4), 143360000);
}

// Few rows: one block per output, no staging buffer.
TEST(ReduceKernel, NoStagingForFewRows) {
  EXPECT_EQ(ColumnSumStagingBytes(64, 1000, 4, 4), 0);
  EXPECT_EQ(ColumnSumStagingBytes(1000, 768, 4, 4), 0);  // under 256 values a thread
  EXPECT_EQ(ColumnSumStagingBytes(0, 768, 4, 4), 0);
}

// Many outputs fill the GPU with blocks already: no split across blocks.
TEST(ReduceKernel, NoStagingWhenOutputsFillTheGpu) {
  // 4 outputs a thread, 32 lanes: 1,000,000 outputs make 7,813 blocks, more
  // than 132 x 16 = 2,112.
  EXPECT_EQ(ColumnSumStagingBytes(8192, 1000000, 2, 4), 0);
}

// An odd column count cannot be vectorized: one output a thread.
TEST(ReduceKernel, OddColumnsUseScalarOutputs) {
  // vec 1: block 32 x 16, grid = ceil(1001 / 32) = 32 blocks, 4,096 / 16 =
  // 256 values a thread; 2,048 / 512 = 4 blocks an SM: a target of 528;
  // ctas = max(min(ceil(528 / 32) = 17, ceil(256 / 16) = 16), 1) = 16.
  EXPECT_EQ(ColumnSumStagingBytes(4096, 1001, 4, 4), int64_t{4} * 1001 * 16 * 32 * 1);
}

// Every shape of bench/reduce_probe.py as measured on the H200
// (bench/results/reduce_probe_h200.jsonl: the call's allocations are the
// output, then the staging buffer and the semaphores, twice when the input
// is reduced in parts).
TEST(ReduceKernel, MatchesEveryProbedShape) {
  std::ifstream in(std::string(MEMPLAN_BENCH_RESULTS_DIR) + "/reduce_probe_h200.jsonl");
  ASSERT_TRUE(in.good());
  const std::regex row(
      R"re("rows": (\d+), "cols": (\d+), "dtype": "(\w+)", "allocs": \[([\d, ]*)\])re");
  std::string line;
  int checked = 0;
  while (std::getline(in, line)) {
    std::smatch m;
    if (!std::regex_search(line, m, row)) continue;
    const int64_t rows = std::stoll(m[1]), cols = std::stoll(m[2]);
    const int64_t elem = m[3] == "float32" ? 4 : 2;
    std::vector<int64_t> allocs;
    const std::string list = m[4];
    std::regex num(R"(\d+)");
    for (auto it = std::sregex_iterator(list.begin(), list.end(), num);
         it != std::sregex_iterator(); ++it) {
      allocs.push_back(std::stoll(it->str()));
    }
    ASSERT_FALSE(allocs.empty()) << line;
    int64_t staging = 0;  // the largest after the output
    for (size_t i = 1; i < allocs.size(); ++i) staging = std::max(staging, allocs[i]);
    EXPECT_EQ(ColumnSumStagingBytes(rows, cols, elem, 4), staging) << line;
    ++checked;
  }
  EXPECT_EQ(checked, 48);
}

}  // namespace
}  // namespace memplan
