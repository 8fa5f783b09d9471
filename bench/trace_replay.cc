// Replays a PyTorch caching-allocator trace recorded by bench/memtrace.py
// through memplan's allocator model and compares the segments it creates
// with the ones PyTorch created. The input is the JSON memtrace.py writes
// (stdin). Exit 1 when the segment totals differ.
//
//   zcat bench/results/traces/resnet18_train_32_fp32.json.gz | ./build/bench/trace_replay
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <unordered_map>
#include <vector>

#include "planner/allocator_sim.h"

int main() {
  nlohmann::json trace;
  try {
    std::cin >> trace;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "trace_replay: not a memtrace JSON on stdin: %s\n", e.what());
    return 2;
  }
  std::vector<memplan::MemEvent> events;
  std::unordered_map<int64_t, int64_t> live;  // address -> event id
  int64_t next_id = 1;
  int64_t real_segments = 0;
  int64_t real_count = 0;
  for (const auto& e : trace.at("events")) {
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
    } else if (action == "segment_alloc") {
      real_segments += size;
      ++real_count;
    }
  }
  auto r = memplan::SimulateCachingAllocator(events, memplan::AllocatorConfig());
  if (!r.ok()) {
    std::fprintf(stderr, "trace_replay: %s\n", r.message().c_str());
    return 2;
  }
  int64_t sim_segments = 0;
  for (int64_t b : r->segment_bytes) sim_segments += b;
  std::printf("%s %s b%lld: PyTorch %lld segments, %.1f MiB; model %zu segments, %.1f MiB\n",
              trace.value("model", "?").c_str(), trace.value("mode", "?").c_str(),
              static_cast<long long>(trace.value("batch", 0)), static_cast<long long>(real_count),
              real_segments / 1048576.0, r->segment_bytes.size(), sim_segments / 1048576.0);
  return sim_segments == real_segments ? 0 : 1;
}
