// Replays a PyTorch caching-allocator trace recorded by bench/memtrace.py
// through memplan's allocator model and compares the segments it creates
// with the ones PyTorch created. The input is the JSON memtrace.py writes
// (stdin). Exit 1 when the segment totals differ.
//
//   zcat bench/results/traces/resnet18_train_32_fp32.json.gz | ./build/bench/trace_replay
//
// --placements prints where the model put each allocation: "placed TRACE_EVENT
// SEGMENT OFFSET BLOCK" (segments numbered in creation order).
//
// With a setting (--expandable_segments, --max_split_size_mb N) the same events
// are replayed under it (PyTorch's own segments then are the default's, so the
// exit status says nothing); --empty_cache appends torch.cuda.empty_cache()
// after the last event, and an event ["empty_cache", 0, 0] (a script's, not
// PyTorch's) calls it there. Either prints the model's reserved peak (before the last empty_cache)
// and, after an empty_cache, what stays reserved and the peak after it: the allocator model's
// figures for the recorded program order and sizes (bench/allocator_whatif_compare.py's
// measurements hold the real ones).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "planner/allocator_sim.h"

int main(int argc, char** argv) {
  memplan::AllocatorConfig config;
  bool empty_cache = false;
  bool setting = false;
  bool placements = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--expandable_segments") {
      config.expandable_segments = true;
      setting = true;
    } else if (arg == "--max_split_size_mb" && i + 1 < argc) {
      config.max_split_size = std::atoll(argv[++i]) << 20;
      setting = true;
    } else if (arg == "--placements") {
      placements = true;
    } else if (arg == "--empty_cache") {
      empty_cache = true;
      setting = true;
    } else {
      std::fprintf(stderr, "trace_replay: %s: unknown flag\n", arg.c_str());
      return 2;
    }
  }
  nlohmann::json trace;
  try {
    std::cin >> trace;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "trace_replay: not a memtrace JSON on stdin: %s\n", e.what());
    return 2;
  }
  std::vector<memplan::MemEvent> events;
  std::vector<size_t> trace_index;            // the trace event of each replayed event
  std::unordered_map<int64_t, int64_t> live;  // address -> event id
  int64_t next_id = 1;
  int64_t real_segments = 0;
  int64_t real_count = 0;
  const auto& recorded = trace.at("events");
  for (size_t k = 0; k < recorded.size(); ++k) {
    const auto& e = recorded[k];
    if (events.size() > trace_index.size()) trace_index.push_back(k - 1);
    const std::string action = e.at(0).get<std::string>();
    const int64_t addr = e.at(1).get<int64_t>();
    const int64_t size = e.at(2).get<int64_t>();
    if (action == "alloc") {
      live[addr] = next_id;
      events.push_back({next_id++, size, true});
    } else if (action == "free_completed") {
      auto it = live.find(addr);
      if (it == live.end()) continue;  // allocated before recording began
      events.push_back({it->second, 0, false});
      live.erase(it);
    } else if (action == "empty_cache") {  // written by a script, not by PyTorch
      memplan::MemEvent ec;
      ec.empty_cache = true;
      ec.is_alloc = false;
      events.push_back(ec);
      setting = true;
    } else if (action == "segment_alloc") {
      real_segments += size;
      ++real_count;
    }
  }
  if (events.size() > trace_index.size()) trace_index.push_back(recorded.size() - 1);
  if (empty_cache) {
    memplan::MemEvent ec;
    ec.empty_cache = true;
    ec.is_alloc = false;
    events.push_back(ec);
  }
  auto r = memplan::SimulateCachingAllocator(events, config);
  if (!r.ok()) {
    std::fprintf(stderr, "trace_replay: %s\n", r.message().c_str());
    return 2;
  }
  if (placements) {  // trace event, segment (creation order), offset, block
    for (size_t i = 0; i < events.size() && i < r->placements.size(); ++i) {
      const memplan::Placement& at = r->placements[i];
      if (!events[i].is_alloc || at.segment < 0) continue;
      std::printf("placed %zu %d %lld %lld\n", i < trace_index.size() ? trace_index[i] : 0,
                  at.segment, static_cast<long long>(at.offset), static_cast<long long>(at.block));
    }
  }
  int64_t sim_segments = 0;
  for (int64_t b : r->segment_bytes) sim_segments += b;
  std::printf("%s %s b%lld: PyTorch %lld segments, %.1f MiB; model %zu segments, %.1f MiB\n",
              trace.value("model", "?").c_str(), trace.value("mode", "?").c_str(),
              static_cast<long long>(trace.value("batch", 0)), static_cast<long long>(real_count),
              real_segments / 1048576.0, r->segment_bytes.size(), sim_segments / 1048576.0);
  if (setting) {
    size_t last = events.size();  // the last empty_cache()
    for (size_t i = 0; i < events.size(); ++i) {
      if (events[i].empty_cache) last = i;
    }
    int64_t before_peak = 0;  // the reserved peak before it
    for (size_t i = 0; i < std::min(last, r->reserved_after.size()); ++i) {
      before_peak = std::max(before_peak, r->reserved_after[i]);
    }
    std::printf("  model reserved peak %.1f MiB", before_peak / 1048576.0);
    if (last < events.size()) {
      int64_t after_peak = 0;
      for (size_t i = last; i < r->reserved_after.size(); ++i) {
        after_peak = std::max(after_peak, r->reserved_after[i]);
      }
      std::printf(", after empty_cache %.1f MiB (allocated %.1f MiB), peak after it %.1f MiB\n",
                  r->reserved_after[last] / 1048576.0, r->allocated_after[last] / 1048576.0,
                  after_peak / 1048576.0);
    }
    if (last == events.size()) std::printf("\n");
    return 0;
  }
  return sim_segments == real_segments ? 0 : 1;
}
