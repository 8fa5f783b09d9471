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
/// MarkCheckpointSegments), each placement's module paths. One copy of the
/// graph is bound in turn to each binding asked (its tensors put back as
/// imported, then shapes inferred: nothing else of a graph changes with the
/// binding). A plan is PlanModel's for the same bindings and options, less
/// what `detail` leaves out. Keeps a reference to `graph`.
class CandidatePlanner {
 public:
  CandidatePlanner(const Graph& graph, const PlanOptions& base)
      : work_(graph), imported_(graph.tensors), base_(base) {}

  /// The graph with shapes for `bindings`, or shape inference's error; valid
  /// until the next call with other bindings.
  [[nodiscard]] Result<const Graph*> Bind(const ShapeBindings& bindings);
  /// The plan of `base` at `bindings`, with `precision` and `checkpoint`
  /// (module patterns, as PlanOptions::checkpoint_segments).
  [[nodiscard]] Result<Plan> PlanStep(const ShapeBindings& bindings, Precision precision,
                                      const std::vector<std::string>& checkpoint,
                                      PlanDetail detail);

 private:
  Graph work_;                              ///< Bound to work_key_'s bindings.
  std::vector<Tensor> imported_;            ///< The graph's tensors before any binding.
  std::string work_key_;                    ///< "": not bound (or its inference failed).
  std::vector<std::string> work_warnings_;  ///< Shape inference's, for work_key_.
  PlanOptions base_;
  /// Resolved module paths (or the error) by pattern list.
  std::map<std::vector<std::string>, Result<std::vector<std::string>>> resolved_;
  /// Schedules of the precision planned last, by bindings and fp32_conv
  /// variant (those of earlier precisions are dropped: the advisor searches
  /// one precision at a time).
  Precision schedules_precision_ = Precision::kFp32;
  std::map<std::string, std::unique_ptr<Schedule>> schedules_;
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
