#include "planner/distributed.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "planner/allocator_sim.h"
#include "planner/checked.h"
#include "planner/checkpoint.h"

namespace memplan {

namespace {

bool ShardsParams(ParallelStrategy s) {
  return s == ParallelStrategy::kFsdp || s == ParallelStrategy::kZero3;
}

}  // namespace

Status CheckDistOptions(const DistOptions& d, Mode mode) {
  if (d.world_size < 1 || d.world_size > 65536) {
    return Status::Error("--world-size " + std::to_string(d.world_size) +
                         ": must be from 1 to 65536");
  }
  if (d.strategy == ParallelStrategy::kSingle && d.world_size > 1) {
    return Status::Error("--world-size " + std::to_string(d.world_size) +
                         ": --strategy single plans one GPU; several need ddp, fsdp, zero1, "
                         "zero2 or zero3");
  }
  if (d.strategy != ParallelStrategy::kSingle && mode != Mode::kTrain) {
    return Status::Error(std::string("--strategy ") + EnumName(d.strategy) +
                         ": plans training (--mode train); inference runs one copy per GPU");
  }
  if (!ShardsParams(d.strategy) && !d.fsdp_units.empty()) {
    return Status::Error("--fsdp-units: applies to --strategy fsdp or zero3, not " +
                         std::string(EnumName(d.strategy)));
  }
  if (!ShardsParams(d.strategy) && !d.reshard_after_forward) {
    return Status::Error("--reshard-after-forward: applies to --strategy fsdp or zero3, not " +
                         std::string(EnumName(d.strategy)));
  }
  return Status();
}

Result<std::vector<std::string>> FsdpUnits(const Graph& g, const DistOptions& d) {
  if (d.fsdp_units.empty()) {
    std::vector<std::string> units;
    for (const Block& b : FindBlocks(g).blocks) units.push_back(b.module);
    return units;
  }
  auto r = ResolveCheckpointModules(g, d.fsdp_units);
  if (!r.ok()) {
    // The resolver's message names --checkpoint, whose rules these follow.
    std::string m = r.message();
    const size_t at = m.find("--checkpoint");
    if (at != std::string::npos) {
      m.replace(at, std::string("--checkpoint").size(), "--fsdp-units");
    } else {
      m = "--fsdp-units: " + m;
    }
    return Status::Error(m);
  }
  return r.value();
}

std::vector<int64_t> DdpBucketSizes(const std::vector<int64_t>& param_bytes) {
  std::vector<int64_t> buckets;
  int64_t open = 0;
  bool any = false;
  for (size_t k = param_bytes.size(); k-- > 0;) {
    open = SatAdd(open, param_bytes[k]);
    any = true;
    const int64_t cap = buckets.empty() ? kDdpFirstBucketBytes : kDdpBucketCapBytes;
    if (open >= cap) {
      buckets.push_back(open);
      open = 0;
      any = false;
    }
  }
  if (any) buckets.push_back(open);
  return buckets;
}

int64_t ShardBytes(const std::vector<int64_t>& dims, int64_t bytes, int64_t world) {
  if (world <= 1) return bytes;
  if (dims.empty() || dims[0] <= 0) {
    // A scalar is chunked as one row: rank 0 holds it.
    return bytes;
  }
  const int64_t rows = dims[0];
  const int64_t row_bytes = bytes / rows;
  return SatMulNonNeg((rows + world - 1) / world, row_bytes);
}

namespace {

/// What a rank's allocation is for (RankBreakdown's fields).
enum Part { kLocalParams, kGathered, kGrads, kOptState, kBuckets, kReduceScatter, kOther };

/// The events of one rank, with what each is for.
struct RankEvents {
  std::vector<MemEvent> events;
  std::vector<Part> parts;
  std::vector<Category> cats;
  std::vector<Phase> phases;
  std::vector<std::string> labels;
  std::vector<int> units;  // per event: the FSDP unit of the op it belongs to, -1 for none
  std::vector<size_t> iteration_starts;
};

Category CategoryOf(Part p, Category original) {
  switch (p) {
    case kLocalParams:
    case kGathered:
      return Category::kParameters;
    case kGrads:
    case kBuckets:
    case kReduceScatter:
      return Category::kGradients;
    case kOptState:
      return Category::kOptimizerState;
    case kOther:
      break;
  }
  return original;
}

/// Rewrites the single-process events into one rank's (see distributed.h).
class Rewriter {
 public:
  Rewriter(const Plan& p, const std::vector<std::string>& blocks,
           const std::vector<int>& unit_of_param, const std::vector<int64_t>& shard)
      : p_(p),
        o_(p.options.dist),
        blocks_(blocks),
        unit_of_param_(unit_of_param),
        shard_(shard),
        root_(static_cast<int>(blocks.size())) {
    const int64_t n = o_.world_size;
    unit_full_.assign(blocks.size() + 1, 0);
    unit_shard_.assign(blocks.size() + 1, 0);
    unit_params_.assign(blocks.size() + 1, {});
    for (size_t k = 0; k < shard_.size(); ++k) {
      const int u = unit_of_param_[k];
      unit_params_[u].push_back(static_cast<int>(k));
      unit_shard_[u] = SatAdd(unit_shard_[u], shard_[k]);
      unit_full_[u] = SatAdd(unit_full_[u], SatMulNonNeg(shard_[k], n));
    }
    for (const MemEvent& e : p.events) next_id_ = std::max(next_id_, e.id + 1);
    unsharded_.assign(blocks.size() + 1, {});
    flat_.assign(blocks.size() + 1, -1);
    unit_grads_.assign(blocks.size() + 1, {});
  }

  RankEvents Run();
  int UnitOf(const std::string& scope);

 private:
  const ParallelStrategy& S() const { return o_.strategy; }
  bool Holds() const { return S() == ParallelStrategy::kFsdp; }
  int64_t Emit(int64_t bytes, Part part, Phase ph, const std::string& label) {
    const int64_t id = next_id_++;
    out_.events.push_back(MemEvent{id, bytes, true});
    out_.parts.push_back(part);
    out_.cats.push_back(CategoryOf(part, Category::kTransients));
    out_.phases.push_back(ph);
    out_.labels.push_back(label);
    out_.units.push_back(-1);
    return id;
  }
  void EmitFree(int64_t id, Phase ph, const std::string& label) {
    if (id < 0) return;
    out_.events.push_back(MemEvent{id, 0, false});
    out_.parts.push_back(kOther);
    out_.cats.push_back(Category::kTransients);
    out_.phases.push_back(ph);
    out_.labels.push_back(label);
    out_.units.push_back(-1);
  }
  // Frees an original allocation now; its own free event is then dropped.
  void FreeEarly(int64_t id, Phase ph, const std::string& label) {
    if (id < 0 || freed_early_.count(id)) return;
    freed_early_.insert(id);
    EmitFree(id, ph, label);
  }
  std::string UnitName(int u) const { return u == root_ ? std::string("root") : blocks_[u]; }
  void Wrap();
  void AllGather(int u, Phase ph);
  void Unshard(int u, Phase ph);
  void Reshard(int u, Phase ph);
  void PostBackward(int u);
  void FreeShardedGrads(Phase ph);

  const Plan& p_;
  const DistOptions& o_;
  const std::vector<std::string>& blocks_;
  const std::vector<int>& unit_of_param_;
  const std::vector<int64_t>& shard_;
  const int root_;
  std::vector<int64_t> unit_full_, unit_shard_;
  std::vector<std::vector<int>> unit_params_;
  int64_t next_id_ = 1;
  RankEvents out_;
  std::unordered_map<std::string, int> unit_of_scope_;
  std::unordered_set<int64_t> freed_early_;
  std::vector<int64_t> load_id_;                  // per param: its live storage after loading
  std::vector<int64_t> buckets_;                  // DDP buckets (ids)
  std::vector<std::vector<int64_t>> unsharded_;   // per unit: unsharded parameter ids
  std::vector<int64_t> flat_;                     // per unit: all-gather output id, -1
  int64_t ag_held_ = -1;                          // kept by AllGatherState
  int64_t rs_held_ = -1;                          // kept by ReduceScatterState
  std::vector<std::vector<int64_t>> unit_grads_;  // per unit: live unsharded gradient ids
  std::vector<int64_t> sharded_grads_;            // reduce-scatter outputs
  std::unordered_set<int64_t> grad_ids_;          // original gradient allocations
  std::vector<int> block_order_;                  // blocks in the order their forward ran
};

int Rewriter::UnitOf(const std::string& scope) {
  auto it = unit_of_scope_.find(scope);
  if (it != unit_of_scope_.end()) return it->second;
  int u = root_;
  for (size_t k = 0; k < blocks_.size(); ++k) {
    if (InModule(scope, blocks_[k])) {
      u = static_cast<int>(k);
      break;
    }
  }
  unit_of_scope_.emplace(scope, u);
  return u;
}

void Rewriter::Wrap() {
  const Phase ph = Phase::kForward;
  const int64_t n = o_.world_size;
  if (S() == ParallelStrategy::kDdp) {
    // _sync_module_states: coalesced broadcast of parameters and buffers.
    std::vector<int64_t> states = p_.param_bytes_each;
    if (p_.buffer_bytes > 0) states.push_back(p_.buffer_bytes);
    int64_t chunk = 0;
    for (size_t k = 0; k < states.size(); ++k) {
      chunk = SatAdd(chunk, states[k]);
      if (chunk >= kDdpBroadcastChunkBytes || k + 1 == states.size()) {
        EmitFree(Emit(chunk, kOther, ph, "DDP broadcast"), ph, "DDP broadcast");
        chunk = 0;
      }
    }
    for (int64_t b : DdpBucketSizes(p_.param_bytes_each)) {
      buckets_.push_back(Emit(b, kBuckets, ph, "DDP buckets"));
    }
    return;
  }
  if (ShardsParams(S())) {
    // fully_shard per unit, then the root: each parameter becomes its shard.
    for (int u = 0; u <= root_; ++u) {
      for (int k : unit_params_[u]) {
        Emit(shard_[k], kLocalParams, ph, "fully_shard " + UnitName(u));
        FreeEarly(load_id_[k], ph, "fully_shard " + UnitName(u));
      }
    }
    return;
  }
  int64_t grads = 0;
  for (int64_t b : p_.param_bytes_each) grads = SatAdd(grads, b);
  if (S() == ParallelStrategy::kZero2) {
    Emit(SatAdd(grads, n - 1) / n, kBuckets, ph, "ZeRO gradient partition");
    // The bucket holds gradients in their dtype: bytes per element from the
    // parameters (4 for fp32 ones, 2 for a model cast to half).
    const bool half =
        p_.options.precision == Precision::kBf16 || p_.options.precision == Precision::kFp16;
    Emit(std::min(grads, SatMulNonNeg(kZeroReduceBucketElements, half ? 2 : 4)), kBuckets, ph,
         "ZeRO reduce bucket");
  }
}

void Rewriter::AllGather(int u, Phase ph) {
  if (flat_[u] >= 0 || !unsharded_[u].empty()) return;
  flat_[u] = Emit(unit_full_[u], kGathered, ph, "all-gather " + UnitName(u));
}

void Rewriter::Unshard(int u, Phase ph) {
  if (!unsharded_[u].empty() || unit_params_[u].empty()) return;
  const std::string label = "all-gather " + UnitName(u);
  AllGather(u, ph);
  const bool fwd = ph == Phase::kForward;
  if (fwd && ag_held_ >= 0) {
    EmitFree(ag_held_, ph, label);
    ag_held_ = -1;
  }
  for (int k : unit_params_[u]) {
    unsharded_[u].push_back(Emit(SatMulNonNeg(shard_[k], o_.world_size), kGathered, ph, label));
  }
  if (fwd && Holds() && o_.world_size > 1) {
    ag_held_ = flat_[u];
  } else {
    EmitFree(flat_[u], ph, label);
  }
  flat_[u] = -1;
}

void Rewriter::Reshard(int u, Phase ph) {
  for (int64_t id : unsharded_[u]) EmitFree(id, ph, "reshard " + UnitName(u));
  unsharded_[u].clear();
}

void Rewriter::PostBackward(int u) {
  const Phase ph = Phase::kBackward;
  const std::string label = "reduce-scatter " + UnitName(u);
  Reshard(u, ph);
  if (unit_grads_[u].empty()) return;
  if (rs_held_ >= 0) {
    EmitFree(rs_held_, ph, label);
    rs_held_ = -1;
  }
  const int64_t in = Emit(unit_full_[u], kReduceScatter, ph, label);
  for (int64_t id : unit_grads_[u]) FreeEarly(id, ph, label);
  unit_grads_[u].clear();
  sharded_grads_.push_back(Emit(unit_shard_[u], kGrads, ph, label));
  if (Holds() && o_.world_size > 1) {
    rs_held_ = in;
  } else {
    EmitFree(in, ph, label);
  }
}

void Rewriter::FreeShardedGrads(Phase ph) {
  for (int64_t id : sharded_grads_) EmitFree(id, ph, "zero_grad");
  sharded_grads_.clear();
}

RankEvents Rewriter::Run() {
  const size_t n_events = p_.events.size();
  const std::vector<size_t>& starts = p_.iteration_starts;
  load_id_.assign(shard_.size(), -1);
  const bool shard_params = ShardsParams(S());
  const bool shard_optim = S() != ParallelStrategy::kDdp && S() != ParallelStrategy::kSingle;
  size_t iter = 0;  // iterations started
  int fwd_cur = -1, bwd_cur = -1;
  bool in_bwd = false, in_opt = false, zeroed = false;
  for (size_t e = 0; e <= n_events; ++e) {
    const bool new_iter = iter < starts.size() && e == starts[iter];
    if (new_iter || e == n_events) {
      if (iter > 0) FreeShardedGrads(Phase::kOptimizer);
      if (e == n_events) break;
      if (iter == 0) Wrap();
      if (iter == 1 && S() == ParallelStrategy::kDdp) {
        // The reducer rebuilds its buckets after the first iteration.
        std::vector<int64_t> old = buckets_;
        buckets_.clear();
        for (int64_t b : DdpBucketSizes(p_.param_bytes_each)) {
          buckets_.push_back(Emit(b, kBuckets, Phase::kForward, "DDP rebuild buckets"));
        }
        for (int64_t id : old) EmitFree(id, Phase::kForward, "DDP rebuild buckets");
      }
      out_.iteration_starts.push_back(out_.events.size());
      ++iter;
      fwd_cur = -1;
      bwd_cur = -1;
      in_bwd = in_opt = zeroed = false;
      if (shard_params) Unshard(root_, Phase::kForward);
    }
    const MemEvent& ev = p_.events[e];
    const Phase ph = p_.event_phases[e];
    const int param = e < p_.event_params.size() ? p_.event_params[e] : -1;
    const bool loading = iter == 0;
    if (iter > 0 && shard_params) {
      const int u = UnitOf(p_.event_scopes[e]);
      if (ph == Phase::kForward && ag_held_ >= 0 && p_.event_nodes[e] == "loss") {
        // The model's forward returned: the root's post-forward frees the
        // all-gather output still kept (FSDPState._post_forward).
        EmitFree(ag_held_, ph, "post-forward root");
        ag_held_ = -1;
      }
      if (ph == Phase::kForward && u != fwd_cur) {
        if (fwd_cur >= 0 && fwd_cur != root_ && o_.reshard_after_forward) {
          Reshard(fwd_cur, ph);
        }
        if (u != root_) {
          Unshard(u, ph);
          if (std::find(block_order_.begin(), block_order_.end(), u) == block_order_.end()) {
            block_order_.push_back(u);
          }
        }
        fwd_cur = u;
      }
      if (ph == Phase::kBackward) {
        if (!in_bwd) {
          in_bwd = true;
          if (fwd_cur >= 0 && fwd_cur != root_ && o_.reshard_after_forward) Reshard(fwd_cur, ph);
          // The root's pre-backward prefetches the last block of forward.
          if (!block_order_.empty()) AllGather(block_order_.back(), ph);
        }
        if (u != bwd_cur) {
          if (bwd_cur >= 0 && bwd_cur != root_) PostBackward(bwd_cur);
          if (u != root_) {
            Unshard(u, ph);
            auto it = std::find(block_order_.begin(), block_order_.end(), u);
            if (it != block_order_.end() && it != block_order_.begin()) {
              AllGather(*(it - 1), ph);
            }
          }
          bwd_cur = u;
        }
      }
      if (ph == Phase::kOptimizer && !in_opt) {
        in_opt = true;
        if (bwd_cur >= 0 && bwd_cur != root_) PostBackward(bwd_cur);
        for (int u2 = 0; u2 <= root_; ++u2) {
          if (u2 != root_ && !unit_grads_[u2].empty()) PostBackward(u2);
        }
        PostBackward(root_);
        EmitFree(rs_held_, Phase::kBackward, "reduce-scatter root");
        rs_held_ = -1;
      }
    }
    if (iter > 0 && S() == ParallelStrategy::kZero1 && ph == Phase::kOptimizer && !in_opt) {
      in_opt = true;
      int64_t grads = 0;
      for (int64_t b : p_.param_bytes_each) grads = SatAdd(grads, b);
      const int64_t bucket = std::min(grads, SatMulNonNeg(kZeroReduceBucketElements, 4));
      EmitFree(Emit(bucket, kBuckets, Phase::kBackward, "ZeRO all-reduce bucket"), Phase::kBackward,
               "ZeRO all-reduce bucket");
    }
    // The event itself.
    if (!ev.is_alloc) {
      if (ev.empty_cache) {
        out_.events.push_back(ev);
        out_.parts.push_back(kOther);
        out_.cats.push_back(Category::kTransients);
        out_.phases.push_back(ph);
        out_.labels.push_back(p_.event_nodes[e]);
        out_.units.push_back(-1);
        continue;
      }
      if (ph == Phase::kOptimizer && grad_ids_.count(ev.id) && !zeroed) {
        zeroed = true;  // zero_grad: the sharded gradients go too
        FreeShardedGrads(ph);
      }
      if (freed_early_.erase(ev.id)) continue;
      // A gradient the step itself frees before its unit's reduce-scatter
      // (the first of two, summed out of place: Simulator::AddGrad) leaves
      // that unit's list.
      if (shard_params && ph == Phase::kBackward && grad_ids_.count(ev.id)) {
        for (std::vector<int64_t>& ids : unit_grads_) {
          ids.erase(std::remove(ids.begin(), ids.end(), ev.id), ids.end());
        }
      }
      EmitFree(ev.id, ph, p_.event_nodes[e]);
      continue;
    }
    Part part = kOther;
    int64_t bytes = ev.bytes;
    if (param >= 0) {
      if (loading) {
        part = kLocalParams;
        load_id_[param] = ev.id;
      } else if (ph == Phase::kOptimizer) {
        part = kOptState;
        if (shard_optim) bytes = shard_[param];
      } else if (ph == Phase::kBackward) {
        part = kGrads;
        grad_ids_.insert(ev.id);
      }
    }
    out_.events.push_back(MemEvent{ev.id, bytes, true});
    out_.parts.push_back(part);
    out_.cats.push_back(CategoryOf(part, p_.event_categories[e]));
    out_.phases.push_back(ph);
    out_.labels.push_back(p_.event_nodes[e]);
    out_.units.push_back(shard_params ? UnitOf(p_.event_scopes[e]) : -1);
    if (part == kGrads) {
      if (shard_params) {
        unit_grads_[unit_of_param_[param]].push_back(ev.id);
      } else if (S() == ParallelStrategy::kZero2) {
        // Copied into the reduce bucket, then only the partition is kept.
        FreeEarly(ev.id, ph, "ZeRO reduce bucket");
      }
    }
  }
  return std::move(out_);
}

/// The peak of events [e0, e1) of a replay, like PlanSchedule's.
Peak RankPeak(const RankEvents& r, const SimResult& res, size_t e0, size_t e1, int64_t extra,
              RankBreakdown* rank) {
  Peak p;
  size_t at = e0;
  const size_t end = std::min(e1, res.allocated_after.size());
  for (size_t e = e0; e < end; ++e) {
    if (res.allocated_after[e] > p.allocated_bytes) {
      p.allocated_bytes = res.allocated_after[e];
      at = e;
    }
    p.reserved_bytes = std::max(p.reserved_bytes, res.reserved_after[e]);
    const int ph = static_cast<int>(r.phases[e]);
    p.phase_allocated[ph] = std::max(p.phase_allocated[ph], res.allocated_after[e]);
    p.phase_reserved[ph] = std::max(p.phase_reserved[ph], res.reserved_after[e]);
  }
  p.device_bytes = SatAdd(p.reserved_bytes, extra);
  if (at < r.labels.size()) {
    p.node = r.labels[at];
    p.phase = r.phases[at];
  }
  // What is live after event `at`, by part and category; the unrounded sum
  // for the lower bound.
  std::unordered_map<int64_t, size_t> live;  // id -> alloc event
  int64_t requested = 0;
  for (size_t e = 0; e <= at && e < res.placements.size(); ++e) {
    const MemEvent& ev = r.events[e];
    if (ev.empty_cache) continue;
    if (ev.is_alloc) {
      live[ev.id] = e;
      requested = SatAdd(requested, ev.bytes);
    } else {
      auto it = live.find(ev.id);
      if (it != live.end()) {
        requested -= r.events[it->second].bytes;
        live.erase(it);
      }
    }
    if (e >= e0) p.lower_bound_bytes = std::max(p.lower_bound_bytes, requested);
  }
  int64_t parts[kOther + 1] = {0, 0, 0, 0, 0, 0, 0};
  for (const auto& [id, e] : live) {
    const int64_t b = res.placements[e].block;
    parts[r.parts[e]] += b;
    p.breakdown.bytes[static_cast<int>(r.cats[e])] += b;
  }
  p.fragmentation = res.reserved_after.size() > at && res.reserved_after[at] > 0
                        ? 1.0 - static_cast<double>(p.allocated_bytes) /
                                    static_cast<double>(res.reserved_after[at])
                        : 0.0;
  if (rank) {
    rank->params_local = parts[kLocalParams];
    rank->params_gathered = parts[kGathered];
    rank->grads = parts[kGrads];
    rank->optimizer_state = parts[kOptState];
    rank->grad_buckets = parts[kBuckets];
    rank->reduce_scatter = parts[kReduceScatter];
    rank->other = parts[kOther];
  }
  return p;
}

}  // namespace

Status ApplyDataParallel(const Graph& g, Plan* plan) {
  const PlanOptions& o = plan->options;
  const DistOptions& d = o.dist;
  if (d.strategy == ParallelStrategy::kSingle) return Status();
  Status ok = CheckDistOptions(d, o.mode);
  if (!ok.ok()) return ok;
  if (plan->event_params.size() != plan->events.size() || plan->iteration_starts.size() < 3) {
    return Status::Error(g.source + ": internal: the plan has no annotated allocator trace");
  }
  std::vector<std::string> blocks;
  if (ShardsParams(d.strategy)) {
    auto units = FsdpUnits(g, d);
    if (!units.ok()) return units.status();
    blocks = units.value();
  }
  // Each parameter's unit: the block all of its readers are in, else the root.
  const size_t np = plan->param_names.size();
  const int root = static_cast<int>(blocks.size());
  std::vector<int> unit_of_param(np, root);
  std::vector<int64_t> shard(np, 0);
  std::unordered_map<std::string, size_t> index;
  for (size_t k = 0; k < np; ++k) index.emplace(plan->param_names[k], k);
  std::vector<int> reader_unit(np, -2);  // -2: none seen, root: several
  auto block_of = [&](const std::string& scope) {
    for (size_t b = 0; b < blocks.size(); ++b) {
      if (InModule(scope, blocks[b])) return static_cast<int>(b);
    }
    return root;
  };
  for (const Node& n : g.nodes) {
    int u = -1;
    for (int t : n.inputs) {
      if (t < 0) continue;
      auto it = index.find(g.tensors[t].name);
      if (it == index.end()) continue;
      if (u < 0) u = block_of(n.scope);
      int& r = reader_unit[it->second];
      r = r == -2 || r == u ? u : root;
    }
  }
  for (size_t k = 0; k < np; ++k) {
    if (reader_unit[k] >= 0) unit_of_param[k] = reader_unit[k];
    const int t = g.Find(plan->param_names[k]);
    std::vector<int64_t> dims;
    if (t >= 0) dims = g.tensors[t].shape;
    shard[k] = d.strategy == ParallelStrategy::kDdp
                   ? plan->param_bytes_each[k]
                   : ShardBytes(dims, plan->param_bytes_each[k], d.world_size);
  }
  Rewriter rw(*plan, blocks, unit_of_param, shard);
  RankEvents r = rw.Run();
  auto sim = SimulateCachingAllocator(r.events, o.allocator);
  if (!sim.ok()) {
    return Status::Error(g.source + ": cannot replay one rank's allocations: " + sim.message());
  }
  const SimResult& res = sim.value();
  const int64_t extra = SatAdd(plan->context_bytes, kNcclDeviceBytes);
  auto range_end = [&](size_t k) {
    return k + 1 < r.iteration_starts.size() ? r.iteration_starts[k + 1] : r.events.size();
  };
  RankBreakdown first, steady;
  plan->first_step = RankPeak(r, res, r.iteration_starts[0], range_end(0), extra, &first);
  plan->steady = RankPeak(r, res, r.iteration_starts[2], range_end(2), extra, &steady);
  const bool want_first = o.step == StepKind::kFirst;
  plan->peak = want_first ? plan->first_step : plan->steady;
  plan->rank = want_first ? first : steady;
  plan->rank.strategy = d.strategy;
  plan->rank.world_size = d.world_size;
  plan->rank.units = ShardsParams(d.strategy) ? root + 1 : 0;
  plan->rank.nccl_bytes = kNcclDeviceBytes;
  plan->rank.unit_modules = blocks;
  const size_t pk = [&] {
    const size_t k = want_first ? 0 : 2;
    size_t at = r.iteration_starts[k];
    for (size_t e = at; e < range_end(k) && e < res.allocated_after.size(); ++e) {
      if (res.allocated_after[e] > res.allocated_after[at]) at = e;
    }
    return at;
  }();
  if (ShardsParams(d.strategy) && pk < r.units.size()) {
    // The unit whose op runs at the peak (the op's own event, or the last
    // one before the inserted collectives).
    for (size_t e = pk + 1; e-- > 0;) {
      if (r.units[e] < 0) continue;
      plan->rank.unit_running = r.units[e] == root ? "root" : blocks[r.units[e]];
      break;
    }
  }
  // The timeline of the planned step: one point per run of events of one label.
  plan->timeline.clear();
  const size_t k = want_first ? 0 : 2;
  const size_t e0 = r.iteration_starts[k], e1 = std::min(range_end(k), res.allocated_after.size());
  Breakdown live;
  std::unordered_map<int64_t, std::pair<Category, int64_t>> blocks_live;
  TimelinePoint pt;
  int step = 0;
  for (size_t e = 0; e < e1; ++e) {
    const MemEvent& ev = r.events[e];
    if (!ev.empty_cache) {
      if (ev.is_alloc) {
        const int64_t b = res.placements[e].block;
        blocks_live[ev.id] = {r.cats[e], b};
        live.bytes[static_cast<int>(r.cats[e])] += b;
      } else {
        auto it = blocks_live.find(ev.id);
        if (it != blocks_live.end()) {
          live.bytes[static_cast<int>(it->second.first)] -= it->second.second;
          blocks_live.erase(it);
        }
      }
    }
    if (e < e0) continue;
    const bool first_of = e == e0 || r.labels[e - 1] != r.labels[e];
    if (first_of || res.allocated_after[e] > pt.allocated) {
      if (first_of) pt.reserved = 0;
      pt.step = step;
      pt.phase = r.phases[e];
      pt.node = r.labels[e];
      pt.live = live;
      pt.allocated = res.allocated_after[e];
    }
    pt.reserved = std::max(pt.reserved, res.reserved_after[e]);
    if (e + 1 == e1 || r.labels[e + 1] != r.labels[e]) {
      pt.allocated_end = res.allocated_after[e];
      plan->timeline.push_back(pt);
      ++step;
    }
  }
  plan->modules.clear();
  for (Peak* p : {&plan->peak, &plan->first_step, &plan->steady}) p->rules.clear();
  plan->events = std::move(r.events);
  plan->event_nodes = std::move(r.labels);
  plan->event_phases = std::move(r.phases);
  plan->event_categories = std::move(r.cats);
  plan->event_params.clear();
  plan->event_scopes.clear();
  return Status();
}

}  // namespace memplan
