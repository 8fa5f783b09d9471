// gpu_probe.h's functions in the memplan executable: they load the GPU
// library (gpu_library.h) on first use and call into it. A build without
// CUDA has no library and says so.

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "gpu_probe/gpu_library.h"
#include "gpu_probe/gpu_probe.h"

namespace memplan {

#ifdef MEMPLAN_GPU_LIBRARY_BUILT

namespace {

/// The directory of the running executable ("" when /proc is unreadable).
std::string ExecutableDir() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  const std::string path(buf, static_cast<size_t>(n));
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

struct Loaded {
  const GpuLibraryApi* api = nullptr;
  Status status;
};

Loaded Load() {
  std::string path;
  const char* env = std::getenv(kGpuLibraryEnv);
  if (env != nullptr && env[0] != '\0') {
    path = env;
  } else {
    path = ExecutableDir() + "/" + kGpuLibraryFile;
  }
  Loaded out;
  if (access(path.c_str(), F_OK) != 0) {
    out.status = Status::Error("GPU support is not installed: " + path +
                               " not found (it is built beside memplan with the CUDA Toolkit; " +
                               kGpuLibraryEnv + " names another path)");
    return out;
  }
  // Never closed: the CUDA libraries do not expect to be unloaded.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    out.status = Status::Error("cannot load the GPU library " + path + ": " +
                               (why != nullptr ? why : "unknown dlopen error"));
    return out;
  }
  auto entry = reinterpret_cast<GpuLibraryEntry>(dlsym(handle, kGpuLibrarySymbol));
  const GpuLibraryApi* api = entry != nullptr ? entry() : nullptr;
  if (api == nullptr || api->version != kGpuLibraryVersion ||
      api->device_info_size != sizeof(DeviceInfo) ||
      api->request_size != sizeof(ValidationRequest) ||
      api->report_size != sizeof(ValidationReport) || api->probe_devices == nullptr ||
      api->validate_on_gpu == nullptr) {
    out.status = Status::Error("the GPU library " + path +
                               " belongs to another build of memplan (rebuild both together)");
    return out;
  }
  out.api = api;
  return out;
}

const Loaded& Library() {
  static const Loaded loaded = Load();
  return loaded;
}

}  // namespace

bool GpuSupportBuilt() { return true; }

Result<std::vector<DeviceInfo>> ProbeDevices() {
  const Loaded& lib = Library();
  if (lib.api == nullptr) return lib.status;
  return lib.api->probe_devices();
}

Result<ValidationReport> ValidateOnGpu(const ValidationRequest& request) {
  const Loaded& lib = Library();
  if (lib.api == nullptr) return lib.status;
  return lib.api->validate_on_gpu(request);
}

#else

bool GpuSupportBuilt() { return false; }

Result<std::vector<DeviceInfo>> ProbeDevices() { return Status::Error(kNoCudaBuildMessage); }

Result<ValidationReport> ValidateOnGpu(const ValidationRequest& /*request*/) {
  return Status::Error(kNoCudaBuildMessage);
}

#endif

}  // namespace memplan
