#include "planner/whatif.h"

#include <gtest/gtest.h>

#include "planner/advisor.h"
#include "planner/ops/test_graph.h"
#include "planner/plan_model.h"

namespace memplan {
namespace {

using testing_util::D;
using testing_util::GraphBuilder;
using testing_util::S;
using testing_util::TwoLayerMlp;

TEST(WhatIf, RangesParse) {
  auto r = ParseDimRange("seq=512..8192:512");
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->name, "seq");
  EXPECT_EQ(r->lo, 512);
  EXPECT_EQ(r->hi, 8192);
  EXPECT_EQ(RangeValues(r.value()).size(), 16u);
  auto d = ParseDimRange("batch=1..48");  // doubling, the end kept
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(RangeValues(d.value()), (std::vector<int64_t>{1, 2, 4, 8, 16, 32, 48}));
  auto x = ParseDimRange("batch=3..30:x1.5");  // rounded, always rising
  ASSERT_TRUE(x.ok());
  EXPECT_EQ(RangeValues(x.value()), (std::vector<int64_t>{3, 5, 8, 12, 18, 27, 30}));
  auto one = ParseDimRange("b=7..7");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(RangeValues(one.value()), (std::vector<int64_t>{7}));
}

TEST(WhatIf, BadRangesSayWhatIsWrong) {
  EXPECT_EQ(ParseDimRange("seq=9..3").message(), "the range ends (3) below its start (9)");
  EXPECT_EQ(ParseDimRange("seq=0..3").message(), "'0' is not a positive integer");
  EXPECT_EQ(ParseDimRange("seq=1..x").message(), "'x' is not a positive integer");
  EXPECT_EQ(ParseDimRange("seq=1..8:0").message(), "step '0': must be a positive integer");
  EXPECT_EQ(ParseDimRange("seq=1..8:x1").message(), "factor '1': must be a number above 1");
  EXPECT_EQ(ParseDimRange("seq=1..100000:1").message(), "more than 256 values; take a larger step");
  EXPECT_FALSE(ParseDimRange("seq=5").ok());
  EXPECT_FALSE(ParseDimRange("=1..5").ok());
}

TEST(WhatIf, SweepPointsArePlansAndTheLargestFitIsTheBoundary) {
  const Graph g = TwoLayerMlp();
  PlanOptions o;
  o.mode = Mode::kTrain;
  FitBudget budget{256LL << 20, 0.05, 0};
  auto range = ParseDimRange("batch=1..65536");
  ASSERT_TRUE(range.ok());
  auto curves =
      Sweep(g, ShapeBindings(), range.value(), {Precision::kFp32, Precision::kBf16}, o, budget);
  ASSERT_TRUE(curves.ok()) << curves.message();
  ASSERT_EQ(curves->size(), 2u);
  for (const SweepCurve& c : curves.value()) {
    ASSERT_EQ(c.points.size(), 17u);
    for (size_t i = 0; i < c.points.size(); ++i) {
      const SweepPoint& p = c.points[i];
      // Each point is the plan at that value.
      ShapeBindings b;
      b.dims["batch"] = p.value;
      PlanOptions po = o;
      po.precision = c.precision;
      po.context_bytes = 0;
      auto plan = PlanModel(g, b, po);
      ASSERT_TRUE(plan.ok());
      EXPECT_EQ(p.allocated_bytes, plan->peak.allocated_bytes);
      EXPECT_EQ(p.reserved_bytes, plan->peak.reserved_bytes);
      EXPECT_EQ(p.fits, FitsBudget(plan.value(), budget));
      if (i > 0) {
        EXPECT_GE(p.allocated_bytes, c.points[i - 1].allocated_bytes);
      }
    }
    // The largest fitting value fits and one more does not.
    ASSERT_GT(c.largest_fitting, 0);
    for (int64_t v : {c.largest_fitting, c.largest_fitting + 1}) {
      ShapeBindings b;
      b.batch = v;
      PlanOptions po = o;
      po.precision = c.precision;
      po.context_bytes = 0;
      auto plan = PlanModel(g, b, po);
      ASSERT_TRUE(plan.ok());
      EXPECT_EQ(FitsBudget(plan.value(), budget), v == c.largest_fitting) << v;
    }
  }
  // bf16 halves the bytes per element: a larger batch fits.
  EXPECT_GT(curves.value()[1].largest_fitting, curves.value()[0].largest_fitting);
}

TEST(WhatIf, SweepWithoutBudgetAndAnUnknownDim) {
  auto range = ParseDimRange("seq=1..4");
  ASSERT_TRUE(range.ok());
  PlanOptions o;
  auto bad =
      Sweep(TwoLayerMlp(), ShapeBindings(), range.value(), {Precision::kFp32}, o, FitBudget{});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("seq=1: "), std::string::npos) << bad.message();
  auto b = ParseDimRange("batch=1..4");
  ASSERT_TRUE(b.ok());
  auto ok = Sweep(TwoLayerMlp(), ShapeBindings(), b.value(), {Precision::kFp32}, o, FitBudget{});
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok.value()[0].largest_fitting, -1);
  EXPECT_FALSE(ok.value()[0].points[0].fits);
}

TEST(WhatIf, SweepsADimOtherThanTheBatch) {
  GraphBuilder gb;
  gb.Input("x", {S("batch"), S("seq"), D(64)});
  gb.Init("w", {64, 256});
  gb.Op("MatMul", {"x", "w"}, {"y"});
  gb.Output("y");
  gb.g.Link();
  ShapeBindings b;
  b.batch = 4;
  auto range = ParseDimRange("seq=128..1024:128");
  ASSERT_TRUE(range.ok());
  PlanOptions o;
  o.mode = Mode::kTrain;
  o.loss = Loss::kMse;
  auto curves = Sweep(gb.g, b, range.value(), {Precision::kFp32}, o, FitBudget{});
  ASSERT_TRUE(curves.ok()) << curves.message();
  const auto& pts = curves.value()[0].points;
  ASSERT_EQ(pts.size(), 8u);
  EXPECT_EQ(pts.back().value, 1024);
  // The activations grow with seq: y is [4, seq, 256] fp32.
  EXPECT_GE(pts.back().allocated_bytes - pts.front().allocated_bytes, 4LL * 896 * 256 * 4);
}

TEST(WhatIf, DtypeSummaryOrdersTheColumns) {
  ShapeBindings b;
  b.batch = 64;
  auto rows = DtypeSummary(TwoLayerMlp(), b, PlanOptions());
  ASSERT_TRUE(rows.ok()) << rows.message();
  ASSERT_EQ(rows->size(), 5u);
  const int64_t params = (256 * 1024 + 1024 * 10) * 4;
  EXPECT_EQ(rows.value()[0].weight_bytes, params);      // fp32
  EXPECT_EQ(rows.value()[1].weight_bytes, params);      // amp keeps fp32 parameters
  EXPECT_EQ(rows.value()[2].weight_bytes, params / 2);  // bf16
  // w1 quantized (w2 is the output layer): int8 a byte a weight and an fp32
  // scale per row; nf4 half a byte and its quantization state.
  const DtypeRow& q8 = rows.value()[3];
  const DtypeRow& q4 = rows.value()[4];
  EXPECT_EQ(q8.weights, WeightFormat::kInt8);
  EXPECT_EQ(q8.weight_bytes, 256 * 1024 + 4 * 256 + 1024 * 10 * 2);
  EXPECT_EQ(q4.weights, WeightFormat::kNf4);
  EXPECT_LT(q4.weight_bytes, q8.weight_bytes);
  // No Linear is named like LoRA's default targets: no training figures.
  EXPECT_EQ(q8.train_adam_bytes, -1);
  EXPECT_NE(q8.training_absent.find("q_proj"), std::string::npos) << q8.training_absent;
  rows->resize(3);
  for (const DtypeRow& r : rows.value()) {
    EXPECT_LT(r.inference_allocated, r.train_sgd_allocated);
    // Adam keeps two states of the parameters' size that SGD does not.
    EXPECT_GE(r.train_adam_allocated - r.train_sgd_allocated, r.weight_bytes * 2 - 4096)
        << PrecisionName(r.precision);
  }
}

// Three layers, so that a train-mode forward keeps the first one's output
// while the second runs.
Graph DeepMlp() {
  GraphBuilder b;
  b.Input("x", {S("batch"), D(256)});
  b.Init("w1", {256, 1024});
  b.Init("w2", {1024, 1024});
  b.Init("w3", {1024, 10});
  b.Op("MatMul", {"x", "w1"}, {"h"});
  b.Op("Relu", {"h"}, {"a"});
  b.Op("MatMul", {"a", "w2"}, {"h2"});
  b.Op("Relu", {"h2"}, {"a2"});
  b.Op("MatMul", {"a2", "w3"}, {"y"});
  b.Output("y");
  b.g.Link();
  return b.g;
}

TEST(WhatIf, AllocatorAdviceFiguresArePlans) {
  const Graph g = DeepMlp();
  ShapeBindings b;
  b.batch = 512;
  PlanOptions o;
  o.mode = Mode::kTrain;
  auto a = AdviseAllocator(g, b, o);
  ASSERT_TRUE(a.ok()) << a.message();
  auto plan = PlanModel(g, b, o);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(a->reserved_bytes, plan->peak.reserved_bytes);
  PlanOptions e = o;
  e.allocator.expandable_segments = true;
  auto exp = PlanModel(g, b, e);
  ASSERT_TRUE(exp.ok());
  EXPECT_EQ(a->expandable.reserved_bytes, exp->peak.reserved_bytes);
  EXPECT_EQ(a->expandable.allocated_bytes, plan->peak.allocated_bytes);
  ASSERT_EQ(a->max_split.size(), MaxSplitCandidatesMiB().size());
  // empty_cache() keeps only segments with live blocks; the next step maps
  // segments again and reaches the reserved peak of a step.
  EXPECT_LE(a->after_empty_cache_reserved, a->step_end_reserved);
  EXPECT_GE(a->after_empty_cache_reserved, a->persistent_bytes);
  EXPECT_GT(a->next_step_segments, 0);
  EXPECT_GE(a->next_step_reserved, plan->peak.allocated_bytes);
  // Evaluation without autograd keeps nothing for backward.
  EXPECT_GT(a->persistent_bytes, 0);
  EXPECT_LT(a->eval_no_grad_allocated, a->forward_train_mode_allocated);
  EXPECT_GT(a->eval_no_grad_allocated, a->persistent_bytes);
}

// x [N, 256] -> MatMul -> h -> Relu -> a -> MatMul -> y [N, 16]: the Relu
// can write into h (nn.ReLU(inplace=True)); the export does not say.
Graph ReluChain() {
  GraphBuilder b;
  b.Input("x", {S("batch"), D(256)});
  b.Init("w1", {256, 256});
  b.Init("w2", {256, 16});
  b.Op("MatMul", {"x", "w1"}, {"h"});
  b.Op("Relu", {"h"}, {"a"});
  b.Op("MatMul", {"a", "w2"}, {"y"});
  b.Output("y");
  b.g.Link();
  return b.g;
}

// Each setting is planned for the program the base figures come from: the
// variant (activations in place or not) whose plan is kept, the one with the
// largest device peak.
TEST(WhatIf, AllocatorSettingsHoldTheKeptProgram) {
  const Graph g = ReluChain();
  ShapeBindings b;
  b.batch = 65536;  // 64 MiB activations
  PlanOptions o;
  int64_t device[2] = {0, 0};
  int64_t expandable[2] = {0, 0};
  int64_t split[2] = {0, 0};
  for (int k = 0; k < 2; ++k) {
    PlanOptions v = o;
    v.inplace = k == 0 ? InPlace::kOff : InPlace::kOn;
    auto plan = PlanModel(g, b, v);
    ASSERT_TRUE(plan.ok()) << plan.message();
    device[k] = plan->peak.device_bytes;
    v.allocator.expandable_segments = true;
    auto e = PlanModel(g, b, v);
    ASSERT_TRUE(e.ok()) << e.message();
    expandable[k] = e->peak.reserved_bytes;
    v.allocator.expandable_segments = false;
    v.allocator.max_split_size = MaxSplitCandidatesMiB()[0] << 20;
    auto s = PlanModel(g, b, v);
    ASSERT_TRUE(s.ok()) << s.message();
    split[k] = s->peak.reserved_bytes;
  }
  // The two programs differ under each setting.
  ASSERT_NE(device[0], device[1]);
  ASSERT_NE(expandable[0], expandable[1]);
  ASSERT_NE(split[0], split[1]);
  const int kept = device[1] > device[0] ? 1 : 0;
  auto a = AdviseAllocator(g, b, o);
  ASSERT_TRUE(a.ok()) << a.message();
  EXPECT_EQ(a->expandable.reserved_bytes, expandable[kept]);
  EXPECT_EQ(a->max_split[0].reserved_bytes, split[kept]);
  // The in-place program, asked for, is what every figure plans.
  o.inplace = InPlace::kOn;
  auto on = AdviseAllocator(g, b, o);
  ASSERT_TRUE(on.ok()) << on.message();
  EXPECT_EQ(on->expandable.reserved_bytes, expandable[1]);
  EXPECT_EQ(on->max_split[0].reserved_bytes, split[1]);
}

}  // namespace
}  // namespace memplan

namespace memplan {
namespace {

TEST(WhatIf, NoGradKeepsTheAutocastWeightCache) {
  const Graph g = DeepMlp();
  ShapeBindings b;
  b.batch = 1;
  PlanOptions o;
  o.mode = Mode::kInference;
  o.precision = Precision::kAmpBf16;
  auto inference_mode = PlanModel(g, b, o);
  o.no_grad_weight_cache = true;
  auto no_grad = PlanModel(g, b, o);
  ASSERT_TRUE(inference_mode.ok() && no_grad.ok());
  // Under no_grad the bf16 copies of all three weights are alive at the end
  // of the forward (with the fp32 weights); inference_mode frees each after use.
  const int64_t fp32_weights = (256 * 1024 + 1024 * 1024 + 1024 * 10) * 4;
  EXPECT_GE(no_grad->peak.allocated_bytes, fp32_weights + fp32_weights / 2);
  EXPECT_GT(no_grad->peak.allocated_bytes, inference_mode->peak.allocated_bytes);
  // A second pass starts where the first did: the cache is dropped.
  EXPECT_EQ(no_grad->timeline.back().allocated_end, inference_mode->timeline.back().allocated_end);
}

}  // namespace
}  // namespace memplan
