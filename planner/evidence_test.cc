// Tests of the evidence attribution (evidence.h): the bytes at the peak by
// the rule that allocated them, which rules measurements back for the plan's
// mode and precision, and the 32-bit kernel limit.
#include "planner/evidence.h"

#include <gtest/gtest.h>

#include <string>

#include "planner/advisor.h"
#include "planner/devices.h"
#include "planner/op_registry.h"
#include "planner/ops/test_graph.h"
#include "planner/shape_inference.h"

namespace memplan {
namespace {

using testing_util::D;
using testing_util::GraphBuilder;
using testing_util::IntsAttr;
using testing_util::S;

constexpr int64_t kMiB = 1024 * 1024;
constexpr int64_t kP = 1024 * 4096 * 4 + 4096 * 10 * 4;  // W1 + W2 = 16941056 B

// x [N, 1024] -> MatMul W1 [1024, 4096] -> `act` -> MatMul W2 [4096, 10].
GraphBuilder Mlp(const std::string& act) {
  GraphBuilder b;
  b.Input("x", {S("N"), D(1024)});
  b.Init("W1", {1024, 4096});
  b.Init("W2", {4096, 10});
  b.Op("MatMul", {"x", "W1"}, {"h"}, "fc1");
  b.Op(act, {"h"}, {"r"}, "act");
  b.Op("MatMul", {"r", "W2"}, {"logits"}, "fc2");
  b.Output("logits");
  return b;
}

Plan PlanOf(GraphBuilder b, int64_t batch, const PlanOptions& o) {
  ShapeBindings bind;
  bind.batch = batch;
  Status s = InferShapes(&b.g, bind, nullptr);
  EXPECT_TRUE(s.ok()) << s.message();
  auto plan = MakePlan(b.g, batch, o);
  EXPECT_TRUE(plan.ok()) << plan.message();
  return plan.ok() ? plan.value() : Plan();
}

PlanOptions Inference(Precision p) {
  PlanOptions o;
  o.mode = Mode::kInference;
  o.precision = p;
  return o;
}

const RuleShare* Find(const Plan& p, const std::string& rule) {
  for (const RuleShare& r : p.coverage.rules) {
    if (r.rule == rule) return &r;
  }
  return nullptr;
}

TEST(Evidence, CoversOnlyTheMeasuredModeAndPrecision) {
  const Evidence relu = OpEvidence("Relu");
  ASSERT_NE(relu.source, nullptr);
  EXPECT_TRUE(relu.Covers(Mode::kTrain, Precision::kFp32));
  EXPECT_TRUE(relu.Covers(Mode::kTrain, Precision::kAmpBf16));
  EXPECT_TRUE(relu.Covers(Mode::kInference, Precision::kFp32));
  // The calibration measured CNN inference in fp32 only.
  EXPECT_FALSE(relu.Covers(Mode::kInference, Precision::kFp16));
  // Measured only by the family rows, training in fp32, amp_bf16 and bf16
  // (deeplab_mnv3); the LSTM in amp_fp16 as well (lstm_lm_c).
  EXPECT_TRUE(OpEvidence("HardSwish").Covers(Mode::kTrain, Precision::kBf16));
  EXPECT_FALSE(OpEvidence("HardSwish").Covers(Mode::kTrain, Precision::kAmpFp16));
  EXPECT_TRUE(OpEvidence("LSTM").Covers(Mode::kTrain, Precision::kAmpFp16));
  EXPECT_TRUE(MechanismEvidence(Mechanism::kMseLoss).Covers(Mode::kTrain, Precision::kFp32));
  EXPECT_FALSE(MechanismEvidence(Mechanism::kMseLoss).Covers(Mode::kInference, Precision::kFp32));
  // Never measured, or fitted: never backed.
  EXPECT_EQ(OpEvidence("InstanceNormalization").source, nullptr);
  EXPECT_EQ(MechanismEvidence(Mechanism::kSdpaMaskGrad).source, nullptr);
  EXPECT_EQ(MechanismEvidence(Mechanism::kRnnWorkspaceFitted).source, nullptr);
  EXPECT_FALSE(OpEvidence("InstanceNormalization").Covers(Mode::kTrain, Precision::kFp32));
  EXPECT_TRUE(MechanismEvidence(Mechanism::kAdamState).Covers(Mode::kTrain, Precision::kAmpBf16));
}

// Inference at batch 8: the peak is at the activation, with W1 + W2, x
// (32 KiB), the forward cuBLAS workspace (32 MiB), h and r (128 KiB each)
// live. Every one of those rules was measured in fp32 inference.
TEST(Evidence, CalibratedOpsAreFullyBacked) {
  const Plan p = PlanOf(Mlp("Relu"), 8, Inference(Precision::kFp32));
  EXPECT_EQ(p.coverage.peak_bytes, kP + 32768 + 32 * kMiB + 2 * 131072);
  EXPECT_EQ(p.coverage.peak_bytes, p.peak.allocated_bytes);
  EXPECT_EQ(p.coverage.unbacked_bytes, 0);
  EXPECT_EQ(p.coverage.UnbackedShare(), 0.0);
  for (const RuleShare& r : p.coverage.rules) EXPECT_TRUE(r.backed) << r.rule;
  const RuleShare* relu = Find(p, "Relu");
  ASSERT_NE(relu, nullptr);
  EXPECT_EQ(relu->peak_bytes, 131072);
  const RuleShare* ws = Find(p, MechanismName(Mechanism::kCublasWorkspace));
  ASSERT_NE(ws, nullptr);
  EXPECT_EQ(ws->peak_bytes, 32 * kMiB);
}

// The same graph with Softplus (never measured): its output r, 128 KiB, is
// the unbacked part of the same peak.
TEST(Evidence, AnUnmeasuredOpReportsItsShare) {
  const Plan p = PlanOf(Mlp("Softplus"), 8, Inference(Precision::kFp32));
  const int64_t peak = kP + 32768 + 32 * kMiB + 2 * 131072;
  EXPECT_EQ(p.coverage.peak_bytes, peak);
  EXPECT_EQ(p.coverage.unbacked_bytes, 131072);
  EXPECT_DOUBLE_EQ(p.coverage.UnbackedShare(), 131072.0 / peak);
  const RuleShare* sp = Find(p, "Softplus");
  ASSERT_NE(sp, nullptr);
  EXPECT_FALSE(sp->backed);
  EXPECT_EQ(sp->evidence, "");
}

// Relu was measured in fp32 inference only: in fp16 its output (8 x 4096 x
// 2 B = 64 KiB) is unbacked, the fp16 MatMul (BERT, GPT-2) is not.
TEST(Evidence, AnOpMeasuredInFp32IsNoEvidenceForHalf) {
  const Plan p = PlanOf(Mlp("Relu"), 8, Inference(Precision::kFp16));
  EXPECT_EQ(p.coverage.unbacked_bytes, 65536);
  const RuleShare* mm = Find(p, "MatMul");
  ASSERT_NE(mm, nullptr);
  EXPECT_TRUE(mm->backed);
}

// h = x W1 has N x 4096 elements: 2^31 at N = 2^19. There Relu (measured
// only below 2^31 elements) becomes its own, unbacked rule; MatMul, measured
// over 2^31 elements by the LLM rows at advised batches, stays backed.
TEST(Evidence, AnOpOverInt32ElementsNeedsEvidenceAtThatSize) {
  const Plan over = PlanOf(Mlp("Relu"), int64_t{1} << 19, Inference(Precision::kFp32));
  const RuleShare* relu = Find(over, std::string("Relu") + kOverInt32Suffix);
  ASSERT_NE(relu, nullptr);
  EXPECT_FALSE(relu->backed);
  EXPECT_EQ(Find(over, "Relu"), nullptr);
  const RuleShare* mm = Find(over, std::string("MatMul") + kOverInt32Suffix);
  ASSERT_NE(mm, nullptr);
  EXPECT_TRUE(mm->backed);
  EXPECT_GT(over.coverage.unbacked_bytes, 0);
  const Plan under = PlanOf(Mlp("Relu"), (int64_t{1} << 19) - 1, Inference(Precision::kFp32));
  EXPECT_EQ(Find(under, std::string("Relu") + kOverInt32Suffix), nullptr);
  EXPECT_EQ(under.coverage.unbacked_bytes, 0);
}

// x [N, 4, 1024, 1024] -> Resize to 2048 x 2048: the output has N x 2^24
// elements, 2^31 at N = 128 (over INT_MAX), 2^31 - 2^24 at N = 127.
GraphBuilder Upsampler() {
  GraphBuilder b(18);
  b.Input("x", {S("N"), D(4), D(1024), D(1024)});
  b.Ints("hw", {2048, 2048});
  b.Op("Resize", {"x", "", "", "hw"}, {"y"}, "up").attrs["axes"] = IntsAttr({2, 3});
  b.Output("y");
  return b;
}

TEST(KernelLimits, ResizeOverInt32ElementsWarns) {
  EXPECT_TRUE(FindOp("", "Resize")->int32_indexing);
  EXPECT_FALSE(FindOp("", "Relu")->int32_indexing);
  const Plan over = PlanOf(Upsampler(), 128, Inference(Precision::kFp32));
  EXPECT_EQ(over.int32_overflow.elements, 1LL << 31);
  EXPECT_EQ(over.int32_overflow.node, "up");
  ASSERT_FALSE(over.warnings.empty());
  EXPECT_NE(over.warnings.back().find("32-bit"), std::string::npos);
  const Plan under = PlanOf(Upsampler(), 127, Inference(Precision::kFp32));
  EXPECT_EQ(under.int32_overflow.elements, 0);
  EXPECT_EQ(under.largest_tensor.elements, 127LL << 24);
  EXPECT_TRUE(under.warnings.empty());
}

// A tensor over the limit in an op whose kernel is not known to index in 32
// bits: a warning, no overflow.
TEST(KernelLimits, OtherOpsOnlyWarn) {
  GraphBuilder b;
  b.Input("x", {S("N"), D(1LL << 24)});
  b.Op("Relu", {"x"}, {"y"}, "relu");
  b.Output("y");
  const Plan p = PlanOf(b, 128, Inference(Precision::kFp32));
  EXPECT_EQ(p.int32_overflow.elements, 0);
  EXPECT_EQ(p.largest_tensor.elements, 1LL << 31);
  ASSERT_FALSE(p.warnings.empty());
  EXPECT_NE(p.warnings.back().find("2^31"), std::string::npos);
}

AdviseRequest Request(int64_t budget, Loss loss = Loss::kCrossEntropy) {
  AdviseRequest r;
  r.base.optimizer = Optimizer::kAdamW;
  r.base.loss = loss;
  r.precisions = {Precision::kFp32};
  r.budget_bytes = budget;
  r.margin = 0.0;
  r.context_bytes = 0;
  r.device = *FindDevice("h200");
  return r;
}

// Memory would allow far more than batch 127 (1 TiB), the kernel limit not.
TEST(KernelLimits, AdviseStaysBelowTheInt32Batch) {
  auto advice = Advise(Upsampler().g, Request(1LL << 40, Loss::kMse));
  ASSERT_TRUE(advice.ok()) << advice.message();
  ASSERT_FALSE(advice->ranked.empty());
  EXPECT_EQ(advice->ranked.front().batch, 127);
  EXPECT_NE(advice->ranked.front().note.find("32-bit"), std::string::npos);
}

// With unmeasured rules the advisor keeps their bytes again in reserve; a
// model of measured rules only keeps the plain budget.
TEST(Evidence, AdviseWidensTheMarginByTheUnmeasuredBytes) {
  const int64_t budget = 2LL << 30;
  auto measured = Advise(Mlp("Relu").g, Request(budget));
  ASSERT_TRUE(measured.ok()) << measured.message();
  ASSERT_FALSE(measured->ranked.empty());
  const Candidate& m = measured->ranked.front();
  EXPECT_EQ(m.uncertain_bytes, 0);
  EXPECT_EQ(UncertaintyBytes(m.plan), 0);
  for (const std::string& n : measured->notes)
    EXPECT_EQ(n.find("UNMEASURED"), std::string::npos) << n;

  auto unmeasured = Advise(Mlp("Softplus").g, Request(budget));
  ASSERT_TRUE(unmeasured.ok()) << unmeasured.message();
  ASSERT_FALSE(unmeasured->ranked.empty());
  const Candidate& u = unmeasured->ranked.front();
  EXPECT_GT(u.uncertain_bytes, 0);
  EXPECT_EQ(u.uncertain_bytes,
            static_cast<int64_t>(u.plan.coverage.unbacked_bytes * kUnmeasuredErrorFactor));
  EXPECT_LE(u.device_bytes + u.uncertain_bytes, budget);
  // Softplus keeps its input as Relu keeps its output: the same bytes, so
  // only the allowance makes the batch smaller.
  EXPECT_LT(u.batch, m.batch);
  bool loud = false;
  for (const std::string& n : unmeasured->notes) loud |= n.find("UNMEASURED") == 0;
  EXPECT_TRUE(loud);
  // The next batch would fit but for the allowance: the candidate says so.
  EXPECT_NE(u.note.find("batch limited by the allowance for unmeasured rules: batch " +
                        std::to_string(u.batch + 1)),
            std::string::npos)
      << u.note;
  EXPECT_NE(u.note.find("(Softplus)"), std::string::npos) << u.note;
  EXPECT_EQ(m.note.find("allowance"), std::string::npos) << m.note;
}

// The note gives the unmeasured rules' share and the bytes kept for them;
// rules that hold none of the peak are said to, not shown as "0.0 %".
TEST(Evidence, UnmeasuredNoteSaysWhatTheRulesHold) {
  Candidate c;
  c.precision = Precision::kAmpFp16;
  c.batch = 52;
  EXPECT_EQ(UnmeasuredNote(c), "");
  c.plan.coverage.peak_bytes = 1000LL << 20;
  c.plan.coverage.rules = {{"Conv", true, "rows", 900LL << 20},
                           {"checkpoint recompute", false, "", 0}};
  const std::string none = UnmeasuredNote(c);
  EXPECT_EQ(none.find("UNMEASURED: amp_fp16 batch 52: "), 0U) << none;
  EXPECT_NE(none.find("(checkpoint recompute) but hold under 0.1 % of the planned peak"),
            std::string::npos)
      << none;
  EXPECT_EQ(none.find("0.0 %"), std::string::npos) << none;
  c.plan.coverage.rules[1].peak_bytes = 100LL << 20;
  c.plan.coverage.unbacked_bytes = 100LL << 20;
  c.uncertain_bytes = 100LL << 20;
  const std::string some = UnmeasuredNote(c);
  EXPECT_NE(some.find("10.0 % of the planned peak rests on rules no measurement backs "
                      "(checkpoint recompute); the margin was widened by those bytes (100 MiB)"),
            std::string::npos)
      << some;
}

}  // namespace
}  // namespace memplan
