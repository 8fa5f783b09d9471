#include "planner/advisor.h"

#include <gtest/gtest.h>

#include <cmath>

#include "planner/ops/test_graph.h"

namespace memplan {
namespace {

using testing_util::TwoLayerMlp;

// A monotone, nonlinear memory curve: fits while 3 b^1.5 + 20 ln(b + 1) <= limit.
FitFn Curve(int64_t limit, std::vector<int64_t>* asked) {
  return [limit, asked](int64_t b) -> Result<bool> {
    asked->push_back(b);
    const double x = static_cast<double>(b);
    return 3 * std::pow(x, 1.5) + 20 * std::log(x + 1) <= static_cast<double>(limit);
  };
}

int64_t Truth(int64_t limit, int64_t cap) {
  int64_t best = 0;
  for (int64_t b = 1; b <= cap; ++b) {
    const double x = static_cast<double>(b);
    if (3 * std::pow(x, 1.5) + 20 * std::log(x + 1) <= static_cast<double>(limit)) best = b;
  }
  return best;
}

TEST(Advisor, BatchSearchFindsTheExactBoundary) {
  for (int64_t limit : {30, 100, 1000, 12345, 99999, 1000000}) {
    for (int64_t start : {1, 7, 100, 5000}) {
      std::vector<int64_t> asked;
      auto r = LargestBatch(Curve(limit, &asked), 65536, start);
      ASSERT_TRUE(r.ok());
      EXPECT_EQ(r->batch, Truth(limit, 65536)) << "limit " << limit << " start " << start;
      EXPECT_EQ(r->probes, static_cast<int>(asked.size()));
      EXPECT_LE(r->probes, 40);
    }
  }
}

TEST(Advisor, BatchSearchEdges) {
  std::vector<int64_t> asked;
  // Nothing fits.
  auto none = LargestBatch([](int64_t) -> Result<bool> { return false; }, 65536, 64);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->batch, 0);
  // Everything fits: stops at the cap.
  auto all = LargestBatch([](int64_t) -> Result<bool> { return true; }, 65536, 1);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->batch, 65536);
  EXPECT_LE(all->probes, 18);
  // Exactly batch 1.
  auto one = LargestBatch([](int64_t b) -> Result<bool> { return b == 1; }, 65536, 1000);
  EXPECT_EQ(one->batch, 1);
  // Errors stop the search.
  auto err = LargestBatch(
      [](int64_t b) -> Result<bool> {
        if (b > 4) return Status::Error("boom at " + std::to_string(b));
        return true;
      },
      100, 1);
  ASSERT_FALSE(err.ok());
  EXPECT_EQ(err.message(), "boom at 8");  // 1, 2, 4, 8
}

AdviseRequest Request(int64_t budget, double margin) {
  AdviseRequest r;
  r.precisions = {Precision::kFp32};
  r.budget_bytes = budget;
  r.margin = margin;
  r.context_bytes = 0;
  r.max_batch = 65536;
  r.device = *FindDevice("h100-sxm");
  return r;
}

TEST(Advisor, MarginIsHonouredAndTheBoundaryIsExact) {
  const Graph g = TwoLayerMlp();
  for (double margin : {0.0, 0.05, 0.3}) {
    AdviseRequest r = Request(256LL << 20, margin);
    auto a = Advise(g, r);
    ASSERT_TRUE(a.ok()) << a.message();
    ASSERT_FALSE(a->ranked.empty());
    const Candidate& c = a->ranked.front();
    const int64_t usable = static_cast<int64_t>(std::floor((256LL << 20) * (1 - margin)));
    EXPECT_EQ(a->usable_bytes, usable);
    EXPECT_LE(c.device_bytes, usable);
    EXPECT_EQ(c.headroom_bytes, (256LL << 20) - c.device_bytes);
    // One more sample does not fit.
    Graph bigger = g;
    ShapeBindings bind;
    bind.batch = c.batch + 1;
    std::vector<std::string> warnings;
    ASSERT_TRUE(InferShapes(&bigger, bind, &warnings).ok());
    PlanOptions o;
    o.mode = Mode::kTrain;
    o.context_bytes = 0;
    auto p = MakePlan(bigger, c.batch + 1, o);
    ASSERT_TRUE(p.ok());
    EXPECT_GT(std::max(p->peak.reserved_bytes, p->first_step.reserved_bytes), usable)
        << "margin " << margin;
  }
}

TEST(Advisor, LargerMarginNeverGivesALargerBatch) {
  const Graph g = TwoLayerMlp();
  int64_t prev = 1LL << 40;
  for (double margin : {0.0, 0.1, 0.2, 0.4}) {
    auto a = Advise(g, Request(256LL << 20, margin));
    ASSERT_TRUE(a.ok());
    ASSERT_FALSE(a->ranked.empty());
    EXPECT_LE(a->ranked.front().batch, prev);
    prev = a->ranked.front().batch;
  }
}

TEST(Advisor, NothingFitsIsNotAnError) {
  auto a = Advise(TwoLayerMlp(), Request(1 << 20, 0.05));
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(a->ranked.empty());
  ASSERT_EQ(a->failing.size(), 1u);
  EXPECT_GT(a->failing[0].device_bytes, 1 << 20);
}

TEST(Advisor, GradientAccumulationReachesTheGlobalBatch) {
  AdviseRequest r = Request(256LL << 20, 0.05);
  r.global_batch = 100000;
  auto a = Advise(TwoLayerMlp(), r);
  ASSERT_TRUE(a.ok());
  const Candidate& c = a->ranked.front();
  EXPECT_GE(c.micro_batch * c.grad_accumulation_steps, 100000);
  EXPECT_LE(c.micro_batch, c.batch);
  EXPECT_LT((c.micro_batch - 1) * c.grad_accumulation_steps, 100000);
}

// Each plan the search makes is reported once, with the batch it planned.
TEST(Advisor, ReportsEveryPlanItMakes) {
  AdviseRequest r = Request(256LL << 20, 0.05);
  std::vector<AdviseProgress> seen;
  r.on_plan = [&](const AdviseProgress& p) { seen.push_back(p); };
  auto a = Advise(TwoLayerMlp(), r);
  ASSERT_TRUE(a.ok()) << a.message();
  ASSERT_EQ(static_cast<int>(seen.size()), a->plans);
  bool planned_the_answer = false;
  for (const AdviseProgress& p : seen) {
    EXPECT_EQ(p.precision, Precision::kFp32);
    EXPECT_GE(p.batch, 1);
    planned_the_answer |= p.batch == a->ranked.front().batch;
  }
  EXPECT_TRUE(planned_the_answer);
}

TEST(Advisor, DevicesWithoutBf16SkipIt) {
  AdviseRequest r = Request(256LL << 20, 0.05);
  r.precisions = {Precision::kAmpBf16, Precision::kFp32};
  r.device = *FindDevice("t4");
  auto a = Advise(TwoLayerMlp(), r);
  ASSERT_TRUE(a.ok());
  ASSERT_EQ(a->ranked.size(), 1u);
  EXPECT_EQ(a->ranked[0].precision, Precision::kFp32);
  ASSERT_EQ(a->notes.size(), 1u);
  EXPECT_EQ(a->notes[0], "amp_bf16 skipped: NVIDIA T4 16GB has no bf16 support");
}

TEST(Advisor, SpeedIsARoofline) {
  Plan p;
  p.batch = 10;
  p.forward_flops = 1000000000000;  // 1 TFLOP
  p.backward_flops = 2000000000000;
  p.options.precision = Precision::kAmpBf16;
  p.options.optimizer = Optimizer::kSgd;
  DevicePreset d;
  d.bf16_flops = 100e12;
  d.mem_bandwidth = 1e12;
  SpeedModel m;
  m.compute_efficiency = 0.5;
  m.memory_efficiency = 1.0;
  m.launch_seconds = 1e-6;
  SpeedEstimate s = EstimateSpeed(p, 1000000000, d, 100, m);
  EXPECT_DOUBLE_EQ(s.compute_s, 3e12 / 50e12);
  EXPECT_DOUBLE_EQ(s.memory_s, 2e9 / 1e12);
  EXPECT_DOUBLE_EQ(s.launch_s, 300e-6);
  EXPECT_DOUBLE_EQ(s.step_s, 0.06 + 300e-6);
  EXPECT_DOUBLE_EQ(s.samples_per_s, 10 / s.step_s);
  // Recompute adds FLOPs and activation traffic.
  p.recompute_flops = 500000000000;
  SpeedEstimate r = EstimateSpeed(p, 1000000000, d, 100, m);
  EXPECT_DOUBLE_EQ(r.compute_s, 3.5e12 / 50e12);
  EXPECT_LT(r.samples_per_s, s.samples_per_s);
}

}  // namespace
}  // namespace memplan
