#include "planner/timeline.h"

#include <algorithm>
#include <cstdint>
#include <tuple>

namespace memplan {

std::vector<TimelinePoint> TimelineOf(const Simulator& sim, const SimResult& res, size_t e0,
                                      size_t e1) {
  std::vector<TimelinePoint> out;
  Breakdown live;
  std::vector<int64_t> live_block(sim.storages.size(), 0);  // per storage, 0 when free
  std::vector<Category> cat(sim.storages.size());
  for (size_t i = 0; i < sim.storages.size(); ++i) cat[i] = sim.storages[i].first_cat;
  size_t rt = 0;
  TimelinePoint pt;
  size_t points = 0;  // one per step: reserved up front (a large graph's timeline is big)
  for (size_t e = e0; e < e1; ++e) {
    if (e + 1 == e1 || sim.event_step[e + 1] != sim.event_step[e]) ++points;
  }
  out.reserve(points);
  for (size_t e = 0; e < e1; ++e) {
    while (rt < sim.retags.size() && std::get<0>(sim.retags[rt]) <= e) {
      const int st = std::get<1>(sim.retags[rt]);
      const Category to = std::get<2>(sim.retags[rt]);
      live.bytes[static_cast<int>(cat[st])] -= live_block[st];
      live.bytes[static_cast<int>(to)] += live_block[st];
      cat[st] = to;
      ++rt;
    }
    const MemEvent& ev = sim.events[e];
    const int st = sim.EventStorage(e);
    if (st >= 0) {  // not empty_cache
      const int c = static_cast<int>(cat[st]);
      if (ev.is_alloc) {
        live_block[st] = res.placements[e].block;
        live.bytes[c] += live_block[st];
      } else {
        live.bytes[c] -= live_block[st];
        live_block[st] = 0;
      }
    }
    if (e < e0) continue;
    const bool first_of_step = e == e0 || sim.event_step[e - 1] != sim.event_step[e];
    if (first_of_step || res.allocated_after[e] > pt.allocated) {
      if (first_of_step) pt.reserved = 0;
      pt.step = sim.event_step[e];
      pt.phase = sim.steps_phase[pt.step];
      pt.node = sim.StepLabel(pt.step);
      pt.live = live;
      pt.allocated = res.allocated_after[e];
    }
    pt.reserved = std::max(pt.reserved, res.reserved_after[e]);
    const bool last_of_step = e + 1 == e1 || sim.event_step[e + 1] != sim.event_step[e];
    if (last_of_step) {
      pt.allocated_end = res.allocated_after[e];
      out.push_back(pt);
    }
  }
  return out;
}

void MergeReservedLine(const std::vector<TimelinePoint>& kept,
                       std::vector<TimelinePoint>* timeline_out) {
  std::vector<TimelinePoint>& timeline = *timeline_out;
  std::vector<int64_t> reserved(timeline.size(), -1);
  size_t i = 0;
  for (const TimelinePoint& q : kept) {
    for (size_t k = i; k < timeline.size() && k < i + 64; ++k) {
      if (timeline[k].node == q.node) {
        i = k;
        break;
      }
    }
    reserved[i] = std::max(reserved[i], q.reserved);
  }
  int64_t last = 0;
  for (size_t k = 0; k < timeline.size(); ++k) {
    if (reserved[k] >= 0) last = reserved[k];
    // Never below its own variant's reserved (>= allocated); that is at most
    // the kept variant's peak, which has the most reserved of all.
    timeline[k].reserved = std::max(last, timeline[k].reserved);
  }
}

}  // namespace memplan
