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

/// ModelPlanner(graph).PlanStep(bindings, options): one plan.
[[nodiscard]] Result<Plan> PlanModel(const Graph& graph, const ShapeBindings& bindings,
                                     const PlanOptions& options);
/// The same plan from a graph the caller gives up: shapes are inferred in
/// place, without the copy (a large graph is not held twice).
[[nodiscard]] Result<Plan> PlanModel(Graph&& graph, const ShapeBindings& bindings,
                                     const PlanOptions& options);

}  // namespace memplan

#endif  // MEMPLAN_PLANNER_PLAN_MODEL_H_
