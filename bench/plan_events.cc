// Prints the allocator events memplan plans for one configuration, one line
// each: event index, phase, op, category, +bytes (alloc) or -bytes (free),
// and the simulated memory_allocated and memory_reserved after it. For comparing a plan with a
// PyTorch allocator trace (bench/families.py trace, bench/memtrace.py).
//
//   plan_events MODEL BATCH PRECISION [LOSS] [all|input_only] [off|on]
//
// The last two pick one variant of what the export does not say (the fp32
// cuDNN engine kind, in-place activations); by default the plan's own choice.
#include <cstdio>
#include <string>
#include <unordered_map>

#include "cli/options.h"
#include "planner/allocator_sim.h"
#include "planner/plan.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr,
                 "usage: plan_events MODEL BATCH PRECISION [LOSS] [all|input_only] [off|on]\n");
    return 2;
  }
  memplan::ModelFlags m;
  m.model = argv[1];
  m.batch = std::stoll(argv[2]);
  memplan::PlanFlags f;
  f.precision = argv[3];
  if (argc > 4) f.loss = argv[4];
  auto loaded = memplan::LoadGraph(m.model);
  if (!loaded.ok()) return memplan::Fail(loaded.message());
  auto bindings = memplan::ToBindings(m);
  if (!bindings.ok()) return memplan::Fail(bindings.message());
  auto options = memplan::ToPlanOptions(f);
  if (!options.ok()) return memplan::Fail(options.message());
  options->keep_events = true;
  if (argc > 5) {
    options->fp32_conv = std::string(argv[5]) == "all" ? memplan::Fp32ConvCopies::kAll
                                                       : memplan::Fp32ConvCopies::kInputOnly;
  }
  if (argc > 6) {
    options->inplace =
        std::string(argv[6]) == "on" ? memplan::InPlace::kOn : memplan::InPlace::kOff;
  }
  std::vector<std::string> warnings;
  auto g = memplan::BindShapes(loaded.value(), bindings.value(), &warnings);
  if (!g.ok()) return memplan::Fail(g.message());
  auto plan = memplan::MakePlan(g.value(), bindings->batch, options.value());
  if (!plan.ok()) return memplan::Fail(plan.message());
  auto sim = memplan::SimulateCachingAllocator(plan->events, options->allocator);
  if (!sim.ok()) return memplan::Fail(sim.message());
  std::unordered_map<int64_t, int64_t> bytes_of;
  for (size_t e = 0; e < plan->events.size(); ++e) {
    const memplan::MemEvent& ev = plan->events[e];
    if (ev.empty_cache) {
      std::printf("%zu empty_cache\n", e);
      continue;
    }
    if (ev.is_alloc) bytes_of[ev.id] = ev.bytes;
    std::printf("%zu %s %s %s %c%lld %lld %lld\n", e, memplan::PhaseName(plan->event_phases[e]),
                plan->event_nodes[e].c_str(), memplan::CategoryName(plan->event_categories[e]),
                ev.is_alloc ? '+' : '-',
                static_cast<long long>(ev.is_alloc ? ev.bytes : bytes_of[ev.id]),
                static_cast<long long>(sim->allocated_after[e]),
                static_cast<long long>(sim->reserved_after[e]));
  }
  std::printf("peak allocated %lld reserved %lld at %s\n",
              static_cast<long long>(plan->peak.allocated_bytes),
              static_cast<long long>(plan->peak.reserved_bytes), plan->peak.node.c_str());
  return 0;
}
