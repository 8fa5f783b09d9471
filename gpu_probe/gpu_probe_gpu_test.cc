// Tests on a real GPU (ctest label gpu; CI leaves them out). They print what
// they measured, for the record.

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "gpu_probe/gpu_library.h"
#include "gpu_probe/gpu_probe.h"

namespace memplan {
namespace {

constexpr int64_t kMiB = 1 << 20;

double Mib(int64_t b) { return static_cast<double>(b) / kMiB; }

MemEvent Alloc(int64_t id, int64_t bytes) { return MemEvent{id, bytes, true}; }
MemEvent Free(int64_t id) { return MemEvent{id, 0, false}; }

void PrintReport(const char* what, const ValidationReport& r) {
  std::printf(
      "[%s] fits=%d oom_at_event=%lld context=%.1f MiB\n"
      "  allocated: measured %.1f MiB, simulated %.1f MiB, predicted %.1f MiB\n"
      "  reserved:  measured %.1f MiB, simulated %.1f MiB, predicted %.1f MiB\n"
      "  device:    measured %.1f MiB, predicted %.1f MiB; on top (workspaces, operands) %.1f MiB\n"
      "  within_tolerance=%d: %s\n",
      what, r.fits, static_cast<long long>(r.oom_at_event), Mib(r.context_bytes),
      Mib(r.measured_allocated_peak), Mib(r.simulated_allocated_peak), Mib(r.predicted_allocated),
      Mib(r.measured_reserved_peak), Mib(r.simulated_reserved_peak), Mib(r.predicted_reserved),
      Mib(r.measured_device_peak), Mib(r.predicted_device), Mib(r.extra_bytes_peak),
      r.within_tolerance, r.message.c_str());
  for (const KernelResult& k : r.kernels) {
    std::string dims;
    for (int64_t d : k.shape.dims) {
      dims += (dims.empty() ? "" : "x") + std::to_string(d);
    }
    std::printf("  kernel %-16s %-22s %9.3f ms %8.1f TFLOP/s %8.1f GB/s ws %8.2f MiB  %s\n",
                k.pass.c_str(), dims.c_str(), k.ms, k.tflops, k.gbs, Mib(k.workspace_bytes),
                k.algo.c_str());
  }
  for (const WorkspaceCheck& w : r.workspaces) {
    std::printf("  cudnn workspace %-16s %-8s %10.2f MiB (plan assumed %.2f MiB)\n", w.pass.c_str(),
                w.node.c_str(), Mib(w.cudnn_bytes), Mib(w.assumed_bytes));
  }
  std::fflush(stdout);
}

TEST(GpuProbeTest, ProbeFindsADevice) {
  Result<std::vector<DeviceInfo>> devices = gpu_impl::ProbeDevices();
  ASSERT_TRUE(devices.ok()) << devices.message();
  ASSERT_GE(devices->size(), 1u);
  for (const DeviceInfo& d : devices.value()) {
    std::printf(
        "device %d: %s, sm_%d%d, %d SMs, total %.1f MiB, free %.1f MiB, ~%.0f GB/s\n"
        "  context overhead %.1f MiB = context %.1f + cuBLAS handle %.1f + cuDNN handle %.1f\n",
        d.index, d.name.c_str(), d.cc_major, d.cc_minor, d.sm_count, Mib(d.total_bytes),
        Mib(d.free_bytes), d.mem_bandwidth_gbs, Mib(d.context_bytes), Mib(d.runtime_bytes),
        Mib(d.cublas_bytes), Mib(d.cudnn_bytes));
    EXPECT_GT(d.total_bytes, 0);
    EXPECT_GT(d.context_bytes, 0);
    EXPECT_GT(d.free_bytes, 0);
    EXPECT_GT(d.sm_count, 0);
    EXPECT_FALSE(d.name.empty());
  }
  std::fflush(stdout);
}

// Ten allocations of mixed sizes (small and large pool, 2/20 MiB and rounded
// segments) with frees in between.
std::vector<MemEvent> MixedTrace() {
  return {Alloc(1, 300 * kMiB),
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
}

TEST(GpuProbeTest, TraceReplaysExactly) {
  ValidationRequest req;
  req.events = MixedTrace();
  Result<SimResult> sim = SimulateCachingAllocator(req.events, AllocatorConfig());
  ASSERT_TRUE(sim.ok()) << sim.message();
  req.predicted_allocated = sim->peak_allocated;
  req.predicted_reserved = sim->peak_reserved;
  Result<ValidationReport> r = gpu_impl::ValidateOnGpu(req);
  ASSERT_TRUE(r.ok()) << r.message();
  PrintReport("mixed trace", r.value());
  EXPECT_TRUE(r->fits);
  EXPECT_EQ(r->measured_reserved_peak, sim->peak_reserved);
  EXPECT_EQ(r->measured_allocated_peak, sim->peak_allocated);
  EXPECT_GT(r->context_bytes, 0);
  const double expected = static_cast<double>(sim->peak_reserved + r->context_bytes);
  EXPECT_NEAR(static_cast<double>(r->measured_device_peak), expected, 0.05 * expected);
  EXPECT_TRUE(r->within_tolerance);
}

KernelShape Shape(KernelShape::Kind kind, std::vector<int64_t> dims, const char* node) {
  KernelShape s;
  s.kind = kind;
  s.dims = std::move(dims);
  s.node = node;
  return s;
}

void RunKernels(DType dtype, const char* label) {
  ValidationRequest req;
  // Two big live tensors the kernels run in.
  req.events = {Alloc(1, 1024 * kMiB), Alloc(2, 512 * kMiB), Free(2), Free(1)};
  req.compute_dtype = dtype;
  const int64_t g = dtype == DType::kFloat ? 4096 : 8192;
  req.kernels = {Shape(KernelShape::kGemm, {g, g, g, 1}, "gemm"),
                 Shape(KernelShape::kGemm, {1024, 1024, 64, 48}, "bmm"),
                 Shape(KernelShape::kConv, {64, 64, 56, 56, 64, 3, 3, 1, 1}, "conv3x3"),
                 Shape(KernelShape::kConv, {64, 3, 224, 224, 64, 7, 7, 2, 3}, "stem"),
                 Shape(KernelShape::kElementwise, {64LL << 20}, "layernorm")};
  req.kernels.back().dtype = dtype;
  req.kernel_event = {1, 1, 1, 1, 1};
  Result<ValidationReport> r = gpu_impl::ValidateOnGpu(req);
  ASSERT_TRUE(r.ok()) << r.message();
  PrintReport(label, r.value());
  EXPECT_TRUE(r->fits);
  // gemm x2, conv x2 x3 passes, elementwise.
  ASSERT_EQ(r->kernels.size(), 9u);
  for (const KernelResult& k : r->kernels) {
    EXPECT_GT(k.ms, 0) << k.pass << " " << k.algo;
    EXPECT_GT(k.tflops, 0) << k.pass << " " << k.algo;
  }
  EXPECT_EQ(r->workspaces.size(), 6u);
}

TEST(GpuProbeTest, KernelsBf16) { RunKernels(DType::kBFloat16, "kernels bf16"); }
TEST(GpuProbeTest, KernelsFp32) { RunKernels(DType::kFloat, "kernels fp32"); }

TEST(GpuProbeTest, ImpossibleRequestDoesNotFit) {
  Result<std::vector<DeviceInfo>> devices = gpu_impl::ProbeDevices();
  ASSERT_TRUE(devices.ok()) << devices.message();
  const int64_t total = devices->at(0).total_bytes;
  const int64_t free_before = devices->at(0).free_bytes;
  ValidationRequest req;
  // 1 GiB that fits, then more than the whole device.
  req.events = {Alloc(1, 1024 * kMiB), Alloc(2, total + 1024 * kMiB), Free(2), Free(1)};
  // Refused before anything is allocated: the replayed peak exceeds the free memory.
  Result<ValidationReport> r = gpu_impl::ValidateOnGpu(req);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("cannot fit (nothing was allocated)"), std::string::npos)
      << r.message();
  // Nothing is held.
  Result<std::vector<DeviceInfo>> after = gpu_impl::ProbeDevices();
  ASSERT_TRUE(after.ok()) << after.message();
  EXPECT_NEAR(static_cast<double>(after->at(0).free_bytes), static_cast<double>(free_before),
              64.0 * kMiB);
}

TEST(GpuProbeTest, MarginStopsBeforeTheDriverDoes) {
  Result<std::vector<DeviceInfo>> devices = gpu_impl::ProbeDevices();
  ASSERT_TRUE(devices.ok()) << devices.message();
  ValidationRequest req;
  // Fits the device, but not with a margin as large as the device.
  req.events = {Alloc(1, 256 * kMiB), Free(1)};
  req.safety_margin_bytes = devices->at(0).total_bytes;
  Result<ValidationReport> r = gpu_impl::ValidateOnGpu(req);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("usable after the"), std::string::npos) << r.message();
  EXPECT_NE(r.message().find("nothing was allocated"), std::string::npos) << r.message();
}

}  // namespace
}  // namespace memplan
