// GPU-free tests: the replay schedule, kernel choice and operand placement,
// FLOPs, margins, the verdict, and the errors when there is no GPU.

#include "gpu_probe/gpu_probe.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "gpu_probe/replay.h"

namespace memplan {
namespace {

constexpr int64_t kMiB = 1 << 20;

MemEvent Alloc(int64_t id, int64_t bytes) { return MemEvent{id, bytes, true}; }
MemEvent Free(int64_t id) { return MemEvent{id, 0, false}; }

// +1 (1 MiB) +2 (30 MiB) -1 +3 (1 MiB) -2 -3, with a hand-made simulation:
// segment 0 (2 MiB, small pool) at event 0, segment 1 (30 MiB) at event 1.
struct Trace {
  std::vector<MemEvent> events = {
      Alloc(1, kMiB), Alloc(2, 30 * kMiB), Free(1), Alloc(3, kMiB), Free(2), Free(3)};
  SimResult sim;
  Trace() {
    sim.segment_bytes = {2 * kMiB, 30 * kMiB};
    sim.segment_created = {0, 1};
    sim.placements.resize(events.size());
    sim.placements[0] = Placement{0, 0, kMiB};
    sim.placements[1] = Placement{1, 0, 30 * kMiB};
    sim.placements[3] = Placement{0, 0, kMiB};
  }
};

std::string Kinds(const std::vector<ReplayStep>& steps) {
  std::string s;
  for (const ReplayStep& st : steps) {
    s += "SAFK"[st.kind];
    s += std::to_string(st.event);
    s += ' ';
  }
  return s;
}

TEST(BuildReplayScheduleTest, SegmentsBeforeTheirAllocKernelsAfterTheirEvent) {
  Trace t;
  Result<std::vector<ReplayStep>> steps = BuildReplaySchedule(t.events, t.sim, {1, 4}, 2);
  ASSERT_TRUE(steps.ok()) << steps.message();
  EXPECT_EQ(Kinds(steps.value()), "S0 A0 S1 A1 K1 F2 A3 F4 K4 F5 ");
  const std::vector<ReplayStep>& s = steps.value();
  EXPECT_EQ(s[0].bytes, 2 * kMiB);
  EXPECT_EQ(s[2].segment, 1);
  EXPECT_EQ(s[2].bytes, 30 * kMiB);
  EXPECT_EQ(s[4].kernel, 0u);
  EXPECT_EQ(s[8].kernel, 1u);
  // A free carries the block it releases.
  EXPECT_EQ(s[7].id, 2);
  EXPECT_EQ(s[7].segment, 1);
  EXPECT_EQ(s[7].bytes, 30 * kMiB);
}

TEST(BuildReplayScheduleTest, CompactPlacementsOnePerAlloc) {
  Trace t;
  t.sim.placements = {Placement{0, 0, kMiB}, Placement{1, 0, 30 * kMiB}, Placement{0, 0, kMiB}};
  Result<std::vector<ReplayStep>> steps = BuildReplaySchedule(t.events, t.sim, {}, 0);
  ASSERT_TRUE(steps.ok()) << steps.message();
  EXPECT_EQ(Kinds(steps.value()), "S0 A0 S1 A1 F2 A3 F4 F5 ");
}

TEST(BuildReplayScheduleTest, NoKernelEventsMeansAfterTheLastEvent) {
  Trace t;
  Result<std::vector<ReplayStep>> steps = BuildReplaySchedule(t.events, t.sim, {}, 1);
  ASSERT_TRUE(steps.ok()) << steps.message();
  EXPECT_EQ(Kinds(steps.value()), "S0 A0 S1 A1 F2 A3 F4 F5 K5 ");
}

TEST(BuildReplayScheduleTest, Errors) {
  Trace t;
  EXPECT_EQ(BuildReplaySchedule(t.events, t.sim, {6}, 1).message(),
            "kernel 0: kernel_event 6 is past the last event");
  EXPECT_EQ(BuildReplaySchedule(t.events, t.sim, {1, 2}, 1).message(),
            "kernel_event has 2 entries for 1 kernels");
  Trace outside;
  outside.sim.placements[3] = Placement{0, 1536 * 1024, kMiB};
  EXPECT_EQ(BuildReplaySchedule(outside.events, outside.sim, {}, 0).message(),
            "event 3: block [1572864, +1048576) outside segment 0");
  Trace unknown;
  unknown.events[2] = Free(7);
  EXPECT_EQ(BuildReplaySchedule(unknown.events, unknown.sim, {}, 0).message(),
            "event 2: free of unknown id 7");
  Trace short_sim;
  short_sim.sim.placements.resize(2);
  EXPECT_EQ(BuildReplaySchedule(short_sim.events, short_sim.sim, {}, 0).message(),
            "simulation: 2 placements for 6 events");
}

// The real simulation, replayed step by step, gives back its own peaks: the
// replay's sums are what the GPU run compares against.
TEST(BuildReplayScheduleTest, RealSimulationSumsToItsPeaks) {
  std::vector<MemEvent> events = {Alloc(1, 300 * kMiB),
                                  Alloc(2, 2000),
                                  Alloc(3, 700 * 1024),
                                  Free(2),
                                  Alloc(4, 15 * kMiB),
                                  Alloc(5, 1024 * kMiB),
                                  Free(1),
                                  Alloc(6, 5 * kMiB),
                                  Alloc(7, 64 * kMiB),
                                  Alloc(8, 100),
                                  Free(4),
                                  Alloc(9, 400 * kMiB),
                                  Alloc(10, 3 * kMiB),
                                  Free(5),
                                  Free(3),
                                  Free(6),
                                  Free(7),
                                  Free(8),
                                  Free(9),
                                  Free(10)};
  Result<SimResult> sim = SimulateCachingAllocator(events, AllocatorConfig());
  ASSERT_TRUE(sim.ok()) << sim.message();
  Result<std::vector<ReplayStep>> steps = BuildReplaySchedule(events, sim.value(), {}, 0);
  ASSERT_TRUE(steps.ok()) << steps.message();
  int64_t reserved = 0, allocated = 0, peak_allocated = 0;
  for (const ReplayStep& s : steps.value()) {
    if (s.kind == ReplayStep::kSegment) {
      reserved += s.bytes;
    }
    if (s.kind == ReplayStep::kAlloc) {
      allocated += s.bytes;
    }
    if (s.kind == ReplayStep::kFree) {
      allocated -= s.bytes;
    }
    peak_allocated = std::max(peak_allocated, allocated);
  }
  EXPECT_EQ(reserved, sim->peak_reserved);
  EXPECT_EQ(peak_allocated, sim->peak_allocated);
  EXPECT_EQ(allocated, 0);
}

KernelShape Gemm(int64_t m, int64_t n, int64_t k, int64_t b = 1) {
  KernelShape s;
  s.kind = KernelShape::kGemm;
  s.dims = {m, n, k, b};
  s.node = "gemm";
  return s;
}

KernelShape Conv(std::vector<int64_t> dims) {
  KernelShape s;
  s.kind = KernelShape::kConv;
  s.dims = std::move(dims);
  s.node = "conv";
  return s;
}

KernelShape Elementwise(int64_t numel) {
  KernelShape s;
  s.kind = KernelShape::kElementwise;
  s.dims = {numel};
  s.node = "ln";
  return s;
}

TEST(KernelMathTest, Flops) {
  EXPECT_EQ(KernelFlops(Gemm(4096, 4096, 4096)).value(), 2LL * 4096 * 4096 * 4096);
  EXPECT_EQ(KernelFlops(Gemm(128, 64, 32, 12)).value(), 2LL * 128 * 64 * 32 * 12);
  // ResNet's stem: 224x224 -> 112x112.
  KernelShape stem = Conv({1, 3, 224, 224, 64, 7, 7, 2, 3});
  int64_t ho = 0, wo = 0;
  ASSERT_TRUE(ConvOutputHw(stem, &ho, &wo));
  EXPECT_EQ(ho, 112);
  EXPECT_EQ(wo, 112);
  EXPECT_EQ(KernelFlops(stem).value(), 2LL * 64 * 112 * 112 * 3 * 49);
  // Stride and pad default to 1 and 0.
  EXPECT_EQ(KernelFlops(Conv({2, 8, 10, 10, 16, 3, 3})).value(), 2LL * 2 * 16 * 8 * 8 * 8 * 9);
  EXPECT_EQ(KernelFlops(Elementwise(1000)).value(), 5000);
  EXPECT_EQ(KernelFlops(Gemm(0, 1, 1)).message(), "kernel 'gemm': bad GEMM dims");
  EXPECT_EQ(KernelFlops(Conv({1, 3, 2, 2, 8, 5, 5})).message(),
            "kernel 'conv': bad conv dims (n,c,h,w,k,r,s,stride,pad)");
}

TEST(KernelMathTest, OperandBytesAndTraffic) {
  Result<std::vector<int64_t>> g = KernelOperandBytes(Gemm(8, 4, 2, 3), DType::kBFloat16);
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(g.value(), (std::vector<int64_t>{8 * 2 * 3 * 2, 2 * 4 * 3 * 2, 8 * 4 * 3 * 2}));
  KernelShape c = Conv({2, 3, 8, 8, 4, 3, 3, 1, 1});
  Result<std::vector<int64_t>> cb = KernelOperandBytes(c, DType::kFloat);
  ASSERT_TRUE(cb.ok()) << cb.message();
  const int64_t x = 2 * 3 * 8 * 8 * 4, w = 4 * 3 * 3 * 3 * 4, y = 2 * 4 * 8 * 8 * 4;
  EXPECT_EQ(cb.value(), (std::vector<int64_t>{x, w, y, x, w}));
  EXPECT_EQ(KernelTrafficBytes(c, "conv_fwd", cb.value()), x + w + y);
  EXPECT_EQ(KernelTrafficBytes(c, "conv_bwd_filter", cb.value()), x + y + w);
  EXPECT_EQ(KernelOperandBytes(Gemm(2, 2, 2), DType::kInt64).message(),
            "kernel 'gemm': cannot run in int64 (float32, bfloat16, float16)");
  EXPECT_EQ(KernelOperandBytes(Gemm(1LL << 40, 1LL << 21, 1), DType::kFloat).message(),
            "kernel 'gemm': operand size overflows");
}

TEST(KernelMathTest, ComputeDTypeAppliesToGemmAndConvOnly) {
  KernelShape e = Elementwise(10);
  e.dtype = DType::kFloat16;
  EXPECT_EQ(KernelDType(e, DType::kBFloat16), DType::kFloat16);
  e.dtype = DType::kDouble;
  EXPECT_EQ(KernelDType(e, DType::kBFloat16), DType::kBFloat16);
  EXPECT_EQ(KernelDType(e, DType::kInt64), DType::kFloat);
  EXPECT_EQ(KernelDType(Gemm(1, 1, 1), DType::kBFloat16), DType::kBFloat16);
  EXPECT_EQ(KernelDType(Gemm(1, 1, 1), DType::kUndefined), DType::kFloat);
}

TEST(SelectKernelsTest, DistinctShapesHeaviestFirstKindsInTurn) {
  std::vector<KernelShape> k = {Gemm(64, 64, 64),       Gemm(4096, 4096, 4096),
                                Gemm(64, 64, 64),       Elementwise(100),
                                Gemm(1024, 1024, 1024), Conv({1, 3, 8, 8, 4, 3, 3})};
  // Everything distinct runs; duplicates point at the first of their shape.
  EXPECT_EQ(SelectKernels(k, 10), (std::vector<int>{0, 1, 0, 3, 4, 5}));
  // Three slots: the heaviest GEMM, the conv, the elementwise kernel.
  EXPECT_EQ(SelectKernels(k, 3), (std::vector<int>{-1, 1, -1, 3, -1, 5}));
  // Four: then the next GEMM.
  EXPECT_EQ(SelectKernels(k, 4), (std::vector<int>{-1, 1, -1, 3, 4, 5}));
  EXPECT_EQ(SelectKernels(k, 0), (std::vector<int>(6, -1)));
  // The same dims in another dtype is another shape.
  std::vector<KernelShape> d = {Gemm(8, 8, 8), Gemm(8, 8, 8)};
  d[1].dtype = DType::kBFloat16;
  EXPECT_EQ(SelectKernels(d, 5), (std::vector<int>{0, 1}));
}

TEST(CarveOperandsTest, LargestFirstAlignedFirstFitRestOnTop) {
  std::vector<OperandSlot> s = CarveOperands({1000, 4096}, {100, 3000, 900, 5000});
  ASSERT_EQ(s.size(), 4u);
  // 5000 fits nowhere; 3000 takes segment 1 at 0; 900 segment 0 at 0;
  // 100 goes after 3000 in segment 1, aligned to 256 (3072).
  EXPECT_EQ(s[3].segment, -1);
  EXPECT_EQ(s[1].segment, 1);
  EXPECT_EQ(s[1].offset, 0);
  EXPECT_EQ(s[2].segment, 0);
  EXPECT_EQ(s[2].offset, 0);
  EXPECT_EQ(s[0].segment, 1);
  EXPECT_EQ(s[0].offset, 3072);
  // A segment not created yet has 0 bytes.
  EXPECT_EQ(CarveOperands({0}, {1})[0].segment, -1);
}

TEST(MarginTest, KeepsTheMarginFree) {
  EXPECT_TRUE(MarginAllows(1000, 100, 900));
  EXPECT_FALSE(MarginAllows(1000, 100, 901));
  EXPECT_TRUE(MarginAllows(1000, -5, 1000));
  EXPECT_FALSE(MarginAllows(100, 512 * kMiB, 1));
}

TEST(ReportTest, ToleranceAndMessage) {
  EXPECT_TRUE(WithinTolerance(105, 100, 0.05));
  EXPECT_FALSE(WithinTolerance(106, 100, 0.05));
  EXPECT_TRUE(WithinTolerance(95, 100, 0.05));
  EXPECT_TRUE(WithinTolerance(12345, 0, 0.05));  // Nothing predicted.

  ValidationReport r;
  r.measured_reserved_peak = 32 * kMiB;
  r.measured_device_peak = 800 * kMiB;
  r.predicted_reserved = 32 * kMiB;
  r.predicted_device = 780 * kMiB;
  FinishReport(0.05, &r);
  EXPECT_TRUE(r.within_tolerance);
  EXPECT_EQ(r.message, "fits: reserved 32.0 MiB, device 800.0 MiB, within 5 % of the prediction");
  r.predicted_device = 700 * kMiB;
  FinishReport(0.05, &r);
  EXPECT_FALSE(r.within_tolerance);
  EXPECT_EQ(r.message,
            "fits: reserved 32.0 MiB, device 800.0 MiB, off the prediction by more than 5 %");

  ValidationReport oom;
  oom.fits = false;
  oom.oom_at_event = 3;
  FinishReport(0.05, &oom);
  EXPECT_FALSE(oom.within_tolerance);
  EXPECT_EQ(oom.message,
            "does not fit: event 3 needs more than the free device memory minus the safety margin");
}

// gpt2 b600 on an H200 (599 GiB predicted): refused before any cudaMalloc,
// in GiB, instead of failing at an allocator event number.
TEST(ReportTest, RefusesUpFrontWhatCannotFit) {
  const int64_t gib = 1024 * kMiB;
  Status s = RefuseBeyondDevice(599 * gib, 139 * gib, 512 * kMiB, 0);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "the plan reserves 599.00 GiB at its peak; GPU 0 has 139.00 GiB free, 138.50 GiB "
            "usable after the 0.50 GiB --margin: it cannot fit (nothing was allocated)");
  EXPECT_TRUE(RefuseBeyondDevice(100 * gib, 139 * gib, 512 * kMiB, 0).ok());
  EXPECT_FALSE(RefuseBeyondDevice(139 * gib, 139 * gib, 512 * kMiB, 1).ok());
}

TEST(NoGpuTest, ErrorsNameTheReason) {
  if (!GpuSupportBuilt()) {
    const std::string msg =
        "memplan was built without CUDA: GPU commands are unavailable (rebuild with the CUDA "
        "Toolkit)";
    EXPECT_EQ(ProbeDevices().message(), msg);
    EXPECT_EQ(ValidateOnGpu(ValidationRequest()).message(), msg);
    return;
  }
  Result<std::vector<DeviceInfo>> devices = ProbeDevices();
  if (devices.ok()) {
    GTEST_SKIP() << "a GPU is present: the GPU tests cover it";
  }
  EXPECT_EQ(devices.message().rfind("no CUDA device found (", 0), 0u) << devices.message();
  EXPECT_EQ(devices.message().back(), ')');
  EXPECT_EQ(ValidateOnGpu(ValidationRequest()).message(), devices.message());
  // Bad input is reported before the GPU is looked for.
  ValidationRequest bad;
  bad.kernels = {Gemm(2, 2, 2)};
  bad.compute_dtype = DType::kInt32;
  EXPECT_EQ(ValidateOnGpu(bad).message(),
            "kernel 'gemm': cannot run in int32 (float32, bfloat16, float16)");
}

}  // namespace
}  // namespace memplan
