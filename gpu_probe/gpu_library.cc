// The entry point of libmemplan_gpu.so: the table the executable's loader
// asks for. The only symbol the library exports.

#include "gpu_probe/gpu_library.h"

extern "C" __attribute__((visibility("default"))) const memplan::GpuLibraryApi*
memplan_gpu_library_api() {
  static const memplan::GpuLibraryApi api = [] {
    memplan::GpuLibraryApi a;
    a.version = memplan::kGpuLibraryVersion;
    a.device_info_size = sizeof(memplan::DeviceInfo);
    a.request_size = sizeof(memplan::ValidationRequest);
    a.report_size = sizeof(memplan::ValidationReport);
    a.probe_devices = &memplan::gpu_impl::ProbeDevices;
    a.validate_on_gpu = &memplan::gpu_impl::ValidateOnGpu;
    return a;
  }();
  return &api;
}
