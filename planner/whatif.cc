#include "planner/whatif.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "planner/advisor.h"
#include "planner/allocator_sim.h"
#include "planner/finetune.h"
#include "planner/params.h"
#include "planner/plan_model.h"

namespace memplan {
namespace {

constexpr const char* kRangeForm = "expected NAME=LO..HI, NAME=LO..HI:STEP or NAME=LO..HI:xFACTOR";

// A positive integer of the whole text, or -1.
int64_t PositiveInteger(const std::string& s) {
  if (s.empty() || s.size() > 18) return -1;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return -1;
    v = v * 10 + (c - '0');
  }
  return v > 0 ? v : -1;
}

// Values of `r`, at most `limit` + 1 of them (so a caller can tell too many).
std::vector<int64_t> Values(const DimRange& r, size_t limit) {
  std::vector<int64_t> out;
  int64_t v = r.lo;
  while (v <= r.hi && out.size() <= limit) {
    out.push_back(v);
    int64_t next = 0;
    if (r.step > 0) {
      next = v + r.step;
    } else {
      const double scaled = std::round(static_cast<double>(v) * r.factor);
      next = scaled >= 9.0e18 ? r.hi + 1 : std::max<int64_t>(v + 1, static_cast<int64_t>(scaled));
    }
    if (next < v) break;  // overflow
    v = next;
  }
  if (!out.empty() && out.back() != r.hi && out.size() <= limit) out.push_back(r.hi);
  return out;
}

int64_t MostReserved(const Plan& p) {
  return std::max({p.peak.reserved_bytes, p.first_step.reserved_bytes, p.steady.reserved_bytes});
}

}  // namespace

Result<DimRange> ParseDimRange(const std::string& text) {
  DimRange r;
  const size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0) return Status::Error(kRangeForm);
  r.name = text.substr(0, eq);
  std::string rest = text.substr(eq + 1);
  const size_t dots = rest.find("..");
  if (dots == std::string::npos) return Status::Error(kRangeForm);
  std::string hi_text = rest.substr(dots + 2);
  std::string suffix;
  const size_t colon = hi_text.find(':');
  if (colon != std::string::npos) {
    suffix = hi_text.substr(colon + 1);
    hi_text = hi_text.substr(0, colon);
  }
  r.lo = PositiveInteger(rest.substr(0, dots));
  r.hi = PositiveInteger(hi_text);
  if (r.lo < 0) return Status::Error("'" + rest.substr(0, dots) + "' is not a positive integer");
  if (r.hi < 0) return Status::Error("'" + hi_text + "' is not a positive integer");
  if (r.hi < r.lo) {
    return Status::Error("the range ends (" + std::to_string(r.hi) + ") below its start (" +
                         std::to_string(r.lo) + ")");
  }
  if (colon != std::string::npos) {
    if (!suffix.empty() && suffix[0] == 'x') {
      const std::string f = suffix.substr(1);
      char* end = nullptr;
      const double factor = f.empty() ? 0.0 : std::strtod(f.c_str(), &end);
      if (f.empty() || end != f.c_str() + f.size() || !(factor > 1.0) || !(factor <= 1e6)) {
        return Status::Error("factor '" + f + "': must be a number above 1");
      }
      r.factor = factor;
    } else {
      r.step = PositiveInteger(suffix);
      if (r.step < 0) return Status::Error("step '" + suffix + "': must be a positive integer");
    }
  }
  const size_t n = Values(r, kMaxRangeValues).size();
  if (n > kMaxRangeValues) {
    return Status::Error("more than " + std::to_string(kMaxRangeValues) +
                         " values; take a larger step");
  }
  return r;
}

std::vector<int64_t> RangeValues(const DimRange& r) { return Values(r, kMaxRangeValues); }

int64_t FitBudget::Usable() const {
  return static_cast<int64_t>(std::floor(static_cast<double>(budget_bytes) * (1.0 - margin)));
}

int64_t BudgetNeed(const Plan& plan, int64_t context_bytes) {
  return MostReserved(plan) + context_bytes + UncertaintyBytes(plan);
}

bool FitsBudget(const Plan& plan, const FitBudget& budget) {
  return plan.int32_overflow.elements == 0 &&
         BudgetNeed(plan, budget.context_bytes) <= budget.Usable();
}

Result<std::vector<SweepCurve>> Sweep(const Graph& graph, const ShapeBindings& bindings,
                                      const DimRange& range,
                                      const std::vector<Precision>& precisions,
                                      const PlanOptions& base, const FitBudget& budget) {
  ModelPlanner planner(graph);
  const std::vector<int64_t> values = RangeValues(range);
  std::vector<SweepCurve> curves;
  for (Precision p : precisions) {
    SweepCurve curve;
    curve.precision = p;
    PlanOptions o = base;
    o.precision = p;
    o.context_bytes = budget.context_bytes;
    o.keep_events = false;
    std::map<int64_t, bool> fits;
    auto plan_at = [&](int64_t v) -> Result<Plan> {
      ShapeBindings b = bindings;
      if (range.binds_batch) {
        b.batch = v;
      } else {
        b.dims[range.name] = v;
      }
      auto plan = planner.PlanStep(b, o);
      ++curve.plans;
      if (!plan.ok()) {
        return Status::Error(range.name + "=" + std::to_string(v) + ": " + plan.message());
      }
      return plan;
    };
    for (int64_t v : values) {
      auto plan = plan_at(v);
      if (!plan.ok()) return plan.status();
      SweepPoint pt;
      pt.value = v;
      pt.allocated_bytes = plan->peak.allocated_bytes;
      pt.reserved_bytes = plan->peak.reserved_bytes;
      pt.device_bytes = plan->peak.device_bytes;
      pt.need_bytes = BudgetNeed(plan.value(), budget.context_bytes);
      pt.fits = budget.budget_bytes > 0 && FitsBudget(plan.value(), budget);
      fits[v] = pt.fits;
      curve.points.push_back(pt);
    }
    if (budget.budget_bytes > 0) {
      FitFn fn = [&](int64_t v) -> Result<bool> {
        auto it = fits.find(v);
        if (it != fits.end()) return it->second;
        auto plan = plan_at(v);
        if (!plan.ok()) return plan.status();
        return fits[v] = FitsBudget(plan.value(), budget);
      };
      auto search = LargestBatch(fn, range.hi, range.lo);
      if (!search.ok()) return search.status();
      curve.largest_fitting = search->batch;
    }
    curves.push_back(std::move(curve));
  }
  return curves;
}

Result<std::vector<DtypeRow>> DtypeSummary(const Graph& graph, const ShapeBindings& bindings,
                                           const PlanOptions& base) {
  ModelPlanner planner(graph);
  std::vector<DtypeRow> rows;
  for (Precision p : {Precision::kFp32, Precision::kAmpBf16, Precision::kBf16}) {
    DtypeRow row;
    row.precision = p;
    PlanOptions o = base;
    o.precision = p;
    o.keep_events = false;
    o.lora = LoraOptions();
    o.mode = Mode::kInference;
    auto inference = planner.PlanStep(bindings, o);
    if (!inference.ok()) return inference.status();
    row.weight_bytes = inference->parameter_bytes + inference->buffer_bytes;
    row.inference_bytes = inference->peak.device_bytes;
    row.inference_allocated = inference->peak.allocated_bytes;
    o.mode = Mode::kTrain;
    o.optimizer = Optimizer::kSgd;
    auto sgd = planner.PlanStep(bindings, o);
    if (!sgd.ok()) return sgd.status();
    row.train_sgd_bytes = sgd->peak.device_bytes;
    row.train_sgd_allocated = sgd->peak.allocated_bytes;
    o.optimizer = Optimizer::kAdam;
    auto adam = planner.PlanStep(bindings, o);
    if (!adam.ok()) return adam.status();
    row.train_adam_bytes = adam->peak.device_bytes;
    row.train_adam_allocated = adam->peak.allocated_bytes;
    rows.push_back(row);
  }
  // A model without Linear weights besides its output layer has nothing to
  // quantize: no such rows. Any other failure of those plans is an error.
  bool quantizable = false;
  for (const LinearLayer& l : FindLinearLayers(graph, ClassifyInitializers(graph))) {
    quantizable = quantizable || !l.head;
  }
  for (WeightFormat f : {WeightFormat::kInt8, WeightFormat::kNf4}) {
    if (!quantizable) break;
    DtypeRow row;
    row.precision = Precision::kBf16;
    row.weights = f;
    PlanOptions o = base;
    o.precision = Precision::kBf16;
    o.weights = f;
    o.keep_events = false;
    o.lora = LoraOptions();
    o.mode = Mode::kInference;
    auto inference = planner.PlanStep(bindings, o);
    if (!inference.ok()) return inference.status();
    row.weight_bytes = inference->parameter_bytes + inference->buffer_bytes;
    row.inference_bytes = inference->peak.device_bytes;
    row.inference_allocated = inference->peak.allocated_bytes;
    o.mode = Mode::kTrain;
    o.lora = base.lora;
    if (o.lora.r <= 0) o.lora.r = 16;  // QLoRA's usual rank, PEFT's default targets
    row.train_sgd_bytes = row.train_sgd_allocated = -1;
    row.train_adam_bytes = row.train_adam_allocated = -1;
    o.optimizer = Optimizer::kSgd;
    auto sgd = planner.PlanStep(bindings, o);
    // The user's own --lora that cannot be planned is an error; only the
    // default targets may miss (the model names its projections otherwise).
    if (!sgd.ok() && base.lora.r > 0) return sgd.status();
    o.optimizer = Optimizer::kAdam;
    auto adam = sgd.ok() ? planner.PlanStep(bindings, o) : sgd;
    if (sgd.ok() && adam.ok()) {
      row.train_sgd_bytes = sgd->peak.device_bytes;
      row.train_sgd_allocated = sgd->peak.allocated_bytes;
      row.train_adam_bytes = adam->peak.device_bytes;
      row.train_adam_allocated = adam->peak.allocated_bytes;
    } else {
      row.training_absent = sgd.ok() ? adam.message() : sgd.message();
    }
    rows.push_back(row);
  }
  return rows;
}

namespace {

// Index of the first event of the last training iteration (its forward after
// the previous optimizer phase); 0 when there is none.
size_t LastIterationStart(const Plan& p) {
  for (size_t i = p.event_phases.size(); i-- > 1;) {
    if (p.event_phases[i] == Phase::kForward && p.event_phases[i - 1] != Phase::kForward) return i;
  }
  return 0;
}

// The options of the variant a plan of `options` keeps, with what the export
// cannot tell (which cuDNN engines run fp32 convolutions, whether activations
// run in place) fixed: MakePlanFrom plans every way and keeps the first plan
// with the largest device peak; this plans the same ways and picks the same.
Result<PlanOptions> KeptVariant(ModelPlanner& planner, const ShapeBindings& bindings,
                                const PlanOptions& options) {
  std::vector<Fp32ConvCopies> convs = {options.fp32_conv};
  if (options.fp32_conv == Fp32ConvCopies::kBoth) {
    convs = {Fp32ConvCopies::kAll, Fp32ConvCopies::kInputOnly};
  }
  std::vector<InPlace> inplace = {options.inplace};
  if (options.inplace == InPlace::kBoth) inplace = {InPlace::kOff, InPlace::kOn};
  PlanOptions kept = options;
  if (convs.size() == 1 && inplace.size() == 1) return kept;
  int64_t most = -1;
  for (Fp32ConvCopies c : convs) {
    for (InPlace ip : inplace) {
      PlanOptions o = options;
      o.keep_events = false;
      o.fp32_conv = c;
      o.inplace = ip;
      auto plan = planner.PlanStep(bindings, o);
      if (!plan.ok()) return plan.status();
      if (plan->peak.device_bytes > most) {
        most = plan->peak.device_bytes;
        kept = o;
      }
    }
  }
  kept.keep_events = options.keep_events;
  return kept;
}

}  // namespace

Result<AllocatorAdvice> AdviseAllocator(const Graph& graph, const ShapeBindings& bindings,
                                        const PlanOptions& options) {
  ModelPlanner planner(graph);
  AllocatorAdvice a;
  PlanOptions o = options;
  o.keep_events = true;
  auto base = planner.PlanStep(bindings, o);
  if (!base.ok()) return base.status();
  const Plan& p = base.value();
  a.allocated_bytes = p.peak.allocated_bytes;
  a.reserved_bytes = p.peak.reserved_bytes;

  // Each setting is planned for the program the base figures come from (its
  // variant of what the export cannot tell): what the setting changes, not
  // the largest over programs that PyTorch would run one of.
  auto program = KeptVariant(planner, bindings, options);
  if (!program.ok()) return program.status();
  PlanOptions v = program.value();
  v.keep_events = false;
  v.allocator.expandable_segments = true;
  v.allocator.max_split_size = std::numeric_limits<int64_t>::max();
  auto expandable = planner.PlanStep(bindings, v);
  if (!expandable.ok()) return expandable.status();
  a.expandable = {"expandable_segments:True", expandable->peak.allocated_bytes,
                  expandable->peak.reserved_bytes};
  v.allocator.expandable_segments = false;
  for (int64_t mib : MaxSplitCandidatesMiB()) {
    v.allocator.max_split_size = mib << 20;
    auto split = planner.PlanStep(bindings, v);
    if (!split.ok()) return split.status();
    a.max_split.push_back({"max_split_size_mb:" + std::to_string(mib), split->peak.allocated_bytes,
                           split->peak.reserved_bytes});
  }

  // empty_cache() after the last step, then (training) that step once more.
  std::vector<MemEvent> events = p.events;
  const size_t end = events.size();
  MemEvent ec;
  ec.empty_cache = true;
  ec.is_alloc = false;
  events.push_back(ec);
  const size_t again = events.size();
  if (options.mode == Mode::kTrain) {
    int64_t offset = 0;
    for (const MemEvent& e : p.events) offset = std::max(offset, e.id + 1);
    std::unordered_set<int64_t> in_copy;
    for (size_t i = LastIterationStart(p); i < end; ++i) {
      MemEvent e = p.events[i];
      if (e.empty_cache) continue;
      if (e.is_alloc) {
        in_copy.insert(e.id);
      } else if (!in_copy.count(e.id)) {
        continue;  // freed before this copy started
      }
      e.id += offset;
      events.push_back(e);
    }
  }
  auto sim = SimulateCachingAllocator(events, options.allocator);
  if (!sim.ok()) return sim.status();
  const SimResult& r = sim.value();
  if (r.oom || r.reserved_after.size() < again) {
    return Status::Error("the allocator replay with empty_cache() ran out of device memory");
  }
  a.step_end_reserved = end > 0 ? r.reserved_after[end - 1] : 0;
  a.after_empty_cache_reserved = r.reserved_after[again - 1];
  for (size_t i = again; i < r.reserved_after.size(); ++i) {
    a.next_step_reserved = std::max(a.next_step_reserved, r.reserved_after[i]);
  }
  for (size_t s = 0; s < r.segment_created.size(); ++s) {
    if (r.segment_created[s] >= again) {
      ++a.next_step_segments;
      a.next_step_segment_bytes += r.segment_bytes[s];
    }
  }

  if (options.mode == Mode::kTrain && !p.timeline.empty()) {
    a.persistent_bytes = p.timeline.back().allocated_end;
    size_t loss = p.timeline.size();
    for (size_t i = 0; i < p.timeline.size(); ++i) {
      if (p.timeline[i].node == "loss") loss = i;
    }
    for (size_t i = 0; i < loss; ++i) {
      if (p.timeline[i].phase != Phase::kForward) continue;
      a.forward_train_mode_allocated =
          std::max(a.forward_train_mode_allocated, p.timeline[i].allocated);
    }
    PlanOptions inf = program.value();  // the same program, evaluating
    inf.keep_events = false;
    inf.mode = Mode::kInference;
    for (bool no_grad : {false, true}) {
      inf.no_grad_weight_cache = no_grad;
      auto eval = planner.PlanStep(bindings, inf);
      if (!eval.ok()) return eval.status();
      const int64_t rest = eval->timeline.empty() ? 0 : eval->timeline.back().allocated_end;
      const int64_t at = a.persistent_bytes + (eval->peak.allocated_bytes - rest);
      (no_grad ? a.eval_no_grad_allocated : a.eval_inference_mode_allocated) = at;
    }
  }
  return a;
}

}  // namespace memplan
