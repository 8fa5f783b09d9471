#include "planner/batch_model.h"

#include <algorithm>
#include <string>
#include <utility>

#include "planner/shape_inference.h"

namespace memplan {
namespace {

// One step kind's peaks over events [e0, e1), as PeakOf reads them: the
// allocated peak and the unmeasured rules' blocks live at its first event,
// the reserved peak from the level before the step (reset_peak_memory_stats
// keeps the cached segments).
struct KindPeak {
  int64_t allocated = 0;
  int64_t reserved = 0;
  int64_t unbacked = 0;
};

}  // namespace

Result<StepFigures> FiguresOf(const std::vector<StepStream>& streams, const PlanOptions& options,
                              int64_t reserved_limit) {
  if (streams.empty()) return Status::Error("no simulated step to replay");
  // Without an empty_cache the reserved bytes never fall: once above the
  // limit, every later peak is (PlanSchedule's fit test stops there too).
  bool can_stop = reserved_limit >= 0;
  for (const StepStream& st : streams) {
    for (const MemEvent& e : st.events) can_stop = can_stop && !e.empty_cache;
  }
  // Per variant, as PlanSchedule reads its replay: the first step is the
  // first iteration, the steady one the third.
  struct Variant {
    KindPeak first, steady;
    const KindPeak& Reported(StepKind k) const { return k == StepKind::kFirst ? first : steady; }
  };
  std::vector<Variant> vs;
  vs.reserve(streams.size());
  StepFigures f;
  for (const StepStream& st : streams) {
    if (st.iterations.size() < 3) return Status::Error("a training step needs three iterations");
    Variant v;
    KindPeak second;  // the second iteration's, for a third that repeats it
    const std::pair<KindPeak*, std::pair<size_t, size_t>> kinds[3] = {
        {&v.first, st.iterations[0]}, {&second, st.iterations[1]}, {&v.steady, st.iterations[2]}};
    std::vector<int64_t> block(st.storage_unbacked.size(), 0);  // live blocks by storage
    int64_t unbacked = 0;  // of the live blocks, the unmeasured rules'
    size_t kind = 0;       // the first of kinds whose range does not end by the event
    bool over = false;
    CachingAllocatorReplay replay(options.allocator);
    replay.Observe([&](size_t e, int64_t taken, int64_t allocated, int64_t reserved) {
      const MemEvent& ev = st.events[e];
      const size_t id = ev.empty_cache ? block.size() : static_cast<size_t>(ev.id - 1);
      if (id < block.size()) {
        int64_t& held = block[id];
        if (st.storage_unbacked[id]) unbacked += (ev.is_alloc ? taken : 0) - held;
        held = ev.is_alloc ? taken : 0;
      }
      // The iterations' ranges follow each other: the kind that holds
      // event e (if any) is the first whose range does not end by it.
      while (kind < 3 && e >= kinds[kind].second.second) ++kind;
      for (size_t k = kind; k < 3 && e + 1 >= kinds[k].second.first; ++k) {
        KindPeak* p = kinds[k].first;
        if (e >= kinds[k].second.first && allocated > p->allocated) {
          p->allocated = allocated;
          p->unbacked = unbacked;
        }
        p->reserved = std::max(p->reserved, reserved);  // the level before the step too
      }
      if (can_stop && reserved > reserved_limit) {
        over = true;
        f.reserved = std::max(f.reserved, reserved);
        return false;
      }
      return true;
    });
    // As PlanSchedule: where the allocator ends the second iteration as it
    // began it, the third repeats the second event for event, and its
    // figures are the second's.
    Status replayed = replay.Replay(st.events, st.iterations[1].first);
    bool repeated = false;
    if (replayed.ok() && !over) {
      const std::vector<int64_t> before = replay.State();
      replayed = replay.Replay(st.events, st.iterations[1].second);
      repeated = replayed.ok() && !over && replay.StateEquals(before);
    }
    if (replayed.ok() && !over && !repeated) replayed = replay.Replay(st.events, st.events.size());
    if (!replayed.ok()) return replayed;
    if (replay.result().oom) return Status::Error("the replay ran out of memory");
    if (repeated) v.steady = second;
    f.allocated = std::max({f.allocated, v.first.allocated, v.steady.allocated});
    if (over) {  // lower bounds, as Plan::over_limit has them
      f.over_limit = true;
      f.unbacked = 0;
      return f;
    }
    vs.push_back(v);
  }
  // MakePlanFrom: the reserved figures are the variant's whose reported
  // reserved peak is highest (the first of equals); each step kind's
  // allocated peak is the highest over the variants, and the coverage is
  // read where the reported one is.
  size_t kept = 0, most = 0;
  for (size_t i = 0; i < vs.size(); ++i) {
    if (vs[i].Reported(options.step).reserved > vs[kept].Reported(options.step).reserved) kept = i;
    if (vs[i].Reported(options.step).allocated > vs[most].Reported(options.step).allocated) {
      most = i;
    }
  }
  f.reserved = std::max(vs[kept].first.reserved, vs[kept].steady.reserved);
  f.unbacked = vs[most].Reported(options.step).unbacked;
  return f;
}

Result<BatchModel> BatchModel::Fit(int64_t b1, const std::vector<StepStream>& s1, int64_t b2,
                                   const std::vector<StepStream>& s2) {
  if (b1 == b2 || b1 < 1 || b2 < 1) return Status::Error("a model needs two batches");
  if (s1.empty() || s1.size() != s2.size()) {
    return Status::Error("the plans simulated different variants");
  }
  BatchModel m;
  m.b1_ = b1;
  m.b2_ = b2;
  const int64_t db = b2 - b1;
  for (size_t v = 0; v < s1.size(); ++v) {
    const StepStream& a = s1[v];
    const StepStream& b = s2[v];
    if (a.events.size() != b.events.size() || a.iterations != b.iterations ||
        a.storage_unbacked.size() != b.storage_unbacked.size()) {
      return Status::Error("the steps differ in their events");
    }
    std::vector<int64_t> grown(a.events.size(), 0);
    for (size_t e = 0; e < a.events.size(); ++e) {
      const MemEvent& x = a.events[e];
      const MemEvent& y = b.events[e];
      if (x.id != y.id || x.is_alloc != y.is_alloc || x.empty_cache != y.empty_cache) {
        return Status::Error("the steps differ at event " + std::to_string(e));
      }
      if (x.is_alloc && !x.empty_cache) grown[e] = y.bytes - x.bytes;  // both under 2^50
    }
    std::vector<int64_t> slope(grown.size(), 0);
    for (size_t e = 0; e < grown.size(); ++e)
      slope[e] = grown[e] % db == 0 ? grown[e] / db : kNoSlope;
    m.streams_.push_back(a);
    // A rule can be measured at one batch and not at the other (a kernel
    // heuristic's shape class): each batch's own flags at and past it,
    // unmeasured where either says so between them.
    const bool first_low = b1 < b2;
    const StepStream& low = first_low ? a : b;
    const StepStream& high = first_low ? b : a;
    m.low_flags_.push_back(low.storage_unbacked);
    m.high_flags_.push_back(high.storage_unbacked);
    m.low_rules_.push_back({low.storage_rule, low.rule_evidence});
    m.high_rules_.push_back({high.storage_rule, high.rule_evidence});
    m.grown_.push_back(std::move(grown));
    m.slope_.push_back(std::move(slope));
  }
  return m;
}

int64_t BatchModel::SizeOf(size_t v, size_t e, int64_t batch) const {
  const int64_t bytes = streams_[v].events[e].bytes;
  const int64_t grown = grown_[v][e];
  if (grown == 0) return bytes;
  __int128 sized = 0;
  const int64_t slope = slope_[v][e];
  if (slope != kNoSlope) {
    sized = bytes + static_cast<__int128>(slope) * (static_cast<__int128>(batch) - b1_);
  } else {
    // On the line through the two sizes, rounded down.
    const __int128 step = static_cast<__int128>(grown) * (static_cast<__int128>(batch) - b1_);
    const __int128 den = static_cast<__int128>(b2_) - b1_;
    __int128 q = step / den;
    if ((step % den != 0) && ((step < 0) != (den < 0))) --q;
    sized = bytes + q;
  }
  if (sized < 0 || sized > kMaxTensorBytes) return -1;
  return static_cast<int64_t>(sized);
}

bool BatchModel::SizeFor(int64_t batch, std::vector<StepStream>* out) const {
  if (batch < 1) return false;
  // Another model's streams (or another candidate's flags): copied afresh.
  bool same = out->size() == streams_.size();
  for (size_t v = 0; same && v < out->size(); ++v) {
    same = (*out)[v].events.size() == streams_[v].events.size() &&
           (*out)[v].iterations == streams_[v].iterations;
  }
  if (!same) *out = streams_;
  for (size_t v = 0; v < out->size(); ++v) {
    (*out)[v].storage_unbacked = FlagsAt(v, batch);
    std::vector<MemEvent>& events = (*out)[v].events;
    for (size_t e = 0; e < events.size(); ++e) {
      if (grown_[v][e] == 0) continue;
      const int64_t bytes = SizeOf(v, e, batch);
      if (bytes < 0) return false;
      events[e].bytes = bytes;
    }
  }
  return true;
}

namespace {

// The most bytes sized events hold at once, each rounded as the allocator
// rounds a request (BatchModel::SizeAt).
int64_t LiveBytesPeak(const std::vector<StepStream>& sized) {
  int64_t most = 0;
  for (const StepStream& st : sized) {
    std::vector<int64_t> held(st.storage_unbacked.size(), 0);
    int64_t live = 0;
    for (const MemEvent& ev : st.events) {
      if (ev.empty_cache) continue;
      const size_t id = static_cast<size_t>(ev.id - 1);
      if (id >= held.size()) continue;
      if (ev.is_alloc) {
        held[id] = RoundAllocation(ev.bytes);
        live += held[id];
        most = std::max(most, live);
      } else {
        live -= held[id];
        held[id] = 0;
      }
    }
  }
  return most;
}

}  // namespace

int64_t BatchModel::SizeAt(int64_t batch, std::vector<StepStream>* scratch) const {
  if (!SizeFor(batch, scratch)) return -1;
  return LiveBytesPeak(*scratch);
}

Result<StepFigures> BatchModel::At(int64_t batch, const PlanOptions& options,
                                   int64_t reserved_limit, std::vector<StepStream>* scratch) const {
  std::vector<StepStream> local;
  std::vector<StepStream>& sized = scratch != nullptr ? *scratch : local;
  if (!SizeFor(batch, &sized)) {
    return Status::Error("batch " + std::to_string(batch) + " is outside the model's sizes");
  }
  return FiguresOf(sized, options, reserved_limit);
}

bool BatchModel::SameEvents(int64_t batch, const std::vector<StepStream>& streams) const {
  if (streams.size() != streams_.size()) return false;
  std::vector<StepStream> sized;
  if (!SizeFor(batch, &sized)) return false;
  for (size_t v = 0; v < sized.size(); ++v) {
    const StepStream& a = sized[v];
    const StepStream& b = streams[v];
    if (a.iterations != b.iterations || a.events.size() != b.events.size() ||
        a.storage_unbacked.size() != b.storage_unbacked.size()) {
      return false;
    }
    for (size_t e = 0; e < a.events.size(); ++e) {
      const MemEvent& x = a.events[e];
      const MemEvent& y = b.events[e];
      if (x.id != y.id || x.is_alloc != y.is_alloc || x.empty_cache != y.empty_cache ||
          (x.is_alloc && !x.empty_cache && RoundAllocation(x.bytes) != RoundAllocation(y.bytes))) {
        return false;
      }
    }
  }
  return true;
}

std::vector<bool> BatchModel::FlagsAt(size_t v, int64_t batch) const {
  const int64_t lo = std::min(b1_, b2_), hi = std::max(b1_, b2_);
  if (batch <= lo) return low_flags_[v];
  if (batch >= hi) return high_flags_[v];
  std::vector<bool> either = low_flags_[v];
  for (size_t k = 0; k < either.size(); ++k) either[k] = either[k] || high_flags_[v][k];
  return either;
}

bool BatchModel::SameFlagsAt(int64_t batch, const BatchModel& other) const {
  if (streams_.size() != other.streams_.size()) return false;
  for (size_t v = 0; v < streams_.size(); ++v) {
    if (FlagsAt(v, batch) != other.FlagsAt(v, batch)) return false;
  }
  return true;
}

bool BatchModel::Predicts(int64_t batch, const std::vector<StepStream>& streams) const {
  if (!SameEvents(batch, streams)) return false;
  for (size_t v = 0; v < streams.size(); ++v) {
    if (FlagsAt(v, batch) != streams[v].storage_unbacked) return false;
  }
  return true;
}

Result<BatchModel> BatchModel::For(int64_t batch, const std::vector<StepStream>& streams) const {
  if (!SameEvents(batch, streams)) return Status::Error("the steps differ in their events");
  BatchModel m = *this;
  for (size_t v = 0; v < streams.size(); ++v) {
    m.streams_[v].storage_unbacked = streams[v].storage_unbacked;
    m.low_flags_[v] = streams[v].storage_unbacked;
    m.high_flags_[v] = streams[v].storage_unbacked;
    m.low_rules_[v] = {streams[v].storage_rule, streams[v].rule_evidence};
    m.high_rules_[v] = m.low_rules_[v];
  }
  return m;
}

BatchModel BatchModel::Under(const PlanOptions& options) const {
  BatchModel m = *this;
  for (size_t v = 0; v < m.streams_.size(); ++v) {
    const Rules& low = low_rules_[v];
    const Rules& high = high_rules_[v];
    m.low_flags_[v] = UnbackedStorages(low.storage_rule, low.evidence, options);
    m.high_flags_[v] = UnbackedStorages(high.storage_rule, high.evidence, options);
  }
  return m;
}

}  // namespace memplan
