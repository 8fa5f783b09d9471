#ifndef MEMPLAN_PLANNER_PLAN_MODEL_H_
#define MEMPLAN_PLANNER_PLAN_MODEL_H_

/// The planning entry point: an imported graph, symbol bindings and options
/// -> the plan of one step, or the error. Shape inference, the schedule and
/// the simulation run in that order; everything that plans a model (the
/// CLI's plan, check, validate, the advisor, the benchmarks) comes through
/// here.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "planner/graph.h"
#include "planner/options.h"
#include "planner/plan.h"
#include "planner/schedule.h"
#include "planner/shape_inference.h"
#include "planner/status.h"

namespace memplan {

/// A copy of `graph` with shapes inferred for `bindings`; shape inference's
/// warnings are appended to `warnings` (may be null).
[[nodiscard]] Result<Graph> BindShapes(const Graph& graph, const ShapeBindings& bindings,
                                       std::vector<std::string>* warnings);

/// Plans one model under many bindings and options, inferring shapes once
/// per binding. Keeps a reference to `graph`, which must outlive it.
class ModelPlanner {
 public:
  explicit ModelPlanner(const Graph& graph) : graph_(graph) {}

  /// The graph with shapes for `bindings` (kept for later calls) and the
  /// warnings shape inference gave, or its error.
  struct Bound {
    Graph graph;
    std::vector<std::string> warnings;
  };
  [[nodiscard]] Result<const Bound*> Bind(const ShapeBindings& bindings);

  /// The plan of one step of the graph bound to `bindings`, run as `options`
  /// say. Its warnings start with shape inference's, then the planner's.
  [[nodiscard]] Result<Plan> PlanStep(const ShapeBindings& bindings, const PlanOptions& options);

 private:
  const Graph& graph_;
  std::map<std::string, std::unique_ptr<Bound>> bound_;  ///< By bindings.
};

/// Plans one model for a search over bindings, precisions and checkpoint
/// placements, everything else of `base` fixed (the advisor). What the
/// placement does not change is built once and kept: the schedules per
/// (binding, precision) (a placement only marks their checkpoint segments:
/// MarkCheckpointSegments; the most recently used, up to kKeptScheduleItems
/// ops and values in all, the one in use always), each placement's module
/// paths. One copy of the
/// graph is bound in turn to each binding asked (its tensors put back as
/// imported, then shapes inferred: nothing else of a graph changes with the
/// binding); the tensors inferred for earlier bindings are kept (up to
/// kKeptTensors in all) and swapped back in when a binding comes again, as
/// the next precision's search does. A plan is PlanModel's for the same
/// bindings and options, less what `detail` leaves out. Keeps a reference to
/// `graph`.
class CandidatePlanner {
 public:
  /// `kept_tensors`: the most tensors whose inferred fields are kept over
  /// earlier bindings (kKeptTensors).
  /// `kept_schedule_items`: the most ops + values of the schedules kept
  /// (kKeptScheduleItems); 0 keeps only the schedule built last.
  CandidatePlanner(const Graph& graph, const PlanOptions& base, size_t kept_tensors = kKeptTensors,
                   size_t kept_schedule_items = kKeptScheduleItems)
      : work_(graph),
        imported_(graph.tensors),
        kept_limit_(kept_tensors),
        base_(base),
        schedule_items_limit_(kept_schedule_items) {}

  /// The graph with shapes for `bindings`, or shape inference's error; valid
  /// until the next call with other bindings.
  [[nodiscard]] Result<const Graph*> Bind(const ShapeBindings& bindings);
  /// The plan of `base` at `bindings`, with `precision` and `checkpoint`
  /// (module patterns, as PlanOptions::checkpoint_segments); with
  /// `reserved_limit` >= 0, one sure to reserve more stops early
  /// (Plan::over_limit; MakePlanFrom).
  [[nodiscard]] Result<Plan> PlanStep(const ShapeBindings& bindings, Precision precision,
                                      const std::vector<std::string>& checkpoint, PlanDetail detail,
                                      int64_t reserved_limit = -1);

  /// Most tensors whose inferred shapes are kept by default, over all
  /// earlier bindings (about 0.1 KiB each).
  static constexpr size_t kKeptTensors = size_t{1} << 18;
  /// Most ops + values (ExecOp and Val entries) of the schedules kept by
  /// default, over the (binding, fp32_conv variant) keys of one precision
  /// (about 0.5 KiB each; a 300 k-node graph's schedule alone is above it).
  static constexpr size_t kKeptScheduleItems = size_t{1} << 19;
  /// Shape inference runs so far (each binding not found kept).
  [[nodiscard]] int inferences() const { return inferences_; }
  /// Schedule analyses (regions found) so far: one per binding scheduled
  /// while its inference is kept.
  [[nodiscard]] int analyses() const { return analyses_; }
  /// Schedules built so far, and those kept now.
  [[nodiscard]] int schedules_built() const { return schedules_built_; }
  [[nodiscard]] size_t schedules_kept() const { return schedules_.size(); }
  /// Ops + values of the schedules kept now.
  [[nodiscard]] size_t schedule_items() const { return schedule_items_; }

 private:
  /// The fields of a tensor shape inference writes (InferShapes, BindInput,
  /// the ops' shape functions); the others are the same for every binding.
  struct InferredTensor {
    DType dtype = DType::kUndefined;
    bool shape_known = false;
    bool has_values = false;
    bool is_sequence = false;
    std::vector<int64_t> shape;
    std::vector<int64_t> values;
    std::vector<std::vector<int64_t>> seq_shapes;
  };
  /// What shape inference wrote for one binding: those fields of every
  /// tensor and the graph's symbols (nothing else of the graph changes).
  struct Inferred {
    std::vector<InferredTensor> tensors;
    std::map<std::string, int64_t> bound_symbols;
    std::string batch_symbol;
    std::vector<std::string> warnings;
    /// The schedule analysis of the bound graph (null until a schedule is
    /// built at this binding).
    std::unique_ptr<ScheduleAnalysis> analysis;
  };
  /// Moves what inference wrote for work_key_ into kept_ (work_'s inferred
  /// fields are left empty).
  void KeepWork();
  /// Exchanges shape inference's fields of work_ with `k`'s.
  void SwapInferred(Inferred* k);
  /// Moves kept inference for `key` into work_ and out of kept_; false when
  /// none is kept.
  bool RestoreWork(const std::string& key);
  Graph work_;                              ///< Bound to work_key_'s bindings.
  std::vector<Tensor> imported_;            ///< The graph's tensors before any binding.
  std::string work_key_;                    ///< "": not bound (or its inference failed).
  std::vector<std::string> work_warnings_;  ///< Shape inference's, for work_key_.
  /// The schedule analysis of work_ (null: none yet), and of the first
  /// binding analysed (its roles and order hold for every binding).
  std::unique_ptr<ScheduleAnalysis> work_analysis_;
  std::unique_ptr<ScheduleAnalysis> first_analysis_;
  int analyses_ = 0;
  /// Earlier bindings' inference, by bindings key, oldest first in kept_order_.
  std::map<std::string, Inferred> kept_;
  std::vector<std::string> kept_order_;
  size_t kept_tensors_ = 0;
  size_t kept_limit_ = kKeptTensors;
  int inferences_ = 0;
  PlanOptions base_;
  /// Resolved module paths (or the error) by pattern list.
  std::map<std::vector<std::string>, Result<std::vector<std::string>>> resolved_;
  /// Schedules of the precision planned last, by bindings and fp32_conv
  /// variant (those of earlier precisions are dropped: the advisor searches
  /// one precision at a time).
  Precision schedules_precision_ = Precision::kFp32;
  std::map<std::string, std::unique_ptr<Schedule>> schedules_;
  std::vector<std::string> schedules_order_;  ///< schedules_' keys, least recently used first.
  size_t schedule_items_ = 0;                 ///< Ops + values of schedules_.
  size_t last_schedule_items_ = 0;            ///< Of the schedule built last.
  size_t schedule_items_limit_ = kKeptScheduleItems;
  int schedules_built_ = 0;
  /// Drops the least recently used schedules until `room` more items fit
  /// the limit (or none is left).
  void DropSchedules(size_t room);
};

/// ModelPlanner(graph).PlanStep(bindings, options): one plan.
[[nodiscard]] Result<Plan> PlanModel(const Graph& graph, const ShapeBindings& bindings,
                                     const PlanOptions& options);
/// The same plan from a graph the caller gives up: shapes are inferred in
/// place, without the copy (a large graph is not held twice).
[[nodiscard]] Result<Plan> PlanModel(Graph&& graph, const ShapeBindings& bindings,
                                     const PlanOptions& options);

}  // namespace memplan

#endif  // MEMPLAN_PLANNER_PLAN_MODEL_H_
