#include "planner/arena.h"

#include <algorithm>
#include <cassert>
#include <numeric>
#include <utility>

namespace memplan {
namespace {

int64_t AlignUp(int64_t x, int64_t alignment) {
  return (x + alignment - 1) / alignment * alignment;
}

// Largest sum of sizes live at one step: sweep +size at `first`, -size after
// `last`; at equal steps the frees (of buffers that ended the step before)
// come first.
int64_t LowerBound(const std::vector<ArenaBuffer>& buffers) {
  std::vector<std::pair<int64_t, int64_t>> deltas;  // (step, delta)
  deltas.reserve(buffers.size() * 2);
  for (const ArenaBuffer& b : buffers) {
    if (b.size <= 0) continue;
    deltas.emplace_back(b.first, b.size);
    deltas.emplace_back(static_cast<int64_t>(b.last) + 1, -b.size);
  }
  std::sort(deltas.begin(), deltas.end());
  int64_t live = 0;
  int64_t best = 0;
  for (const auto& d : deltas) {
    live += d.second;
    best = std::max(best, live);
  }
  return best;
}

bool OverlapInTime(const ArenaBuffer& a, const ArenaBuffer& b) {
  return a.first <= b.last && b.first <= a.last;
}

}  // namespace

ArenaResult PackGreedyBySize(const std::vector<ArenaBuffer>& buffers, int64_t alignment) {
  assert(alignment > 0);
  const size_t n = buffers.size();
  ArenaResult r;
  r.offsets.assign(n, 0);
  r.lower_bound = LowerBound(buffers);

  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    const ArenaBuffer& x = buffers[a];
    const ArenaBuffer& y = buffers[b];
    if (x.size != y.size) return x.size > y.size;
    if (x.first != y.first) return x.first < y.first;
    return a < b;
  });

  // Placed buffers sorted by first use, so the time-overlap scan only visits
  // buffers with first in [b.first - longest placed lifetime, b.last].
  std::vector<int> placed;  // buffer indices, ordered by (first, index)
  placed.reserve(n);
  int64_t longest = 0;  // max (last - first) among placed buffers
  std::vector<int> overlapping;
  auto by_first = [&](int a, int b) {
    if (buffers[a].first != buffers[b].first) return buffers[a].first < buffers[b].first;
    return a < b;
  };

  for (int i : order) {
    const ArenaBuffer& b = buffers[i];
    if (b.size <= 0) continue;  // takes no space; offset 0
    overlapping.clear();
    const int64_t from = static_cast<int64_t>(b.first) - longest;
    auto lo = std::lower_bound(placed.begin(), placed.end(), from,
                               [&](int p, int64_t v) { return buffers[p].first < v; });
    for (auto it = lo; it != placed.end() && buffers[*it].first <= b.last; ++it) {
      if (buffers[*it].last >= b.first) overlapping.push_back(*it);
    }
    std::sort(overlapping.begin(), overlapping.end(), [&](int x, int y) {
      if (r.offsets[x] != r.offsets[y]) return r.offsets[x] < r.offsets[y];
      return x < y;
    });
    // Smallest gap between the overlapping buffers that fits; else the end.
    int64_t best_offset = -1;
    int64_t best_gap = 0;
    int64_t cursor = 0;  // lowest free offset (aligned) after the buffers so far
    for (int p : overlapping) {
      const int64_t gap = r.offsets[p] - cursor;
      if (gap >= b.size && (best_offset < 0 || gap < best_gap)) {
        best_offset = cursor;
        best_gap = gap;
      }
      cursor = std::max(cursor, AlignUp(r.offsets[p] + buffers[p].size, alignment));
    }
    if (best_offset < 0) best_offset = cursor;
    r.offsets[i] = best_offset;
    r.arena_size = std::max(r.arena_size, best_offset + b.size);
    placed.insert(std::upper_bound(placed.begin(), placed.end(), i, by_first), i);
    longest = std::max(longest, static_cast<int64_t>(b.last) - b.first);
  }
  return r;
}

ArenaResult PackNaive(const std::vector<ArenaBuffer>& buffers, int64_t alignment) {
  assert(alignment > 0);
  ArenaResult r;
  r.offsets.reserve(buffers.size());
  r.lower_bound = LowerBound(buffers);
  int64_t cursor = 0;
  for (const ArenaBuffer& b : buffers) {
    r.offsets.push_back(cursor);
    if (b.size <= 0) continue;
    r.arena_size = cursor + b.size;
    cursor = AlignUp(cursor + b.size, alignment);
  }
  return r;
}

bool VerifyNoOverlap(const std::vector<ArenaBuffer>& buffers, const ArenaResult& r) {
  const size_t n = buffers.size();
  if (r.offsets.size() != n) return false;
  std::vector<int> order;
  order.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (buffers[i].size <= 0) continue;
    if (r.offsets[i] < 0 || r.offsets[i] + buffers[i].size > r.arena_size) return false;
    order.push_back(static_cast<int>(i));
  }
  // Sweep by first use: each buffer is compared with the later-starting
  // buffers that start before it ends.
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    if (buffers[a].first != buffers[b].first) return buffers[a].first < buffers[b].first;
    return a < b;
  });
  for (size_t x = 0; x < order.size(); ++x) {
    const ArenaBuffer& a = buffers[order[x]];
    const int64_t a_begin = r.offsets[order[x]];
    const int64_t a_end = a_begin + a.size;
    for (size_t y = x + 1; y < order.size() && buffers[order[y]].first <= a.last; ++y) {
      const ArenaBuffer& b = buffers[order[y]];
      if (!OverlapInTime(a, b)) continue;
      const int64_t b_begin = r.offsets[order[y]];
      if (b_begin < a_end && a_begin < b_begin + b.size) return false;
    }
  }
  return true;
}

}  // namespace memplan
