#include "planner/advisor.h"

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "planner/batch_model.h"
#include "planner/op_registry.h"
#include "planner/plan_model.h"

namespace memplan {

Result<BatchSearch> LargestBatch(const FitFn& fits, int64_t cap, int64_t start) {
  BatchSearch out;
  if (cap < 1) return out;
  start = std::min(std::max<int64_t>(start, 1), cap);
  auto probe = [&](int64_t b) -> Result<bool> {
    ++out.probes;
    return fits(b);
  };
  // lo fits (0: nothing known to fit), hi fails (cap + 1: nothing known to fail).
  int64_t lo = 0, hi = cap + 1;
  auto first = probe(start);
  if (!first.ok()) return first.status();
  // Gallop: steps grow geometrically from about start/8.
  int64_t step = std::max<int64_t>(1, start / 8);
  if (first.value()) {
    lo = start;
    while (lo < cap) {
      const int64_t b = std::min(cap, lo + step);
      auto f = probe(b);
      if (!f.ok()) return f.status();
      if (!f.value()) {
        hi = b;
        break;
      }
      lo = b;
      step *= 2;
    }
    if (lo == cap) {
      out.batch = cap;
      return out;
    }
  } else {
    hi = start;
    while (hi > 1) {
      const int64_t b = std::max<int64_t>(1, hi - step);
      auto f = probe(b);
      if (!f.ok()) return f.status();
      if (f.value()) {
        lo = b;
        break;
      }
      hi = b;
      step *= 2;
    }
    if (lo == 0) return out;  // Batch 1 does not fit.
  }
  // The peak need not grow with the batch (allocator rounding, segment
  // sizes): after each bisection the batches just past the first failure
  // are tried too, and the search goes on upward from any that fits.
  constexpr int64_t kNeighbours = 2;
  for (;;) {
    while (hi - lo > 1) {
      const int64_t mid = lo + (hi - lo) / 2;
      auto f = probe(mid);
      if (!f.ok()) return f.status();
      if (f.value()) {
        lo = mid;
      } else {
        hi = mid;
      }
    }
    int64_t next = 0;
    for (int64_t b = hi + 1; b <= std::min(cap, hi + kNeighbours); ++b) {
      auto f = probe(b);
      if (!f.ok()) return f.status();
      if (f.value()) {
        next = b;
        break;
      }
    }
    if (next == 0) break;
    lo = next;
    hi = cap + 1;
    step = 1;
    while (lo < cap) {  // Gallop again from the new batch that fits.
      const int64_t b = std::min(cap, lo + step);
      auto f = probe(b);
      if (!f.ok()) return f.status();
      if (!f.value()) {
        hi = b;
        break;
      }
      lo = b;
      step *= 2;
    }
    if (lo == cap) break;
  }
  out.batch = lo;
  return out;
}

Result<BatchSearch> ScanPastDips(const FitFn& fits, const BeyondFn& beyond, int64_t found,
                                 int64_t cap, int max_misses) {
  BatchSearch out;
  out.batch = std::max<int64_t>(0, found);
  int misses = 0;
  for (int64_t b = out.batch + 1; b <= cap && misses < max_misses; ++b) {
    ++out.probes;
    auto over = beyond(b);
    if (!over.ok()) return over.status();
    if (over.value()) break;
    ++out.probes;
    auto f = fits(b);
    if (!f.ok()) return f.status();
    if (!f.value()) {
      ++misses;
      continue;
    }
    auto up = LargestBatch(fits, cap, b);
    if (!up.ok()) return up.status();
    out.probes += up->probes;
    out.batch = std::max(b, up->batch);
    b = out.batch;
    misses = 0;
  }
  return out;
}

Result<BatchSearch> LargestBatchPredicted(const MeasureFn& measure, double target, int64_t cap,
                                          int64_t start) {
  BatchSearch out;
  if (cap < 1) return out;
  start = std::min(std::max<int64_t>(start, 1), cap);
  struct Point {
    int64_t batch = 0;
    double need = 0;
  };
  // lo fits (0: nothing known to fit), hi fails (cap + 1: nothing known to
  // fail); lo_p / hi_p are their probes, lo_prev / hi_prev the ones before
  // on the same side (batch 0: none).
  int64_t lo = 0, hi = cap + 1;
  Point lo_p, hi_p, lo_prev, hi_prev;
  // Both sides known: a secant guess left more than half the bracket, so the
  // probes bisect from then on (a need with steps, as the caching
  // allocator's reserved bytes have, leaves the secant crawling).
  bool bisect_only = false;
  int64_t step = 0;  // one-sided: the least step of the next probe (0: none)
  // `neighbour`: a batch past the first failure, which moves lo only.
  auto probe = [&](int64_t b, bool neighbour = false) -> Result<bool> {
    ++out.probes;
    auto m = measure(b);
    if (!m.ok()) return m.status();
    if (neighbour && !m->fits) return false;
    const Point pt{b, m->need};
    if (m->fits) {
      lo_prev = lo_p;
      lo_p = pt;
      lo = b;
    } else {
      hi_prev = hi_p;
      hi_p = pt;
      hi = b;
    }
    return m->fits;
  };
  // The batch where the line through a and b reaches target (nan: none).
  auto secant = [target](const Point& a, const Point& b) -> double {
    const double slope = (b.need - a.need) / static_cast<double>(b.batch - a.batch);
    if (!(slope > 0) || !std::isfinite(slope)) return std::nan("");
    return static_cast<double>(a.batch) + (target - a.need) / slope;
  };
  auto clamp = [&](double g) -> int64_t {
    if (std::isnan(g)) return -1;
    if (g >= static_cast<double>(hi - 1)) return hi - 1;
    if (g <= static_cast<double>(lo + 1)) return lo + 1;
    return static_cast<int64_t>(std::floor(g));
  };
  bool guessed = false;  // next_batch's answer came from a secant
  auto next_batch = [&]() -> int64_t {
    guessed = false;
    if (lo > 0 && hi <= cap) {  // both sides known
      const int64_t b = bisect_only ? -1 : clamp(secant(lo_p, hi_p));
      guessed = b > 0;
      return b > 0 ? b : lo + (hi - lo) / 2;
    }
    if (lo > 0) {  // only fits known: upward
      // A secant over batches close together is mostly noise (the reserved
      // bytes move in steps): it needs the earlier probe at half or less.
      double g =
          lo_prev.batch > 0 && 2 * lo_prev.batch <= lo ? secant(lo_prev, lo_p) : std::nan("");
      if (std::isnan(g) && lo_p.need > 0 && target > lo_p.need) {
        g = static_cast<double>(lo) * target / lo_p.need;  // need proportional to the batch
      }
      if (std::isnan(g)) g = 2.0 * static_cast<double>(lo);
      if (step > 0) g = std::max(g, static_cast<double>(lo) + static_cast<double>(step));
      return clamp(g);
    }
    // Only failures known: downward.
    double g = hi_prev.batch > 0 ? secant(hi_p, hi_prev) : std::nan("");
    if (std::isnan(g) && hi_p.need > target && target > 0) {
      g = static_cast<double>(hi) * target / hi_p.need;
    }
    if (std::isnan(g)) g = static_cast<double>(hi) / 2.0;
    if (step > 0) g = std::min(g, static_cast<double>(hi) - static_cast<double>(step));
    return clamp(g);
  };
  auto first = probe(start);
  if (!first.ok()) return first.status();
  if (first.value() && start > 1 && start < cap) {
    // A start above 1 is another search's answer: often this one's too.
    auto f = probe(start + 1);
    if (!f.ok()) return f.status();
  }
  constexpr int64_t kNeighbours = 2;
  for (;;) {
    // Narrow to hi == lo + 1 (or the ends: lo == cap fits, hi == 1 fails).
    while (hi - lo > 1) {
      const bool one_sided = !(lo > 0 && hi <= cap);
      const int64_t width = hi - lo;
      const int64_t b = next_batch();
      auto f = probe(b);
      if (!f.ok()) return f.status();
      if (!one_sided && guessed && 2 * (hi - lo) > width) bisect_only = true;
      if (one_sided && (lo > 0) != (hi <= cap)) {
        // Still one-sided after a guess: the next step is at least twice
        // this one's (a gallop), so a poor guess costs log steps.
        step = step == 0 ? 1 : 2 * step;
      } else {
        step = 0;
      }
    }
    if (lo == 0 || lo == cap) break;
    bool resumed = false;
    const int64_t first_failure = hi;
    for (int64_t b = first_failure + 1; b <= std::min(cap, first_failure + kNeighbours); ++b) {
      auto f = probe(b, true);
      if (!f.ok()) return f.status();
      if (f.value()) {
        resumed = true;
        break;
      }
    }
    if (!resumed) break;
    // Resume upward from the batch that fits; the failures below it are
    // forgotten.
    hi = cap + 1;
    hi_p = hi_prev = Point();
    bisect_only = false;
    step = 0;
  }
  out.batch = lo;
  return out;
}

int64_t SavedActivationBytes(const Plan& plan) {
  const int c = static_cast<int>(Category::kSavedActivations);
  int64_t best = plan.peak.breakdown.bytes[c];
  for (const TimelinePoint& t : plan.timeline) best = std::max(best, t.live.bytes[c]);
  return best;
}

int64_t CountKernels(const Graph& g) {
  int64_t n = 0;
  for (const Node& node : g.nodes) {
    const OpDef* def = FindOp(node.domain, node.op_type);
    if (def != nullptr && def->differentiable && def->alias == Alias::kNone) ++n;
  }
  return n;
}

// The step time is a roofline: the larger of the time to do the FLOPs and the
// time to move the bytes, plus the launch overhead of eager PyTorch.
// - FLOPs: forward + backward (the plan's, about 2x forward) + recompute.
// - Compute rate: the datasheet's peak dense rate for the precision's matmul
//   format x compute_efficiency. 0.45 is a typical model-FLOPs utilisation of
//   an eager PyTorch training step on tensor cores (large matmuls reach 70-80 %
//   of peak, the step's normalisations, activations and optimizer do not).
//   fp32 uses the plain fp32 rate: PyTorch leaves TF32 off for matmuls by
//   default (cuDNN convolutions do use TF32, so fp32 CNNs are underestimated).
// - Bytes: every saved activation written once in forward and read once in
//   backward (again for what is recomputed), and the parameters, gradients and
//   optimizer state streamed: forward read, backward read + gradient write, and
//   the optimizer (SGD 3 passes, momentum 5, Adam/AdamW 7 + 2 for the foreach
//   sqrt temporary, once per `accumulation` micro-steps), at
//   memory_efficiency x the datasheet bandwidth.
// - Launches: every kernel of forward, two per op in backward, one more per
//   recomputed op, at launch_seconds each: what makes tiny batches slow.
SpeedEstimate EstimateSpeed(const Plan& plan, int64_t saved, const DevicePreset& device,
                            int64_t kernels, const SpeedModel& model, int64_t accumulation) {
  SpeedEstimate s;
  const double fwd = static_cast<double>(plan.forward_flops);
  const double recompute_share = fwd > 0 ? plan.recompute_flops / fwd : 0.0;
  s.flops = fwd + static_cast<double>(plan.backward_flops) + plan.recompute_flops;
  double opt_passes = 9;
  switch (plan.options.optimizer) {
    case Optimizer::kSgd:
      opt_passes = 3;
      break;
    case Optimizer::kMomentum:
      opt_passes = 5;
      break;
    default:
      break;
  }
  s.bytes = 2.0 * saved * (1.0 + recompute_share) +
            static_cast<double>(plan.parameter_bytes) *
                (3.0 + opt_passes / static_cast<double>(std::max<int64_t>(1, accumulation)));
  const double peak = PeakFlops(device, plan.options.precision);
  s.compute_s = peak > 0 ? s.flops / (peak * model.compute_efficiency) : 0.0;
  s.memory_s =
      device.mem_bandwidth > 0 ? s.bytes / (device.mem_bandwidth * model.memory_efficiency) : 0.0;
  s.launch_s = static_cast<double>(kernels) * (3.0 + recompute_share) * model.launch_seconds;
  s.step_s = std::max(s.compute_s, s.memory_s) + s.launch_s;
  s.samples_per_s = s.step_s > 0 ? static_cast<double>(plan.batch) / s.step_s : 0.0;
  return s;
}

namespace {

std::string Key(Precision p, const std::vector<std::string>& ckpt, int64_t batch) {
  std::string k = std::to_string(static_cast<int>(p)) + "|" + std::to_string(batch) + "|";
  for (const std::string& m : ckpt) k += m + ",";
  return k;
}

struct Probe {
  Plan plan;
  int64_t saved = 0;
  int64_t device = 0;           ///< Reserved peak over the step + context.
  int64_t uncertain = 0;        ///< Allowance for unmeasured rules (UncertaintyBytes).
  bool int32_overflow = false;  ///< A 32-bit-indexing kernel would fail.
  /// The plan stopped once sure not to fit (Plan::over_limit): `device` is
  /// a lower bound, nothing else is filled in.
  bool over_limit = false;
  /// The allocated peak + context + NCCL + allowance (a lower bound where
  /// over_limit): no larger batch fits once it is over the budget.
  int64_t allocated_need = 0;
  /// What does not grow with the batch: the context and, at the allocated
  /// peak, the parameters, their gradients and the optimizer state.
  int64_t fixed = 0;
  /// Planned with PlanDetail::kStreams: the plan's streams (moved out of
  /// `plan`), until the candidate's search is over (Searcher::DropStreams).
  std::vector<StepStream> streams;
  bool planned_streams = false;
  /// What must fit the usable budget.
  int64_t Need() const { return device + uncertain; }
  bool Fits(int64_t usable) const { return !over_limit && !int32_overflow && Need() <= usable; }
};

// The replay search's planners keep only the schedule built last: it
// seldom plans one binding of one precision twice (a checkpointed
// placement's first batch is the answer without checkpointing, planned just
// before), and a kept schedule is memory the process writes for the first
// time, whose page faults cost more than the rare rebuild: advise on
// llama_1b_train (2 threads) 80 -> 62 MiB peak RSS and about 5 % less wall
// time; none of the five exports timed (llama_1b, gpt2, qwen_bigvocab,
// resnet50, unet_ldm) got slower. The planned searches plan a batch's fit
// test, then the batch in full, and keep CandidatePlanner's default (with
// only the last one kept, the 20 k-node chain's full search took 2.9 and
// 3.5 CPU-s in two runs, against 2.5 and 2.7).
constexpr size_t kReplaySearchKeptScheduleItems = 0;

class Searcher {
 public:
  Searcher(const Graph& g, const AdviseRequest& r)
      : planner_(g, ProbeOptions(r), CandidatePlanner::kKeptTensors,
                 r.search == BatchSearchKind::kReplay ? kReplaySearchKeptScheduleItems
                                                      : CandidatePlanner::kKeptScheduleItems),
        r_(r) {
    for (const Node& node : g.nodes) {
      const OpDef* def = FindOp(node.domain, node.op_type);
      recurrent_ = recurrent_ || (def != nullptr && def->cudnn_rnn);
    }
  }

  /// The graph has a cuDNN recurrent op, whose workspace and reserve space
  /// follow the algorithm cuDNN picks for the batch (planner/rnn.h): steps
  /// a model fitted at two batches cannot follow.
  bool recurrent() const { return recurrent_; }

  /// What every probe plans: the request's options, trained, with its context.
  static PlanOptions ProbeOptions(const AdviseRequest& r) {
    PlanOptions o = r.base;
    o.mode = Mode::kTrain;
    o.context_bytes = r.context_bytes;
    o.keep_events = false;
    return o;
  }

  int plans() const { return plans_; }

  ShapeBindings BindingsAt(int64_t batch) const {
    ShapeBindings b = r_.bindings;
    if (r_.batch_symbol.empty()) {
      b.batch = batch;
    } else {
      b.dims[r_.batch_symbol] = batch;
    }
    return b;
  }

  Result<const Graph*> Bound(int64_t batch) {
    auto bound = planner_.Bind(BindingsAt(batch));
    if (!bound.ok())
      return Status::Error("batch " + std::to_string(batch) + ": " + bound.message());
    return bound.value();
  }

  /// The probe of (batch, p, ckpt). With `fit_usable` >= 0 the caller reads
  /// only whether it fits that budget: a plan sure to need more stops early
  /// (Probe::over_limit), and such a probe is made again in full when asked
  /// without.
  Result<const Probe*> At(int64_t batch, Precision p, const std::vector<std::string>& ckpt,
                          int64_t fit_usable = -1) {
    const std::string key = Key(p, ckpt, batch);
    auto it = cache_.find(key);
    if (it != cache_.end() && (fit_usable >= 0 || !it->second->over_limit)) {
      return it->second.get();
    }
    // Need = reserved + context + NCCL + allowance, the last two never
    // negative: a reserved peak above usable - context cannot fit.
    const int64_t limit =
        fit_usable >= 0 ? std::max<int64_t>(0, fit_usable - r_.context_bytes) : -1;
    return Make(key, batch, p, ckpt, PlanDetail::kPeaks, limit);
  }

  /// The full probe of (batch, p, ckpt) with its plan's streams (empty where
  /// the plan has none: several GPUs, a device limit).
  Result<const Probe*> Planned(int64_t batch, Precision p, const std::vector<std::string>& ckpt) {
    const std::string key = Key(p, ckpt, batch);
    auto it = cache_.find(key);
    if (it != cache_.end() && !it->second->over_limit && it->second->planned_streams) {
      return it->second.get();
    }
    return Make(key, batch, p, ckpt, PlanDetail::kStreams, -1);
  }

  /// The probe of (batch, p, ckpt) made so far, full or stopped over a
  /// limit; null when none is.
  const Probe* Cached(int64_t batch, Precision p, const std::vector<std::string>& ckpt) const {
    auto it = cache_.find(Key(p, ckpt, batch));
    return it == cache_.end() ? nullptr : it->second.get();
  }

  /// Frees the probes' streams (a finished candidate's search).
  void DropStreams() {
    for (auto& [key, probe] : cache_) {
      probe->streams.clear();
      probe->streams.shrink_to_fit();
      probe->planned_streams = false;
    }
  }

  const AdviseRequest& request() const { return r_; }

  MeasureFn Measure(Precision p, const std::vector<std::string>& ckpt, int64_t usable) {
    return [this, p, ckpt, usable](int64_t batch) -> Result<FitMeasure> {
      auto probe = At(batch, p, ckpt, usable);
      if (!probe.ok()) return probe.status();
      return FitMeasure{probe.value()->Fits(usable), static_cast<double>(probe.value()->Need())};
    };
  }

  BeyondFn Beyond(Precision p, const std::vector<std::string>& ckpt, int64_t usable) {
    return [this, p, ckpt, usable](int64_t batch) -> Result<bool> {
      auto probe = At(batch, p, ckpt, usable);
      if (!probe.ok()) return probe.status();
      return probe.value()->allocated_need > usable;
    };
  }

  FitFn Fits(Precision p, const std::vector<std::string>& ckpt, int64_t usable) {
    return [this, p, ckpt, usable](int64_t batch) -> Result<bool> {
      auto probe = At(batch, p, ckpt, usable);
      if (!probe.ok()) return probe.status();
      return probe.value()->Fits(usable);
    };
  }

 private:
  Result<const Probe*> Make(const std::string& key, int64_t batch, Precision p,
                            const std::vector<std::string>& ckpt, PlanDetail detail,
                            int64_t limit) {
    auto g = Bound(batch);  // A shape error names the batch.
    if (!g.ok()) return g.status();
    auto plan = planner_.PlanStep(BindingsAt(batch), p, ckpt, detail, limit);
    ++plans_;
    if (r_.on_plan) r_.on_plan({r_.base.dist.strategy, p, ckpt.size(), batch});
    if (!plan.ok()) return Status::Error("batch " + std::to_string(batch) + ": " + plan.message());
    if (plan->over_limit) {
      auto probe = std::make_unique<Probe>();
      probe->over_limit = true;
      probe->device = plan->peak.reserved_bytes + r_.context_bytes;
      probe->allocated_need = plan->peak.allocated_bytes + r_.context_bytes;  // a lower bound
      const Probe* out = probe.get();
      cache_[key] = std::move(probe);
      return out;
    }
    auto probe = std::make_unique<Probe>();
    probe->saved = SavedActivationBytes(plan.value());
    probe->planned_streams = detail == PlanDetail::kStreams;
    probe->streams = std::move(plan->streams);
    plan->streams.clear();
    probe->plan = std::move(plan.value());
    probe->plan.timeline.clear();
    probe->plan.timeline.shrink_to_fit();
    const Plan& pl = probe->plan;
    const int64_t reserved =
        std::max({pl.peak.reserved_bytes, pl.first_step.reserved_bytes, pl.steady.reserved_bytes});
    probe->device = reserved + r_.context_bytes + pl.rank.nccl_bytes;
    probe->uncertain = UncertaintyBytes(pl);
    probe->allocated_need = std::max({pl.peak.allocated_bytes, pl.first_step.allocated_bytes,
                                      pl.steady.allocated_bytes}) +
                            r_.context_bytes + pl.rank.nccl_bytes + probe->uncertain;
    probe->int32_overflow = pl.int32_overflow.elements > 0;
    probe->fixed = r_.context_bytes + pl.rank.nccl_bytes;
    for (Category k : {Category::kParameters, Category::kGradients, Category::kOptimizerState}) {
      probe->fixed += pl.peak.breakdown.bytes[static_cast<int>(k)];
    }
    const Probe* out = probe.get();
    std::unique_ptr<Probe>& slot = cache_[key];
    if (slot) replaced_.push_back(std::move(slot));  // an over_limit one: still pointed to
    slot = std::move(probe);
    return out;
  }

  CandidatePlanner planner_;
  const AdviseRequest& r_;
  std::map<std::string, std::unique_ptr<Probe>> cache_;
  std::vector<std::unique_ptr<Probe>> replaced_;
  int plans_ = 0;
  bool recurrent_ = false;
};

// What the replay search read off one batch under its model: the live
// bytes of its sized events and, where those were within the budget, the
// replay's figures at the fit test's limit.
struct ReplayedBatch {
  int64_t live = -1;
  bool replayed = false;
  Result<StepFigures> figures = Status::Error("not replayed");
  /// Whether what was read depends on which storages are unmeasured: only
  /// a replay that ran to the end reads them (StepFigures::unbacked).
  bool ReadsFlags() const { return replayed && figures.ok() && !figures->over_limit; }
};
using ReplayedBatches = std::map<int64_t, ReplayedBatch>;

// One candidate's batch search by the batch model (BatchSearchKind::kReplay).
// A batch is judged by its plan where one was made, else by the model's
// replay; the answer is always planned, and accepted where the model
// predicts that plan's events (the batches around it were judged by a model
// that holds there), else the model is fitted again at the answer and the
// batch after it.
class ReplaySearch {
 public:
  /// `inherited`: the model another candidate's search ended with (the
  /// first precision's at this placement, one that moves the same bytes; may
  /// be null), taken over with this candidate's own rules before anything is
  /// planned; the answer's plan checks it. `inherited_replays`: what that
  /// search read off its batches under it (may be null). While this search
  /// judges by the model taken over, the events are the same: a batch is
  /// read from there where that did not depend on the unmeasured storages
  /// (past the budget on its live bytes, or its replay stopped over the
  /// limit) or they are the same.
  ReplaySearch(Searcher* s, Precision p, std::vector<std::string> ckpt, int64_t usable, int64_t cap,
               const BatchModel* inherited, const ReplayedBatches* inherited_replays)
      : s_(*s),
        p_(p),
        ckpt_(std::move(ckpt)),
        usable_(usable),
        cap_(cap),
        inherited_(inherited),
        inherited_replays_(inherited_replays) {
    options_ = Searcher::ProbeOptions(s_.request());
    options_.precision = p;
  }

  /// Batches judged by the model alone so far (replayed, or past the
  /// budget on their events' sizes).
  int replays() const { return replays_; }
  /// The model the search ended with (none where it planned alone), moved
  /// out of the search.
  std::optional<BatchModel> TakeModel() { return std::move(model_); }
  /// What it read off its batches under that model, moved out of the search.
  ReplayedBatches TakeReplayed() { return std::move(replayed_); }

  Result<BatchSearch> Run(int64_t start) {
    BatchSearch out;
    if (cap_ < 1) return out;
    // Batch 1 is viewed where more samples are copied (its plan makes other
    // events): a model starts from 2.
    start = std::min(std::max<int64_t>(start, 2), cap_);
    // A precision that moves the same bytes takes the model over before
    // anything is planned; its answer's plan checks it.
    if (inherited_ != nullptr) return Search(start, inherited_->Under(options_));
    auto first = PlanAt(start);
    if (!first.ok()) return first.status();
    // Nothing to replay (AdviseOneStrategy gives such requests the full
    // search): a plan at every batch.
    if (first.value()->streams.empty()) return PlansAlone(start);
    // The second batch: where the need reaches the budget, the need taken
    // as what does not grow with the batch (the weights, their gradients
    // and optimizer state at the peak, the context) plus a part
    // proportional to it; the batch after or before the first at least.
    const Probe& a = *first.value();
    const double fixed = static_cast<double>(a.fixed);
    const double need = static_cast<double>(a.Need());
    const double room = static_cast<double>(usable_) - fixed;
    const double guess =
        need > fixed && room > 0
            ? static_cast<double>(start) * room / (need - fixed)
            : static_cast<double>(start) * static_cast<double>(usable_) / std::max(need, 1.0);
    int64_t second = 0;
    if (a.Fits(usable_)) {
      second = guess >= static_cast<double>(cap_)
                   ? cap_
                   : std::max(start + 1, static_cast<int64_t>(guess));
      if (start == cap_) second = start - 1;
    } else {
      second = std::max<int64_t>(1, std::min(start - 1, static_cast<int64_t>(guess)));
      if (start == 1) second = 2;
    }
    if (second < 1 || second > cap_) {  // cap 1: that batch is the search
      out.batch = a.Fits(usable_) ? start : 0;
      return out;
    }
    auto b = PlanAt(second);
    if (!b.ok()) return b.status();
    Refit(start, second);
    return Search(start, std::nullopt);
  }

 private:
  // The rounds of Run from `model` (none: the one Refit left), the first
  // plan at `start`.
  Result<BatchSearch> Search(int64_t start, std::optional<BatchModel> model) {
    BatchSearch out;
    if (model) {
      model_ = std::move(model);
      on_inherited_ = true;
      judged_.clear();
      replayed_.clear();
      scratch_.clear();
    }
    int64_t answer = start;
    for (int round = 0; round < kReplayRounds; ++round) {
      if (!model_) {
        auto refit = RefitNearBoundary();
        if (!refit.ok()) return refit.status();
        if (!refit.value()) break;
      }
      const int64_t best = BestFitting();
      auto found = SearchModel(best > 0 ? best : start);
      if (!found.ok()) return found.status();
      answer = found.value();
      if (answer == 0) {
        // Nothing fits by the model: batch 1, planned, says whether it is so.
        auto one = PlanAt(1);
        if (!one.ok()) return one.status();
        if (!one.value()->Fits(usable_)) return out;
        auto refit = RefitAround(1);
        if (!refit.ok()) return refit.status();
        if (!refit.value()) break;
        continue;
      }
      auto planned = PlanAt(answer);
      if (!planned.ok()) return planned.status();
      const Probe& at = *planned.value();
      if (!at.Fits(usable_) && at.int32_overflow && at.Need() <= usable_) {
        // A kernel limit, which the replay does not see: no larger batch
        // can run either (the tensor grows with the batch).
        overflow_from_ = std::min(overflow_from_, answer);
        judged_.clear();
        continue;
      }
      // Accepted where the model judged the batches around the answer on
      // their own unmeasured rules and gives the answer's plan: its events,
      // or at least its figures (a size off the model's line, a cap
      // reached, need not reach the peak). A model error can then only have
      // judged a batch past the answer not to fit that does (one it judged
      // to fit would have been the answer, and planned).
      auto exact = Exact(answer, at);
      if (!exact.ok()) return exact.status();
      if (at.Fits(usable_) && exact.value()) {
        // The model judged the batches past the answer along a line, where a
        // recurrent net's workspaces step with cuDNN's algorithm; below
        // kDipScanBelow its reserved peak's dips of a batch or a few are
        // PyTorch's too (lstm_lm_g amp_bf16: 772, 832, 796, 916, 828 MiB
        // planned at 8 to 12, 828 measured at 12), so the batches past it
        // are planned, as the planned search's dip scan does.
        if (answer < kDipScanBelow && s_.recurrent()) {
          auto past = ScanPastDips(s_.Fits(p_, ckpt_, usable_), s_.Beyond(p_, ckpt_, usable_),
                                   answer, cap_, kDipScanMisses);
          if (!past.ok()) return past.status();
          answer = past->batch;
        }
        out.batch = answer;
        return out;
      }
      // Where the answer fits, a model around it (the batches past it are
      // judged there). Where it does not, the plan refutes the model's
      // "fits": its judgements there and above rest on nothing planned, and
      // none says "fits" there any more; a model between the planned batches
      // around the budget takes over.
      if (!at.Fits(usable_)) RaiseNoFitsFrom(answer);
      auto refit = at.Fits(usable_) ? RefitAround(answer) : Bracket();
      if (!refit.ok()) return refit.status();
      if (!refit.value()) break;
    }
    return PlansAlone(std::max<int64_t>(1, answer));
  }

  // Where no model holds: the same search with a plan at every batch (the
  // planned search's dip scan), from the largest planned batch that fits.
  Result<BatchSearch> PlansAlone(int64_t start) {
    BatchSearch out;
    const int64_t best = BestFitting();
    auto found = SearchFrom(NoLoneDips(s_.Measure(p_, ckpt_, usable_)),
                            s_.Beyond(p_, ckpt_, usable_), kDipScanMisses, best > 0 ? best : start);
    if (!found.ok()) return found.status();
    out.batch = found.value();
    return out;
  }

  void Refit(int64_t b1, int64_t b2) {
    model_.reset();
    on_inherited_ = false;
    judged_.clear();
    replayed_.clear();
    scratch_.clear();
    const Probe* x = s_.Cached(b1, p_, ckpt_);
    const Probe* y = s_.Cached(b2, p_, ckpt_);
    if (x == nullptr || y == nullptr || x->streams.empty() || y->streams.empty()) return;
    auto m = BatchModel::Fit(b1, x->streams, b2, y->streams);
    if (m.ok()) model_ = std::move(m.value());
  }

  // A model from `b` and the batch after it (before it at the cap), both
  // planned; false where they differ in more than sizes.
  Result<bool> RefitAround(int64_t b) {
    const int64_t next = b < cap_ ? b + 1 : b - 1;
    if (next < 1) return false;
    for (int64_t x : {b, next}) {
      auto planned = PlanAt(x);
      if (!planned.ok()) return planned.status();
    }
    Refit(b, next);
    return model_.has_value();
  }

  // The model said a batch fits that does not: a decision of the step parts
  // between the batches it was fitted at and that one. Between the largest
  // planned batch that fits and the smallest planned one above it that does
  // not, the middle is planned until the two around the budget make the
  // same events but for sizes (or are adjacent); the model is fitted there.
  Result<bool> Bracket() {
    for (;;) {
      const int64_t lo = BestFitting();
      if (lo == 0) return RefitNearBoundary();
      int64_t hi = 0;
      for (int64_t b : planned_) {
        const Probe* probe = s_.Cached(b, p_, ckpt_);
        if (b > lo && probe != nullptr && !probe->Fits(usable_) && (hi == 0 || b < hi)) hi = b;
      }
      if (hi == 0 || hi - lo <= 1) return RefitAround(lo);
      // Between two batches whose unmeasured rules differ, the model takes
      // both's as unmeasured: bisected further instead.
      Refit(lo, hi);
      if (model_ && model_->SameFlags()) {
        // Fitted below a planned batch that does not fit: past it, its
        // judgements would rest on nothing planned.
        RaiseNoFitsFrom(hi);
        return true;
      }
      auto mid = PlanAt(lo + (hi - lo) / 2);
      if (!mid.ok()) return mid.status();
    }
  }

  // Where the two first batches differ in more than sizes: a model around
  // the planned batch nearest the budget (the largest that fits, else the
  // smallest that does not).
  Result<bool> RefitNearBoundary() {
    const int64_t fits = BestFitting();
    if (fits > 0) return RefitAround(fits);
    int64_t least = 0;
    for (int64_t b : planned_) {
      if (least == 0 || b < least) least = b;
    }
    if (least == 0) return false;
    return RefitAround(least);
  }

  // Whether the model holds at `b`, planned as `at` (see Search).
  Result<bool> Exact(int64_t b, const Probe& at) {
    if (!model_ || !model_->FlagsExact()) return false;
    if (model_->Predicts(b, at.streams)) return true;
    auto planned = FiguresOf(at.streams, options_);
    if (!planned.ok()) return planned.status();
    auto modelled = model_->At(b, options_, -1, &scratch_);
    if (!modelled.ok()) return false;
    return planned->reserved == modelled->reserved && planned->allocated == modelled->allocated &&
           planned->unbacked == modelled->unbacked;
  }

  // From `b` on the model judges no batch to fit (a plan refuted it there,
  // or it was fitted below a planned batch that does not fit).
  void RaiseNoFitsFrom(int64_t b) {
    if (b < no_fits_from_) {
      no_fits_from_ = b;
      judged_.clear();
    }
  }

  // The largest planned batch that fits (0: none).
  int64_t BestFitting() const {
    int64_t best = 0;
    for (int64_t b : planned_) {
      const Probe* probe = s_.Cached(b, p_, ckpt_);
      if (probe != nullptr && probe->Fits(usable_)) best = std::max(best, b);
    }
    return best;
  }

  // The full probe at `b`, with its streams.
  Result<const Probe*> PlanAt(int64_t b) {
    planned_.insert(b);
    return s_.Planned(b, p_, ckpt_);
  }

  // Whether `b` fits, by its plan where it was planned, else by the model.
  Result<FitMeasure> MeasureOne(int64_t b) {
    if (const Probe* probe = s_.Cached(b, p_, ckpt_)) {
      return FitMeasure{probe->Fits(usable_), static_cast<double>(probe->Need())};
    }
    const Judged& j = Judge(b);
    return FitMeasure{j.fits, static_cast<double>(j.need)};
  }

  // `one` where from kDipScanBelow up a batch counts as fitting only where
  // the one before it fits too: a dip of one batch there is where a plan's
  // blocks fall into cached ones exactly (llama_gqa_b_train amp_bf16 plans
  // 145.6 GiB reserved at 72 and 74, 119.8 at 73), which PyTorch need not
  // repeat (llama_gqa amp_bf16 ran out of memory at such a batch, 215:
  // README, Accuracy); below, the recurrent nets' one-batch dips are
  // PyTorch's too (gru_lm fp32 at 12).
  static MeasureFn NoLoneDips(MeasureFn one) {
    return [one = std::move(one)](int64_t b) -> Result<FitMeasure> {
      auto m = one(b);
      if (!m.ok() || !m->fits || b <= kDipScanBelow) return m;
      auto before = one(b - 1);
      if (!before.ok()) return before.status();
      if (!before->fits) m->fits = false;
      return m;
    };
  }

  Result<bool> Beyond(int64_t b) {
    if (const Probe* probe = s_.Cached(b, p_, ckpt_)) return probe->allocated_need > usable_;
    return Judge(b).allocated_need > usable_;
  }

  // The model's figures at `b` as the probe would read them.
  struct Judged {
    bool fits = false;
    int64_t need = 0;
    int64_t allocated_need = 0;
  };
  const Judged& Judge(int64_t b) {
    auto it = judged_.find(b);
    if (it != judged_.end()) return it->second;
    Judged j;
    const int64_t context = s_.request().context_bytes;
    // Past the budget before any replay: the events' rounded sizes alone,
    // which the allocated (and reserved) bytes never go below.
    ++replays_;
    const ReplayedBatch& r = Replayed(b);
    const int64_t live = r.live;
    if (!r.replayed) {
      j.need = j.allocated_need = live < 0 ? INT64_MAX : live + context;
      return judged_.emplace(b, j).first->second;
    }
    const Result<StepFigures>& f = r.figures;
    if (!f.ok()) {
      // Sizes past what a plan can have: nothing this large fits.
      j.need = j.allocated_need = INT64_MAX;
    } else if (f->over_limit) {
      j.need = f->reserved + context;
      j.allocated_need = std::max(f->allocated, live) + context;
    } else {
      const int64_t uncertain = static_cast<int64_t>(
          std::ceil(static_cast<double>(f->unbacked) * kUnmeasuredErrorFactor));
      j.need = f->reserved + context + uncertain;
      j.allocated_need = f->allocated + context + uncertain;
      j.fits = j.need <= usable_ && b < overflow_from_ && b < no_fits_from_;
    }
    return judged_.emplace(b, j).first->second;
  }

  // The live bytes at `b` and, within the budget, the replay (one sure to
  // reserve more than the budget stops there: lower bounds, as a plan over
  // its limit gives them): At's figures. Kept until the model changes (a
  // batch is judged again when the batches that may fit change); read from
  // the inherited search's where that holds (see the constructor).
  const ReplayedBatch& Replayed(int64_t b) {
    auto own = replayed_.find(b);
    if (own != replayed_.end()) return own->second;
    if (on_inherited_ && inherited_replays_ != nullptr && inherited_ != nullptr) {
      auto it = inherited_replays_->find(b);
      if (it != inherited_replays_->end() &&
          (!it->second.ReadsFlags() || model_->SameFlagsAt(b, *inherited_))) {
        return replayed_.emplace(b, it->second).first->second;
      }
    }
    const int64_t context = s_.request().context_bytes;
    ReplayedBatch r;
    r.live = model_->SizeAt(b, &scratch_);
    if (r.live >= 0 && r.live + context <= usable_) {
      r.replayed = true;
      r.figures = FiguresOf(scratch_, options_, std::max<int64_t>(0, usable_ - context));
    }
    return replayed_.emplace(b, std::move(r)).first->second;
  }

  // LargestBatchPredicted from `start`, then past its answer the dip scan
  // (below kDipScanBelow, `misses` in a row) and the leaps, each batch
  // judged by `measure` (the model where nothing was planned, else plans).
  Result<int64_t> SearchFrom(const MeasureFn& measure, const BeyondFn& beyond, int misses,
                             int64_t start) {
    auto found = LargestBatchPredicted(measure, static_cast<double>(usable_), cap_,
                                       std::max<int64_t>(1, start));
    if (!found.ok()) return found.status();
    FitFn fits = [&measure](int64_t b) -> Result<bool> {
      auto m = measure(b);
      if (!m.ok()) return m.status();
      return m->fits;
    };
    int64_t answer = found->batch;
    for (;;) {
      if (answer < kDipScanBelow) {
        auto past = ScanPastDips(fits, beyond, answer, cap_, misses);
        if (!past.ok()) return past.status();
        answer = past->batch;
      }
      // Dips wider than the scan: a few batches further up (1/16, 1/8 and
      // 1/4 more), where LargestBatch's doubling steps land on them, taken
      // where the batch after fits too (a dip of more than one batch, as
      // Measure asks from kDipScanBelow up; lstm_lm_b amp_bf16's is 72-78,
      // in PyTorch too).
      int64_t leap_to = 0;
      const int64_t step = std::max<int64_t>(1, answer / 16);
      for (int k = 0; k < kReplayLeaps && leap_to == 0; ++k) {
        const int64_t b = answer + (step << k);
        if (b >= cap_ || b <= answer + 2) continue;
        auto over = beyond(b);
        if (!over.ok()) return over.status();
        if (over.value()) break;
        auto after = fits(b + 1);  // from kDipScanBelow up, it asks b too
        if (!after.ok()) return after.status();
        bool wide = after.value();
        if (wide && b + 1 <= kDipScanBelow) {
          auto at = fits(b);
          if (!at.ok()) return at.status();
          wide = at.value();
        }
        if (wide) leap_to = b + 1;
      }
      if (leap_to == 0) return answer;
      auto up = LargestBatchPredicted(measure, static_cast<double>(usable_), cap_, leap_to);
      if (!up.ok()) return up.status();
      answer = std::max(leap_to, up->batch);
    }
  }

  Result<int64_t> SearchModel(int64_t start) {
    return SearchFrom(
        NoLoneDips([this](int64_t b) { return MeasureOne(b); }),
        [this](int64_t b) { return Beyond(b); }, kReplayDipMisses, start);
  }

  Searcher& s_;
  Precision p_;
  std::vector<std::string> ckpt_;
  int64_t usable_;
  int64_t cap_;
  const BatchModel* inherited_;
  const ReplayedBatches* inherited_replays_;
  bool on_inherited_ = false;  // model_ is inherited_ Under this search's options
  ReplayedBatches replayed_;   // what was read under model_, by batch
  PlanOptions options_;
  std::optional<BatchModel> model_;
  std::vector<StepStream> scratch_;   // model_'s events, sized for the last batch judged
  std::map<int64_t, Judged> judged_;  // the model's, by batch
  std::set<int64_t> planned_;         // batches planned with streams
  int64_t overflow_from_ = INT64_MAX;
  int64_t no_fits_from_ = INT64_MAX;  // RaiseNoFitsFrom
  int replays_ = 0;
};

bool Ranks(const Candidate& a, const Candidate& b) {
  if (a.speed.samples_per_s != b.speed.samples_per_s) {
    return a.speed.samples_per_s > b.speed.samples_per_s;
  }
  if (a.batch != b.batch) return a.batch > b.batch;
  return a.checkpoint.size() < b.checkpoint.size();
}

// The rules of `cov` no measurement backs, comma-separated; only those that
// hold bytes at the peak where `holding_only`.
std::string UnbackedRules(const Coverage& cov, bool holding_only) {
  std::string out;
  for (const RuleShare& rs : cov.rules) {
    if (!rs.backed && (!holding_only || rs.peak_bytes > 0)) {
      out += (out.empty() ? "" : ", ") + rs.rule;
    }
  }
  return out;
}

}  // namespace

std::string UnmeasuredNote(const Candidate& c) {
  const Coverage& cov = c.plan.coverage;
  const std::string unmeasured = UnbackedRules(cov, false);
  if (unmeasured.empty()) return "";
  // Rules that run but hold none of the peak's bytes (a recompute that ends
  // before the peak) widen nothing: said so, not as "0.0 %, 0 MiB".
  const double share = cov.UnbackedShare();
  std::string held;
  if (share >= 0.0005) {
    char pct[64];
    std::snprintf(pct, sizeof pct, "%.1f %%", 100.0 * share);
    held = std::string(pct) + " of the planned peak rests on rules no measurement backs (" +
           unmeasured + "); the margin was widened by those bytes (" +
           std::to_string(c.uncertain_bytes >> 20) + " MiB)";
  } else {
    held = "rules no measurement backs run (" + unmeasured +
           ") but hold under 0.1 % of the planned peak (the margin is not widened for them)";
  }
  return std::string("UNMEASURED: ") + PrecisionName(c.precision) + " batch " +
         std::to_string(c.batch) + ": " + held +
         "; an unmeasured op can also miss allocations entirely: measure this model before " +
         "relying on the batch";
}

int64_t UncertaintyBytes(const Plan& plan) {
  return static_cast<int64_t>(
      std::ceil(static_cast<double>(plan.coverage.unbacked_bytes) * kUnmeasuredErrorFactor));
}

namespace {

Result<Advice> AdviseOneStrategy(const Graph& g, const AdviseRequest& r);

}  // namespace

Result<Advice> Advise(const Graph& g, const AdviseRequest& r) {
  if (r.strategies.empty()) return AdviseOneStrategy(g, r);
  // Each strategy searched on its own, with the global batch split over the
  // ranks; the candidates of all ranked together.
  Advice all;
  bool first = true;
  for (ParallelStrategy st : r.strategies) {
    AdviseRequest one = r;
    one.strategies.clear();
    one.base.dist.strategy = st;
    one.base.dist.world_size = st == ParallelStrategy::kSingle ? 1 : r.world_size;
    if (st != ParallelStrategy::kFsdp && st != ParallelStrategy::kZero3) {
      one.base.dist.fsdp_units.clear();
      one.base.dist.reshard_after_forward = true;
    }
    const int64_t ranks = one.base.dist.world_size;
    if (r.global_batch > 0)
      one.global_batch = r.global_batch / ranks + (r.global_batch % ranks != 0);
    auto a = AdviseOneStrategy(g, one);
    if (!a.ok()) return Status::Error(std::string(EnumName(st)) + ": " + a.message());
    if (first) {
      all.usable_bytes = a->usable_bytes;
      all.blocks = a->blocks;
      first = false;
    }
    for (Candidate& c : a->ranked) all.ranked.push_back(std::move(c));
    for (Candidate& c : a->failing) all.failing.push_back(std::move(c));
    for (const std::string& n : a->notes) {
      const std::string note = std::string(EnumName(st)) + ": " + n;
      all.notes.push_back(note);
    }
    all.plans += a->plans;
  }
  std::stable_sort(all.ranked.begin(), all.ranked.end(), Ranks);
  return all;
}

namespace {

// One precision x placement of AdviseOneStrategy, searched by a worker:
// what it needs from the tasks before it, and what it leaves for them and
// for the advice. `all` also plans the optimal placement after its search.
struct PlacementTask {
  Precision p = Precision::kFp32;
  CheckpointStrategy pl = CheckpointStrategy::kNone;
  std::vector<std::string> checkpoint;  ///< FixedPlacement's modules.
  std::vector<size_t> deps;             ///< Tasks whose answers it reads.
  int none = -1;                        ///< This precision's kNone task.
  int prev_none = -1;                   ///< The previous precision's kNone task.
  int prev_same = -1;                   ///< The previous precision's task of this placement.
  int64_t hint = 1;                     ///< kNone: the last answer of an earlier precision.
  // Outputs.
  bool started = false, done = false;
  Status error;
  int64_t answer = 0;                       ///< Its batch (0: none fits, or skipped).
  std::shared_ptr<const BatchModel> model;  ///< The replay search's, at its end, if read.
  bool model_read = false;                  ///< A later task reads `model`.
  /// What the search read off its batches under `model` (TakeReplayed).
  std::shared_ptr<const ReplayedBatches> replayed;
  std::vector<Candidate> candidates;  ///< Kept ones, in order.
  /// Notes in order; `no_saving` ones are kept only for the first task
  /// that has one (the advice warns once).
  std::vector<std::pair<bool, std::string>> notes;
  int plans = 0, replays = 0;
};

// Everything a task reads that no task writes.
struct AdviseShared {
  const AdviseRequest& r;
  const BlockChain& blocks;
  int64_t usable = 0;
  int64_t cap = 0;
  int64_t kernels = 0;
};

// The batch run for `c` at its searched batch, its plan and what is read
// off it (AdviseOneStrategy's candidates all go through here).
Status FinishCandidate(Searcher& s, const AdviseShared& sh, Candidate* c, PlacementTask* t) {
  const AdviseRequest& r = sh.r;
  // The batch actually run: with gradient accumulation, the smallest
  // micro-batch that needs no more steps than the largest one.
  int64_t run = c->batch;
  if (c->batch > 0 && r.global_batch > 0) {
    // Ceiling divisions that cannot overflow (global batch up to 2^63-1).
    const int64_t gb = r.global_batch;
    c->grad_accumulation_steps = gb / c->batch + (gb % c->batch != 0 ? 1 : 0);
    const int64_t steps = c->grad_accumulation_steps;
    run = gb / steps + (gb % steps != 0 ? 1 : 0);
  }
  if (c->batch == 0) run = 1;
  auto probe = s.At(run, c->precision, c->checkpoint);
  if (!probe.ok()) return probe.status();
  if (c->batch > 0 && run != c->batch && probe.value()->device > sh.usable) {
    // The peak is not monotone in the batch: the smaller micro-batch
    // does not fit where the largest does; run the largest.
    run = c->batch;
    probe = s.At(run, c->precision, c->checkpoint);
    if (!probe.ok()) return probe.status();
  }
  c->micro_batch = c->batch == 0 ? 0 : run;
  c->plan = probe.value()->plan;
  c->device_bytes = probe.value()->device;
  c->uncertain_bytes = probe.value()->uncertain;
  c->headroom_bytes = r.budget_bytes - c->device_bytes;
  if (c->batch > 0 && c->batch < sh.cap) {
    // Stopped by a kernel limit rather than by memory? Only a probe that is
    // not over the budget matters here. The replay search planned it where
    // it might be so (its kernel limits are not replayed).
    // The replay search plans it only where the answer already keeps an
    // allowance for unmeasured rules, to say whether that is what stops it.
    const bool replay = r.search == BatchSearchKind::kReplay;
    const Probe* next = replay ? s.Cached(c->batch + 1, c->precision, c->checkpoint) : nullptr;
    if (next == nullptr &&
        (!replay || (c->uncertain_bytes > 0 && c->strategy == CheckpointStrategy::kNone))) {
      auto at = s.At(c->batch + 1, c->precision, c->checkpoint, sh.usable);
      if (!at.ok()) return at.status();
      next = at.value();
    }
    if (next != nullptr && !next->over_limit && next->int32_overflow && next->Need() <= sh.usable) {
      const KernelLimit& k = next->plan.int32_overflow;
      c->note = "batch limited by a 32-bit kernel index: at batch " + std::to_string(c->batch + 1) +
                ", node '" + k.node + "' (" + k.op_type + ") would see " +
                std::to_string(k.elements) + " elements, over PyTorch's limit of 2^31 - 1";
      t->notes.emplace_back(false, std::string(PrecisionName(c->precision)) + ": " + c->note);
    } else if (next != nullptr && !next->over_limit && !next->int32_overflow &&
               next->uncertain > 0 && next->device <= sh.usable && next->Need() > sh.usable &&
               c->strategy == CheckpointStrategy::kNone) {
      // Stopped by the allowance for unmeasured rules (where a batch puts
      // tensors past 2^31 elements, often all at once): said, or the
      // headroom left looks unexplained.
      const std::string rules = UnbackedRules(next->plan.coverage, true);
      char figures[160];
      std::snprintf(figures, sizeof figures,
                    "needs %.2f GiB of the %.2f GiB usable, but %.2f GiB of its peak",
                    static_cast<double>(next->device) / (1 << 30),
                    static_cast<double>(sh.usable) / (1 << 30),
                    static_cast<double>(next->uncertain) / (1 << 30));
      c->note = "batch limited by the allowance for unmeasured rules: batch " +
                std::to_string(c->batch + 1) + " " + figures +
                " rests on rules no measurement backs" + (rules.empty() ? "" : " (" + rules + ")") +
                ", kept again in reserve; measure the model at that batch to lift the limit";
      t->notes.emplace_back(false, std::string(PrecisionName(c->precision)) + ": " + c->note);
    }
  }
  const double fb = static_cast<double>(c->plan.forward_flops + c->plan.backward_flops);
  c->recompute_overhead = fb > 0 ? c->plan.recompute_flops / fb : 0.0;
  c->speed = EstimateSpeed(c->plan, probe.value()->saved, r.device, sh.kernels, r.speed,
                           c->grad_accumulation_steps);
  return Status();
}

// The cheapest placement at the largest batch that checkpointing everything
// allows, or at the global batch when that lies between the largest batch
// without checkpointing and that one (no gradient accumulation then); false
// when none is found.
Result<bool> OptimalPlacement(Searcher& s, const AdviseShared& sh, Precision p, int64_t b_none,
                              int64_t b_all, const BatchModel* none_model, Candidate* c,
                              PlacementTask* t) {
  const AdviseRequest& r = sh.r;
  if (b_all <= b_none || b_all == 0) return false;
  const int64_t b = r.global_batch > b_none && r.global_batch < b_all ? r.global_batch : b_all;
  // What the step without checkpointing needs at b, which only steers the
  // choice (each choice is planned): the replay search's model there, else
  // a plan.
  int64_t none_device = -1, none_need = -1;
  if (none_model != nullptr) {
    PlanOptions o = Searcher::ProbeOptions(r);
    o.precision = p;
    auto f = none_model->At(b, o);
    if (f.ok()) {
      none_device = f->reserved + r.context_bytes;
      none_need = none_device + static_cast<int64_t>(std::ceil(static_cast<double>(f->unbacked) *
                                                               kUnmeasuredErrorFactor));
    }
  }
  if (none_device < 0) {
    auto none = s.At(b, p, {});
    if (!none.ok()) return none.status();
    none_device = none.value()->device;
    none_need = none.value()->Need();
  }
  auto every = s.At(b, p, FixedPlacement(sh.blocks, CheckpointStrategy::kAll));
  if (!every.ok()) return every.status();
  auto bound = s.Bound(b);
  if (!bound.ok()) return bound.status();
  const std::vector<BlockCost> costs = EstimateBlockCosts(*bound.value(), sh.blocks);
  int64_t total = 0;
  for (const BlockCost& bc : costs) total += bc.bytes;
  const double saving = static_cast<double>(none_device - every.value()->device);
  if (saving <= 0 || total <= 0) {
    t->notes.emplace_back(true, "checkpointing every block saves nothing in the plan at batch " +
                                    std::to_string(b) + ": optimal placement skipped");
    return false;
  }
  // Linear model: each block's share of the calibrated saving is
  // proportional to its activation bytes.
  const double alpha = saving / static_cast<double>(total);
  double need = (none_need - sh.usable) / alpha;
  for (int attempt = 0; attempt < 5; ++attempt) {
    std::vector<int> chosen;
    if (!CheapestCover(costs, static_cast<int64_t>(std::ceil(need)), &chosen)) break;
    std::vector<std::string> mods;
    mods.reserve(chosen.size());
    for (int i : chosen) mods.push_back(sh.blocks.blocks[i].module);
    auto v = s.At(b, p, mods);
    if (!v.ok()) return v.status();
    if (v.value()->Fits(sh.usable)) {
      c->checkpoint = mods;
      c->batch = b;
      return true;
    }
    // Tighten by the overshoot (and a bit more each round).
    need += (v.value()->Need() - sh.usable) / alpha * (1.0 + 0.25 * attempt) + 1.0;
  }
  return false;
}

// Whether two precisions hold every tensor in the same dtype sizes (the two
// AMP kinds, the two whole-model 16-bit casts): one's step makes the other's
// events, unless a rule parts them (cuDNN runs no bf16 RNN), which the replay
// search's plans check.
bool SameBytes(Precision a, Precision b) {
  auto kind = [](Precision p) {
    switch (p) {
      case Precision::kAmpBf16:
      case Precision::kAmpFp16:
        return 1;
      case Precision::kBf16:
      case Precision::kFp16:
        return 2;
      default:
        return 0;
    }
  };
  return a == b || (kind(a) != 0 && kind(a) == kind(b));
}

// The task whose batch model `t` takes over in the replay search (the
// previous precision's at this placement, one that moves the same bytes),
// or -1.
int ModelSource(const std::vector<PlacementTask>& tasks, const PlacementTask& t) {
  return t.prev_same >= 0 && SameBytes(t.p, tasks[t.prev_same].p) ? t.prev_same : -1;
}

// Runs task `t` on worker searcher `s`; `tasks` holds its finished deps.
Status RunTask(Searcher& s, const AdviseShared& sh, std::vector<PlacementTask>& tasks,
               PlacementTask& t) {
  const AdviseRequest& r = sh.r;
  const int plans_before = s.plans();
  const int64_t b_none = t.none >= 0 ? tasks[t.none].answer : 0;
  Candidate c;
  c.precision = t.p;
  c.strategy = t.pl;
  c.checkpoint = t.checkpoint;
  int64_t start = t.pl == CheckpointStrategy::kNone ? t.hint : std::max<int64_t>(1, b_none);
  if (r.search == BatchSearchKind::kReplay && t.pl != CheckpointStrategy::kNone && b_none > 0 &&
      t.prev_none >= 0 && t.prev_same >= 0 && tasks[t.prev_none].answer > 0 &&
      tasks[t.prev_same].answer > 0) {
    // The previous precision's answer for this placement, scaled by what
    // the two precisions fit without checkpointing.
    start =
        std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(b_none) *
                                                  static_cast<double>(tasks[t.prev_same].answer) /
                                                  static_cast<double>(tasks[t.prev_none].answer)));
  }
  if (r.search == BatchSearchKind::kReplay) {
    const int source = ModelSource(tasks, t);
    const BatchModel* inherited = source >= 0 ? tasks[source].model.get() : nullptr;
    const ReplayedBatches* inherited_replays =
        inherited != nullptr ? tasks[source].replayed.get() : nullptr;
    ReplaySearch search(&s, t.p, c.checkpoint, sh.usable, sh.cap, inherited, inherited_replays);
    auto found = search.Run(start);
    if (!found.ok()) return found.status();
    c.batch = found->batch;
    c.replays = search.replays();
    t.replays += search.replays();
    if (t.model_read) {
      std::optional<BatchModel> model = search.TakeModel();
      if (model) {
        t.model = std::make_shared<const BatchModel>(std::move(*model));
        t.replayed = std::make_shared<const ReplayedBatches>(search.TakeReplayed());
      }
    }
  } else {
    auto found = r.search == BatchSearchKind::kPredicted
                     ? LargestBatchPredicted(s.Measure(t.p, c.checkpoint, sh.usable),
                                             static_cast<double>(sh.usable), sh.cap, start)
                     : LargestBatch(s.Fits(t.p, c.checkpoint, sh.usable), sh.cap, start);
    if (!found.ok()) return found.status();
    c.batch = found->batch;
    if (c.batch < kDipScanBelow) {
      auto past = ScanPastDips(s.Fits(t.p, c.checkpoint, sh.usable),
                               s.Beyond(t.p, c.checkpoint, sh.usable), c.batch, sh.cap);
      if (!past.ok()) return past.status();
      c.batch = past->batch;
    }
  }
  t.answer = c.batch;
  Status st = FinishCandidate(s, sh, &c, &t);
  if (!st.ok()) return st;
  c.probes = s.plans() - plans_before;
  s.DropStreams();
  bool keep = true;
  if (t.pl != CheckpointStrategy::kNone && c.batch > 0 && c.batch <= b_none) {
    // Dominated: no larger batch, and recomputation on top.
    keep = false;
    if (t.pl == CheckpointStrategy::kAll) {
      auto a = s.At(b_none, t.p, c.checkpoint);
      auto n = s.At(b_none, t.p, {});
      if (a.ok() && n.ok() && a.value()->device >= n.value()->device) {
        // The peak lies where no repeated block runs (a feature encoder
        // before the blocks, the loss over a large vocabulary, ...).
        const Peak& at = n.value()->plan.peak;
        std::string where = "at " + at.node;
        if (!at.module.empty()) where += " in " + at.module;
        where += std::string(", ") + PhaseName(at.phase);
        t.notes.emplace_back(true, "checkpointing every block does not lower the planned peak (" +
                                       std::string(PrecisionName(t.p)) + ", batch " +
                                       std::to_string(b_none) + "): it is outside the blocks (" +
                                       where + ")");
      }
    }
  }
  if (keep) t.candidates.push_back(std::move(c));
  if (t.pl == CheckpointStrategy::kAll) {
    const int plans_optimal = s.plans();
    Candidate o;
    o.precision = t.p;
    o.strategy = CheckpointStrategy::kOptimal;
    auto found = OptimalPlacement(s, sh, t.p, b_none, t.answer, tasks[t.none].model.get(), &o, &t);
    if (!found.ok()) return found.status();
    const std::vector<std::string> none_list;
    const std::vector<std::string> sqrt_list = FixedPlacement(sh.blocks, CheckpointStrategy::kSqrt);
    if (found.value() && o.checkpoint != none_list && o.checkpoint != sqrt_list &&
        o.checkpoint != t.checkpoint) {
      st = FinishCandidate(s, sh, &o, &t);
      if (!st.ok()) return st;
      o.probes = s.plans() - plans_optimal;
      if (!(o.batch > 0 && o.batch <= b_none)) t.candidates.push_back(std::move(o));
    }
  }
  t.plans += s.plans() - plans_before;
  return Status();
}

// The worker count: the request's, else the machine's cores, at most `tasks`.
size_t Workers(const AdviseRequest& r, size_t tasks) {
  size_t n = r.threads > 0 ? static_cast<size_t>(r.threads) : std::thread::hardware_concurrency();
  return std::max<size_t>(1, std::min(n == 0 ? 1 : n, tasks));
}

Result<Advice> AdviseOneStrategy(const Graph& g, const AdviseRequest& request) {
  // Plans with nothing to replay (several GPUs, a device limit) get the full
  // search, as it starts each candidate.
  AdviseRequest r = request;
  if (r.search == BatchSearchKind::kReplay && !PlansStepStreams(Searcher::ProbeOptions(r))) {
    r.search = BatchSearchKind::kFull;
  }
  Advice advice;
  if (r.budget_bytes <= 0) return Status::Error("the memory budget must be positive");
  if (!(r.margin >= 0 && r.margin < 1)) return Status::Error("the margin must be in [0, 100) %");
  advice.usable_bytes =
      static_cast<int64_t>(std::floor(static_cast<double>(r.budget_bytes) * (1.0 - r.margin)));
  if (r.checkpoint) {
    advice.blocks = FindBlocks(g);
    if (advice.blocks.blocks.empty()) {
      advice.notes.push_back("no repeated modules found (Node::scope): checkpointing not tried");
    }
  }
  const bool ckpt = r.checkpoint && !advice.blocks.blocks.empty();
  const AdviseShared sh{r, advice.blocks, advice.usable_bytes, std::max<int64_t>(1, r.max_batch),
                        CountKernels(g)};

  // The tasks, in the order a single search takes them: per precision the
  // placement without checkpointing, then sqrt, then all (and optimal).
  // Each starts from answers before it (LargestBatch's start, the replay
  // search's hints): those are its dependencies, and nothing else of one
  // task reaches another, so the advice is the same for any worker count.
  std::vector<PlacementTask> tasks;
  int prev_none = -1;
  std::map<CheckpointStrategy, int> prev_task;
  for (Precision p : r.precisions) {
    if (PeakFlops(r.device, p) <= 0) {
      advice.notes.push_back(
          std::string(PrecisionName(p)) + " skipped: " + r.device.display + " has no " +
          (p == Precision::kAmpBf16 || p == Precision::kBf16 ? "bf16" : "fp16") + " support");
      continue;
    }
    std::vector<CheckpointStrategy> placements = {CheckpointStrategy::kNone};
    if (ckpt) {
      placements.push_back(CheckpointStrategy::kSqrt);
      placements.push_back(CheckpointStrategy::kAll);
    }
    const int none = static_cast<int>(tasks.size());
    std::map<CheckpointStrategy, int> this_task;
    for (CheckpointStrategy pl : placements) {
      PlacementTask t;
      t.p = p;
      t.pl = pl;
      t.checkpoint = FixedPlacement(advice.blocks, pl);
      if (pl == CheckpointStrategy::kAll &&
          t.checkpoint == FixedPlacement(advice.blocks, CheckpointStrategy::kSqrt)) {
        continue;  // the same modules as sqrt
      }
      t.prev_none = prev_none;
      auto same = prev_task.find(pl);
      t.prev_same = same == prev_task.end() ? -1 : same->second;
      if (pl == CheckpointStrategy::kNone) {
        // The replay search starts a precision that moves other bytes than
        // the first from scratch, beside the first's search.
        if (r.search == BatchSearchKind::kReplay && prev_none >= 0 &&
            !SameBytes(p, tasks[prev_none].p)) {
          t.prev_none = -1;
          t.prev_same = -1;
        }
        if (t.prev_none >= 0) t.deps.push_back(t.prev_none);
      } else {
        t.none = none;
        t.deps.push_back(none);
        if (r.search == BatchSearchKind::kReplay) {
          if (t.prev_none >= 0) t.deps.push_back(t.prev_none);
          if (t.prev_same >= 0) t.deps.push_back(t.prev_same);
        }
      }
      this_task[pl] = static_cast<int>(tasks.size());
      tasks.push_back(std::move(t));
    }
    // The replay search starts every later precision from the first's
    // answers (they need not wait for each other); the planned searches
    // from the previous precision's.
    if (r.search != BatchSearchKind::kReplay || prev_none < 0) {
      prev_none = none;
      prev_task = this_task;
    }
  }
  // The replay search's models that a later task reads (RunTask, the one
  // it inherits; OptimalPlacement, this precision's without checkpointing):
  // only those are kept past their task.
  for (const PlacementTask& t : tasks) {
    const int source = ModelSource(tasks, t);
    if (source >= 0) tasks[source].model_read = true;
    if (t.pl == CheckpointStrategy::kAll && t.none >= 0) tasks[t.none].model_read = true;
  }
  // kNone's start: the answer of the precision it starts from, or (planned
  // searches) the last answer of an earlier precision that fits; else 1.
  auto hint_of = [&tasks, &r](const PlacementTask& t) {
    int64_t hint = 1;
    if (r.search == BatchSearchKind::kReplay) {
      if (t.prev_none >= 0 && tasks[t.prev_none].answer > 0) hint = tasks[t.prev_none].answer;
      return hint;
    }
    for (size_t i = 0; &tasks[i] != &t; ++i) {
      if (tasks[i].pl == CheckpointStrategy::kNone && tasks[i].answer > 0) hint = tasks[i].answer;
    }
    return hint;
  };

  std::mutex mu;
  std::condition_variable changed;
  size_t first_error = tasks.size();  // no task after it is started
  std::mutex progress;
  AdviseRequest per_worker = r;
  if (r.on_plan) {
    per_worker.on_plan = [&r, &progress](const AdviseProgress& step) {
      std::lock_guard<std::mutex> lock(progress);
      r.on_plan(step);
    };
  }
  auto worker = [&]() {
    std::unique_ptr<Searcher> s;
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      PlacementTask* next = nullptr;
      bool running = false;
      for (size_t i = 0; i < tasks.size() && i < first_error; ++i) {
        PlacementTask& t = tasks[i];
        if (t.started) {
          running = running || !t.done;
          continue;
        }
        bool ready = true;
        for (size_t d : t.deps) ready = ready && tasks[d].done;
        if (ready) {
          next = &t;
          break;
        }
      }
      if (next == nullptr) {
        if (!running) return;
        changed.wait(lock);
        continue;
      }
      next->started = true;
      if (next->pl == CheckpointStrategy::kNone) next->hint = hint_of(*next);
      lock.unlock();
      if (!s) s = std::make_unique<Searcher>(g, per_worker);
      Status st = RunTask(*s, sh, tasks, *next);
      lock.lock();
      next->error = st;
      next->done = true;
      if (!st.ok()) {
        first_error = std::min(first_error, static_cast<size_t>(next - tasks.data()));
      }
      changed.notify_all();
    }
  };
  const size_t workers = Workers(r, tasks.size());
  std::vector<std::thread> threads;
  for (size_t w = 1; w < workers; ++w) threads.emplace_back(worker);
  worker();
  for (std::thread& t : threads) t.join();

  bool warned_no_saving = false;
  for (PlacementTask& t : tasks) {
    if (!t.error.ok()) return t.error;
    for (auto& [no_saving, note] : t.notes) {
      if (no_saving && warned_no_saving) continue;
      warned_no_saving = warned_no_saving || no_saving;
      advice.notes.push_back(std::move(note));
    }
    for (Candidate& c : t.candidates) {
      if (c.batch > 0) {
        advice.ranked.push_back(std::move(c));
      } else {
        advice.failing.push_back(std::move(c));
      }
    }
    advice.plans += t.plans;
    advice.replays += t.replays;
  }
  std::stable_sort(advice.ranked.begin(), advice.ranked.end(), Ranks);
  for (const Candidate& c : advice.ranked) {
    std::string note = UnmeasuredNote(c);
    if (note.empty()) continue;
    advice.notes.push_back(std::move(note));
    break;
  }
  return advice;
}

}  // namespace

}  // namespace memplan
