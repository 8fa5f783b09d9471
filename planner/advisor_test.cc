#include "planner/advisor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <set>

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

// gru_lm fp32's measured reserved peak for a budget of 594 MiB: batch 4
// fits, 5 to 11 do not, 12 does again (588 MiB), 22 and more reserve more
// and the allocated peak passes the budget at 18.
TEST(Advisor, ScanPastDipsFindsALargerBatchThatFits) {
  const std::set<int64_t> fitting = {1, 2, 3, 4, 12, 13};
  FitFn fits = [&](int64_t b) -> Result<bool> { return fitting.count(b) > 0; };
  int beyond_asked = 0;
  BeyondFn beyond = [&](int64_t b) -> Result<bool> {
    ++beyond_asked;
    return b >= 18;
  };
  auto mono = LargestBatch(fits, 65536, 1);
  ASSERT_TRUE(mono.ok());
  EXPECT_EQ(mono->batch, 4);  // The search stops a few batches past 5.
  auto past = ScanPastDips(fits, beyond, mono->batch, 65536);
  ASSERT_TRUE(past.ok()) << past.message();
  EXPECT_EQ(past->batch, 13);
  // Asked at 5 to 12, then past LargestBatch's 13 at 14 to 18, where the
  // allocated peak is over.
  EXPECT_EQ(beyond_asked, 8 + 5);
  // Misses in a row end it: 5 to 10 fail, so with 6 allowed 12 is not reached.
  auto short_scan = ScanPastDips(
      fits, [](int64_t) -> Result<bool> { return false; }, 4, 65536,
      /*max_misses=*/6);
  ASSERT_TRUE(short_scan.ok());
  EXPECT_EQ(short_scan->batch, 4);
  // At the cap, or when nothing larger can fit, the answer stands.
  auto capped = ScanPastDips(fits, beyond, 4, 10);
  ASSERT_TRUE(capped.ok());
  EXPECT_EQ(capped->batch, 4);
  auto none = ScanPastDips(
      fits, [](int64_t) -> Result<bool> { return true; }, 0, 65536);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->batch, 0);
  // An error stops it.
  auto err = ScanPastDips(
      fits, [](int64_t b) -> Result<bool> { return Status::Error("at " + std::to_string(b)); }, 4,
      65536);
  ASSERT_FALSE(err.ok());
  EXPECT_EQ(err.message(), "at 5");
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

// A need in bytes for the predicted search, and the fit it implies.
using NeedFn = std::function<double(int64_t)>;

MeasureFn Measured(const NeedFn& need, double limit, std::vector<int64_t>* asked) {
  return [need, limit, asked](int64_t b) -> Result<FitMeasure> {
    asked->push_back(b);
    return FitMeasure{need(b) <= limit, need(b)};
  };
}

FitFn Fitting(const NeedFn& need, double limit) {
  return [need, limit](int64_t b) -> Result<bool> { return need(b) <= limit; };
}

// The largest batch in [1, cap] whose need fits, by trying every batch.
int64_t Exhaustive(const NeedFn& need, double limit, int64_t cap) {
  int64_t best = 0;
  for (int64_t b = 1; b <= cap; ++b) {
    if (need(b) <= limit) best = b;
  }
  return best;
}

// What the advisor's reserved bytes look like: a fixed part and a per-sample
// part, rounded up to whole segments.
NeedFn Stepped(double fixed, double per_sample, double segment) {
  return [=](int64_t b) {
    return fixed + segment * std::ceil(per_sample * static_cast<double>(b) / segment);
  };
}

TEST(Advisor, PredictedSearchMatchesTheExhaustiveOneOnAffineAndSteppedNeeds) {
  const int64_t cap = 65536;
  int predicted_probes = 0, doubling_probes = 0;
  for (double per_sample : {1e6, 3.3e7, 2.5e8}) {
    for (double segment : {1.0, 2097152.0, 2e9}) {
      const NeedFn need = Stepped(6e9, per_sample, segment);
      for (double limit : {5e9, 6.2e9, 4e10, 1.33e11}) {
        const int64_t truth = Exhaustive(need, limit, cap);
        for (int64_t start : {1, 97, 5000}) {
          std::vector<int64_t> asked;
          auto p = LargestBatchPredicted(Measured(need, limit, &asked), limit, cap, start);
          ASSERT_TRUE(p.ok());
          EXPECT_EQ(p->batch, truth)
              << per_sample << " " << segment << " " << limit << " " << start;
          EXPECT_EQ(p->probes, static_cast<int>(asked.size()));
          EXPECT_LE(p->probes, 40);
          auto d = LargestBatch(Fitting(need, limit), cap, start);
          ASSERT_TRUE(d.ok());
          EXPECT_EQ(d->batch, truth);
          predicted_probes += p->probes;
          doubling_probes += d->probes;
        }
      }
    }
  }
  // The point of it: fewer probes in all.
  EXPECT_LT(predicted_probes, doubling_probes * 3 / 4);
}

TEST(Advisor, PredictedSearchNeedsFewProbesOnAnAffineNeed) {
  // 6 GB fixed, 33 MB per sample, 133 GB usable: the frontier is at 3848.
  const NeedFn need = [](int64_t b) { return 6e9 + 3.3e7 * static_cast<double>(b); };
  std::vector<int64_t> asked;
  auto p = LargestBatchPredicted(Measured(need, 1.33e11, &asked), 1.33e11, 65536, 1);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->batch, 3848);
  // 1, a proportional guess, the secant's 3848, 3849, the two neighbours.
  EXPECT_LE(p->probes, 7);
  // From another search's answer that is this one's too: it and the next
  // three batches.
  asked.clear();
  auto again = LargestBatchPredicted(Measured(need, 1.33e11, &asked), 1.33e11, 65536, 3848);
  EXPECT_EQ(again->batch, 3848);
  EXPECT_EQ(asked, (std::vector<int64_t>{3848, 3849, 3850, 3851}));
}

// The need is not monotone: single batches below the largest fitting one do
// not fit (one batch wide, so the neighbour probes see past them), and past
// a cliff nothing fits, although the need falls back a little further on.
TEST(Advisor, PredictedSearchMatchesTheExhaustiveOneOnANonMonotoneNeed) {
  const int64_t cap = 65536;
  for (int64_t frontier : {7, 700, 49152}) {
    for (int64_t hole_every : {3, 17, 1000}) {
      const NeedFn need = [=](int64_t b) {
        const double base = 1e9 + 2e6 * static_cast<double>(b);
        if (b <= frontier) return b % hole_every == 0 && b > 1 ? 9e18 : base;
        if (b < frontier + 6000) return 1.5e11;  // the cliff
        return 1.45e11;                          // lower, still over
      };
      const double limit = 1.42e11;
      const int64_t truth = Exhaustive(need, limit, cap);
      ASSERT_LE(truth, frontier);
      ASSERT_GE(truth, frontier - 1);
      for (int64_t start : {int64_t{1}, int64_t{64}, frontier, int64_t{60000}}) {
        std::vector<int64_t> asked;
        auto p = LargestBatchPredicted(Measured(need, limit, &asked), limit, cap, start);
        ASSERT_TRUE(p.ok());
        EXPECT_EQ(p->batch, truth)
            << "frontier " << frontier << " holes " << hole_every << " start " << start;
        auto d = LargestBatch(Fitting(need, limit), cap, start);
        ASSERT_TRUE(d.ok());
        EXPECT_EQ(d->batch, truth);
      }
    }
  }
}

TEST(Advisor, PredictedSearchEdges) {
  std::vector<int64_t> asked;
  auto none =
      LargestBatchPredicted(Measured([](int64_t) { return 2.0; }, 1.0, &asked), 1.0, 65536, 64);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->batch, 0);
  auto all =
      LargestBatchPredicted(Measured([](int64_t) { return 0.0; }, 1.0, &asked), 1.0, 65536, 1);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->batch, 65536);
  EXPECT_LE(all->probes, 18);
  auto one = LargestBatchPredicted(
      Measured([](int64_t b) { return b == 1 ? 0.0 : 2.0; }, 1.0, &asked), 1.0, 65536, 1000);
  EXPECT_EQ(one->batch, 1);
  auto err = LargestBatchPredicted(
      [](int64_t b) -> Result<FitMeasure> {
        if (b > 4) return Status::Error("boom at " + std::to_string(b));
        return FitMeasure{true, 1.0};
      },
      2.0, 100, 1);
  ASSERT_FALSE(err.ok());
  EXPECT_EQ(err.message().substr(0, 8), "boom at ");
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

// Advise gives the same candidates with either batch search, in fewer plans
// with the predicted one.
TEST(Advisor, PredictedAndDoublingSearchesAdviseTheSame) {
  const Graph g = TwoLayerMlp();
  int predicted_plans = 0, doubling_plans = 0;
  for (int64_t budget : {int64_t{64} << 20, int64_t{256} << 20, int64_t{3} << 30}) {
    AdviseRequest r = Request(budget, 0.05);
    r.precisions = {Precision::kAmpBf16, Precision::kFp32};
    r.search = BatchSearchKind::kPredicted;
    auto predicted = Advise(g, r);
    r.search = BatchSearchKind::kFull;
    auto doubling = Advise(g, r);
    ASSERT_TRUE(predicted.ok() && doubling.ok());
    ASSERT_EQ(predicted->ranked.size(), doubling->ranked.size());
    for (size_t i = 0; i < predicted->ranked.size(); ++i) {
      EXPECT_EQ(predicted->ranked[i].batch, doubling->ranked[i].batch) << budget;
      EXPECT_EQ(predicted->ranked[i].device_bytes, doubling->ranked[i].device_bytes);
    }
    EXPECT_LE(predicted->plans, doubling->plans) << budget;
    predicted_plans += predicted->plans;
    doubling_plans += doubling->plans;
  }
  EXPECT_LT(predicted_plans, doubling_plans);
}

// On a need affine in the batch (an MLP's events grow linearly), the replay
// search's model is exact: the same answers as planning every batch, from
// fewer plans, the rest replays.
TEST(Advisor, ReplaySearchAdvisesAsTheFullOneOnAnAffineNeed) {
  const Graph g = TwoLayerMlp();
  int replay_plans = 0, full_plans = 0;
  for (int64_t budget : {int64_t{64} << 20, int64_t{256} << 20, int64_t{3} << 30}) {
    AdviseRequest r = Request(budget, 0.05);
    r.precisions = {Precision::kAmpBf16, Precision::kFp32};
    r.search = BatchSearchKind::kReplay;
    auto replay = Advise(g, r);
    r.search = BatchSearchKind::kFull;
    auto full = Advise(g, r);
    ASSERT_TRUE(replay.ok() && full.ok());
    ASSERT_EQ(replay->ranked.size(), full->ranked.size());
    for (size_t i = 0; i < replay->ranked.size(); ++i) {
      EXPECT_EQ(replay->ranked[i].batch, full->ranked[i].batch) << budget;
      EXPECT_EQ(replay->ranked[i].device_bytes, full->ranked[i].device_bytes);
    }
    EXPECT_LE(replay->plans, full->plans) << budget;
    EXPECT_GT(replay->replays, 0) << budget;
    EXPECT_EQ(full->replays, 0);
    replay_plans += replay->plans;
    full_plans += full->plans;
  }
  EXPECT_LT(2 * replay_plans, full_plans);
}

// Two worker threads give the advice one does.
TEST(Advisor, ThreadsDoNotChangeTheAdvice) {
  AdviseRequest r = Request(256LL << 20, 0.05);
  r.precisions = {Precision::kAmpBf16, Precision::kAmpFp16, Precision::kFp32};
  r.threads = 1;
  auto one = Advise(TwoLayerMlp(), r);
  r.threads = 2;
  auto two = Advise(TwoLayerMlp(), r);
  ASSERT_TRUE(one.ok() && two.ok());
  ASSERT_EQ(one->ranked.size(), two->ranked.size());
  for (size_t i = 0; i < one->ranked.size(); ++i) {
    EXPECT_EQ(one->ranked[i].precision, two->ranked[i].precision);
    EXPECT_EQ(one->ranked[i].batch, two->ranked[i].batch);
    EXPECT_EQ(one->ranked[i].device_bytes, two->ranked[i].device_bytes);
  }
  EXPECT_EQ(one->notes, two->notes);
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
