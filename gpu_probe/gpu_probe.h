#ifndef MEMPLAN_GPU_PROBE_GPU_PROBE_H_
#define MEMPLAN_GPU_PROBE_GPU_PROBE_H_

// Device facts and validation of a plan on a real GPU.
//
// Built with the CUDA Toolkit, these functions load the GPU library
// (libmemplan_gpu.so, gpu_library.h) on first use, which talks to the CUDA
// runtime, cuBLAS and cuDNN; when it is absent or cannot be loaded they
// return a one-line error saying so. Built without CUDA every function
// returns kNoCudaBuildMessage and GpuSupportBuilt() is false (the CLI exits 3).
//
// Both ProbeDevices() and ValidateOnGpu() create the device's primary context
// and call cudaDeviceReset() before returning, so the process must not hold
// other CUDA state on that device. Memory numbers come from cudaMemGetInfo and
// therefore include other processes on the same GPU, if any.

#include <cstdint>
#include <string>
#include <vector>

#include "planner/allocator_sim.h"
#include "planner/dtype.h"
#include "planner/plan.h"
#include "planner/status.h"

namespace memplan {

/// The error every GPU function returns in a build without CUDA.
extern const char kNoCudaBuildMessage[];

/// True when this build has the GPU library (CUDA, cuBLAS, cuDNN); loading
/// it can still fail at run time, which the functions below report.
bool GpuSupportBuilt();

/// What one device is and what merely using it costs.
struct DeviceInfo {
  int index = 0;
  std::string name;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  int64_t total_bytes = 0;
  int64_t free_bytes = 0;  ///< Free after our context and handles exist.
  /// Device memory in use (total - free) once the primary context, a cuBLAS
  /// handle and a cuDNN handle exist and before any allocation of ours:
  /// context, module images loaded so far, library handle state. Includes other
  /// processes' memory on a shared GPU; excludes kernels loaded lazily later.
  int64_t context_bytes = 0;
  int64_t runtime_bytes = 0;     ///< Of which: the bare context (cudaFree(0)).
  int64_t cublas_bytes = 0;      ///< Of which: cublasCreate.
  int64_t cudnn_bytes = 0;       ///< Of which: cudnnCreate.
  double mem_bandwidth_gbs = 0;  ///< 2 x memory clock x bus width; 0 if unknown.
};

/// Facts about every visible device; error "no CUDA device found (...)".
Result<std::vector<DeviceInfo>> ProbeDevices();

/// A plan's allocation trace plus the kernels to run inside it.
struct ValidationRequest {
  std::vector<MemEvent> events;
  AllocatorConfig allocator;  ///< device_limit is ignored: the GPU is the limit.
  std::vector<KernelShape> kernels;
  std::vector<size_t> kernel_event;     ///< Kernel i runs right after events[kernel_event[i]].
  DType compute_dtype = DType::kFloat;  ///< GEMM/conv: kFloat, kBFloat16 or kFloat16.
  int device = 0;
  int64_t safety_margin_bytes = 512LL << 20;  ///< Kept free at every cudaMalloc.
  double tolerance = 0.05;                    ///< Relative, for within_tolerance.
  int64_t predicted_allocated = 0;            ///< 0 = not compared.
  int64_t predicted_reserved = 0;
  int64_t predicted_device = 0;
  /// Compare the device peak with predicted_reserved + the context measured
  /// on this GPU (instead of predicted_device, which assumed a context).
  bool measured_context = false;
  int max_kernels = 24;  ///< Distinct shapes run at most (heaviest per kind first).
  int timing_runs = 5;   ///< Timed runs per kernel (after one warm-up).
  int64_t cublas_workspace_bytes = 32LL << 20;  ///< As PyTorch on sm90.
};

/// One kernel pass that ran (a conv gives three: fwd, bwd_data, bwd_filter).
struct KernelResult {
  KernelShape shape;
  std::string pass;  ///< "gemm", "conv_fwd", "conv_bwd_data", "conv_bwd_filter", "elementwise".
  double ms = 0;     ///< Median over timing_runs.
  double tflops = 0;
  double gbs = 0;               ///< Compulsory DRAM bytes / time.
  int64_t workspace_bytes = 0;  ///< What the library asked for (allocated on top).
  std::string algo;
};

/// A cuDNN workspace against what the plan assumed for it.
struct WorkspaceCheck {
  std::string node;
  std::string pass;
  int64_t cudnn_bytes = 0;
  int64_t assumed_bytes = 0;  ///< The plan keeps conv workspaces out of KernelShape: 0.
};

/// What happened on the GPU, next to the prediction.
struct ValidationReport {
  bool fits = true;
  int64_t oom_at_event = -1;  ///< First event that could not be placed; -1 if none.
  int64_t predicted_allocated = 0, predicted_reserved = 0, predicted_device = 0;
  int64_t measured_allocated_peak = 0;  ///< Max sum of live blocks we placed.
  int64_t measured_reserved_peak = 0;   ///< Max sum of cudaMalloc'd segments.
  int64_t measured_device_peak = 0;     ///< Max total-free (cudaMemGetInfo).
  int64_t context_bytes = 0;
  int64_t simulated_allocated_peak = 0;
  int64_t simulated_reserved_peak = 0;
  int64_t extra_bytes_peak = 0;  ///< Max of workspaces + operands placed on top.
  std::vector<KernelResult> kernels;
  std::vector<WorkspaceCheck> workspaces;
  bool within_tolerance = false;
  std::string message;  ///< One line: verdict or why it stopped.
};

/// Replays the caching-allocator simulation of `request.events` with real
/// cudaMalloc segments and runs the kernels in them. Running out of memory is a
/// report with fits=false; errors are CUDA failures, bad input or Ctrl-C.
Result<ValidationReport> ValidateOnGpu(const ValidationRequest& request);

}  // namespace memplan

#endif  // MEMPLAN_GPU_PROBE_GPU_PROBE_H_
