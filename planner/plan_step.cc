#include "planner/plan_step.h"

#include <algorithm>
#include <string>
#include <vector>

#include "planner/allocator_sim.h"
#include "planner/distributed.h"
#include "planner/kernels.h"
#include "planner/peaks.h"
#include "planner/shape_inference.h"
#include "planner/simulator.h"
#include "planner/timeline.h"

namespace memplan {
namespace {

// The innermost module of the node behind the schedule op labelled `label`
// ("" for a synthetic op or a node the export put in no module).
std::string ModuleOfOp(const Graph& g, const Schedule& s, const std::string& label) {
  for (const ExecOp& op : s.ops) {
    if (op.label != label) continue;
    if (op.node < 0) return "";
    const Node& n = g.nodes[op.node];
    return n.modules_known && !n.modules.empty() ? n.modules.back() : "";
  }
  return "";
}

// The most bytes live at once over events [e0, e1) as the simulation
// requested them: the allocator's blocks are never smaller than their
// requests, its segments never hold less than their blocks, so the
// replayed reserved peak over those events is at least this. -1 when an
// event asks for a size the replay would refuse (it must report that).
int64_t LiveBytesPeak(const Simulator& sim, size_t e0, size_t e1) {
  std::vector<int64_t> live(sim.storages.size(), -1);
  int64_t now = 0, most = 0;
  for (size_t e = 0; e < e1 && e < sim.events.size(); ++e) {
    const MemEvent& ev = sim.events[e];
    const int st = sim.EventStorage(e);
    if (ev.empty_cache || st < 0) continue;
    if (ev.is_alloc) {
      if (ev.bytes < 0 || ev.bytes > kMaxTensorBytes) return -1;
      if (live[st] >= 0) return -1;  // not one allocation per storage: no bound
      live[st] = ev.bytes;
      now += ev.bytes;
    } else if (live[st] >= 0) {
      now -= live[st];
      live[st] = -1;
    }
    if (e >= e0) most = std::max(most, now);
  }
  return most;
}

}  // namespace

Result<Plan> PlanSchedule(const Graph& g, int64_t batch, const PlanOptions& options,
                          const Schedule& s, PlanDetail detail, bool* in_place_matters,
                          int64_t reserved_limit) {
  if (options.mode == Mode::kTrain && s.logits < 0) {
    return Status::Error(g.source + ": the graph has no output to put a loss on");
  }
  Plan plan;
  plan.options = options;
  plan.batch = batch;
  plan.dims = g.bound_symbols;
  plan.batch_symbol = g.batch_symbol;
  if (!g.batch_symbol.empty()) {
    auto b = g.bound_symbols.find(g.batch_symbol);
    if (b != g.bound_symbols.end()) plan.batch = b->second;
  }
  plan.warnings = s.warnings;
  plan.parameter_count = s.parameter_count;
  plan.frozen_count = s.frozen_count;
  plan.lora_count = s.lora_count;
  for (int p : s.params) plan.parameter_bytes += s.vals[p].bytes;
  for (const auto& [v, q] : s.quantized) {
    int64_t b = s.vals[v].bytes;
    for (int64_t x : q.state_bytes) b += x;
    plan.quantized_bytes += b;
    plan.parameter_bytes += b - s.vals[v].bytes;
  }
  for (int b : s.buffers) plan.buffer_bytes += s.vals[b].bytes;
  plan.context_bytes = options.context_bytes >= 0 ? options.context_bytes : kDefaultContextBytes;
  const bool data_parallel = options.dist.strategy != ParallelStrategy::kSingle;
  Simulator sim(s, options);
  // The second steady iteration is the first one again when the simulation
  // and the allocator both end it where they began it (Simulator::
  // stop_when_steady, CachingAllocatorReplay::State); then it is not run,
  // and the steady step's figures are read off the first steady one. Where
  // the events are handed on (keep_events, data parallel) all are made.
  // A stream for the batch model (PlanDetail::kStreams) holds every
  // iteration's events too.
  const bool streams = detail == PlanDetail::kStreams && PlansStepStreams(options);
  sim.stop_when_steady =
      options.mode == Mode::kTrain && !options.keep_events && !data_parallel && !streams;
  sim.Run();
  if (in_place_matters != nullptr) *in_place_matters = sim.in_place_matters;
  int64_t fit_live = 0;        // the step's live bytes, with a reserved limit
  size_t fit_stop_before = 0;  // a fit test's replay can stop before this event (0: never)
  if (reserved_limit >= 0 && options.allocator.device_limit == 0 && !data_parallel &&
      !sim.iteration_events.empty()) {
    // The events of the reported peak, as below: inference spans every pass,
    // training is the first step or the steady one (where the simulation
    // stopped after the second, a third would make the same events from the
    // same live storages).
    const auto& it = sim.iteration_events;
    size_t e0 = it.front().first, e1 = it.back().second;
    if (options.mode == Mode::kTrain) {
      size_t k = options.step == StepKind::kFirst ? 0 : sim.steady_repeats ? 1 : 2;
      k = std::min(k, it.size() - 1);
      e0 = it[k].first;
      e1 = it[k].second;
    }
    const int64_t live = LiveBytesPeak(sim, e0, e1);
    if (live > reserved_limit) {
      plan.over_limit = true;
      plan.peak.reserved_bytes = live;
      plan.peak.allocated_bytes = live;
      return plan;
    }
    fit_live = live;
    fit_stop_before = e1;
  }
  CachingAllocatorReplay replay(options.allocator);
  if (fit_stop_before > 0 && std::none_of(sim.events.begin(), sim.events.end(),
                                          [](const MemEvent& e) { return e.empty_cache; })) {
    // The reported step ends at fit_stop_before: once more than the limit is
    // reserved before it, its reserved peak is above the limit.
    replay.StopAbove(reserved_limit, fit_stop_before);
  }
  bool repeated = false;
  Status replayed;
  if (sim.steady_repeats) {
    replayed = replay.Replay(sim.events, sim.iteration_events[1].first);
    if (replayed.ok() && !replay.result().stopped_above) {
      const std::vector<int64_t> before = replay.State();
      replayed = replay.Replay(sim.events, sim.events.size());
      repeated = replayed.ok() && !replay.result().oom && replay.StateEquals(before);
    }
    if (!repeated && !replay.result().stopped_above) sim.RunRepeatedIteration();
  }
  // After a stop at the limit this replays nothing more.
  if (replayed.ok()) replayed = replay.Replay(sim.events, sim.events.size());
  if (!replayed.ok()) {
    return Status::Error(g.source + ": cannot replay the allocations: " + replayed.message());
  }
  if (replay.result().stopped_above) {
    // Over the limit; the allocated peak is the simulation's live bytes, a
    // lower bound.
    plan.over_limit = true;
    plan.peak.reserved_bytes = replay.result().peak_reserved;
    plan.peak.allocated_bytes = fit_live;
    return plan;
  }
  if (repeated) sim.CountRepeatedIteration();
  const SimResult& res = replay.result();
  const auto& it = sim.iteration_events;
  // The steady iteration: the third, or the second where the third repeats it.
  const size_t steady = repeated ? 1 : 2;
  // Peaks are those of the step (the calibration protocol resets the peak
  // statistics after loading the model).
  if (options.mode == Mode::kInference) {
    plan.peak = PeakOf(sim, res, it.front().first, it.back().second, options);
    plan.steady = plan.peak;
    plan.first_step = plan.peak;
  } else {
    plan.first_step = PeakOf(sim, res, it[0].first, it[0].second, options);
    plan.steady = PeakOf(sim, res, it[steady].first, it[steady].second, options);
    plan.peak = options.step == StepKind::kFirst ? plan.first_step : plan.steady;
  }
  if (reserved_limit >= 0 && options.allocator.device_limit == 0 && !data_parallel &&
      plan.peak.reserved_bytes > reserved_limit) {
    plan.over_limit = true;
    return plan;
  }
  for (Peak* p : {&plan.peak, &plan.first_step, &plan.steady}) {
    p->device_bytes = p->reserved_bytes + plan.context_bytes;
    p->module = ModuleOfOp(g, s, p->node);
  }
  int iter = options.mode == Mode::kTrain && options.step == StepKind::kSteady
                 ? static_cast<int>(steady)
                 : 0;
  if (options.mode == Mode::kInference) {
    // The reported peak spans both passes: draw the pass that holds it.
    for (size_t k = 1; k < it.size(); ++k) {
      if (PeakOf(sim, res, it[k].first, it[k].second, options).allocated_bytes >
          PeakOf(sim, res, it[iter].first, it[iter].second, options).allocated_bytes) {
        iter = static_cast<int>(k);
      }
    }
  }
  // Per step (the simulation ran several); a saturated sum stays saturated.
  const int64_t steps = static_cast<int64_t>(sim.iteration_events.size()) + (repeated ? 1 : 0);
  auto per_step = [steps](int64_t total) { return total == INT64_MAX ? total : total / steps; };
  plan.forward_flops = per_step(sim.forward_flops);
  plan.backward_flops = per_step(sim.backward_flops);
  plan.recompute_flops = per_step(sim.recompute_flops);
  // The timeline of the planned iteration: one point per step, at the
  // step's highest moment (workspaces and temporaries come and go inside an
  // op), so the curve reaches the peak the numbers report.
  const size_t e0 = sim.iteration_events[iter].first;
  const size_t e1 = sim.iteration_events[iter].second;
  plan.timeline = TimelineOf(sim, res, e0, e1);
  if (repeated && iter == 1) {
    // Numbered as the third iteration's steps would be.
    const int shift = static_cast<int>(sim.steps_phase.size()) - sim.iteration_start[1];
    for (TimelinePoint& pt : plan.timeline) pt.step += shift;
  }
  if (detail == PlanDetail::kFull) plan.modules = ModulePeaksOf(g, s, sim, res, e0, e1);
  // Inference: the activations packed into one arena (lower bound vs packed).
  if (options.mode == Mode::kInference) {
    plan.arena_lower_bound = ArenaLowerBoundOf(sim, it[0].first, it[0].second);
  }
  if (options.keep_events || data_parallel) {
    plan.events = sim.events;
    for (size_t e = 0; e < sim.events.size(); ++e) {
      const int st = sim.event_step[e];
      const int stor = sim.EventStorage(e);
      plan.event_nodes.push_back(sim.StepLabel(st));
      plan.event_phases.push_back(sim.steps_phase[st]);
      plan.event_categories.push_back(stor >= 0 ? sim.storages[stor].first_cat
                                                : Category::kWorkspaces);
      plan.event_params.push_back(stor >= 0 ? sim.storages[stor].param : -1);
      const int op = sim.event_op[e];
      const int node = op >= 0 ? s.ops[op].node : -1;
      plan.event_scopes.push_back(node >= 0 ? g.nodes[node].scope : std::string());
    }
    for (const auto& range : sim.iteration_events) plan.iteration_starts.push_back(range.first);
    for (int p : s.params) {
      plan.param_names.push_back(s.vals[p].name);
      plan.param_bytes_each.push_back(s.vals[p].bytes);
    }
  }
  if (detail == PlanDetail::kFull) KernelsOf(g, s, &plan.kernels);
  for (size_t i = 0; i < sim.rules.size(); ++i) {
    if (sim.rule_used[i]) plan.coverage.rules.push_back(ShareOf(sim.rules[i], options));
  }
  KernelLimitsOf(s, &plan);
  if (streams) {
    StepStream st;
    st.iterations = sim.iteration_events;
    st.storage_rule.reserve(sim.storages.size());
    for (const auto& storage : sim.storages) st.storage_rule.push_back(storage.rule);
    for (const RuleRef& r : sim.rules) st.rule_evidence.push_back(r.evidence);
    st.storage_unbacked = UnbackedStorages(st.storage_rule, st.rule_evidence, options);
    st.events = std::move(sim.events);  // the simulation is not read after this
    plan.streams.push_back(std::move(st));
    return plan;
  }
  if (data_parallel) {
    // One rank of the data-parallel job (distributed.h) from the process's events.
    Status dp = ApplyDataParallel(g, &plan);
    if (!dp.ok()) return dp;
    if (!options.keep_events) {
      plan.events.clear();
      plan.event_nodes.clear();
      plan.event_phases.clear();
      plan.event_categories.clear();
    }
  }
  return plan;
}

}  // namespace memplan
