// The build without the CUDA Toolkit: every GPU function says so.

#include "gpu_probe/gpu_probe.h"

namespace memplan {

bool GpuSupportBuilt() { return false; }

Result<std::vector<DeviceInfo>> ProbeDevices() { return Status::Error(kNoCudaBuildMessage); }

Result<ValidationReport> ValidateOnGpu(const ValidationRequest& /*request*/) {
  return Status::Error(kNoCudaBuildMessage);
}

}  // namespace memplan
