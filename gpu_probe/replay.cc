#include "gpu_probe/replay.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <tuple>
#include <unordered_map>

#include "planner/checked.h"

namespace memplan {

namespace {

std::string EventPlace(size_t i) { return "event " + std::to_string(i); }

}  // namespace

Result<std::vector<ReplayStep>> BuildReplaySchedule(const std::vector<MemEvent>& events,
                                                    const SimResult& sim,
                                                    const std::vector<size_t>& kernel_event,
                                                    size_t num_kernels) {
  if (!kernel_event.empty() && kernel_event.size() != num_kernels) {
    return Status::Error("kernel_event has " + std::to_string(kernel_event.size()) +
                         " entries for " + std::to_string(num_kernels) + " kernels");
  }
  if (sim.segment_bytes.size() != sim.segment_created.size()) {
    return Status::Error("simulation: segment_bytes and segment_created differ in length");
  }
  size_t num_allocs = 0;
  for (const MemEvent& e : events) {
    num_allocs += e.is_alloc ? 1 : 0;
  }
  // Placements are either one per event or one per alloc event.
  const bool per_event = sim.placements.size() == events.size();
  if (!per_event && sim.placements.size() != num_allocs) {
    return Status::Error("simulation: " + std::to_string(sim.placements.size()) +
                         " placements for " + std::to_string(events.size()) + " events");
  }

  // Segments and kernels bucketed by the event they follow.
  std::multimap<size_t, int> segments_at;
  for (size_t s = 0; s < sim.segment_bytes.size(); ++s) {
    if (sim.segment_created[s] >= events.size()) {
      return Status::Error("simulation: segment " + std::to_string(s) +
                           " created at an event past the end");
    }
    if (sim.segment_bytes[s] <= 0) {
      return Status::Error("simulation: segment " + std::to_string(s) + " has no bytes");
    }
    segments_at.emplace(sim.segment_created[s], static_cast<int>(s));
  }
  const size_t end = events.empty() ? 0 : events.size() - 1;
  std::multimap<size_t, size_t> kernels_at;
  for (size_t k = 0; k < num_kernels; ++k) {
    size_t at = kernel_event.empty() ? end : kernel_event[k];
    if (!events.empty() && at >= events.size()) {
      return Status::Error("kernel " + std::to_string(k) + ": kernel_event " + std::to_string(at) +
                           " is past the last event");
    }
    kernels_at.emplace(at, k);
  }

  std::vector<ReplayStep> steps;
  std::unordered_map<int64_t, ReplayStep> live;
  size_t alloc_ordinal = 0;
  for (size_t i = 0; i < events.size(); ++i) {
    const MemEvent& e = events[i];
    auto segs = segments_at.equal_range(i);
    for (auto it = segs.first; it != segs.second; ++it) {
      ReplayStep s;
      s.kind = ReplayStep::kSegment;
      s.event = i;
      s.segment = it->second;
      s.bytes = sim.segment_bytes[it->second];
      steps.push_back(s);
    }
    if (e.empty_cache) {
      // The replay keeps every segment it made (it never gives memory back
      // before the end), so an empty_cache() leaves it above the simulation.
    } else if (e.is_alloc) {
      const Placement& p = sim.placements[per_event ? i : alloc_ordinal++];
      if (p.segment < 0 || static_cast<size_t>(p.segment) >= sim.segment_bytes.size()) {
        return Status::Error(EventPlace(i) + ": placement in unknown segment " +
                             std::to_string(p.segment));
      }
      int64_t block_end = 0;
      if (p.offset < 0 || p.block <= 0 || !CheckedAdd(p.offset, p.block, &block_end) ||
          block_end > sim.segment_bytes[p.segment]) {
        return Status::Error(EventPlace(i) + ": block [" + std::to_string(p.offset) + ", +" +
                             std::to_string(p.block) + ") outside segment " +
                             std::to_string(p.segment));
      }
      if (live.count(e.id) != 0) {
        return Status::Error(EventPlace(i) + ": id " + std::to_string(e.id) + " allocated twice");
      }
      ReplayStep s;
      s.kind = ReplayStep::kAlloc;
      s.event = i;
      s.segment = p.segment;
      s.offset = p.offset;
      s.bytes = p.block;
      s.id = e.id;
      live[e.id] = s;
      steps.push_back(s);
    } else {
      auto it = live.find(e.id);
      if (it == live.end()) {
        return Status::Error(EventPlace(i) + ": free of unknown id " + std::to_string(e.id));
      }
      ReplayStep s = it->second;
      s.kind = ReplayStep::kFree;
      s.event = i;
      live.erase(it);
      steps.push_back(s);
    }
    auto ks = kernels_at.equal_range(i);
    for (auto it = ks.first; it != ks.second; ++it) {
      ReplayStep s;
      s.kind = ReplayStep::kKernel;
      s.event = i;
      s.kernel = it->second;
      steps.push_back(s);
    }
  }
  if (events.empty()) {
    for (const auto& kv : kernels_at) {
      ReplayStep s;
      s.kind = ReplayStep::kKernel;
      s.kernel = kv.second;
      steps.push_back(s);
    }
  }
  return steps;
}

int KernelElementBytes(DType t) {
  switch (t) {
    case DType::kFloat:
      return 4;
    case DType::kBFloat16:
    case DType::kFloat16:
      return 2;
    default:
      return 0;
  }
}

DType KernelDType(const KernelShape& shape, DType compute) {
  if (shape.kind == KernelShape::kElementwise) {
    // A type our kernel lacks (fp64, fp8, ...) runs in the compute type.
    if (KernelElementBytes(shape.dtype) != 0) {
      return shape.dtype;
    }
    return KernelElementBytes(compute) != 0 ? compute : DType::kFloat;
  }
  return compute == DType::kUndefined ? shape.dtype : compute;
}

namespace {

// dims[i] or `fallback` when absent.
int64_t DimOr(const KernelShape& s, size_t i, int64_t fallback) {
  return i < s.dims.size() ? s.dims[i] : fallback;
}

bool AllPositive(std::initializer_list<int64_t> v) {
  return std::all_of(v.begin(), v.end(), [](int64_t x) { return x > 0; });
}

std::string ShapeError(const KernelShape& s, const char* what) {
  return "kernel '" + s.node + "': " + what;
}

}  // namespace

bool ConvOutputHw(const KernelShape& c, int64_t* ho, int64_t* wo) {
  if (c.dims.size() < 7) {
    return false;
  }
  const int64_t h = c.dims[2], w = c.dims[3], r = c.dims[5], s = c.dims[6];
  const int64_t stride = DimOr(c, 7, 1), pad = DimOr(c, 8, 0);
  if (!AllPositive({h, w, r, s, stride}) || pad < 0) {
    return false;
  }
  const int64_t hp = h + 2 * pad - r, wp = w + 2 * pad - s;
  if (hp < 0 || wp < 0) {
    return false;
  }
  *ho = hp / stride + 1;
  *wo = wp / stride + 1;
  return true;
}

Result<int64_t> KernelFlops(const KernelShape& s) {
  int64_t f = 0;
  switch (s.kind) {
    case KernelShape::kGemm: {
      if (s.dims.size() < 3) {
        return Status::Error(ShapeError(s, "GEMM needs m,n,k"));
      }
      if (!CheckedNumel({2, s.dims[0], s.dims[1], s.dims[2], DimOr(s, 3, 1)}, &f) || f == 0) {
        return Status::Error(ShapeError(s, "bad GEMM dims"));
      }
      return f;
    }
    case KernelShape::kConv: {
      int64_t ho = 0, wo = 0;
      if (!ConvOutputHw(s, &ho, &wo) ||
          !CheckedNumel({2, s.dims[0], s.dims[4], ho, wo, s.dims[1], s.dims[5], s.dims[6]}, &f) ||
          f == 0) {
        return Status::Error(ShapeError(s, "bad conv dims (n,c,h,w,k,r,s,stride,pad)"));
      }
      return f;
    }
    case KernelShape::kElementwise: {
      if (s.dims.empty() || !CheckedMul(5, s.dims[0], &f) || f == 0) {
        return Status::Error(ShapeError(s, "elementwise needs numel > 0"));
      }
      return f;
    }
  }
  return Status::Error(ShapeError(s, "unknown kernel kind"));
}

Result<std::vector<int64_t>> KernelOperandBytes(const KernelShape& s, DType t) {
  const int64_t es = KernelElementBytes(t);
  if (es == 0) {
    return Status::Error(ShapeError(s, "cannot run in ") + DTypeName(t) +
                         " (float32, bfloat16, float16)");
  }
  Result<int64_t> flops = KernelFlops(s);
  if (!flops.ok()) {
    return flops.status();
  }
  std::vector<std::vector<int64_t>> factors;
  switch (s.kind) {
    case KernelShape::kGemm: {
      const int64_t m = s.dims[0], n = s.dims[1], k = s.dims[2], b = DimOr(s, 3, 1);
      factors = {{m, k, b}, {k, n, b}, {m, n, b}};
      break;
    }
    case KernelShape::kConv: {
      int64_t ho = 0, wo = 0;
      ConvOutputHw(s, &ho, &wo);
      const auto& d = s.dims;
      std::vector<int64_t> x = {d[0], d[1], d[2], d[3]}, w = {d[4], d[1], d[5], d[6]};
      factors = {x, w, {d[0], d[4], ho, wo}, x, w};
      break;
    }
    case KernelShape::kElementwise:
      factors = {{s.dims[0]}, {s.dims[0]}};
      break;
  }
  std::vector<int64_t> bytes;
  for (auto& f : factors) {
    f.push_back(es);
    int64_t b = 0;
    if (!CheckedNumel(f, &b)) {
      return Status::Error(ShapeError(s, "operand size overflows"));
    }
    bytes.push_back(b);
  }
  return bytes;
}

int64_t KernelTrafficBytes(const KernelShape& shape, const std::string& pass,
                           const std::vector<int64_t>& ob) {
  switch (shape.kind) {
    case KernelShape::kGemm:
      return ob[0] + ob[1] + ob[2];
    case KernelShape::kConv:
      if (pass == "conv_fwd") {
        return ob[0] + ob[1] + ob[2];  // x, w -> y
      }
      if (pass == "conv_bwd_data") {
        return ob[2] + ob[1] + ob[3];  // dy, w -> dx
      }
      return ob[0] + ob[2] + ob[4];  // x, dy -> dw
    case KernelShape::kElementwise:
      return ob[0] + ob[1];
  }
  return 0;
}

std::vector<int> SelectKernels(const std::vector<KernelShape>& kernels, int max_kernels) {
  std::vector<int> use(kernels.size(), -1);
  std::map<std::tuple<int, std::vector<int64_t>, int>, int> first;
  // Distinct shapes per kind, in order of appearance.
  std::vector<std::vector<int>> by_kind(3);
  for (size_t i = 0; i < kernels.size(); ++i) {
    const KernelShape& k = kernels[i];
    auto key = std::make_tuple(static_cast<int>(k.kind), k.dims, static_cast<int>(k.dtype));
    auto it = first.find(key);
    if (it != first.end()) {
      continue;
    }
    first.emplace(key, static_cast<int>(i));
    by_kind[static_cast<int>(k.kind)].push_back(static_cast<int>(i));
  }
  auto flops = [&](int i) {
    Result<int64_t> f = KernelFlops(kernels[i]);
    return f.ok() ? f.value() : int64_t{0};
  };
  for (auto& list : by_kind) {
    std::stable_sort(list.begin(), list.end(), [&](int a, int b) { return flops(a) > flops(b); });
  }
  // Take the kinds in turn: GEMM, conv, elementwise, GEMM, ...
  std::vector<bool> chosen(kernels.size(), false);
  int taken = 0;
  for (size_t round = 0; taken < max_kernels; ++round) {
    bool any = false;
    for (auto& list : by_kind) {
      if (round < list.size() && taken < max_kernels) {
        chosen[list[round]] = true;
        ++taken;
        any = true;
      }
    }
    if (!any) {
      break;
    }
  }
  for (size_t i = 0; i < kernels.size(); ++i) {
    const KernelShape& k = kernels[i];
    int rep = first[std::make_tuple(static_cast<int>(k.kind), k.dims, static_cast<int>(k.dtype))];
    use[i] = chosen[rep] ? rep : -1;
  }
  return use;
}

std::vector<OperandSlot> CarveOperands(const std::vector<int64_t>& segment_bytes,
                                       const std::vector<int64_t>& operand_bytes, int64_t align) {
  std::vector<OperandSlot> slots(operand_bytes.size());
  std::vector<int64_t> used(segment_bytes.size(), 0);
  std::vector<size_t> order(operand_bytes.size());
  for (size_t i = 0; i < order.size(); ++i) {
    order[i] = i;
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return operand_bytes[a] > operand_bytes[b]; });
  for (size_t i : order) {
    for (size_t s = 0; s < segment_bytes.size(); ++s) {
      const int64_t start = (used[s] + align - 1) / align * align;
      if (operand_bytes[i] <= segment_bytes[s] - start) {
        slots[i].segment = static_cast<int>(s);
        slots[i].offset = start;
        used[s] = start + operand_bytes[i];
        break;
      }
    }
  }
  return slots;
}

bool MarginAllows(int64_t free_bytes, int64_t margin, int64_t bytes) {
  return bytes <= free_bytes - std::max<int64_t>(margin, 0);
}

bool WithinTolerance(int64_t measured, int64_t predicted, double tolerance) {
  if (predicted <= 0) {
    return true;
  }
  return std::fabs(static_cast<double>(measured - predicted)) <=
         tolerance * static_cast<double>(predicted);
}

namespace {

std::string Mib(int64_t b) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(b) / (1 << 20));
  return buf;
}

}  // namespace

void FinishReport(double tolerance, ValidationReport* r) {
  r->within_tolerance =
      r->fits && WithinTolerance(r->measured_allocated_peak, r->predicted_allocated, tolerance) &&
      WithinTolerance(r->measured_reserved_peak, r->predicted_reserved, tolerance) &&
      WithinTolerance(r->measured_device_peak, r->predicted_device, tolerance);
  if (!r->fits) {
    r->message = "does not fit: event " + std::to_string(r->oom_at_event) +
                 " needs more than the free device memory minus the safety margin" +
                 (r->message.empty() ? "" : " (" + r->message + ")");
    return;
  }
  std::string m = "fits: reserved " + Mib(r->measured_reserved_peak) + ", device " +
                  Mib(r->measured_device_peak);
  if (r->predicted_reserved > 0 || r->predicted_device > 0 || r->predicted_allocated > 0) {
    char pct[32];
    std::snprintf(pct, sizeof pct, "%g %%", tolerance * 100);
    m += r->within_tolerance ? std::string(", within ") + pct + " of the prediction"
                             : std::string(", off the prediction by more than ") + pct;
  }
  r->message = m;
}

Status RefuseBeyondDevice(int64_t reserved_peak, int64_t free_bytes, int64_t margin_bytes,
                          int device) {
  const int64_t usable = free_bytes - margin_bytes;
  if (reserved_peak <= usable) return Status();
  auto gib = [](int64_t b) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(b) / (1024.0 * 1024 * 1024));
    return std::string(buf);
  };
  return Status::Error("the plan reserves " + gib(reserved_peak) + " at its peak; GPU " +
                       std::to_string(device) + " has " + gib(free_bytes) + " free, " +
                       gib(usable > 0 ? usable : 0) + " usable after the " + gib(margin_bytes) +
                       " --margin: it cannot fit (nothing was allocated)");
}

}  // namespace memplan
