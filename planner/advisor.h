#ifndef MEMPLAN_PLANNER_ADVISOR_H_
#define MEMPLAN_PLANNER_ADVISOR_H_

// The advisor: the largest batch that fits a memory budget, per precision and
// checkpoint placement, ranked by an estimated training throughput.
//
// Every number it reports comes from a real MakePlan at that batch (shapes
// inferred for it). Which batches fit is searched per candidate (a precision
// and a checkpoint placement), by default from a few plans and the allocator
// replayed over their events at the other batches (BatchSearchKind::kReplay,
// planner/batch_model.h); the answer is always a batch that was planned.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "planner/checkpoint.h"
#include "planner/devices.h"
#include "planner/graph.h"
#include "planner/options.h"
#include "planner/plan.h"
#include "planner/shape_inference.h"
#include "planner/status.h"

namespace memplan {

/// Whether a batch fits; errors abort the search.
using FitFn = std::function<Result<bool>(int64_t batch)>;

/// Where the batch search ended.
struct BatchSearch {
  int64_t batch = 0;  ///< Largest fitting batch in [1, cap]; 0 when 1 does not fit.
  int probes = 0;     ///< Calls of the fit function.
};

/// The largest batch in [1, cap] with fits(batch), for a monotone `fits`:
/// doubling from `start` (clamped to [1, cap]) until a failure (or halving
/// until a success), then bisection.
Result<BatchSearch> LargestBatch(const FitFn& fits, int64_t cap, int64_t start = 1);

/// Whether no batch from `batch` on can fit: a lower bound of the need that
/// grows with the batch (the allocated peak) is already over the budget there.
using BeyondFn = std::function<Result<bool>(int64_t batch)>;

/// How many batches in a row past an answer ScanPastDips tries before it stops.
constexpr int kDipScanMisses = 8;
/// The advisor scans past answers below this batch only: above it the
/// kDipScanMisses batches scanned are under 1/8 more samples, and where
/// the allocated peak sits far under the reserved one (gpt2's 12 %) each
/// answer would cost that many more plans.
constexpr int64_t kDipScanBelow = 64;

/// The reserved peak is not monotone in the batch (segments are cut and
/// cached in steps: bench/results/advise_fit/top_h200.jsonl has recurrent
/// nets whose batch 12 reserves less than their batch 4), so a larger batch
/// than a search's answer `found` (0: none fits) can fit. Tries found + 1,
/// found + 2, ... (cap at most) until `beyond` says none larger can fit or
/// `max_misses` in a row fail; from a batch that fits, LargestBatch goes on
/// upward and the scan goes on past its answer. `probes` counts the calls of
/// `fits` and `beyond` (an advisor's repeated ones cost nothing).
[[nodiscard]] Result<BatchSearch> ScanPastDips(const FitFn& fits, const BeyondFn& beyond,
                                               int64_t found, int64_t cap,
                                               int max_misses = kDipScanMisses);

/// One probe of a batch for LargestBatchPredicted: whether it fits, and the
/// bytes it needs (a lower bound is enough: it only steers the search).
struct FitMeasure {
  bool fits = false;
  double need = 0;
};
using MeasureFn = std::function<Result<FitMeasure>(int64_t batch)>;

/// LargestBatch's answer in fewer probes where the need is close to affine in
/// the batch: a start above 1 (another search's answer) is tried with the
/// batch after it; then the next batch is where the line through two probes'
/// needs meets `target` (the secant, or the need taken proportional to the
/// batch; with at least a doubling step while only one side is known; within
/// the bracket once both are, bisecting from the first guess that leaves more
/// than half of it). It ends as LargestBatch does: batch + 1 fails, and the
/// two batches after it are probed too (the peak need not grow with the
/// batch); one that fits resumes the search from there. For a monotone
/// `fits` the answer is LargestBatch's; otherwise it may be another batch
/// with the same property.
[[nodiscard]] Result<BatchSearch> LargestBatchPredicted(const MeasureFn& measure, double target,
                                                        int64_t cap, int64_t start = 1);

/// Tunables of the throughput estimate; see advisor.cc for the reasoning.
struct SpeedModel {
  double compute_efficiency = 0.45;  ///< Sustained share of peak dense FLOP/s.
  double memory_efficiency = 0.80;   ///< Sustained share of peak DRAM bandwidth.
  double launch_seconds = 6e-6;      ///< Per kernel launch (eager PyTorch overhead).
};

/// What a step costs in time on a device.
struct SpeedEstimate {
  double flops = 0;          ///< Forward + backward + recompute.
  double bytes = 0;          ///< Estimated DRAM traffic.
  double compute_s = 0;      ///< flops / (peak x efficiency).
  double memory_s = 0;       ///< bytes / (bandwidth x efficiency).
  double launch_s = 0;       ///< Kernel launches x launch_seconds.
  double step_s = 0;         ///< max(compute, memory) + launch.
  double samples_per_s = 0;  ///< batch / step_s.
};

/// Most saved-activation bytes alive at once (from the timeline; the peak's
/// breakdown when the timeline is empty).
int64_t SavedActivationBytes(const Plan& plan);

/// Roofline estimate of one micro-step of `plan` on `device`: `saved` from
/// SavedActivationBytes, `kernels` the forward kernel count (CountKernels);
/// the optimizer runs once every `accumulation` micro-steps.
SpeedEstimate EstimateSpeed(const Plan& plan, int64_t saved, const DevicePreset& device,
                            int64_t kernels, const SpeedModel& model = SpeedModel(),
                            int64_t accumulation = 1);

/// Forward ops that launch a kernel: differentiable, non-view ops.
int64_t CountKernels(const Graph& g);

/// One plan the search has just made (for a progress report).
struct AdviseProgress {
  ParallelStrategy strategy = ParallelStrategy::kSingle;
  Precision precision = Precision::kFp32;
  size_t checkpointed = 0;  ///< Modules recomputed in backward.
  int64_t batch = 0;
};

/// How each candidate's batches are searched.
enum class BatchSearchKind {
  /// Two or three plans and the allocator replayed over their events at the
  /// batches between and around them (BatchModel): LargestBatchPredicted's
  /// and ScanPastDips' probes are replays, every answer is a plan whose
  /// events the model predicts (else the model is fitted again there, and
  /// after kReplayRounds the same search goes on with a plan at every batch).
  kReplay,
  /// A plan at every batch probed: LargestBatch.
  kFull,
  /// A plan at every batch probed: LargestBatchPredicted.
  kPredicted,
};
/// The names, as the CLI's --search takes them (EnumName, ParseEnum).
template <>
struct EnumTable<BatchSearchKind> {
  static constexpr const char* kOption = "search";
  static constexpr EnumEntry<BatchSearchKind> kEntries[] = {
      {BatchSearchKind::kReplay, "replay"},
      {BatchSearchKind::kFull, "full"},
      {BatchSearchKind::kPredicted, "predicted"}};
};
/// How many times the replay search takes an answer to a plan before it
/// goes on with plans alone.
constexpr int kReplayRounds = 4;
/// The replay search's ScanPastDips below kDipScanBelow: batches in a row
/// past an answer it judges before it stops looking for a dip, unless the
/// allocated peak (a lower bound) is over the budget first, which ends most
/// scans within a few batches (a replay costs a fraction of a plan).
/// Planned reserved curves have dips 9 batches past an answer (lstm_lm_b
/// fp32: 2372 MiB at 62, 2092 at 63, for a budget of 2126 that PyTorch
/// reserved at 64) and 17 (lstm_tagger bf16: 270 MiB at 42, 278 to 328 at
/// 43-59, 260 at 60 and 270 at 64, where PyTorch reserved 270), so up to
/// kDipScanBelow: the batches an answer below it can double to.
constexpr int kReplayDipMisses = static_cast<int>(kDipScanBelow);
/// Batches past an answer at any size the replay search also judges,
/// answer/16 x 1, 2, 4 further up: wider dips (lstm_lm_b amp_bf16's plans
/// fit a 1986 MiB budget at 64 and at 72-78, not at 65-70; PyTorch reserved
/// 1986 MiB at 64, 2140 at 70 and 1974 at 78,
/// bench/results/families_check_h200.jsonl and advise_fit/top_h200.jsonl).
constexpr int kReplayLeaps = 3;

/// What to search.
struct AdviseRequest {
  PlanOptions base;        ///< Optimizer, attention, loss, allocator.
  ShapeBindings bindings;  ///< Other symbols (--dim); batch is searched.
  /// The symbol the searched batch binds; "": dim 0 of the first input.
  std::string batch_symbol;
  std::vector<Precision> precisions;             ///< Candidates, in preference order.
  bool checkpoint = false;                       ///< Also try the placements of checkpoint.h.
  int64_t budget_bytes = 0;                      ///< Device memory.
  double margin = 0.05;                          ///< Share of the budget kept free.
  int64_t context_bytes = kDefaultContextBytes;  ///< Outside PyTorch (context).
  int64_t max_batch = 65536;
  /// The batch search. Where the need is not monotone in the batch (most
  /// models at scale) each kind can end at another batch that fits with the
  /// next ones failing, as often larger as smaller.
  BatchSearchKind search = BatchSearchKind::kReplay;
  int64_t global_batch = 0;  ///< > 0: gradient accumulation to reach it (over all ranks).
  /// Several GPUs: the data-parallel strategies to try (each at world_size
  /// ranks, `single` at one), batches per rank; empty = base.dist alone.
  std::vector<ParallelStrategy> strategies;
  int64_t world_size = 1;
  DevicePreset device;  ///< For the speed estimate.
  SpeedModel speed;
  /// Called after each plan the search makes, when set (progress reports);
  /// from the worker threads, one call at a time.
  std::function<void(const AdviseProgress&)> on_plan;
  /// Candidates searched at once, each in a thread of its own with its own
  /// copy of the graph (0: one per core). The advice is the same for any
  /// count: a candidate's search reads only the answers it starts from.
  int threads = 0;
};

/// One precision x placement at its largest fitting batch.
struct Candidate {
  Precision precision = Precision::kFp32;
  CheckpointStrategy strategy = CheckpointStrategy::kNone;
  std::vector<std::string> checkpoint;  ///< Modules recomputed in backward.
  int64_t batch = 0;                    ///< 0: not even batch 1 fits.
  /// At `batch`, without the timeline, module peaks and kernel shapes.
  Plan plan;
  int64_t device_bytes = 0;       ///< reserved + context.
  int64_t uncertain_bytes = 0;    ///< Allowance for unmeasured rules (UncertaintyBytes).
  int64_t headroom_bytes = 0;     ///< budget - device bytes.
  double recompute_overhead = 0;  ///< recompute / (forward + backward) FLOPs.
  SpeedEstimate speed;
  int64_t grad_accumulation_steps = 1;
  int64_t micro_batch = 0;  ///< Per step with accumulation (<= batch).
  int probes = 0;           ///< MakePlan runs spent on it.
  int replays = 0;          ///< Batches it judged by a model's replay alone.
  std::string note;
};

/// The ranked candidates and what was assumed.
struct Advice {
  int64_t usable_bytes = 0;        ///< budget x (1 - margin).
  BlockChain blocks;               ///< The checkpointable modules found.
  std::vector<Candidate> ranked;   ///< Fitting ones, best first.
  std::vector<Candidate> failing;  ///< Not even batch 1 fits.
  std::vector<std::string> notes;
  int plans = 0;    ///< MakePlan runs in all.
  int replays = 0;  ///< Batches judged by a model's replay alone, in all.
};

/// How far an unmeasured rule's bytes may be off, as a share of them: the
/// advisor plans them at (1 + this) times their size. In the family
/// measurements (bench/results/families_h200.jsonl) where the plan's gap came
/// from rules it has (U-Net amp_bf16 b32 and b96), PyTorch needed 0.92 and 1.00
/// times the unmeasured bytes more than planned.
constexpr double kUnmeasuredErrorFactor = 1.0;

/// The allowance the advisor adds for `plan`'s unmeasured rules:
/// coverage.unbacked_bytes x kUnmeasuredErrorFactor.
[[nodiscard]] int64_t UncertaintyBytes(const Plan& plan);

/// The loud note for a candidate whose plan uses rules no measurement backs:
/// their share of the peak and the bytes kept for them, or that they hold
/// under 0.1 % of it; "" when every rule is backed.
[[nodiscard]] std::string UnmeasuredNote(const Candidate& c);

/// Searches every precision x placement for `g` (shapes not yet bound).
/// Fit test: reserved peak + context + UncertaintyBytes <= usable_bytes, and
/// no tensor over a 32-bit-indexing kernel's limit (Plan::int32_overflow).
Result<Advice> Advise(const Graph& g, const AdviseRequest& request);

}  // namespace memplan

#endif  // MEMPLAN_PLANNER_ADVISOR_H_
