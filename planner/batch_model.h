#ifndef MEMPLAN_PLANNER_BATCH_MODEL_H_
#define MEMPLAN_PLANNER_BATCH_MODEL_H_

/// A training step's allocator events as functions of the batch, for a
/// search that asks about many batches of one candidate (a precision and a
/// checkpoint placement): the schedule, the simulation and its events are
/// planned at two batches, and the others get the allocator replay alone.
///
/// Between two batches where the schedule and the simulation take the same
/// decisions (views, copies, kernel choices, what is saved and freed when),
/// a step makes the same events in the same order, and only their sizes
/// change; most sizes are affine in the batch (a tensor's bytes are the
/// batch times its other dims' product), some are not (a reduction's
/// staging buffer grows in steps and stops at a cap, a cuDNN RNN workspace
/// follows a fitted curve; tests/batch_model_test.cc has both). A model is
/// fitted to two plans of one candidate and refused where their events
/// differ in anything but their sizes; at another batch each size is taken
/// on the line through its two sizes, the events are replayed
/// (CachingAllocatorReplay) and what a fit test reads off a plan is read as
/// PlanSchedule and MakePlanFrom read it. It predicts: a size off its line,
/// or a decision that parts between the batches it was fitted at and
/// another, makes it wrong there, so what it says must be checked against a
/// plan (Predicts) before it is relied on.

#include <cstdint>
#include <vector>

#include "planner/allocator_sim.h"
#include "planner/options.h"
#include "planner/plan.h"
#include "planner/status.h"

namespace memplan {

/// What a fit test reads off a plan (the advisor's Probe), as the plan
/// would report it.
struct StepFigures {
  /// The largest of the reported, first and steady steps' reserved peaks,
  /// of the variant whose reported reserved peak is highest (MakePlanFrom's
  /// kept plan).
  int64_t reserved = 0;
  /// The largest allocated peak of any step kind over the variants.
  int64_t allocated = 0;
  /// Coverage::unbacked_bytes: the blocks at the reported step's allocated
  /// peak (of the variant where it is highest) that unmeasured rules hold.
  int64_t unbacked = 0;
  /// Stopped once more than the limit was reserved (as Plan::over_limit):
  /// `reserved` and `allocated` are lower bounds, `unbacked` is 0.
  bool over_limit = false;
};

/// The figures of `streams` (Plan::streams) replayed under `options` (its
/// allocator and step kind); an error as the replay gives it. With
/// `reserved_limit` >= 0 and no empty_cache in the streams, the replay stops
/// once more than that is reserved (the reserved bytes never fall then).
[[nodiscard]] Result<StepFigures> FiguresOf(const std::vector<StepStream>& streams,
                                            const PlanOptions& options,
                                            int64_t reserved_limit = -1);

class BatchModel {
 public:
  /// Fitted to the streams (Plan::streams) of one candidate's plans at
  /// batches `b1` and `b2` (b1 != b2, both >= 1); an error says what differs.
  /// Which storages unmeasured rules allocate is each batch's own at and
  /// past it, and unmeasured where either says so between them.
  [[nodiscard]] static Result<BatchModel> Fit(int64_t b1, const std::vector<StepStream>& s1,
                                              int64_t b2, const std::vector<StepStream>& s2);

  /// The figures at `batch` >= 1 (FiguresOf, `reserved_limit` as there);
  /// an error where a size would be negative or past the allocator's limits
  /// (no plan has that step). `scratch` (may be null) holds the sized events
  /// between calls, which then only rewrite the sizes: one per thread.
  [[nodiscard]] Result<StepFigures> At(int64_t batch, const PlanOptions& options,
                                       int64_t reserved_limit = -1,
                                       std::vector<StepStream>* scratch = nullptr) const;

  /// The events sized for `batch` into `scratch` (as At's: FiguresOf
  /// (*scratch, ...) is then At(batch, ...)), and a lower bound of
  /// StepFigures::allocated there without the replay: the most bytes the
  /// events hold at once, each rounded as the allocator rounds a request (a
  /// block is never smaller); -1 where a size would be out of range
  /// (nothing sized).
  [[nodiscard]] int64_t SizeAt(int64_t batch, std::vector<StepStream>* scratch) const;

  /// Whether `streams` (a plan's at `batch`) are the events the model gives
  /// at that batch, as the allocator sees them: the same events with the
  /// same sizes rounded to its 512 B (RoundAllocation; the replay reads
  /// nothing finer), and the same storages unmeasured: so that they replay
  /// to the same figures.
  [[nodiscard]] bool Predicts(int64_t batch, const std::vector<StepStream>& streams) const;

  /// This model for another candidate whose plan at `batch` makes the
  /// events this one gives there (the sizes rounded as Predicts rounds
  /// them), with that plan's own unmeasured rules (`streams`' flags): a
  /// precision that moves the same bytes (amp_fp16 after amp_bf16) under
  /// other evidence. An error where the events differ.
  [[nodiscard]] Result<BatchModel> For(int64_t batch, const std::vector<StepStream>& streams) const;

  /// This model for another precision or mode of the same candidate (the
  /// next precision's search): the same events taken for granted, which
  /// storages unmeasured rules allocate read from their rules under
  /// `options`. Predicts tells whether that holds at a planned batch.
  [[nodiscard]] BatchModel Under(const PlanOptions& options) const;

  /// Whether `other` (this model Under other options, or the model it was
  /// taken Under from) has the same storages unmeasured at `batch`: then
  /// both give the same events there, and the same figures.
  [[nodiscard]] bool SameFlagsAt(int64_t batch, const BatchModel& other) const;

  /// Whether the two batches it was fitted at have the same storages
  /// unmeasured (else those between are taken as unmeasured where either is).
  [[nodiscard]] bool SameFlags() const { return low_flags_ == high_flags_; }
  /// Whether every batch's unmeasured storages are those of a batch fitted:
  /// the same at both, or no batch between them.
  [[nodiscard]] bool FlagsExact() const { return SameFlags() || b1_ - b2_ == 1 || b2_ - b1_ == 1; }

  /// The batches it was fitted at.
  [[nodiscard]] int64_t first_batch() const { return b1_; }
  [[nodiscard]] int64_t second_batch() const { return b2_; }

 private:
  /// Sizes the streams' events for `batch` into `out` (this model's streams
  /// sized before, or anything else: then copied first); false where one is
  /// out of range.
  bool SizeFor(int64_t batch, std::vector<StepStream>* out) const;
  /// Event `e` of variant `v` sized for `batch` (-1: out of range).
  int64_t SizeOf(size_t v, size_t e, int64_t batch) const;
  /// The unmeasured storages of variant `v` at `batch`.
  std::vector<bool> FlagsAt(size_t v, int64_t batch) const;
  /// Whether `streams` make the events sized for `batch` (flags aside).
  bool SameEvents(int64_t batch, const std::vector<StepStream>& streams) const;

  int64_t b1_ = 0;
  int64_t b2_ = 0;
  /// The first plan's streams (sizes at b1_) and, per event, how much its
  /// size grows from b1_ to b2_ (0 for frees), and per sample where that is
  /// a whole number of bytes (kNoSlope where not).
  std::vector<StepStream> streams_;
  std::vector<std::vector<int64_t>> grown_;
  std::vector<std::vector<int64_t>> slope_;
  /// Per variant, which storages unmeasured rules allocate at the smaller
  /// and at the larger batch fitted (FlagsAt), and the rules' evidence they
  /// are read from (StepStream::storage_rule, rule_evidence).
  std::vector<std::vector<bool>> low_flags_, high_flags_;
  struct Rules {
    std::vector<int> storage_rule;
    std::vector<Evidence> evidence;
  };
  std::vector<Rules> low_rules_, high_rules_;
  static constexpr int64_t kNoSlope = INT64_MIN;
};

}  // namespace memplan

#endif  // MEMPLAN_PLANNER_BATCH_MODEL_H_
