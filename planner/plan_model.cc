#include "planner/plan_model.h"

#include <utility>

namespace memplan {

namespace {

/// A key naming the bindings: batch and every dim (names cannot hold '\n').
std::string BindingsKey(const ShapeBindings& b) {
  std::string key = std::to_string(b.batch);
  for (const auto& [name, value] : b.dims) key += "\n" + name + "=" + std::to_string(value);
  return key;
}

}  // namespace

Result<Graph> BindShapes(const Graph& graph, const ShapeBindings& bindings,
                         std::vector<std::string>* warnings) {
  Graph copy = graph;
  Status s = InferShapes(&copy, bindings, warnings);
  if (!s.ok()) return s;
  return copy;
}

Result<const ModelPlanner::Bound*> ModelPlanner::Bind(const ShapeBindings& bindings) {
  const std::string key = BindingsKey(bindings);
  auto it = bound_.find(key);
  if (it != bound_.end()) return it->second.get();
  auto bound = std::make_unique<Bound>();
  bound->graph = graph_;
  Status s = InferShapes(&bound->graph, bindings, &bound->warnings);
  if (!s.ok()) return s;
  const Bound* out = bound.get();
  bound_[key] = std::move(bound);
  return out;
}

Result<Plan> ModelPlanner::PlanStep(const ShapeBindings& bindings, const PlanOptions& options) {
  auto bound = Bind(bindings);
  if (!bound.ok()) return bound.status();
  auto plan = MakePlan(bound.value()->graph, bindings.batch, options);
  if (!plan.ok()) return plan;
  const std::vector<std::string>& shape_warnings = bound.value()->warnings;
  plan->warnings.insert(plan->warnings.begin(), shape_warnings.begin(), shape_warnings.end());
  return plan;
}

Result<Plan> PlanModel(const Graph& graph, const ShapeBindings& bindings,
                       const PlanOptions& options) {
  ModelPlanner planner(graph);
  return planner.PlanStep(bindings, options);
}

Result<Plan> PlanModel(Graph&& graph, const ShapeBindings& bindings, const PlanOptions& options) {
  Graph g = std::move(graph);
  std::vector<std::string> warnings;
  Status s = InferShapes(&g, bindings, &warnings);
  if (!s.ok()) return s;
  auto plan = MakePlan(g, bindings.batch, options);
  if (!plan.ok()) return plan;
  plan->warnings.insert(plan->warnings.begin(), warnings.begin(), warnings.end());
  return plan;
}

}  // namespace memplan
