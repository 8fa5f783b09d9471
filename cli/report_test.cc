#include "cli/report.h"

#include <gtest/gtest.h>

#include "cli/format.h"
#include "cli/xml_test_util.h"

namespace memplan {
namespace {

constexpr int64_t kGiB = 1LL << 30;
constexpr int64_t kMiB = 1LL << 20;

ReportCase MakeCase(const std::string& model, const std::string& name, int64_t device,
                    int64_t budget) {
  ReportCase c;
  c.model = c.file = model;
  c.name = name;
  c.plan.options.mode = Mode::kTrain;
  c.plan.batch = 8;
  c.plan.peak.allocated_bytes = device - 2 * kGiB;
  c.plan.peak.reserved_bytes = device - kGiB;
  c.plan.peak.device_bytes = device;
  c.plan.peak.node = "/layer1/conv<2>";
  c.plan.peak.phase = Phase::kBackward;
  c.budget_bytes = budget;
  c.budget_text = budget >= 0 ? FormatBytes(budget) : "";
  return c;
}

TEST(FormatBytes, BinaryUnits) {
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB");
  EXPECT_EQ(FormatBytes(12 * kMiB), "12.0 MiB");
  EXPECT_EQ(FormatBytes(3 * kGiB / 2), "1.50 GiB");
  EXPECT_EQ(FormatBytes(40 * kGiB), "40.00 GiB");
}

TEST(ParseSize, UnitsAndErrors) {
  EXPECT_EQ(ParseSize("40GiB").value(), 40 * kGiB);
  EXPECT_EQ(ParseSize("80GB").value(), 80000000000LL);
  EXPECT_EQ(ParseSize("512 MiB").value(), 512 * kMiB);
  EXPECT_FALSE(ParseSize("12XB").ok());
  EXPECT_EQ(ParseSize("12XB").message(),
            "'12XB': unknown unit 'xb' (binary: KiB MiB GiB TiB, also Ki/K, Mi/M, Gi/G, "
            "Ti/T; decimal: KB MB GB TB)");
  EXPECT_FALSE(ParseSize("GiB").ok());
}

TEST(Metric, BytesAndNames) {
  Peak p;
  p.allocated_bytes = 1;
  p.reserved_bytes = 2;
  p.device_bytes = 3;
  EXPECT_EQ(MetricBytes(p, Metric::kAllocated), 1);
  EXPECT_EQ(MetricBytes(p, Metric::kReserved), 2);
  EXPECT_EQ(MetricBytes(p, Metric::kDevice), 3);
  EXPECT_EQ(ParseMetric("reserved").value(), Metric::kReserved);
  EXPECT_FALSE(ParseMetric("peak").ok());
}

TEST(ReportCase, StatusFromBudgetAndBaseline) {
  ReportCase c = MakeCase("m.onnx", "m", 10 * kGiB, 12 * kGiB);
  EXPECT_EQ(c.status(), CheckStatus::kPass);
  EXPECT_EQ(c.headroom(), 2 * kGiB);
  c.budget_bytes = 10 * kGiB;  // equal is within budget
  EXPECT_EQ(c.status(), CheckStatus::kPass);
  c.budget_bytes = 9 * kGiB;
  EXPECT_EQ(c.status(), CheckStatus::kOverBudget);
  c.budget_bytes = 12 * kGiB;
  c.baseline_bytes = 9 * kGiB;  // +11.1 %
  c.max_increase_pct = 10;
  EXPECT_EQ(c.status(), CheckStatus::kRegression);
  c.max_increase_pct = 12;
  EXPECT_EQ(c.status(), CheckStatus::kPass);
  c.budget_bytes = -1;
  EXPECT_EQ(c.status(), CheckStatus::kNoBudget);
  EXPECT_EQ(CheckExitCode({c}), 0);
  c.max_increase_pct = 0;
  EXPECT_EQ(CheckExitCode({c}), 1);
}

TEST(MarkdownTable, EscapesPipesAndAligns) {
  const std::string t = MarkdownTable({"a", "b"}, {{"x|y", "1"}}, {false, true});
  EXPECT_EQ(t, "| a | b |\n| --- | ---: |\n| x\\|y | 1 |\n");
}

TEST(CheckMarkdown, TablePerModelWithNumbers) {
  std::vector<ReportCase> cases = {
      MakeCase("models/a.onnx", "a train b8", 10 * kGiB, 12 * kGiB),
      MakeCase("models/b.onnx", "b train b8", 10 * kGiB, 9 * kGiB),
      MakeCase("models/a.onnx", "a train b16", 11 * kGiB, 12 * kGiB),
  };
  const std::string md = CheckMarkdown("memplan check", cases);
  EXPECT_NE(md.find("## \u274c memplan check"), std::string::npos) << md;
  EXPECT_NE(md.find("**2 of 3** configurations within budget"), std::string::npos) << md;
  EXPECT_NE(md.find("### a.onnx\n"), std::string::npos);
  EXPECT_NE(md.find("### b.onnx\n"), std::string::npos);
  // One header per model, both configurations of a.onnx under it.
  EXPECT_NE(md.find("| configuration | allocated | reserved | device | budget | headroom | "
                    "status |"),
            std::string::npos);
  EXPECT_NE(md.find("| a train b8 | 8.00 GiB | 9.00 GiB | 10.00 GiB | 12.00 GiB | +2.00 GiB | "
                    "\u2705 pass |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| b train b8 | 8.00 GiB | 9.00 GiB | 10.00 GiB | 9.00 GiB | -1.00 GiB | "
                    "\u274c over budget |"),
            std::string::npos)
      << md;
  EXPECT_LT(md.find("a train b16"), md.find("### b.onnx\n"));
  EXPECT_NE(md.find("exceeds the budget 9.00 GiB"), std::string::npos);
}

TEST(JUnitXml, WellFormedWithFailureAndEscaping) {
  std::vector<ReportCase> cases = {
      MakeCase("models/a.onnx", "a <&> \"quoted\" 'x'", 10 * kGiB, 12 * kGiB),
      MakeCase("models/b.onnx", "b train", 10 * kGiB, 9 * kGiB),
  };
  cases[1].plan.peak.node = "bad\x01node]]>";
  const std::string xml = CheckJUnit("suite & co", cases);
  std::string err;
  EXPECT_TRUE(testing::XmlWellFormed(xml, &err)) << err << "\n" << xml;
  EXPECT_NE(xml.find("tests=\"2\" failures=\"1\""), std::string::npos) << xml;
  EXPECT_NE(xml.find("name=\"a &lt;&amp;&gt; &quot;quoted&quot; &apos;x&apos;\""),
            std::string::npos);
  EXPECT_NE(xml.find("<failure type=\"over_budget\" message=\"b train: device peak 10.00 GiB"),
            std::string::npos)
      << xml;
  EXPECT_NE(xml.find("budget: 9.00 GiB (9663676416 bytes)"), std::string::npos);
  EXPECT_EQ(xml.find('\x01'), std::string::npos);
  EXPECT_NE(xml.find("classname=\"memplan.b\""), std::string::npos);
}

TEST(XmlWellFormed, CatchesBrokenDocuments) {
  std::string err;
  EXPECT_TRUE(testing::XmlWellFormed("<a x=\"1\"><b/>t &amp; u</a>", &err)) << err;
  EXPECT_FALSE(testing::XmlWellFormed("<a><b></a></b>", &err));
  EXPECT_FALSE(testing::XmlWellFormed("<a>x & y</a>", &err));
  EXPECT_FALSE(testing::XmlWellFormed("<a x=\"<\"/>", &err));
  EXPECT_FALSE(testing::XmlWellFormed("<a>", &err));
}

TEST(GithubAnnotation, EscapesProperties) {
  EXPECT_EQ(GithubAnnotation("error", "conf/a,b.json", "memplan: x", "50% over\nnext"),
            "::error file=conf/a%2Cb.json,title=memplan%3A x::50%25 over%0Anext\n");
  EXPECT_EQ(GithubAnnotation("warning", "", "", "m"), "::warning::m\n");
}

TEST(CheckAnnotations, ErrorsForFailuresWarningsNearBudget) {
  std::vector<ReportCase> cases = {
      MakeCase("a.onnx", "a", 10 * kGiB, 30 * kGiB),         // far below: nothing
      MakeCase("b.onnx", "b", 10 * kGiB, 9 * kGiB),          // over: error
      MakeCase("c.onnx", "c", 10 * kGiB, 10 * kGiB + kMiB),  // within 5%: warning
  };
  const std::string a = CheckAnnotations(cases);
  EXPECT_EQ(a.find("file=a.onnx"), std::string::npos);
  EXPECT_NE(a.find("::error file=b.onnx,title=memplan%3A over_budget::b: device peak"),
            std::string::npos)
      << a;
  EXPECT_NE(a.find("::warning file=c.onnx"), std::string::npos) << a;
}

TEST(CheckJson, RoundTripsAsBaseline) {
  std::vector<ReportCase> cases = {MakeCase("a.onnx", "a", 10 * kGiB, 9 * kGiB)};
  const nlohmann::json j = CheckJson(cases);
  EXPECT_EQ(j["ok"], false);
  EXPECT_EQ(j["summary"]["over_budget"], 1);
  EXPECT_EQ(j["checks"][0]["status"], "over_budget");
  EXPECT_EQ(j["checks"][0]["headroom_bytes"], -kGiB);
  EXPECT_EQ(j["checks"][0]["plan"]["peak"]["device_bytes"], 10 * kGiB);
  auto b = ParseBaseline(j);
  ASSERT_TRUE(b.ok()) << b.message();
  EXPECT_EQ(b->at("a")["device_bytes"], 10 * kGiB);
  EXPECT_FALSE(ParseBaseline(nlohmann::json::object()).ok());
}

TEST(CheckTable, ListsEveryCaseAndFailures) {
  std::vector<ReportCase> cases = {MakeCase("a.onnx", "a", 10 * kGiB, 12 * kGiB),
                                   MakeCase("b.onnx", "b", 10 * kGiB, 9 * kGiB)};
  const std::string t = CheckTable(cases);
  EXPECT_NE(t.find("1 of 2 within budget (metric: device)"), std::string::npos) << t;
  EXPECT_NE(t.find("OVER BUDGET"), std::string::npos);
  EXPECT_NE(t.find("-1.00 GiB"), std::string::npos);
}

}  // namespace
}  // namespace memplan
