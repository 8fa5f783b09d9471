#include "planner/advisor.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>

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
  /// What must fit the usable budget.
  int64_t Need() const { return device + uncertain; }
  bool Fits(int64_t usable) const { return !over_limit && !int32_overflow && Need() <= usable; }
};

class Searcher {
 public:
  Searcher(const Graph& g, const AdviseRequest& r) : planner_(g, ProbeOptions(r)), r_(r) {}

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
    auto g = Bound(batch);  // A shape error names the batch.
    if (!g.ok()) return g.status();
    // Need = reserved + context + NCCL + allowance, the last two never
    // negative: a reserved peak above usable - context cannot fit.
    const int64_t limit =
        fit_usable >= 0 ? std::max<int64_t>(0, fit_usable - r_.context_bytes) : -1;
    auto plan = planner_.PlanStep(BindingsAt(batch), p, ckpt, PlanDetail::kPeaks, limit);
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
    const Probe* out = probe.get();
    std::unique_ptr<Probe>& slot = cache_[key];
    if (slot) replaced_.push_back(std::move(slot));  // an over_limit one: still pointed to
    slot = std::move(probe);
    return out;
  }

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
  CandidatePlanner planner_;
  const AdviseRequest& r_;
  std::map<std::string, std::unique_ptr<Probe>> cache_;
  std::vector<std::unique_ptr<Probe>> replaced_;
  int plans_ = 0;
};

bool Ranks(const Candidate& a, const Candidate& b) {
  if (a.speed.samples_per_s != b.speed.samples_per_s) {
    return a.speed.samples_per_s > b.speed.samples_per_s;
  }
  if (a.batch != b.batch) return a.batch > b.batch;
  return a.checkpoint.size() < b.checkpoint.size();
}

}  // namespace

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

Result<Advice> AdviseOneStrategy(const Graph& g, const AdviseRequest& r) {
  Advice advice;
  if (r.budget_bytes <= 0) return Status::Error("the memory budget must be positive");
  if (!(r.margin >= 0 && r.margin < 1)) return Status::Error("the margin must be in [0, 100) %");
  advice.usable_bytes =
      static_cast<int64_t>(std::floor(static_cast<double>(r.budget_bytes) * (1.0 - r.margin)));
  const int64_t usable = advice.usable_bytes;
  const int64_t cap = std::max<int64_t>(1, r.max_batch);
  Searcher s(g, r);
  if (r.checkpoint) {
    advice.blocks = FindBlocks(g);
    if (advice.blocks.blocks.empty()) {
      advice.notes.push_back("no repeated modules found (Node::scope): checkpointing not tried");
    }
  }
  const bool ckpt = r.checkpoint && !advice.blocks.blocks.empty();
  int64_t kernels = -1;
  int64_t hint = 1;
  bool warned_no_saving = false;
  std::vector<Candidate> all;

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
      placements.push_back(CheckpointStrategy::kOptimal);
    }
    int64_t b_none = 0, b_all = 0;
    std::vector<std::vector<std::string>> seen;
    for (CheckpointStrategy pl : placements) {
      Candidate c;
      c.precision = p;
      c.strategy = pl;
      const int plans_before = s.plans();
      if (pl != CheckpointStrategy::kOptimal) {
        c.checkpoint = FixedPlacement(advice.blocks, pl);
        if (pl != CheckpointStrategy::kNone &&
            std::find(seen.begin(), seen.end(), c.checkpoint) != seen.end()) {
          continue;
        }
        const int64_t start = pl == CheckpointStrategy::kNone ? hint : std::max<int64_t>(1, b_none);
        auto found = r.predicted_search
                         ? LargestBatchPredicted(s.Measure(p, c.checkpoint, usable),
                                                 static_cast<double>(usable), cap, start)
                         : LargestBatch(s.Fits(p, c.checkpoint, usable), cap, start);
        if (!found.ok()) return found.status();
        c.batch = found->batch;
        if (c.batch < kDipScanBelow) {
          auto past = ScanPastDips(s.Fits(p, c.checkpoint, usable),
                                   s.Beyond(p, c.checkpoint, usable), c.batch, cap);
          if (!past.ok()) return past.status();
          c.batch = past->batch;
        }
        if (pl == CheckpointStrategy::kNone) {
          b_none = c.batch;
          if (c.batch > 0) hint = c.batch;
        }
        if (pl == CheckpointStrategy::kAll) b_all = c.batch;
      } else {
        // The cheapest placement at the largest batch that checkpointing
        // everything allows, or at the global batch when that lies between
        // the largest batch without checkpointing and that one (no gradient
        // accumulation then).
        if (b_all <= b_none || b_all == 0) continue;
        const int64_t b =
            r.global_batch > b_none && r.global_batch < b_all ? r.global_batch : b_all;
        auto none = s.At(b, p, {});
        if (!none.ok()) return none.status();
        auto every = s.At(b, p, FixedPlacement(advice.blocks, CheckpointStrategy::kAll));
        if (!every.ok()) return every.status();
        auto bound = s.Bound(b);
        if (!bound.ok()) return bound.status();
        const std::vector<BlockCost> costs = EstimateBlockCosts(*bound.value(), advice.blocks);
        int64_t total = 0;
        for (const BlockCost& bc : costs) total += bc.bytes;
        const double saving = static_cast<double>(none.value()->device - every.value()->device);
        if (saving <= 0 || total <= 0) {
          if (!warned_no_saving) {
            advice.notes.push_back("checkpointing every block saves nothing in the plan at batch " +
                                   std::to_string(b) + ": optimal placement skipped");
            warned_no_saving = true;
          }
          continue;
        }
        // Linear model: each block's share of the calibrated saving is
        // proportional to its activation bytes.
        const double alpha = saving / static_cast<double>(total);
        double need = (none.value()->Need() - usable) / alpha;
        bool done = false;
        for (int attempt = 0; attempt < 5 && !done; ++attempt) {
          std::vector<int> chosen;
          if (!CheapestCover(costs, static_cast<int64_t>(std::ceil(need)), &chosen)) break;
          std::vector<std::string> mods;
          for (int i : chosen) mods.push_back(advice.blocks.blocks[i].module);
          auto v = s.At(b, p, mods);
          if (!v.ok()) return v.status();
          if (v.value()->Fits(usable)) {
            c.checkpoint = mods;
            done = true;
          } else {
            // Tighten by the overshoot (and a bit more each round).
            need += (v.value()->Need() - usable) / alpha * (1.0 + 0.25 * attempt) + 1.0;
          }
        }
        if (!done || std::find(seen.begin(), seen.end(), c.checkpoint) != seen.end()) continue;
        c.batch = b;
      }
      seen.push_back(c.checkpoint);
      // The batch actually run: with gradient accumulation, the smallest
      // micro-batch that needs no more steps than the largest one.
      int64_t run = c.batch;
      if (c.batch > 0 && r.global_batch > 0) {
        // Ceiling divisions that cannot overflow (global batch up to 2^63-1).
        const int64_t gb = r.global_batch;
        c.grad_accumulation_steps = gb / c.batch + (gb % c.batch != 0 ? 1 : 0);
        const int64_t steps = c.grad_accumulation_steps;
        run = gb / steps + (gb % steps != 0 ? 1 : 0);
      }
      if (c.batch == 0) run = 1;
      auto probe = s.At(run, p, c.checkpoint);
      if (!probe.ok()) return probe.status();
      if (c.batch > 0 && run != c.batch && probe.value()->device > usable) {
        // The peak is not monotone in the batch: the smaller micro-batch
        // does not fit where the largest does; run the largest.
        run = c.batch;
        probe = s.At(run, p, c.checkpoint);
        if (!probe.ok()) return probe.status();
      }
      c.micro_batch = c.batch == 0 ? 0 : run;
      c.plan = probe.value()->plan;
      c.device_bytes = probe.value()->device;
      c.uncertain_bytes = probe.value()->uncertain;
      c.headroom_bytes = r.budget_bytes - c.device_bytes;
      if (c.batch > 0 && c.batch < cap) {
        // Stopped by a kernel limit rather than by memory?
        // Only a probe that is not over the budget matters here.
        auto next = s.At(c.batch + 1, p, c.checkpoint, usable);
        if (!next.ok()) return next.status();
        if (!next.value()->over_limit && next.value()->int32_overflow &&
            next.value()->Need() <= usable) {
          const KernelLimit& k = next.value()->plan.int32_overflow;
          c.note = "batch limited by a 32-bit kernel index: at batch " +
                   std::to_string(c.batch + 1) + ", node '" + k.node + "' (" + k.op_type +
                   ") would see " + std::to_string(k.elements) +
                   " elements, over PyTorch's limit of 2^31 - 1";
          advice.notes.push_back(std::string(PrecisionName(p)) + ": " + c.note);
        }
      }
      const double fb = static_cast<double>(c.plan.forward_flops + c.plan.backward_flops);
      c.recompute_overhead = fb > 0 ? c.plan.recompute_flops / fb : 0.0;
      if (kernels < 0) kernels = CountKernels(g);
      c.speed = EstimateSpeed(c.plan, probe.value()->saved, r.device, kernels, r.speed,
                              c.grad_accumulation_steps);
      c.probes = s.plans() - plans_before;
      if (pl != CheckpointStrategy::kNone && c.batch > 0 && c.batch <= b_none) {
        // Dominated: no larger batch, and recomputation on top.
        if (pl == CheckpointStrategy::kAll && !warned_no_saving) {
          auto a = s.At(b_none, p, c.checkpoint);
          auto n = s.At(b_none, p, {});
          if (a.ok() && n.ok() && a.value()->device >= n.value()->device) {
            advice.notes.push_back(
                "checkpointing every block does not lower the planned peak (" +
                std::string(PrecisionName(p)) + ", batch " + std::to_string(b_none) +
                "): is PlanOptions::checkpoint_segments implemented in this build?");
            warned_no_saving = true;
          }
        }
        continue;
      }
      all.push_back(std::move(c));
    }
  }
  for (Candidate& c : all) {
    if (c.batch > 0) {
      advice.ranked.push_back(std::move(c));
    } else {
      advice.failing.push_back(std::move(c));
    }
  }
  std::stable_sort(advice.ranked.begin(), advice.ranked.end(), Ranks);
  for (const Candidate& c : advice.ranked) {
    const Coverage& cov = c.plan.coverage;
    std::string unmeasured;
    for (const RuleShare& rs : cov.rules) {
      if (!rs.backed) unmeasured += (unmeasured.empty() ? "" : ", ") + rs.rule;
    }
    if (unmeasured.empty()) continue;
    char pct[64];
    std::snprintf(pct, sizeof pct, "%.1f %%", 100.0 * cov.UnbackedShare());
    advice.notes.push_back(
        std::string("UNMEASURED: ") + PrecisionName(c.precision) + " batch " +
        std::to_string(c.batch) + ": " + pct + " of the planned peak rests on rules no " +
        "measurement backs (" + unmeasured + "); the margin was widened by those bytes (" +
        std::to_string(c.uncertain_bytes >> 20) +
        " MiB), but an unmeasured op can also miss allocations entirely: measure this model " +
        "before relying on the batch");
    break;
  }
  advice.plans = s.plans();
  return advice;
}

}  // namespace

}  // namespace memplan
