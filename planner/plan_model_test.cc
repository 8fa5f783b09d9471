#include "planner/plan_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "planner/ops/test_graph.h"

namespace memplan {
namespace {

using testing_util::D;
using testing_util::GraphBuilder;
using testing_util::IntsAttr;
using testing_util::S;

// Four blocks of MatMul -> Relu -> MatMul -> Add (residual), each in its own
// module, then a head: checkpointable, with in-place candidates.
Graph Blocks() {
  GraphBuilder b;
  b.Input("x", {S("batch"), D(64), D(96)});
  std::string prev = "x";
  for (int i = 0; i < 4; ++i) {
    const std::string m = "layers." + std::to_string(i);
    const std::string p = "l" + std::to_string(i) + "_";
    b.Init(p + "w1", {96, 384});
    b.Init(p + "w2", {384, 96});
    b.Op("MatMul", {prev, p + "w1"}, {p + "h"}).scope = m + ".fc1";
    b.Op("Relu", {p + "h"}, {p + "a"}).scope = m + ".act";
    b.Op("MatMul", {p + "a", p + "w2"}, {p + "o"}).scope = m + ".fc2";
    b.Op("Add", {prev, p + "o"}, {p + "y"}).scope = m;
    prev = p + "y";
  }
  b.Init("head", {96, 1000});
  b.Op("MatMul", {prev, "head"}, {"logits"}).scope = "head";
  b.Output("logits");
  b.g.Link();
  return b.g;
}

// Convolutions with batch norm and ReLU in three modules: fp32 convolutions
// (two cuDNN engine kinds) and in-place activations, so MakePlan plans
// several variants of one schedule.
Graph ConvNet() {
  GraphBuilder b;
  b.Input("x", {S("batch"), D(8), D(32), D(32)});
  std::string prev = "x";
  int channels = 8;
  for (int i = 0; i < 3; ++i) {
    const std::string m = "stage" + std::to_string(i);
    const std::string p = "s" + std::to_string(i) + "_";
    b.Init(p + "w", {16, channels, 3, 3});
    b.Init(p + "scale", {16});
    b.Init(p + "bias", {16});
    b.Init(p + "mean", {16});
    b.Init(p + "var", {16});
    Node& c = b.Op("Conv", {prev, p + "w"}, {p + "c"});
    c.attrs["pads"] = IntsAttr({1, 1, 1, 1});
    c.scope = m + ".conv";
    Node& bn = b.Op("BatchNormalization", {p + "c", p + "scale", p + "bias", p + "mean", p + "var"},
                    {p + "n"});
    bn.scope = m + ".bn";
    b.Op("Relu", {p + "n"}, {p + "r"}).scope = m + ".relu";
    prev = p + "r";
    channels = 16;
  }
  b.Op("GlobalAveragePool", {prev}, {"pool"}).scope = "head";
  b.Op("Flatten", {"pool"}, {"logits"}).scope = "head";
  b.Output("logits");
  b.g.Link();
  return b.g;
}

// Shape arithmetic on the batch: Shape -> Gather -> Concat -> Reshape (known
// values that change with the binding), then a sequence, so that every field
// shape inference writes differs between bindings.
Graph ShapeMath() {
  GraphBuilder b;
  b.Input("x", {S("batch"), D(4), D(6)});
  b.Ints("i0", {0});
  b.Ints("minus1", {-1});
  b.Op("Shape", {"x"}, {"shape"});
  b.Op("Gather", {"shape", "i0"}, {"n"});
  b.Op("Concat", {"n", "minus1"}, {"target"}).attrs["axis"] = testing_util::IntAttr(0);
  b.Op("Reshape", {"x", "target"}, {"flat"});
  b.Init("w", {24, 10});
  b.Op("MatMul", {"flat", "w"}, {"logits"});
  b.Op("SplitToSequence", {"logits"}, {"pieces"});
  b.Output("logits");
  b.g.Link();
  return b.g;
}

void ExpectSameTensors(const Graph& kept, const Graph& fresh, const std::string& what) {
  ASSERT_EQ(kept.tensors.size(), fresh.tensors.size()) << what;
  for (size_t i = 0; i < kept.tensors.size(); ++i) {
    const Tensor& a = kept.tensors[i];
    const Tensor& b = fresh.tensors[i];
    const std::string w = what + " tensor " + b.name;
    EXPECT_EQ(a.name, b.name) << w;
    EXPECT_EQ(a.dtype, b.dtype) << w;
    EXPECT_EQ(a.kind, b.kind) << w;
    EXPECT_EQ(a.producer, b.producer) << w;
    EXPECT_EQ(a.consumers, b.consumers) << w;
    EXPECT_EQ(a.shape_known, b.shape_known) << w;
    EXPECT_EQ(a.shape, b.shape) << w;
    EXPECT_EQ(a.has_values, b.has_values) << w;
    EXPECT_EQ(a.values, b.values) << w;
    EXPECT_EQ(a.is_sequence, b.is_sequence) << w;
    EXPECT_EQ(a.seq_shapes, b.seq_shapes) << w;
  }
  EXPECT_EQ(kept.bound_symbols, fresh.bound_symbols) << what;
  EXPECT_EQ(kept.batch_symbol, fresh.batch_symbol) << what;
}

// Bindings asked again get back the shapes inferred for them before (kept,
// not inferred again), equal to a fresh inference field by field, also
// after a binding that failed and once the oldest were dropped.
TEST(CandidatePlanner, KeptShapesAreAFreshInference) {
  for (const Graph& g : {ShapeMath(), Blocks(), ConvNet()}) {
    CandidatePlanner kept(g, PlanOptions());
    const std::vector<int64_t> batches = {2, 7, 0, 2, 1, 7, 7, 3, 1, 2};
    std::vector<int64_t> inferred;
    for (int64_t batch : batches) {
      ShapeBindings bind;
      bind.batch = batch;
      std::vector<std::string> warnings;
      auto fresh = BindShapes(g, bind, &warnings);
      auto bound = kept.Bind(bind);
      ASSERT_EQ(bound.ok(), fresh.ok()) << "batch " << batch;
      if (!fresh.ok()) {
        EXPECT_EQ(bound.message(), fresh.message());
        continue;
      }
      ExpectSameTensors(*bound.value(), fresh.value(), "batch " + std::to_string(batch));
    }
    // 2, 7, 0 (refused), 1, 3: inferred once each.
    EXPECT_EQ(kept.inferences(), 5);
  }
  const Graph g = ShapeMath();
  ShapeBindings two;
  two.batch = 2;
  std::vector<std::string> warnings;
  auto fresh = BindShapes(g, two, &warnings);
  ASSERT_TRUE(fresh.ok());
  EXPECT_TRUE(fresh->tensors[fresh->Find("target")].has_values);
  EXPECT_TRUE(fresh->tensors[fresh->Find("pieces")].is_sequence);
}

// More bindings than the kept tensors hold: the oldest are inferred again,
// and still equal a fresh inference.
TEST(CandidatePlanner, KeptShapesDropTheOldestBeyondTheirLimit) {
  const Graph g = ShapeMath();
  const int64_t room = 4;
  CandidatePlanner kept(g, PlanOptions(), room * g.tensors.size());
  ShapeBindings bind;
  for (int64_t batch = 1; batch <= room + 2; ++batch) {
    bind.batch = batch;
    ASSERT_TRUE(kept.Bind(bind).ok());
  }
  const int before = kept.inferences();
  EXPECT_EQ(before, room + 2);
  bind.batch = 1;  // dropped: inferred again
  auto first = kept.Bind(bind);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(kept.inferences(), before + 1);
  std::vector<std::string> warnings;
  auto fresh = BindShapes(g, bind, &warnings);
  ASSERT_TRUE(fresh.ok());
  ExpectSameTensors(*first.value(), fresh.value(), "batch 1 again");
  bind.batch = room;  // kept
  ASSERT_TRUE(kept.Bind(bind).ok());
  EXPECT_EQ(kept.inferences(), before + 1);
}

void ExpectSamePeak(const Peak& a, const Peak& b, const std::string& what) {
  EXPECT_EQ(a.allocated_bytes, b.allocated_bytes) << what;
  EXPECT_EQ(a.reserved_bytes, b.reserved_bytes) << what;
  EXPECT_EQ(a.device_bytes, b.device_bytes) << what;
  EXPECT_EQ(a.lower_bound_bytes, b.lower_bound_bytes) << what;
  EXPECT_EQ(a.node, b.node) << what;
  EXPECT_EQ(a.module, b.module) << what;
  EXPECT_EQ(a.phase, b.phase) << what;
  for (int c = 0; c < kNumCategories; ++c) {
    EXPECT_EQ(a.breakdown.bytes[c], b.breakdown.bytes[c]) << what << " category " << c;
  }
  for (int p = 0; p < 3; ++p) {
    EXPECT_EQ(a.phase_allocated[p], b.phase_allocated[p]) << what;
    EXPECT_EQ(a.phase_reserved[p], b.phase_reserved[p]) << what;
  }
  ASSERT_EQ(a.rules.size(), b.rules.size()) << what;
  for (size_t i = 0; i < a.rules.size(); ++i) {
    EXPECT_EQ(a.rules[i].rule, b.rules[i].rule) << what;
    EXPECT_EQ(a.rules[i].peak_bytes, b.rules[i].peak_bytes) << what;
  }
}

// Everything a fit test and the advisor's report read, and (kFull) the rest.
void ExpectSamePlan(const Plan& kept, const Plan& fresh, PlanDetail detail,
                    const std::string& what) {
  ExpectSamePeak(kept.peak, fresh.peak, what + " peak");
  ExpectSamePeak(kept.first_step, fresh.first_step, what + " first step");
  ExpectSamePeak(kept.steady, fresh.steady, what + " steady");
  EXPECT_EQ(kept.batch, fresh.batch) << what;
  EXPECT_EQ(kept.parameter_bytes, fresh.parameter_bytes) << what;
  EXPECT_EQ(kept.forward_flops, fresh.forward_flops) << what;
  EXPECT_EQ(kept.backward_flops, fresh.backward_flops) << what;
  EXPECT_EQ(kept.recompute_flops, fresh.recompute_flops) << what;
  EXPECT_EQ(kept.options.checkpoint_segments, fresh.options.checkpoint_segments) << what;
  EXPECT_EQ(kept.warnings, fresh.warnings) << what;
  EXPECT_EQ(kept.coverage.peak_bytes, fresh.coverage.peak_bytes) << what;
  EXPECT_EQ(kept.coverage.unbacked_bytes, fresh.coverage.unbacked_bytes) << what;
  EXPECT_EQ(kept.int32_overflow.elements, fresh.int32_overflow.elements) << what;
  EXPECT_EQ(kept.largest_tensor.elements, fresh.largest_tensor.elements) << what;
  EXPECT_EQ(kept.rank.nccl_bytes, fresh.rank.nccl_bytes) << what;
  ASSERT_EQ(kept.timeline.size(), fresh.timeline.size()) << what;
  for (size_t i = 0; i < kept.timeline.size(); ++i) {
    EXPECT_EQ(kept.timeline[i].allocated, fresh.timeline[i].allocated) << what << " point " << i;
    EXPECT_EQ(kept.timeline[i].reserved, fresh.timeline[i].reserved) << what << " point " << i;
    EXPECT_EQ(kept.timeline[i].node, fresh.timeline[i].node) << what << " point " << i;
  }
  if (detail == PlanDetail::kPeaks) {
    EXPECT_TRUE(kept.modules.empty()) << what;
    EXPECT_TRUE(kept.kernels.empty()) << what;
    return;
  }
  ASSERT_EQ(kept.modules.size(), fresh.modules.size()) << what;
  for (size_t i = 0; i < kept.modules.size(); ++i) {
    EXPECT_EQ(kept.modules[i].module, fresh.modules[i].module) << what;
    EXPECT_EQ(kept.modules[i].forward_allocated, fresh.modules[i].forward_allocated) << what;
    EXPECT_EQ(kept.modules[i].backward_allocated, fresh.modules[i].backward_allocated) << what;
  }
  EXPECT_EQ(kept.kernels.size(), fresh.kernels.size()) << what;
}

// The planner that keeps schedules across placements gives the plan a fresh
// PlanModel gives, over batches, precisions and placements asked in an order
// that reuses every kept schedule under another placement.
TEST(CandidatePlanner, KeptSchedulesPlanLikeFreshPlans) {
  const std::vector<std::vector<std::string>> placements = {
      {},
      {"layers.1"},
      {"layers.0", "layers.2"},
      {"layers.0", "layers.1", "layers.2", "layers.3"},
      {"stage1"},
      {"stage0", "stage2"}};
  for (const Graph& g : {Blocks(), ConvNet()}) {
    PlanOptions base;
    base.mode = Mode::kTrain;
    base.optimizer = Optimizer::kAdamW;
    CandidatePlanner kept(g, base);
    int compared = 0;
    bool recomputes = false;
    for (Precision p : {Precision::kFp32, Precision::kAmpBf16, Precision::kBf16}) {
      for (int round = 0; round < 2; ++round) {
        for (const std::vector<std::string>& ckpt : placements) {
          for (int64_t batch : {1, 3, 8, 64, 3}) {
            ShapeBindings bind;
            bind.batch = batch;
            PlanOptions o = base;
            o.precision = p;
            o.checkpoint_segments = ckpt;
            auto fresh = PlanModel(g, bind, o);
            const PlanDetail detail = round == 0 ? PlanDetail::kPeaks : PlanDetail::kFull;
            auto plan = kept.PlanStep(bind, p, ckpt, detail);
            ASSERT_EQ(plan.ok(), fresh.ok()) << (fresh.ok() ? plan.message() : fresh.message());
            if (!fresh.ok()) {
              EXPECT_EQ(plan.message(), fresh.message());
              continue;
            }
            std::string what = std::string(PrecisionName(p)) + " batch " + std::to_string(batch);
            for (const std::string& m : ckpt) what += " " + m;
            ExpectSamePlan(plan.value(), fresh.value(), detail, what);
            if (!ckpt.empty() && fresh->recompute_flops > 0) recomputes = true;
            ++compared;
          }
        }
      }
    }
    EXPECT_GT(compared, 60);
    // The placements did reach the simulation (a schedule reused without
    // its segments re-marked would plan no recomputation, or too much).
    EXPECT_TRUE(recomputes);
  }
}

// Attention over a symbolic batch: q, k, v of [batch, 4, 16, 8] from
// projections, scores scaled, softmax, the context (an SDPA region), then a
// projection to the output; each in its own module.
Graph Attention() {
  GraphBuilder b;
  for (const std::string name : {"q", "k", "v"}) {
    b.Input(name + "_in", {S("batch"), D(4), D(16), D(8)});
    b.Init(name + "_w", {8, 8});
    b.Op("MatMul", {name + "_in", name + "_w"}, {name}).scope = "attn." + name;
  }
  b.Init("scale", {});
  Node& t = b.Op("Transpose", {"k"}, {"kt"});
  t.attrs["perm"] = IntsAttr({0, 1, 3, 2});
  t.scope = "attn";
  b.Op("MatMul", {"q", "kt"}, {"scores"}).scope = "attn";
  b.Op("Mul", {"scores", "scale"}, {"scaled"}).scope = "attn";
  b.Op("Softmax", {"scaled"}, {"probs"}).scope = "attn";
  b.Op("MatMul", {"probs", "v"}, {"ctx"}).scope = "attn";
  b.Init("out_w", {8, 8});
  b.Op("MatMul", {"ctx", "out_w"}, {"logits"}).scope = "head";
  b.Output("logits");
  b.g.Link();
  return b.g;
}

// The schedule analysis kept per binding (the regions) and over bindings
// (roles, Linear layers, order) gives the plans fresh ones give, for a graph
// with an attention region, over precisions asked one after another at
// batches that come back; one analysis per binding, not per schedule.
TEST(CandidatePlanner, KeptAnalysesPlanLikeFreshPlans) {
  const Graph g = Attention();
  {
    Graph bound = g;
    ShapeBindings bind;
    bind.batch = 2;
    ASSERT_TRUE(InferShapes(&bound, bind, nullptr).ok());
    ASSERT_EQ(AnalyzeForSchedule(bound).attention.size(), 1u);
  }
  PlanOptions base;
  base.mode = Mode::kTrain;
  base.optimizer = Optimizer::kAdamW;
  base.attention = Attention::kFused;
  CandidatePlanner kept(g, base);
  const std::vector<int64_t> batches = {1, 2, 5, 2, 1};
  for (Precision p : {Precision::kFp32, Precision::kAmpBf16, Precision::kBf16}) {
    for (int64_t batch : batches) {
      for (const std::vector<std::string>& ckpt :
           {std::vector<std::string>{}, std::vector<std::string>{"attn"}}) {
        ShapeBindings bind;
        bind.batch = batch;
        PlanOptions o = base;
        o.precision = p;
        o.checkpoint_segments = ckpt;
        auto fresh = PlanModel(g, bind, o);
        ASSERT_TRUE(fresh.ok()) << fresh.message();
        auto plan = kept.PlanStep(bind, p, ckpt, PlanDetail::kFull);
        ASSERT_TRUE(plan.ok()) << plan.message();
        ExpectSamePlan(plan.value(), fresh.value(), PlanDetail::kFull,
                       std::string(PrecisionName(p)) + " batch " + std::to_string(batch) +
                           (ckpt.empty() ? "" : " attn"));
      }
    }
  }
  // Three bindings, each analysed once for the three precisions' schedules.
  EXPECT_EQ(kept.inferences(), 3);
  EXPECT_EQ(kept.analyses(), 3);
  EXPECT_EQ(kept.schedules_built(), 9);
}

// The kept schedules stay within their limit (the one in use always kept),
// the plans are still fresh PlanModel's, and a schedule dropped is built
// again when its batch comes back.
TEST(CandidatePlanner, KeptSchedulesStayWithinTheirLimit) {
  for (const Graph& g : {Blocks(), ConvNet()}) {
    PlanOptions base;
    base.mode = Mode::kTrain;
    ShapeBindings bind;
    bind.batch = 1;
    CandidatePlanner unbounded(g, base);
    ASSERT_TRUE(unbounded.PlanStep(bind, Precision::kFp32, {}, PlanDetail::kPeaks).ok());
    // One schedule per fp32 convolution variant and batch.
    const size_t variants = unbounded.schedules_kept();
    const size_t one = unbounded.schedule_items() / variants;
    ASSERT_GT(one, 0u);
    for (size_t limit : {size_t{0}, variants * (2 * one + one / 2)}) {
      CandidatePlanner kept(g, base, CandidatePlanner::kKeptTensors, limit);
      for (int64_t batch : {1, 2, 3, 4, 5, 1, 5}) {
        bind.batch = batch;
        PlanOptions o = base;
        auto fresh = PlanModel(g, bind, o);
        ASSERT_TRUE(fresh.ok());
        auto plan = kept.PlanStep(bind, Precision::kFp32, {}, PlanDetail::kFull);
        ASSERT_TRUE(plan.ok()) << plan.message();
        ExpectSamePlan(plan.value(), fresh.value(), PlanDetail::kFull,
                       "limit " + std::to_string(limit) + " batch " + std::to_string(batch));
        EXPECT_GE(kept.schedules_kept(), 1u);
        if (limit == 0) {
          EXPECT_EQ(kept.schedules_kept(), 1u);
        } else {
          EXPECT_LE(kept.schedule_items(), limit);
        }
      }
      // Batch 1 came back after four others: built again; batch 5 came
      // right back: kept, unless nothing but the one in use is.
      EXPECT_EQ(kept.schedules_built(), (limit == 0 ? 7 : 6) * static_cast<int>(variants)) << limit;
    }
  }
}

// A fit test's limit: a plan stops early only when the full plan's reserved
// peak is above the limit, and below it the plan is the full one. Limits
// around the reserved peak and the allocated peak (where the live-bytes
// bound and the replayed peak decide), over graphs with one and with
// several variants, precisions, batches and placements.
TEST(CandidatePlanner, AReservedLimitStopsOnlyPlansAboveIt) {
  for (const Graph& g : {Blocks(), ConvNet()}) {
    PlanOptions base;
    base.mode = Mode::kTrain;
    base.optimizer = Optimizer::kAdamW;
    CandidatePlanner kept(g, base);
    int stopped = 0, stopped_before_replay = 0, full = 0;
    for (Precision p : {Precision::kFp32, Precision::kAmpBf16}) {
      for (const std::vector<std::string>& ckpt :
           {std::vector<std::string>{}, std::vector<std::string>{"layers.1", "stage1"}}) {
        std::vector<std::string> exists;
        for (const std::string& m : ckpt) {
          if (g.nodes.end() != std::find_if(g.nodes.begin(), g.nodes.end(), [&](const Node& n) {
                return n.scope.rfind(m, 0) == 0;
              })) {
            exists.push_back(m);
          }
        }
        for (int64_t batch : {1, 4, 32}) {
          ShapeBindings bind;
          bind.batch = batch;
          PlanOptions o = base;
          o.precision = p;
          o.checkpoint_segments = exists;
          auto fresh = PlanModel(g, bind, o);
          ASSERT_TRUE(fresh.ok()) << fresh.message();
          const int64_t reserved = fresh->peak.reserved_bytes;
          const int64_t allocated = fresh->peak.allocated_bytes;
          for (int64_t limit : {int64_t{0}, allocated / 2, allocated - 1, allocated, reserved - 1,
                                reserved, reserved + 1}) {
            auto plan = kept.PlanStep(bind, p, exists, PlanDetail::kPeaks, limit);
            ASSERT_TRUE(plan.ok()) << plan.message();
            const std::string what = std::string(PrecisionName(p)) + " batch " +
                                     std::to_string(batch) + " limit " + std::to_string(limit);
            if (plan->over_limit) {
              ++stopped;
              EXPECT_GT(reserved, limit) << what;
              EXPECT_GT(plan->peak.reserved_bytes, limit) << what;
              EXPECT_LE(plan->peak.reserved_bytes, reserved) << what;
              if (plan->peak.reserved_bytes < reserved) ++stopped_before_replay;
            } else {
              ++full;
              ExpectSamePlan(plan.value(), fresh.value(), PlanDetail::kPeaks, what);
            }
          }
          // reserved - 1 is below the kept variant's reserved peak.
          auto just_under = kept.PlanStep(bind, p, exists, PlanDetail::kPeaks, reserved - 1);
          ASSERT_TRUE(just_under.ok());
          EXPECT_TRUE(just_under->over_limit) << batch;
        }
      }
    }
    EXPECT_GT(stopped, 0);
    EXPECT_GT(stopped_before_replay, 0);  // the live bytes alone were over the limit
    EXPECT_GT(full, 0);
  }
}

// No early stop where the replay may end at an out-of-memory (a device
// limit): the full plan comes back.
TEST(CandidatePlanner, AReservedLimitIsIgnoredWithADeviceLimit) {
  const Graph g = Blocks();
  PlanOptions base;
  base.mode = Mode::kTrain;
  base.allocator.device_limit = int64_t{1} << 40;
  CandidatePlanner kept(g, base);
  ShapeBindings bind;
  bind.batch = 8;
  auto plan = kept.PlanStep(bind, Precision::kFp32, {}, PlanDetail::kPeaks, 0);
  ASSERT_TRUE(plan.ok()) << plan.message();
  EXPECT_FALSE(plan->over_limit);
  auto fresh = PlanModel(g, bind, base);
  ASSERT_TRUE(fresh.ok());
  ExpectSamePlan(plan.value(), fresh.value(), PlanDetail::kPeaks, "device limit");
}

TEST(CandidatePlanner, PlacementErrorsAreMakePlansErrors) {
  const Graph g = Blocks();
  PlanOptions base;
  base.mode = Mode::kTrain;
  CandidatePlanner kept(g, base);
  ShapeBindings bind;
  bind.batch = 2;
  PlanOptions o = base;
  o.checkpoint_segments = {"nosuchmodule"};
  auto fresh = PlanModel(g, bind, o);
  ASSERT_FALSE(fresh.ok());
  for (int i = 0; i < 2; ++i) {  // the second answer comes from the kept resolution
    auto plan = kept.PlanStep(bind, Precision::kFp32, {"nosuchmodule"}, PlanDetail::kPeaks);
    ASSERT_FALSE(plan.ok());
    EXPECT_EQ(plan.message(), fresh.message());
  }
}

// A binding shape inference refuses leaves the planner as it was: the next
// binding plans as a fresh graph would.
TEST(CandidatePlanner, AFailedBindingLeavesNothingBehind) {
  const Graph g = Blocks();
  PlanOptions base;
  base.mode = Mode::kTrain;
  CandidatePlanner kept(g, base);
  ShapeBindings good, bad;
  good.batch = 5;
  bad.batch = 0;
  ASSERT_TRUE(kept.PlanStep(good, Precision::kFp32, {}, PlanDetail::kFull).ok());
  auto refused = kept.PlanStep(bad, Precision::kFp32, {}, PlanDetail::kFull);
  auto fresh_refused = PlanModel(g, bad, base);
  ASSERT_FALSE(refused.ok());
  ASSERT_FALSE(fresh_refused.ok());
  EXPECT_EQ(refused.message(), fresh_refused.message());
  for (int64_t batch : {5, 6}) {
    good.batch = batch;
    auto plan = kept.PlanStep(good, Precision::kFp32, {}, PlanDetail::kFull);
    auto fresh = PlanModel(g, good, base);
    ASSERT_TRUE(plan.ok() && fresh.ok());
    ExpectSamePlan(plan.value(), fresh.value(), PlanDetail::kFull,
                   "batch " + std::to_string(batch));
  }
}

// Two inputs, two symbols: x [a, 64] and z [b, 64], each through a MatMul.
Graph TwoSymbols() {
  GraphBuilder b;
  b.Input("x", {S("a"), D(64)});
  b.Input("z", {S("b"), D(64)});
  b.Init("w", {64, 64});
  b.Op("MatMul", {"x", "w"}, {"y"});
  b.Op("MatMul", {"z", "w"}, {"v"});
  b.Output("y");
  b.Output("v");
  b.g.Link();
  return b.g;
}

// Bindings that differ only in --batch-dim name another batch symbol: the
// planners keep a bound graph per binding, and must not hand the first
// one's batch symbol to the second.
TEST(Planners, BatchDimIsPartOfTheBinding) {
  const Graph g = TwoSymbols();
  PlanOptions base;
  base.mode = Mode::kInference;
  ShapeBindings on_a, on_b;
  on_a.batch = on_b.batch = 4;
  on_a.dims = on_b.dims = {{"a", 4}, {"b", 4}};
  on_a.batch_dim = "a";
  on_b.batch_dim = "b";
  ModelPlanner model(g);
  CandidatePlanner candidates(g, base);
  for (const ShapeBindings* b : {&on_a, &on_b}) {
    auto fresh = PlanModel(g, *b, base);
    auto kept = model.PlanStep(*b, base);
    auto candidate = candidates.PlanStep(*b, Precision::kFp32, {}, PlanDetail::kFull);
    ASSERT_TRUE(fresh.ok() && kept.ok() && candidate.ok());
    EXPECT_EQ(fresh->batch_symbol, b->batch_dim);
    EXPECT_EQ(kept->batch_symbol, fresh->batch_symbol)
        << "ModelPlanner, batch_dim " << b->batch_dim;
    EXPECT_EQ(candidate->batch_symbol, fresh->batch_symbol)
        << "CandidatePlanner, batch_dim " << b->batch_dim;
  }
}

}  // namespace
}  // namespace memplan
