#include "cli/timeline_svg.h"

#include <gtest/gtest.h>

#include "cli/report.h"
#include "cli/xml_test_util.h"

namespace memplan {
namespace {

constexpr int64_t kMiB = 1LL << 20;
constexpr int64_t kGiB = 1LL << 30;

// A small training step: forward grows activations, backward frees them.
Plan SmallPlan() {
  Plan p;
  p.options.mode = Mode::kTrain;
  p.batch = 4;
  for (int i = 0; i < 30; ++i) {
    TimelinePoint t;
    t.step = 100 + i;
    t.phase = i < 12 ? Phase::kForward : i < 27 ? Phase::kBackward : Phase::kOptimizer;
    t.node = "op" + std::to_string(i);
    t.live.bytes[0] = 400 * kMiB;
    t.live.bytes[1] = i >= 12 ? 400 * kMiB : 0;
    t.live.bytes[2] = 800 * kMiB;
    t.live.bytes[3] = (i < 12 ? i : std::max(0, 24 - i)) * 50 * kMiB;
    t.live.bytes[4] = (i % 3) * 10 * kMiB;
    t.live.bytes[5] = i == 14 ? 64 * kMiB : 0;
    t.allocated = t.live.Total();
    t.reserved = t.allocated + 100 * kMiB;
    p.timeline.push_back(t);
  }
  p.peak.allocated_bytes = p.timeline[14].allocated;
  p.peak.reserved_bytes = p.peak.allocated_bytes + 100 * kMiB;
  p.peak.device_bytes = p.peak.reserved_bytes + 767 * kMiB;
  p.peak.node = "op14 <&>";
  p.timeline[14].node = "op14 <&>";
  p.peak.phase = Phase::kBackward;
  return p;
}

TEST(BytesTicks, NiceBinaryTicks) {
  AxisTicks t = BytesTicks(13 * kGiB);
  ASSERT_FALSE(t.values.empty());
  EXPECT_EQ(t.values.front(), 0);
  EXPECT_GE(t.top, 13 * kGiB);
  EXPECT_EQ(t.labels[1], "5 GiB");
  EXPECT_EQ(t.labels.back(), "15 GiB");
  t = BytesTicks(300 * kMiB);
  EXPECT_EQ(t.labels[1], "100 MiB");
  EXPECT_EQ(t.labels.back(), "300 MiB");
  t = BytesTicks(2 * kGiB + 200 * kMiB);
  EXPECT_EQ(t.labels[1], "0.5 GiB");
  EXPECT_EQ(t.labels.back(), "2.5 GiB");
  t = BytesTicks(10 * kGiB);
  EXPECT_EQ(t.labels[1], "2 GiB");
  EXPECT_EQ(t.top, 10 * kGiB);
  t = BytesTicks(1900 * kMiB);
  EXPECT_EQ(t.labels[1], "0.5 GiB");
  EXPECT_EQ(t.labels.back(), "2.0 GiB");
  t = BytesTicks(0);
  EXPECT_GE(t.values.size(), 2u);
}

TEST(CountTicks, NiceIntegers) {
  EXPECT_EQ(CountTicks(30, 8), (std::vector<int64_t>{0, 5, 10, 15, 20, 25, 30}));
  EXPECT_EQ(CountTicks(3, 8), (std::vector<int64_t>{0, 1, 2, 3}));
}

TEST(TimelineSvg, WellFormedWithCategoriesPeakAndBudget) {
  TimelineStyle style;
  style.title = "small & model";
  style.budget_bytes = 3 * kGiB;
  const std::string svg = TimelineDocument({TimelineChart(SmallPlan(), style)}, 1200, 540);
  std::string err;
  EXPECT_TRUE(testing::XmlWellFormed(svg, &err)) << err;
  for (int c = 0; c < kNumCategories; ++c) {
    const std::string name = CategoryName(static_cast<Category>(c));
    EXPECT_NE(svg.find("data-category=\"" + name + "\""), std::string::npos) << name;
    EXPECT_NE(svg.find(">" + name + "</text>"), std::string::npos) << name << " legend";
  }
  EXPECT_NE(svg.find("at op14 &lt;&amp;&gt; (backward)"), std::string::npos);
  EXPECT_NE(svg.find("budget 3.00 GiB"), std::string::npos);
  EXPECT_NE(svg.find(">forward</text>"), std::string::npos);
  EXPECT_NE(svg.find(">backward</text>"), std::string::npos);
  EXPECT_NE(svg.find(">op index</text>"), std::string::npos);
  EXPECT_NE(svg.find(" GiB</text>"), std::string::npos);
  EXPECT_NE(svg.find("id=\"allocated\""), std::string::npos);
  EXPECT_NE(svg.find("id=\"reserved\""), std::string::npos);
}

TEST(TimelineSvg, DeviceBudgetLineAndFarBudget) {
  ReportCase c;
  c.name = "m";
  c.plan = SmallPlan();
  c.plan.context_bytes = 767 * kMiB;
  c.budget_bytes = 4 * kGiB;
  c.metric = Metric::kDevice;
  const TimelineStyle s = TimelineStyleFor(c);
  EXPECT_EQ(s.budget_bytes, 4 * kGiB - 767 * kMiB);
  const std::string svg = TimelineChart(c.plan, s);
  EXPECT_NE(svg.find("budget 4.00 GiB - 767.0 MiB context (for reserved)</text>"),
            std::string::npos);
  c.metric = Metric::kAllocated;
  c.budget_bytes = 100 * kGiB;  // far above the data: a note, not a line
  const std::string far = TimelineChart(c.plan, TimelineStyleFor(c));
  EXPECT_NE(far.find("budget 100.00 GiB (for allocated) (above the chart)"), std::string::npos);
  EXPECT_EQ(far.find("id=\"budget\"><line"), std::string::npos);
  EXPECT_NE(svg.find("id=\"budget\"><line"), std::string::npos);
}

TEST(TimelineSvg, ManyPointsAreBucketedAndEmptyIsFine) {
  Plan p = SmallPlan();
  std::vector<TimelinePoint> many;
  for (int r = 0; r < 200; ++r) {
    for (TimelinePoint t : p.timeline) {
      t.step = static_cast<int>(many.size());
      many.push_back(t);
    }
  }
  p.timeline = many;
  const std::string svg = TimelineChart(p, TimelineStyle());
  EXPECT_LT(svg.size(), 400000u);
  std::string err;
  EXPECT_TRUE(testing::XmlWellFormed(svg, &err)) << err;
  Plan empty;
  EXPECT_TRUE(testing::XmlWellFormed(TimelineChart(empty, TimelineStyle()), &err)) << err;
}

TEST(CheckHtml, SelfContainedWithInlineSvg) {
  ReportCase c;
  c.model = "m.onnx";
  c.name = "m train b4";
  c.plan = SmallPlan();
  c.budget_bytes = 3 * kGiB;
  const std::string html = CheckHtml("report", {c});
  EXPECT_EQ(html.find("<!DOCTYPE html>"), 0u);
  EXPECT_NE(html.find("<svg xmlns"), std::string::npos);
  EXPECT_EQ(html.find("http://www.w3.org/2000/svg\" x"), html.find("http://www.w3.org/2000/svg"));
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
  EXPECT_NE(html.find("saved_activations"), std::string::npos);
}

}  // namespace
}  // namespace memplan
