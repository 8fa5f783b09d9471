// BatchModel and FiguresOf on hand-made streams, where every figure is known
// in closed form (tests/batch_model_test.cc has the shipped exports).

#include "planner/batch_model.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "planner/evidence.h"

namespace memplan {
namespace {

constexpr int64_t MiB = int64_t{1024} * 1024;

// The activation's and the temporary's requests at `batch`: the activation
// 300 B short of whole MiB (rounded up to them by the allocator), the
// temporary whole MiB; both an even number of MiB, so that each fills the
// 2 MiB-rounded segment it gets (an odd one would leave 1 MiB that is not
// split off, and count in memory_allocated).
int64_t Act(int64_t batch) { return 4 * batch * MiB - 300; }
int64_t Tmp(int64_t batch) { return 2 * batch * MiB; }

// A training step as Plan::streams has it: 8 MiB of weights, then three
// iterations that each allocate an activation and a temporary and free
// both (storages 2-7). The temporaries are unmeasured from batch
// `unbacked_from` up.
std::vector<StepStream> Step(int64_t batch, int64_t unbacked_from = 0) {
  StepStream st;
  st.events.push_back({1, 8 * MiB, true});
  for (int64_t it = 0; it < 3; ++it) {
    const size_t begin = st.events.size();
    const int64_t act = 2 + 2 * it, tmp = act + 1;
    st.events.push_back({act, Act(batch), true});
    st.events.push_back({tmp, Tmp(batch), true});
    st.events.push_back({tmp, 0, false});
    st.events.push_back({act, 0, false});
    st.iterations.emplace_back(begin, st.events.size());
  }
  st.storage_unbacked.assign(7, false);
  if (unbacked_from > 0 && batch >= unbacked_from) {
    for (size_t id : {3, 5, 7}) {
      st.storage_unbacked[id - 1] = true;
    }
  }
  return {st};
}

PlanOptions Train() {
  PlanOptions o;
  o.mode = Mode::kTrain;
  return o;
}

StepFigures Figures(const std::vector<StepStream>& streams) {
  auto f = FiguresOf(streams, Train());
  EXPECT_TRUE(f.ok()) << f.message();
  return f.ok() ? f.value() : StepFigures{};
}

StepFigures At(const BatchModel& m, int64_t batch) {
  auto f = m.At(batch, Train());
  EXPECT_TRUE(f.ok()) << "batch " << batch << ": " << f.message();
  return f.ok() ? f.value() : StepFigures{};
}

TEST(FiguresOf, ReadsTheAllocatedPeakAndItsUnmeasuredBlocks) {
  const StepFigures f = Figures(Step(5, 1));
  EXPECT_EQ(f.allocated, (8 + 20 + 10) * MiB);
  EXPECT_EQ(f.unbacked, Tmp(5));
  EXPECT_GE(f.reserved, f.allocated);
  EXPECT_FALSE(f.over_limit);
  EXPECT_EQ(Figures(Step(5)).unbacked, 0);
}

TEST(FiguresOf, StopsPastTheReservedLimit) {
  auto f = FiguresOf(Step(5, 1), Train(), 16 * MiB);
  ASSERT_TRUE(f.ok()) << f.message();
  EXPECT_TRUE(f->over_limit);
  EXPECT_GT(f->reserved, 16 * MiB);
  EXPECT_EQ(f->unbacked, 0);
}

TEST(FiguresOf, NeedsThreeIterations) {
  std::vector<StepStream> two = Step(2);
  two[0].iterations.pop_back();
  EXPECT_FALSE(FiguresOf(two, Train()).ok());
  EXPECT_FALSE(FiguresOf({}, Train()).ok());
}

// Every size is affine in the batch: the model's figures at any batch are
// the replay of that batch's step.
TEST(BatchModel, GivesTheStepOfAnyBatchOnItsLines) {
  auto m = BatchModel::Fit(2, Step(2), 6, Step(6));
  ASSERT_TRUE(m.ok()) << m.message();
  EXPECT_TRUE(m->SameFlags());
  for (int64_t b : {1, 3, 4, 9, 40}) {
    const StepFigures want = Figures(Step(b));
    const StepFigures got = At(m.value(), b);
    EXPECT_EQ(got.allocated, (8 + 6 * b) * MiB) << b;
    EXPECT_EQ(got.allocated, want.allocated) << b;
    EXPECT_EQ(got.reserved, want.reserved) << b;
    EXPECT_EQ(got.unbacked, want.unbacked) << b;
    EXPECT_TRUE(m->Predicts(b, Step(b))) << b;
    std::vector<StepStream> sized;
    EXPECT_EQ(m->SizeAt(b, &sized), (8 + 6 * b) * MiB) << b;
  }
  std::vector<StepStream> sized;
  EXPECT_EQ(m->SizeAt(0, &sized), -1);
  EXPECT_FALSE(m->At(0, Train()).ok());
}

TEST(BatchModel, ScratchGivesWhatAFreshCallGives) {
  auto m = BatchModel::Fit(6, Step(6), 2, Step(2));  // either order
  ASSERT_TRUE(m.ok()) << m.message();
  std::vector<StepStream> scratch;
  for (int64_t b : {7, 3, 11, 3}) {
    auto reused = m->At(b, Train(), -1, &scratch);
    ASSERT_TRUE(reused.ok()) << reused.message();
    EXPECT_EQ(reused->allocated, At(m.value(), b).allocated) << b;
    EXPECT_EQ(reused->reserved, At(m.value(), b).reserved) << b;
  }
}

// SizeAt sizes the scratch as At does and returns the live peak: the replay of
// what it sized is At's, unmeasured flags included (the temporaries from
// batch 4: measured at and below 2, unmeasured between the two fitted
// batches and past 6); out of range it says -1.
TEST(BatchModel, SizeAtSizesForTheReplayAndGivesTheLivePeak) {
  auto m = BatchModel::Fit(2, Step(2, 4), 6, Step(6, 4));
  ASSERT_TRUE(m.ok()) << m.message();
  std::vector<StepStream> scratch;
  for (int64_t b : {9, 3, 1, 5}) {
    EXPECT_EQ(m->SizeAt(b, &scratch), (8 + 6 * b) * MiB) << b;
    auto replayed = FiguresOf(scratch, Train());
    ASSERT_TRUE(replayed.ok()) << replayed.message();
    const StepFigures want = At(m.value(), b);
    EXPECT_EQ(replayed->allocated, want.allocated) << b;
    EXPECT_EQ(replayed->reserved, want.reserved) << b;
    EXPECT_EQ(replayed->unbacked, want.unbacked) << b;
    EXPECT_EQ(replayed->unbacked, b > 2 ? Tmp(b) : 0) << b;
  }
  EXPECT_EQ(m->SizeAt(0, &scratch), -1);
}

// SameFlagsAt compares the unmeasured storages two models of the same events
// give at a batch: the same below the batches fitted (both measured there),
// not between them or past them, where one has the temporaries unmeasured.
TEST(BatchModel, SameFlagsAtComparesTheUnmeasuredStoragesAtABatch) {
  auto unmeasured = BatchModel::Fit(2, Step(2, 4), 6, Step(6, 4));
  auto measured = BatchModel::Fit(2, Step(2), 6, Step(6));
  ASSERT_TRUE(unmeasured.ok()) << unmeasured.message();
  ASSERT_TRUE(measured.ok()) << measured.message();
  EXPECT_TRUE(unmeasured->SameFlagsAt(1, measured.value()));
  EXPECT_TRUE(unmeasured->SameFlagsAt(2, measured.value()));
  for (int64_t b : {3, 5, 6, 9}) {
    EXPECT_FALSE(unmeasured->SameFlagsAt(b, measured.value())) << b;
    EXPECT_TRUE(unmeasured->SameFlagsAt(b, unmeasured.value())) << b;
  }
}

// A size whose growth is not a whole number of bytes per sample is read on
// the line through its two sizes, rounded down: 1 MiB at batch 1 and
// 1 MiB + 1025 B at 3 give 1 MiB + 512 B at 2 (one 512 B granule; rounded
// up it would take two).
TEST(BatchModel, RoundsSizesOffTheLineDown) {
  auto one = [](int64_t bytes) {
    std::vector<StepStream> s = Step(1);
    s[0].events[2].bytes = bytes;  // the first iteration's temporary
    return s;
  };
  auto m = BatchModel::Fit(1, one(MiB), 3, one(MiB + 1025));
  ASSERT_TRUE(m.ok()) << m.message();
  EXPECT_TRUE(m->Predicts(2, one(MiB + 512)));
  EXPECT_FALSE(m->Predicts(2, one(MiB + 513)));
}

// Predicts compares what the allocator reads: sizes rounded to its 512 B,
// the same events in the same order, the same storages unmeasured.
TEST(BatchModel, PredictsOnlyWhatReplaysTheSame) {
  auto m = BatchModel::Fit(2, Step(2), 6, Step(6));
  ASSERT_TRUE(m.ok()) << m.message();
  std::vector<StepStream> s = Step(5);
  s[0].events[1].bytes += 200;  // still within the same 512 B
  EXPECT_TRUE(m->Predicts(5, s));
  s[0].events[1].bytes += 512;
  EXPECT_FALSE(m->Predicts(5, s));
  EXPECT_FALSE(m->Predicts(5, Step(5, 1)));  // flags differ
  std::vector<StepStream> swapped = Step(5);
  std::swap(swapped[0].events[3], swapped[0].events[4]);  // frees in another order
  EXPECT_FALSE(m->Predicts(5, swapped));
  EXPECT_FALSE(m->Predicts(5, {}));
}

TEST(BatchModel, RefusesStepsThatAreNotOneStep) {
  EXPECT_FALSE(BatchModel::Fit(2, Step(2), 2, Step(2)).ok());
  EXPECT_FALSE(BatchModel::Fit(0, Step(1), 2, Step(2)).ok());
  EXPECT_FALSE(BatchModel::Fit(1, {}, 2, {}).ok());
  std::vector<StepStream> more = Step(4);
  more[0].events.push_back({1, 0, false});
  EXPECT_FALSE(BatchModel::Fit(2, Step(2), 4, more).ok());
  std::vector<StepStream> other = Step(4);
  other[0].events[1].id = 3;
  EXPECT_FALSE(BatchModel::Fit(2, Step(2), 4, other).ok());
  std::vector<StepStream> two = Step(4);
  two.push_back(two[0]);
  EXPECT_FALSE(BatchModel::Fit(2, Step(2), 4, two).ok());
}

// A size that shrinks with the batch goes negative past some batch: no plan
// has that step, and the model says so instead of replaying it.
TEST(BatchModel, RefusesBatchesWhereASizeLeavesItsRange) {
  std::vector<StepStream> a = Step(1), b = Step(2);
  a[0].events[0].bytes = 8 * MiB;
  b[0].events[0].bytes = 4 * MiB;  // 4 MiB less per sample: -4 MiB at 4
  auto m = BatchModel::Fit(1, a, 2, b);
  ASSERT_TRUE(m.ok()) << m.message();
  EXPECT_TRUE(m->At(3, Train()).ok());
  EXPECT_FALSE(m->At(4, Train()).ok());
  std::vector<StepStream> sized;
  EXPECT_EQ(m->SizeAt(4, &sized), -1);
}

// The temporaries are unmeasured from batch 4 up: each fitted batch's own
// flags at and past it, unmeasured between where either says so.
TEST(BatchModel, FlagsAreEachFittedBatchsOwnAndEitherBetween) {
  auto m = BatchModel::Fit(2, Step(2, 4), 6, Step(6, 4));
  ASSERT_TRUE(m.ok()) << m.message();
  EXPECT_FALSE(m->SameFlags());
  EXPECT_FALSE(m->FlagsExact());
  EXPECT_EQ(At(m.value(), 1).unbacked, 0);
  EXPECT_EQ(At(m.value(), 2).unbacked, 0);
  EXPECT_EQ(At(m.value(), 3).unbacked, Tmp(3));  // taken as unmeasured
  EXPECT_FALSE(m->Predicts(3, Step(3, 4)));      // which it is not
  EXPECT_EQ(At(m.value(), 5).unbacked, Tmp(5));
  EXPECT_EQ(At(m.value(), 9).unbacked, Tmp(9));
  EXPECT_TRUE(m->Predicts(9, Step(9, 4)));
  auto adjacent = BatchModel::Fit(3, Step(3, 4), 4, Step(4, 4));
  ASSERT_TRUE(adjacent.ok()) << adjacent.message();
  EXPECT_FALSE(adjacent->SameFlags());
  EXPECT_TRUE(adjacent->FlagsExact());
}

// For: the same events under another candidate's flags; Under: the flags
// read from the storages' rules under other options.
TEST(BatchModel, GoesOverToOtherFlagsWithTheSameEvents) {
  auto m = BatchModel::Fit(2, Step(2), 6, Step(6));
  ASSERT_TRUE(m.ok()) << m.message();
  auto other = m->For(5, Step(5, 1));
  ASSERT_TRUE(other.ok()) << other.message();
  EXPECT_EQ(At(other.value(), 8).unbacked, Tmp(8));
  EXPECT_TRUE(other->Predicts(8, Step(8, 1)));
  std::vector<StepStream> bigger = Step(5);
  bigger[0].events[1].bytes += MiB;
  EXPECT_FALSE(m->For(5, bigger).ok());

  // Under: storages 3, 5 and 7 by a rule measured in bf16 only, the rest
  // by one measured in both; measured in bf16, unmeasured in fp32.
  std::vector<StepStream> ruled[2] = {Step(2), Step(6)};
  for (auto& s : ruled) {
    s[0].rule_evidence = {
        {"a.onnx",
         static_cast<uint8_t>(PrecisionBit(Precision::kAmpBf16) | PrecisionBit(Precision::kFp32)),
         0, false},
        {"b.onnx", PrecisionBit(Precision::kAmpBf16), 0, false}};
    s[0].storage_rule = {0, 0, 1, 0, 1, 0, 1};
  }
  auto ruled_model = BatchModel::Fit(2, ruled[0], 6, ruled[1]);
  ASSERT_TRUE(ruled_model.ok()) << ruled_model.message();
  PlanOptions bf16 = Train(), fp32 = Train();
  bf16.precision = Precision::kAmpBf16;
  fp32.precision = Precision::kFp32;
  auto measured = ruled_model->Under(bf16).At(4, bf16);
  auto unmeasured = ruled_model->Under(fp32).At(4, fp32);
  ASSERT_TRUE(measured.ok() && unmeasured.ok());
  EXPECT_EQ(measured->unbacked, 0);
  EXPECT_EQ(unmeasured->unbacked, Tmp(4));
}

}  // namespace
}  // namespace memplan
