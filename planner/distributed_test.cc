// Tests of the data-parallel rewrite (distributed.h) with hand-derived numbers.
#include "planner/distributed.h"

#include <gtest/gtest.h>

#include "planner/allocator_sim.h"
#include "planner/ops/test_graph.h"
#include "planner/shape_inference.h"

namespace memplan {
namespace {

using testing_util::D;
using testing_util::GraphBuilder;
using testing_util::S;

constexpr int64_t kMiB = 1LL << 20;
constexpr int64_t kW = 256 * 256 * 4;    // one block weight: 262144 B
constexpr int64_t kHead = 256 * 10 * 4;  // 10240 B

// Eight Linear-ReLU layers of width 256 in four blocks of two (blk.0 ..
// blk.3), then a head at the root. Batch 4096: every activation is 4 MiB.
Graph DeepMlp(int64_t batch) {
  GraphBuilder b;
  b.Input("x", {S("N"), D(256)});
  std::string cur = "x";
  for (int i = 1; i <= 8; ++i) {
    const std::string w = "W" + std::to_string(i);
    const std::string h = "h" + std::to_string(i);
    const std::string r = "r" + std::to_string(i);
    const std::string blk = "blk." + std::to_string((i - 1) / 2);
    b.Init(w, {256, 256});
    b.Op("MatMul", {cur, w}, {h}, "fc" + std::to_string(i)).scope = blk;
    b.Op("Relu", {h}, {r}, "relu" + std::to_string(i)).scope = blk;
    cur = r;
  }
  b.Init("Wh", {256, 10});
  b.Op("MatMul", {cur, "Wh"}, {"logits"}, "head").scope = "head";
  b.Output("logits");
  ShapeBindings bind;
  bind.batch = batch;
  Status s = InferShapes(&b.g, bind, nullptr);
  EXPECT_TRUE(s.ok()) << s.message();
  return b.g;
}

PlanOptions Train(Optimizer opt, ParallelStrategy st, int64_t world) {
  PlanOptions o;
  o.mode = Mode::kTrain;
  o.optimizer = opt;
  o.dist.strategy = st;
  o.dist.world_size = world;
  return o;
}

Plan PlanOf(const Graph& g, int64_t batch, const PlanOptions& o) {
  auto plan = MakePlan(g, batch, o);
  EXPECT_TRUE(plan.ok()) << plan.message();
  return plan.ok() ? plan.value() : Plan();
}

int64_t PartsSum(const RankBreakdown& r) {
  return r.params_local + r.params_gathered + r.grads + r.optimizer_state + r.grad_buckets +
         r.reduce_scatter + r.other;
}

TEST(Distributed, DdpBucketsCloseAtOneMiBThenAt25MiBInReverseOrder) {
  // Reverse order: 10 MiB closes the 1 MiB first bucket alone; 10 + 10 + 30
  // MiB pass 25 MiB together; the two 600 KiB parameters are what is left.
  const std::vector<int64_t> params = {600 << 10, 600 << 10, 30 * kMiB,
                                       10 * kMiB, 10 * kMiB, 10 * kMiB};
  const std::vector<int64_t> want = {10 * kMiB, 50 * kMiB, 1200 << 10};
  EXPECT_EQ(DdpBucketSizes(params), want);
  EXPECT_TRUE(DdpBucketSizes({}).empty());
}

TEST(Distributed, ShardsAreCeilOfDimZeroRows) {
  // GPT-2's token embedding [50257, 768] fp32 over 2 ranks: 25129 rows.
  EXPECT_EQ(ShardBytes({50257, 768}, 50257LL * 768 * 4, 2), 25129LL * 768 * 4);
  EXPECT_EQ(ShardBytes({8, 3}, 96, 8), 12);
  EXPECT_EQ(ShardBytes({3}, 12, 8), 4);  // ranks past dim 0 hold padding rows only
  EXPECT_EQ(ShardBytes({}, 4, 4), 4);    // a scalar: one chunk
  EXPECT_EQ(ShardBytes({10, 10}, 400, 1), 400);
}

TEST(Distributed, BadOptionsAreOneLineErrorsNamingTheFlag) {
  DistOptions d;
  d.world_size = 0;
  EXPECT_EQ(CheckDistOptions(d, Mode::kTrain).message(), "--world-size 0: must be from 1 to 65536");
  d.world_size = 8;
  EXPECT_EQ(CheckDistOptions(d, Mode::kTrain).message(),
            "--world-size 8: --strategy single plans one GPU; several need ddp, fsdp, zero1, "
            "zero2 or zero3");
  d.strategy = ParallelStrategy::kDdp;
  EXPECT_TRUE(CheckDistOptions(d, Mode::kTrain).ok());
  EXPECT_FALSE(CheckDistOptions(d, Mode::kInference).ok());
  d.fsdp_units = {"blk.0"};
  EXPECT_EQ(CheckDistOptions(d, Mode::kTrain).message(),
            "--fsdp-units: applies to --strategy fsdp or zero3, not ddp");
  d.strategy = ParallelStrategy::kFsdp;
  EXPECT_TRUE(CheckDistOptions(d, Mode::kTrain).ok());
  const Graph g = DeepMlp(16);
  d.fsdp_units = {"blk.9"};
  auto units = FsdpUnits(g, d);
  ASSERT_FALSE(units.ok());
  EXPECT_NE(units.message().find("--fsdp-units blk.9: matches no module"), std::string::npos)
      << units.message();
  EXPECT_EQ(units.message().find("--checkpoint"), std::string::npos) << units.message();
  auto bad = MakePlan(g, 16, [] {
    PlanOptions o = Train(Optimizer::kAdamW, ParallelStrategy::kFsdp, 2);
    o.dist.fsdp_units = {"nothing.here"};
    return o;
  }());
  EXPECT_FALSE(bad.ok());
}

TEST(Distributed, DefaultFsdpUnitsAreTheRepeatedBlocks) {
  DistOptions d;
  d.strategy = ParallelStrategy::kFsdp;
  auto units = FsdpUnits(DeepMlp(16), d);
  ASSERT_TRUE(units.ok());
  const std::vector<std::string> want = {"blk.0", "blk.1", "blk.2", "blk.3"};
  EXPECT_EQ(units.value(), want);
}

// DDP keeps every gradient twice: the buckets persist beside the gradients,
// so at the same peak the rank holds exactly the buckets more. Reverse
// order: Wh (10240) + W8..W5 (4 x 262144) = 1058816 B >= 1 MiB closes the
// first bucket; W4..W1 are the second (1 MiB). Both are multiples of 512.
TEST(Distributed, DdpAddsItsBucketsToTheSingleProcessPeak) {
  const Graph g = DeepMlp(4096);
  const Plan one = PlanOf(g, 4096, Train(Optimizer::kMomentum, ParallelStrategy::kSingle, 1));
  const Plan ddp = PlanOf(g, 4096, Train(Optimizer::kMomentum, ParallelStrategy::kDdp, 2));
  const int64_t buckets = (kHead + 4 * kW) + 4 * kW;
  EXPECT_EQ(ddp.rank.grad_buckets, buckets);
  EXPECT_EQ(ddp.peak.allocated_bytes - one.peak.allocated_bytes, buckets);
  EXPECT_EQ(ddp.peak.device_bytes, ddp.peak.reserved_bytes + ddp.context_bytes + kNcclDeviceBytes);
  EXPECT_EQ(PartsSum(ddp.rank), ddp.peak.allocated_bytes);
  EXPECT_EQ(ddp.rank.params_local, 8 * kW + kHead);
  EXPECT_EQ(ddp.rank.world_size, 2);
  EXPECT_TRUE(ddp.modules.empty());
  EXPECT_FALSE(ddp.timeline.empty());
}

// FSDP2 over 2 ranks: each 256 x 256 weight keeps 128 rows (131072 B), the
// head [256, 10] 128 rows (5120 B); AdamW keeps two states per shard. At a
// backward peak (batch 4096: activations dominate) the shards and states are
// exactly those; the sum of the parts is the allocated peak.
TEST(Distributed, FsdpShardsParametersAndOptimizerState) {
  const Graph g = DeepMlp(4096);
  const Plan fsdp = PlanOf(g, 4096, Train(Optimizer::kAdamW, ParallelStrategy::kFsdp, 2));
  const int64_t shards = 8 * (kW / 2) + kHead / 2;
  EXPECT_EQ(fsdp.peak.phase, Phase::kBackward);
  EXPECT_EQ(fsdp.rank.params_local, shards);
  EXPECT_EQ(fsdp.rank.optimizer_state, 2 * shards);
  EXPECT_EQ(fsdp.rank.units, 5);
  EXPECT_EQ(PartsSum(fsdp.rank), fsdp.peak.allocated_bytes);
  // Gathered: the root (Wh) and at most two blocks, each with its unsharded
  // weights and one flat all-gather output of the same size.
  EXPECT_GT(fsdp.rank.params_gathered, 0);
  EXPECT_LE(fsdp.rank.params_gathered, kHead + 2 * 2 * (2 * kW));
  const Plan one = PlanOf(g, 4096, Train(Optimizer::kAdamW, ParallelStrategy::kSingle, 1));
  EXPECT_LT(fsdp.peak.allocated_bytes, one.peak.allocated_bytes);
  // Keeping the gathered blocks for backward costs memory.
  PlanOptions keep = Train(Optimizer::kAdamW, ParallelStrategy::kFsdp, 2);
  keep.dist.reshard_after_forward = false;
  const Plan kept = PlanOf(g, 4096, keep);
  EXPECT_GE(kept.peak.allocated_bytes, fsdp.peak.allocated_bytes);
  EXPECT_GT(kept.rank.params_gathered, fsdp.rank.params_gathered);
}

// ZeRO-1 shards only the optimizer state: parameters stay replicated.
TEST(Distributed, ZeroStagesPartitionStateThenGradientsThenParameters) {
  const Graph g = DeepMlp(4096);
  const int64_t full = 8 * kW + kHead;
  const int64_t shards = 8 * (kW / 2) + kHead / 2;
  const Plan z1 = PlanOf(g, 4096, Train(Optimizer::kAdamW, ParallelStrategy::kZero1, 2));
  EXPECT_EQ(z1.rank.params_local, full);
  EXPECT_EQ(z1.rank.optimizer_state, 2 * shards);
  const Plan z2 = PlanOf(g, 4096, Train(Optimizer::kAdamW, ParallelStrategy::kZero2, 2));
  EXPECT_EQ(z2.rank.params_local, full);
  // The partition (1/2 of the gradients) and one bucket of all of them.
  EXPECT_EQ(z2.rank.grad_buckets, RoundAllocation(full / 2) + RoundAllocation(full));
  const Plan z3 = PlanOf(g, 4096, Train(Optimizer::kAdamW, ParallelStrategy::kZero3, 2));
  EXPECT_EQ(z3.rank.params_local, shards);
  EXPECT_EQ(z3.rank.optimizer_state, 2 * shards);
  EXPECT_EQ(PartsSum(z3.rank), z3.peak.allocated_bytes);
}

// One rank: FSDP's shards are the whole parameters.
TEST(Distributed, OneRankFsdpHoldsWholeShards) {
  const Graph g = DeepMlp(256);
  const Plan f = PlanOf(g, 256, Train(Optimizer::kSgd, ParallelStrategy::kFsdp, 1));
  EXPECT_EQ(f.rank.params_local, 8 * kW + kHead);
}

}  // namespace
}  // namespace memplan
