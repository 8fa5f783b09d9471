#include "planner/plan_model.h"

#include <algorithm>
#include <utility>

#include "planner/checkpoint.h"
#include "planner/distributed.h"

namespace memplan {

namespace {

/// A key naming the bindings: batch, the symbol it binds (the bound graph
/// records it) and every dim (names cannot hold '\n').
std::string BindingsKey(const ShapeBindings& b) {
  std::string key = std::to_string(b.batch) + "\n@" + b.batch_dim;
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

// Exchanges what shape inference wrote in work_ with `k` (both ways: keep
// and restore are the same swap).
void CandidatePlanner::SwapInferred(Inferred* k) {
  for (size_t i = 0; i < work_.tensors.size(); ++i) {
    Tensor& t = work_.tensors[i];
    InferredTensor& o = k->tensors[i];
    std::swap(o.dtype, t.dtype);
    std::swap(o.shape_known, t.shape_known);
    std::swap(o.has_values, t.has_values);
    std::swap(o.is_sequence, t.is_sequence);
    o.shape.swap(t.shape);
    o.values.swap(t.values);
    o.seq_shapes.swap(t.seq_shapes);
  }
  k->bound_symbols.swap(work_.bound_symbols);
  k->batch_symbol.swap(work_.batch_symbol);
  k->warnings.swap(work_warnings_);
  k->analysis.swap(work_analysis_);
}

void CandidatePlanner::KeepWork() {
  Inferred& k = kept_[work_key_];
  k.tensors.resize(work_.tensors.size());
  SwapInferred(&k);
  kept_order_.push_back(work_key_);
  kept_tensors_ += k.tensors.size();
  while (kept_tensors_ > kept_limit_ && !kept_order_.empty()) {  // the oldest go first
    auto old = kept_.find(kept_order_.front());
    kept_tensors_ -= old->second.tensors.size();
    kept_.erase(old);
    kept_order_.erase(kept_order_.begin());
  }
}

bool CandidatePlanner::RestoreWork(const std::string& key) {
  auto kept = kept_.find(key);
  if (kept == kept_.end()) return false;
  Inferred& k = kept->second;
  if (k.tensors.size() != work_.tensors.size()) return false;
  // work_ holds the imported graph with some binding's inferred fields (or
  // none): the fields no binding changes are as imported.
  SwapInferred(&k);
  kept_tensors_ -= k.tensors.size();
  kept_.erase(kept);
  kept_order_.erase(std::find(kept_order_.begin(), kept_order_.end(), key));
  return true;
}

Result<const Graph*> CandidatePlanner::Bind(const ShapeBindings& bindings) {
  const std::string key = BindingsKey(bindings);
  if (!work_key_.empty() && key == work_key_) return &work_;
  if (!work_key_.empty()) KeepWork();
  work_key_.clear();
  work_warnings_.clear();
  work_analysis_.reset();
  if (RestoreWork(key)) {
    work_key_ = key;
    return &work_;
  }
  // Shape inference writes only the fields InferredTensor holds (and the
  // bound symbols): with those back as imported, the graph is a fresh copy
  // again (the names, declared shapes and edges are never written).
  for (size_t i = 0; i < work_.tensors.size(); ++i) {
    Tensor& t = work_.tensors[i];
    const Tensor& o = imported_[i];
    t.dtype = o.dtype;
    t.shape_known = o.shape_known;
    t.has_values = o.has_values;
    t.is_sequence = o.is_sequence;
    t.shape = o.shape;
    t.values = o.values;
    t.seq_shapes = o.seq_shapes;
  }
  ++inferences_;
  Status s = InferShapes(&work_, bindings, &work_warnings_);
  if (!s.ok()) return s;
  work_key_ = key;
  return &work_;
}

void CandidatePlanner::DropSchedules(size_t room) {
  while (!schedules_order_.empty() && schedule_items_ + room > schedule_items_limit_) {
    auto old = schedules_.find(schedules_order_.front());
    schedule_items_ -= old->second->ops.size() + old->second->vals.size();
    schedules_.erase(old);
    schedules_order_.erase(schedules_order_.begin());
  }
}

Result<Plan> CandidatePlanner::PlanStep(const ShapeBindings& bindings, Precision precision,
                                        const std::vector<std::string>& checkpoint,
                                        PlanDetail detail, int64_t reserved_limit) {
  auto bound = Bind(bindings);
  if (!bound.ok()) return bound.status();
  const Graph& g = *bound.value();
  PlanOptions options = base_;
  options.precision = precision;
  // MakePlan's order of checks: the parallel options, then the placement.
  Status dist = CheckDistOptions(options.dist, options.mode);
  if (!dist.ok()) return dist;
  auto resolved = resolved_.find(checkpoint);
  if (resolved == resolved_.end()) {
    // Module paths come from the nodes' scopes, which no binding changes.
    resolved = resolved_.emplace(checkpoint, ResolveCheckpointModules(g, checkpoint)).first;
  }
  if (!resolved->second.ok()) return resolved->second.status();
  options.checkpoint_segments = resolved->second.value();
  if (precision != schedules_precision_) {
    schedules_.clear();
    schedules_order_.clear();
    schedule_items_ = 0;
    schedules_precision_ = precision;
  }
  const std::string key = BindingsKey(bindings);
  auto schedule_of = [&](const PlanOptions& o) -> Result<const Schedule*> {
    const std::string k = key + "\n#" + std::to_string(static_cast<int>(o.fp32_conv));
    auto it = schedules_.find(k);
    if (it != schedules_.end()) {
      schedules_order_.erase(std::find(schedules_order_.begin(), schedules_order_.end(), k));
      schedules_order_.push_back(k);
      MarkCheckpointSegments(g, o, it->second.get());
      return it->second.get();
    }
    // Room for one more, made before it is built (MakePlanFrom holds no
    // earlier schedule when it asks for the next).
    DropSchedules(last_schedule_items_);
    if (!work_analysis_) {
      // The roles and the order are the imported graph's: found once.
      ++analyses_;
      if (first_analysis_) {
        work_analysis_ = std::make_unique<ScheduleAnalysis>();
        work_analysis_->roles = first_analysis_->roles;
        work_analysis_->linears = first_analysis_->linears;
        work_analysis_->order = first_analysis_->order;
        ReanalyzeRegions(g, work_analysis_.get());
      } else {
        work_analysis_ = std::make_unique<ScheduleAnalysis>(AnalyzeForSchedule(g));
        first_analysis_ = std::make_unique<ScheduleAnalysis>(*work_analysis_);
      }
    }
    auto s = BuildSchedule(g, o, *work_analysis_);
    if (!s.ok()) return s.status();
    ++schedules_built_;
    last_schedule_items_ = s->ops.size() + s->vals.size();
    DropSchedules(last_schedule_items_);
    it = schedules_.emplace(k, std::make_unique<Schedule>(std::move(s.value()))).first;
    schedule_items_ += last_schedule_items_;
    schedules_order_.push_back(k);
    return it->second.get();
  };
  auto plan = MakePlanFrom(g, bindings.batch, options, schedule_of, detail, reserved_limit);
  if (!plan.ok() || plan->over_limit) return plan;
  plan->warnings.insert(plan->warnings.begin(), work_warnings_.begin(), work_warnings_.end());
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
