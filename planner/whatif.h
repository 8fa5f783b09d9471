#ifndef MEMPLAN_PLANNER_WHATIF_H_
#define MEMPLAN_PLANNER_WHATIF_H_

/// What-if answers, each from full plans (nothing extrapolated): one dim swept
/// over a range with the largest value that fits a budget, a per-dtype summary
/// of weights / inference / training, and what the allocator settings
/// (expandable_segments, max_split_size_mb, empty_cache) change for one step.

#include <cstdint>
#include <string>
#include <vector>

#include "planner/graph.h"
#include "planner/options.h"
#include "planner/plan.h"
#include "planner/shape_inference.h"
#include "planner/status.h"

namespace memplan {

/// A range of one symbolic dim: NAME=LO..HI, then :STEP (arithmetic) or :xF
/// (geometric); no suffix doubles.
struct DimRange {
  std::string name;
  int64_t lo = 0;
  int64_t hi = 0;
  int64_t step = 0;          ///< > 0: lo, lo + step, ...
  double factor = 2.0;       ///< When step is 0: lo, lo x factor, ... (rounded).
  bool binds_batch = false;  ///< The name is the batch: bound as --batch is.
};

/// Values of a range at most.
constexpr size_t kMaxRangeValues = 256;

/// Parses "seq=512..8192", "seq=512..8192:512", "batch=1..64:x2" (the text
/// after NAME= is a range; errors say what is wrong with it).
[[nodiscard]] Result<DimRange> ParseDimRange(const std::string& text);

/// lo, then each step or factor, and hi last when the steps miss it.
[[nodiscard]] std::vector<int64_t> RangeValues(const DimRange& r);

/// A device memory budget, as the advisor reads it.
struct FitBudget {
  int64_t budget_bytes = 0;  ///< 0: no budget.
  double margin = 0.05;      ///< Share kept free.
  int64_t context_bytes = kDefaultContextBytes;
  [[nodiscard]] int64_t Usable() const;
};

/// What a plan must fit in: the most reserved over its steps + context +
/// the allowance for unmeasured rules (UncertaintyBytes), as `advise` tests it.
[[nodiscard]] int64_t BudgetNeed(const Plan& plan, int64_t context_bytes);
/// BudgetNeed <= usable and no tensor over a 32-bit-indexing kernel's limit.
[[nodiscard]] bool FitsBudget(const Plan& plan, const FitBudget& budget);

/// One planned point of a sweep.
struct SweepPoint {
  int64_t value = 0;
  int64_t allocated_bytes = 0;
  int64_t reserved_bytes = 0;
  int64_t device_bytes = 0;  ///< reserved + context.
  int64_t need_bytes = 0;    ///< BudgetNeed.
  bool fits = false;         ///< With a budget.
};

/// One precision's curve.
struct SweepCurve {
  Precision precision = Precision::kFp32;
  std::vector<SweepPoint> points;
  /// With a budget: the largest value in [1, hi] that fits (0: not even 1);
  /// -1 without a budget.
  int64_t largest_fitting = -1;
  int plans = 0;  ///< Plans made for the search.
};

/// Plans `graph` at every value of `range` (bound as --dim NAME=value on top
/// of `bindings`) for each precision; with a budget, also finds the largest
/// fitting value by bisection (fits assumed monotone in the dim).
[[nodiscard]] Result<std::vector<SweepCurve>> Sweep(
    const Graph& graph, const ShapeBindings& bindings, const DimRange& range,
    const std::vector<Precision>& precisions, const PlanOptions& base, const FitBudget& budget);

/// One dtype's row of the summary (accelerate estimate-memory, for training).
/// The quantized rows (weights int8, nf4) are a bf16 model with its Linear
/// weights quantized: weight-only inference, and training as QLoRA does it
/// (LoRA r=16 on the default targets, the quantized base frozen).
struct DtypeRow {
  Precision precision = Precision::kFp32;
  WeightFormat weights = WeightFormat::kNative;
  /// Quantized rows: why the training columns are absent (-1), e.g. no
  /// Linear layer matches LoRA's default targets; "" when planned.
  std::string training_absent;
  int64_t weight_bytes = 0;     ///< Parameters and buffers as stored on the GPU.
  int64_t inference_bytes = 0;  ///< Inference pass: peak reserved + context.
  int64_t train_sgd_bytes = 0;  ///< Training step with plain SGD: peak reserved + context.
  int64_t train_adam_bytes = 0;
  int64_t inference_allocated = 0;  ///< The same as max_memory_allocated.
  int64_t train_sgd_allocated = 0;
  int64_t train_adam_allocated = 0;
};

/// The summary rows for fp32, amp_bf16 and bf16 (in that order) at
/// `bindings`, then bf16 with int8 and with nf4 Linear weights where the
/// model has Linear weights to quantize.
[[nodiscard]] Result<std::vector<DtypeRow>> DtypeSummary(const Graph& graph,
                                                         const ShapeBindings& bindings,
                                                         const PlanOptions& base);

/// What one allocator setting gives for the planned step.
struct AllocatorVariant {
  std::string setting;  ///< "expandable_segments:True", "max_split_size_mb:512".
  int64_t allocated_bytes = 0;
  int64_t reserved_bytes = 0;
};

/// Allocator advice for one configuration, every figure from a plan or a
/// replay of its allocator events.
struct AllocatorAdvice {
  int64_t allocated_bytes = 0;  ///< The plan as configured.
  int64_t reserved_bytes = 0;
  AllocatorVariant expandable;              ///< expandable_segments:True.
  std::vector<AllocatorVariant> max_split;  ///< max_split_size_mb values tried.
  /// empty_cache() after a step (between epochs): reserved before / after,
  /// and what the next step then maps again (segments, bytes) and peaks at.
  int64_t step_end_reserved = 0;
  int64_t after_empty_cache_reserved = 0;
  int64_t next_step_segments = 0;
  int64_t next_step_segment_bytes = 0;
  int64_t next_step_reserved = 0;
  /// Training: what stays allocated between steps (parameters, optimizer
  /// state, workspaces, the batch).
  int64_t persistent_bytes = 0;
  /// An evaluation forward during training: under no_grad (autocast keeps its
  /// weight cache) and inference_mode (it does not), each persistent + what
  /// that inference pass rises by, against a train-mode forward with autograd
  /// on (the step's forward before the loss).
  int64_t eval_no_grad_allocated = 0;
  int64_t eval_inference_mode_allocated = 0;  ///< No autocast weight cache.
  int64_t forward_train_mode_allocated = 0;
};

/// max_split_size_mb values the advice tries.
inline const std::vector<int64_t>& MaxSplitCandidatesMiB() {
  static const std::vector<int64_t> v = {128, 256, 512, 1024};
  return v;
}

/// The advice for `options` (a training step; inference plans get the
/// allocator variants and empty_cache only).
[[nodiscard]] Result<AllocatorAdvice> AdviseAllocator(const Graph& graph,
                                                      const ShapeBindings& bindings,
                                                      const PlanOptions& options);

}  // namespace memplan

#endif  // MEMPLAN_PLANNER_WHATIF_H_
