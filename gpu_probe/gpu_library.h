#ifndef MEMPLAN_GPU_PROBE_GPU_LIBRARY_H_
#define MEMPLAN_GPU_PROBE_GPU_LIBRARY_H_

/// The interface between the memplan executable and its GPU library
/// (libmemplan_gpu.so, which links the CUDA runtime, cuBLAS and cuDNN). The
/// executable links none of them: `probe`, `validate` and `--device auto`
/// load the library with dlopen when they run (gpu_loader.cc), so `plan`,
/// `check` and the rest start without the GPU libraries, also on machines
/// that lack them. Both sides are built from the same sources by the same
/// build; the version and the struct sizes catch a stale library.

#include <cstddef>
#include <vector>

#include "gpu_probe/gpu_probe.h"
#include "planner/status.h"

namespace memplan {

/// File name of the GPU library; the loader looks for it next to the
/// executable unless MEMPLAN_GPU_LIBRARY names another path.
inline constexpr char kGpuLibraryFile[] = "libmemplan_gpu.so";
/// The environment variable that overrides where the GPU library is.
inline constexpr char kGpuLibraryEnv[] = "MEMPLAN_GPU_LIBRARY";
/// The one symbol the library exports (an extern "C" function returning
/// the GpuLibraryApi table).
inline constexpr char kGpuLibrarySymbol[] = "memplan_gpu_library_api";
/// Bumped whenever GpuLibraryApi or the structs it passes change.
inline constexpr int kGpuLibraryVersion = 1;

/// What the GPU library offers: the CUDA implementations of gpu_probe.h.
struct GpuLibraryApi {
  int version = 0;
  size_t device_info_size = 0;
  size_t request_size = 0;
  size_t report_size = 0;
  Result<std::vector<DeviceInfo>> (*probe_devices)() = nullptr;
  Result<ValidationReport> (*validate_on_gpu)(const ValidationRequest&) = nullptr;
};

/// The signature of kGpuLibrarySymbol.
using GpuLibraryEntry = const GpuLibraryApi* (*)();

namespace gpu_impl {
/// The CUDA implementations (gpu_probe_cuda.cc), linked into the GPU library
/// and into the GPU tests; everything else calls gpu_probe.h's functions.
Result<std::vector<DeviceInfo>> ProbeDevices();
Result<ValidationReport> ValidateOnGpu(const ValidationRequest& request);
}  // namespace gpu_impl

}  // namespace memplan

#endif  // MEMPLAN_GPU_PROBE_GPU_LIBRARY_H_
