#include "planner/plan.h"

#include <algorithm>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "planner/checkpoint.h"
#include "planner/distributed.h"
#include "planner/peaks.h"
#include "planner/plan_step.h"
#include "planner/schedule.h"
#include "planner/timeline.h"

namespace memplan {

const char* PhaseName(Phase p) {
  switch (p) {
    case Phase::kForward:
      return "forward";
    case Phase::kBackward:
      return "backward";
    case Phase::kOptimizer:
      return "optimizer";
  }
  return "?";
}

const char* CategoryName(Category c) {
  switch (c) {
    case Category::kParameters:
      return "parameters";
    case Category::kGradients:
      return "gradients";
    case Category::kOptimizerState:
      return "optimizer_state";
    case Category::kSavedActivations:
      return "saved_activations";
    case Category::kTransients:
      return "transients";
    case Category::kWorkspaces:
      return "workspaces";
  }
  return "?";
}

double Coverage::UnbackedShare() const {
  return peak_bytes > 0 ? static_cast<double>(unbacked_bytes) / static_cast<double>(peak_bytes)
                        : 0.0;
}

int64_t Breakdown::Total() const {
  int64_t t = 0;
  for (int64_t b : bytes) t += b;
  return t;
}

Result<Plan> MakePlan(const Graph& g, int64_t batch, const PlanOptions& requested) {
  // Checkpoint patterns become module paths (one set, whatever their order).
  PlanOptions options = requested;
  Status dist = CheckDistOptions(requested.dist, requested.mode);
  if (!dist.ok()) return dist;
  auto checkpointed = ResolveCheckpointModules(g, requested.checkpoint_segments);
  if (!checkpointed.ok()) return checkpointed.status();
  options.checkpoint_segments = checkpointed.value();
  Schedule sched;
  // One analysis serves both fp32-convolution variants.
  std::unique_ptr<ScheduleAnalysis> analysis;
  auto build = [&](const PlanOptions& o) -> Result<const Schedule*> {
    if (!analysis) analysis = std::make_unique<ScheduleAnalysis>(AnalyzeForSchedule(g));
    auto s = BuildSchedule(g, o, *analysis);
    if (!s.ok()) return s.status();
    sched = std::move(s.value());
    return &sched;
  };
  return MakePlanFrom(g, batch, options, build, PlanDetail::kFull);
}

bool PlansStepStreams(const PlanOptions& options) {
  return options.mode == Mode::kTrain && options.dist.strategy == ParallelStrategy::kSingle &&
         options.allocator.device_limit == 0;
}

std::vector<bool> UnbackedStorages(const std::vector<int>& storage_rule,
                                   const std::vector<Evidence>& rule_evidence,
                                   const PlanOptions& options) {
  std::vector<bool> unbacked(storage_rule.size(), true);
  for (size_t i = 0; i < storage_rule.size(); ++i) {
    const int rule = storage_rule[i];
    if (rule >= 0 && static_cast<size_t>(rule) < rule_evidence.size()) {
      unbacked[i] = !rule_evidence[rule].Covers(options.mode, options.precision);
    }
  }
  return unbacked;
}

Result<Plan> MakePlanFrom(const Graph& g, int64_t batch, const PlanOptions& options,
                          const ScheduleSource& schedules, PlanDetail detail,
                          int64_t reserved_limit) {
  Status dist = CheckDistOptions(options.dist, options.mode);
  if (!dist.ok()) return dist;
  // What the export cannot tell (which cuDNN engines run fp32 convolutions,
  // whether activations run in place) is planned every way; the plan that
  // needs the most device memory is kept.
  std::vector<Fp32ConvCopies> convs = {options.fp32_conv};
  if (options.fp32_conv == Fp32ConvCopies::kBoth) {
    convs = {Fp32ConvCopies::kAll, Fp32ConvCopies::kInputOnly};
  }
  std::vector<InPlace> inplace = {options.inplace};
  if (options.inplace == InPlace::kBoth) inplace = {InPlace::kOff, InPlace::kOn};
  Result<Plan> keep = Status::Error("no plan");
  bool have = false;
  Peak most[3];                     // the largest allocated peak per step kind, over the variants
  std::vector<ModulePeak> modules;  // per module, the largest over the variants
  std::unordered_map<std::string, size_t> module_index;
  std::vector<TimelinePoint> timeline;  // of the variant with the largest allocated peak
  bool timeline_in_keep = false;        // that variant is `keep`: its timeline is not copied yet
  std::vector<StepStream> streams;      // every variant's (PlanDetail::kStreams)
  for (Fp32ConvCopies c : convs) {
    PlanOptions o = options;
    o.fp32_conv = c;
    auto sched = schedules(o);
    if (!sched.ok()) return sched.status();
    for (InPlace ip : inplace) {
      o.inplace = ip;
      bool in_place_matters = true;
      auto plan =
          PlanSchedule(g, batch, o, *sched.value(), detail, &in_place_matters, reserved_limit);
      if (!plan.ok()) return plan;
      // Above the limit in one variant: the kept one's reserved peak (the
      // largest of all) is above it too.
      if (plan->over_limit) return plan;
      for (StepStream& st : plan->streams) streams.push_back(std::move(st));
      plan->streams.clear();
      const Peak* peaks[3] = {&plan->peak, &plan->first_step, &plan->steady};
      const bool takes_timeline = !have || plan->peak.allocated_bytes > most[0].allocated_bytes;
      const bool kept = !have || plan->peak.device_bytes > keep->peak.device_bytes;
      if (takes_timeline && !kept) {
        timeline = std::move(plan->timeline);
        timeline_in_keep = false;
      } else if (!takes_timeline && kept && timeline_in_keep) {
        timeline = std::move(keep->timeline);  // the old keep's, before it is replaced
        timeline_in_keep = false;
      } else if (takes_timeline) {
        timeline.clear();
        timeline_in_keep = true;
      }
      for (int k = 0; k < 3; ++k) {
        if (!have || peaks[k]->allocated_bytes > most[k].allocated_bytes) most[k] = *peaks[k];
      }
      for (const ModulePeak& m : plan->modules) {
        auto it = module_index.find(m.module);
        if (it == module_index.end()) {
          module_index.emplace(m.module, modules.size());
          modules.push_back(m);
          continue;
        }
        ModulePeak& have_m = modules[it->second];
        have_m.forward_allocated = std::max(have_m.forward_allocated, m.forward_allocated);
        have_m.backward_allocated = std::max(have_m.backward_allocated, m.backward_allocated);
        have_m.forward_rise = std::max(have_m.forward_rise, m.forward_rise);
        have_m.forward_kept = std::max(have_m.forward_kept, m.forward_kept);
        have_m.backward_rise = std::max(have_m.backward_rise, m.backward_rise);
      }
      if (kept) keep = std::move(plan);
      have = true;
      // Nothing runs in place, or nothing could when it was allowed (then the
      // in-place step is this one, event for event): one plan covers both.
      if (!sched.value()->inplace_activations || !in_place_matters) break;
    }
    if (!sched.value()->fp32_convs) break;  // no fp32 convolution: both kinds agree
  }
  // Each figure is the largest of its own: the allocated peak (and where it
  // is, what it is made of) of one variant, reserved and device of another.
  Peak* peaks[3] = {&keep->peak, &keep->first_step, &keep->steady};
  for (int k = 0; k < 3; ++k) {
    Peak p = most[k];
    p.reserved_bytes = peaks[k]->reserved_bytes;
    p.device_bytes = peaks[k]->device_bytes;
    for (int ph = 0; ph < 3; ++ph) p.phase_reserved[ph] = peaks[k]->phase_reserved[ph];
    *peaks[k] = p;
  }
  keep->modules = std::move(modules);
  keep->streams = std::move(streams);
  // The timeline draws the allocated peak's variant, with the reserved line
  // of the variant whose reserved figure is reported. The two may differ in
  // steps (an in-place op is one step less): each reserved point goes to the
  // next point of the same op, or else to the last one matched, keeping the
  // highest, so the line reaches the reported reserved peak. Where both are
  // one variant's, its timeline is merged with itself, in place.
  if (timeline_in_keep) {
    MergeReservedLine(keep->timeline, &keep->timeline);
  } else {
    if (!timeline.empty()) MergeReservedLine(keep->timeline, &timeline);
    keep->timeline = std::move(timeline);
  }
  keep->options.fp32_conv = options.fp32_conv;
  keep->options.inplace = options.inplace;
  FillCoverage(&keep.value());
  return keep;
}

}  // namespace memplan
