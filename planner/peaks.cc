#include "planner/peaks.h"

#include <algorithm>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "planner/arena.h"

namespace memplan {

RuleShare ShareOf(const RuleRef& r, const PlanOptions& o) {
  RuleShare sh;
  sh.rule = r.name;
  sh.backed = r.evidence.Covers(o.mode, o.precision);
  sh.evidence = r.evidence.source ? r.evidence.source : "";
  return sh;
}

Peak PeakOf(const Simulator& sim, const SimResult& r, size_t e0, size_t e1, const PlanOptions& o) {
  Peak p;
  size_t at = e0;
  for (size_t e = e0; e < e1 && e < r.allocated_after.size(); ++e) {
    if (r.allocated_after[e] > p.allocated_bytes) {
      p.allocated_bytes = r.allocated_after[e];
      at = e;
    }
  }
  // reset_peak_memory_stats() before the step: the peak reserved starts at
  // what is reserved then (cached segments stay) and grows from there.
  for (size_t e = e0 > 0 ? e0 - 1 : 0; e < e1 && e < r.reserved_after.size(); ++e) {
    p.reserved_bytes = std::max(p.reserved_bytes, r.reserved_after[e]);
  }
  // Per phase: each event's level after it and before it (so a phase's peak
  // includes where it started).
  for (size_t e = e0; e < e1 && e < r.allocated_after.size(); ++e) {
    const int ph = static_cast<int>(sim.steps_phase[sim.event_step[e]]);
    int64_t a = r.allocated_after[e];
    int64_t res = r.reserved_after[e];
    if (e > 0) {
      a = std::max(a, r.allocated_after[e - 1]);
      res = std::max(res, r.reserved_after[e - 1]);
    }
    p.phase_allocated[ph] = std::max(p.phase_allocated[ph], a);
    p.phase_reserved[ph] = std::max(p.phase_reserved[ph], res);
  }
  // Categories and the exact live sum at the peak. Every storage is
  // allocated once (Simulator::AllocNew), so the block it holds is kept per
  // storage; -1 while it is not live.
  std::vector<int64_t> live(sim.storages.size(), -1);
  // Replay categories: each storage starts with its category at allocation;
  // retags apply in event order.
  std::vector<Category> cat(sim.storages.size());
  for (size_t i = 0; i < sim.storages.size(); ++i) cat[i] = sim.storages[i].first_cat;
  const auto& retags = sim.retags;
  size_t rt = 0;
  int64_t lower = 0;
  for (size_t e = 0; e <= at && e < sim.events.size(); ++e) {
    while (rt < retags.size() && std::get<0>(retags[rt]) <= e) {
      cat[std::get<1>(retags[rt])] = std::get<2>(retags[rt]);
      ++rt;
    }
    const MemEvent& ev = sim.events[e];
    const int st = sim.EventStorage(e);
    if (st < 0) continue;  // empty_cache
    if (ev.is_alloc) {
      live[st] = r.placements[e].block;
      lower += ev.bytes;
    } else if (live[st] >= 0) {
      lower -= sim.storages[st].bytes;
      live[st] = -1;
    }
  }
  std::vector<int64_t> by_rule(sim.rules.size(), 0);
  int64_t no_rule = 0;
  for (size_t st = 0; st < live.size(); ++st) {
    if (live[st] < 0) continue;
    p.breakdown.bytes[static_cast<int>(cat[st])] += live[st];
    const int rule = sim.storages[st].rule;
    (rule >= 0 ? by_rule[rule] : no_rule) += live[st];
  }
  for (size_t i = 0; i < by_rule.size(); ++i) {
    if (by_rule[i] == 0) continue;
    RuleShare sh = ShareOf(sim.rules[i], o);
    sh.peak_bytes = by_rule[i];
    p.rules.push_back(sh);
  }
  if (no_rule > 0) {
    RuleShare sh;
    sh.rule = "unattributed";
    sh.peak_bytes = no_rule;
    p.rules.push_back(sh);
  }
  p.lower_bound_bytes = lower;
  if (at < sim.event_step.size()) {
    const int step = sim.event_step[at];
    p.node = sim.StepLabel(step);
    p.phase = sim.steps_phase[step];
  }
  p.fragmentation = at >= r.reserved_after.size() || r.reserved_after[at] == 0
                        ? 0.0
                        : 1.0 - static_cast<double>(r.allocated_after[at]) / r.reserved_after[at];
  return p;
}

// The allocated peak of each module over events [e0, e1): an event counts for
// the modules of the op it is attributed to (synthetic ops run inside the op
// after them, as in MarkModuleArguments), in forward or in backward. A call is
// a run of consecutive events of the module in one phase; its start level is
// the level before its first event, its end the level after its last.
std::vector<ModulePeak> ModulePeaksOf(const Graph& g, const Schedule& s, const Simulator& sim,
                                      const SimResult& r, size_t e0, size_t e1) {
  const int n = static_cast<int>(s.ops.size());
  std::vector<int> node_of(n, -1);
  int next = -1;
  for (int i = n - 1; i >= 0; --i) {
    const int node = s.ops[i].node;
    if (node >= 0 && g.nodes[node].modules_known) next = node;
    node_of[i] = next;
  }
  std::vector<ModulePeak> out;
  std::unordered_map<std::string, size_t> index;
  struct Run {
    size_t module;
    bool forward;
    int64_t entry;
    int64_t peak;
  };
  std::vector<Run> open;
  auto close = [&](const Run& run, int64_t exit) {
    ModulePeak& m = out[run.module];
    if (run.forward) {
      m.forward_rise = std::max(m.forward_rise, run.peak - run.entry);
      m.forward_kept += exit - run.entry;
    } else {
      m.backward_rise = std::max(m.backward_rise, run.peak - run.entry);
    }
  };
  static const std::vector<std::string> kNone;
  for (size_t e = e0; e < e1 && e < r.allocated_after.size(); ++e) {
    const int op = sim.event_op[e];
    const Phase ph = sim.steps_phase[sim.event_step[e]];
    const bool has = op >= 0 && op < n && node_of[op] >= 0 && ph != Phase::kOptimizer;
    const std::vector<std::string>& mods = has ? g.nodes[node_of[op]].modules : kNone;
    const bool fwd = ph == Phase::kForward;
    const int64_t before = e > 0 ? r.allocated_after[e - 1] : 0;
    std::vector<size_t> here;
    for (const std::string& m : mods) {
      auto it = index.find(m);
      if (it == index.end()) {
        it = index.emplace(m, out.size()).first;
        out.push_back(ModulePeak{m, 0, 0, 0, 0, 0});
      }
      here.push_back(it->second);
    }
    // Runs of modules this event is not in (or of the other phase) end here.
    std::vector<Run> still;
    for (const Run& run : open) {
      const bool in =
          run.forward == fwd && std::find(here.begin(), here.end(), run.module) != here.end();
      if (in) {
        still.push_back(run);
      } else {
        close(run, before);
      }
    }
    open.swap(still);
    const int64_t level = std::max(r.allocated_after[e], before);
    for (size_t m : here) {
      auto it = std::find_if(open.begin(), open.end(), [&](const Run& x) { return x.module == m; });
      if (it == open.end()) {
        open.push_back(Run{m, fwd, before, before});
        it = open.end() - 1;
      }
      it->peak = std::max(it->peak, level);
      int64_t& slot = fwd ? out[m].forward_allocated : out[m].backward_allocated;
      slot = std::max(slot, level);
    }
  }
  const int64_t last = e1 > 0 && e1 - 1 < r.allocated_after.size() ? r.allocated_after[e1 - 1] : 0;
  for (const Run& run : open) close(run, last);
  return out;
}

int64_t ArenaLowerBoundOf(const Simulator& sim, size_t e0, size_t e1) {
  std::vector<ArenaBuffer> bufs;
  std::unordered_map<int64_t, size_t> open;
  for (size_t e = e0; e < e1; ++e) {
    const MemEvent& ev = sim.events[e];
    if (ev.is_alloc) {
      open[ev.id] = bufs.size();
      bufs.push_back(ArenaBuffer{ev.bytes, sim.event_step[e], sim.event_step[e]});
    } else if (open.count(ev.id)) {
      bufs[open[ev.id]].last = sim.event_step[e];
    }
  }
  ArenaResult ar = PackGreedyBySize(bufs, 512);
  return ar.lower_bound;
}

void FillCoverage(Plan* plan) {
  Coverage& c = plan->coverage;
  c.peak_bytes = 0;
  c.unbacked_bytes = 0;
  for (RuleShare& r : c.rules) r.peak_bytes = 0;
  for (const RuleShare& at : plan->peak.rules) {
    c.peak_bytes += at.peak_bytes;
    if (!at.backed) c.unbacked_bytes += at.peak_bytes;
    bool found = false;
    for (RuleShare& r : c.rules) {
      if (r.rule == at.rule) {
        r.peak_bytes += at.peak_bytes;
        found = true;
      }
    }
    if (!found) c.rules.push_back(at);
  }
  std::stable_sort(c.rules.begin(), c.rules.end(), [](const RuleShare& a, const RuleShare& b) {
    return a.peak_bytes > b.peak_bytes;
  });
}

}  // namespace memplan
