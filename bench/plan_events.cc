// Prints the allocator events memplan plans for one configuration, one line
// each: event index, phase, op, category, +bytes (alloc) or -bytes (free),
// and the simulated memory_allocated and memory_reserved after it. For comparing a plan with a
// PyTorch allocator trace (bench/families.py trace, bench/memtrace.py).
//
//   plan_events MODEL BATCH PRECISION [LOSS] [all|input_only] [off|on]
//
// The last two pick one variant of what the export does not say (the fp32
// cuDNN engine kind, in-place activations); by default the plan's own choice.
// MEMPLAN_LORA=SPEC, MEMPLAN_WEIGHTS=FORMAT and MEMPLAN_MODEL_LOAD=LOAD in the
// environment add --lora, --weights and --model-load (MEMPLAN_ATTENTION --attention,
// MEMPLAN_CHECKPOINT --checkpoint); MEMPLAN_MODE=inference
// plans the inference pass. MEMPLAN_PLACEMENTS=1
// appends each event's id and where an allocation landed: #ID @SEGMENT:OFFSET/BLOCK
// (bytes), and
// the segments' sizes after the peak line. MEMPLAN_DEVICE_LIMIT=BYTES replays
// the events with cudaMalloc failing past that many reserved bytes (the caching
// allocator then frees its cached segments and retries, as PyTorch does on a
// full card) and prints the retries after the peak line.
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unordered_map>

#include "onnx_import/importer.h"
#include "planner/allocator_sim.h"
#include "planner/finetune.h"
#include "planner/plan.h"
#include "planner/plan_model.h"
#include "planner/text.h"

namespace {

int Fail(const std::string& message) {
  std::fprintf(stderr, "plan_events: error: %s\n", message.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr,
                 "usage: plan_events MODEL BATCH PRECISION [LOSS] [all|input_only] [off|on]\n");
    return 2;
  }
  auto loaded = memplan::ImportOnnxFile(argv[1]);
  if (!loaded.ok()) return Fail(loaded.message());
  memplan::ShapeBindings bindings;
  bindings.batch = std::stoll(argv[2]);
  memplan::Result<memplan::PlanOptions> options = memplan::PlanOptions();
  options->mode = memplan::Mode::kTrain;
  auto precision = memplan::ParseEnum<memplan::Precision>(argv[3]);
  if (!precision.ok()) return Fail(precision.message());
  options->precision = precision.value();
  if (argc > 4) {
    auto loss = memplan::ParseEnum<memplan::Loss>(argv[4]);
    if (!loss.ok()) return Fail(loss.message());
    options->loss = loss.value();
  }
  options->keep_events = true;
  if (argc > 5) {
    const std::string kind = argv[5];
    if (kind != "all" && kind != "input_only") return Fail("unknown engine kind '" + kind + "'");
    options->fp32_conv =
        kind == "all" ? memplan::Fp32ConvCopies::kAll : memplan::Fp32ConvCopies::kInputOnly;
  }
  if (argc > 6) {
    const std::string inplace = argv[6];
    if (inplace != "on" && inplace != "off") return Fail("unknown in-place '" + inplace + "'");
    options->inplace = inplace == "on" ? memplan::InPlace::kOn : memplan::InPlace::kOff;
  }
  // MEMPLAN_LORA / MEMPLAN_WEIGHTS: a --lora spec and a --weights format.
  if (const char* lora = std::getenv("MEMPLAN_LORA")) {
    auto l = memplan::ParseLora(lora);
    if (!l.ok()) return Fail(l.message());
    options->lora = l.value();
  }
  if (const char* w = std::getenv("MEMPLAN_WEIGHTS")) {
    auto f = memplan::ParseEnum<memplan::WeightFormat>(w);
    if (!f.ok()) return Fail(f.message());
    options->weights = f.value();
  }
  // MEMPLAN_MODE=inference: the inference pass instead of a training step.
  if (const char* m = std::getenv("MEMPLAN_MODE")) {
    auto f = memplan::ParseEnum<memplan::Mode>(m);
    if (!f.ok()) return Fail(f.message());
    options->mode = f.value();
  }
  // MEMPLAN_ATTENTION: an --attention value (eager: transformers' eager attention).
  if (const char* a = std::getenv("MEMPLAN_ATTENTION")) {
    auto f = memplan::ParseEnum<memplan::Attention>(a);
    if (!f.ok()) return Fail(f.message());
    options->attention = f.value();
  }
  // MEMPLAN_MODEL_LOAD: a --model-load value (bf16/fp16).
  if (const char* m = std::getenv("MEMPLAN_MODEL_LOAD")) {
    auto f = memplan::ParseEnum<memplan::ModelLoad>(m);
    if (!f.ok()) return Fail(f.message());
    options->model_load = f.value();
  }
  // MEMPLAN_CHECKPOINT: modules recomputed in backward, comma-separated (--checkpoint).
  if (const char* c = std::getenv("MEMPLAN_CHECKPOINT")) {
    options->checkpoint_segments = memplan::SplitList(c);
  }
  auto plan = memplan::PlanModel(loaded.value(), bindings, options.value());
  if (!plan.ok()) return Fail(plan.message());
  // MEMPLAN_DEVICE_LIMIT: bytes past which the replay's cudaMalloc fails (the
  // caching allocator then frees its cached segments and retries).
  memplan::AllocatorConfig replay_config = options->allocator;
  if (const char* l = std::getenv("MEMPLAN_DEVICE_LIMIT")) {
    char* end = nullptr;
    errno = 0;
    const long long bytes = std::strtoll(l, &end, 10);
    if (end == l || *end != '\0' || errno != 0 || bytes <= 0) {
      return Fail(std::string("MEMPLAN_DEVICE_LIMIT: '") + l + "' is not a positive byte count");
    }
    replay_config.device_limit = bytes;
  }
  auto sim = memplan::SimulateCachingAllocator(plan->events, replay_config);
  if (!sim.ok()) return Fail(sim.message());
  const bool placements = std::getenv("MEMPLAN_PLACEMENTS") != nullptr;
  std::unordered_map<int64_t, int64_t> bytes_of;
  for (size_t e = 0; e < plan->events.size(); ++e) {
    const memplan::MemEvent& ev = plan->events[e];
    if (ev.empty_cache) {
      std::printf("%zu empty_cache\n", e);
      continue;
    }
    if (ev.is_alloc) bytes_of[ev.id] = ev.bytes;
    std::printf("%zu %s %s %s %c%lld %lld %lld", e, memplan::PhaseName(plan->event_phases[e]),
                plan->event_nodes[e].c_str(), memplan::CategoryName(plan->event_categories[e]),
                ev.is_alloc ? '+' : '-',
                static_cast<long long>(ev.is_alloc ? ev.bytes : bytes_of[ev.id]),
                static_cast<long long>(sim->allocated_after[e]),
                static_cast<long long>(sim->reserved_after[e]));
    const memplan::Placement& at = sim->placements[e];
    if (placements) std::printf(" #%lld", static_cast<long long>(ev.id));
    if (placements && ev.is_alloc && at.segment >= 0) {
      std::printf(" @%d:%lld/%lld", at.segment, static_cast<long long>(at.offset),
                  static_cast<long long>(at.block));
    }
    std::printf("\n");
  }
  std::printf("peak allocated %lld reserved %lld at %s\n",
              static_cast<long long>(plan->peak.allocated_bytes),
              static_cast<long long>(plan->peak.reserved_bytes), plan->peak.node.c_str());
  if (replay_config.device_limit > 0) {
    std::printf("device limit %lld: %lld retries, %s\n",
                static_cast<long long>(replay_config.device_limit),
                static_cast<long long>(sim->alloc_retries), sim->oom ? "out of memory" : "no oom");
  }
  if (placements) {
    for (size_t k = 0; k < sim->segment_bytes.size(); ++k) {
      std::printf("segment %zu %lld created at event %zu\n", k,
                  static_cast<long long>(sim->segment_bytes[k]), sim->segment_created[k]);
    }
  }
  return 0;
}
