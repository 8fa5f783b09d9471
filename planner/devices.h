#ifndef MEMPLAN_PLANNER_DEVICES_H_
#define MEMPLAN_PLANNER_DEVICES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "planner/options.h"

namespace memplan {

/// A GPU model: memory, what a CUDA context costs on it, and its datasheet speeds.
struct DevicePreset {
  std::string name;                  ///< Canonical, lower case: "h100-sxm".
  std::string display;               ///< "NVIDIA H100 SXM5 80GB".
  std::vector<std::string> aliases;  ///< Lower case: "h100-80gb", "h100".
  int64_t memory_bytes = 0;          ///< Device memory (see devices.cc for the unit).
  /// Device memory outside PyTorch's allocator while training (CUDA context,
  /// cuBLAS/cuDNN state): measured on the H200, assumed elsewhere.
  int64_t context_bytes = 0;
  bool context_measured = false;  ///< True when context_bytes was measured.
  double bf16_flops = 0;          ///< Peak dense tensor FLOP/s; 0 = no bf16 support.
  double fp16_flops = 0;          ///< Peak dense tensor FLOP/s (fp32 accumulate).
  double tf32_flops = 0;          ///< Peak dense TF32 tensor FLOP/s; 0 = none.
  double fp32_flops = 0;          ///< Peak fp32 (non-tensor) FLOP/s.
  double mem_bandwidth = 0;       ///< Peak DRAM bytes/s.
  std::string source;             ///< The datasheet the numbers come from.
};

/// Percent of a device's memory that `advise` and `check --device` keep free
/// by default: room for what the plan cannot see (driver reservations, cuDNN's
/// per-shape engine choice; see the README's accuracy section).
constexpr double kDefaultMarginPercent = 5.0;

/// Every preset, in table order.
const std::vector<DevicePreset>& ListDevices();

/// The preset called `name` or one of its aliases (case-insensitive; spaces,
/// '_' and '-' are interchangeable); nullptr when none.
const DevicePreset* FindDevice(const std::string& name);

/// The preset for a probed device ("NVIDIA H100 80GB HBM3", total bytes), or
/// nullptr: the name must match and the memory be within 10 % of the preset's.
const DevicePreset* MatchProbedDevice(const std::string& probed_name, int64_t total_bytes);

/// Peak dense FLOP/s for the matmuls of `p` on `d` (fp32 runs without TF32,
/// PyTorch's default for matmul); 0 when the device lacks the format.
double PeakFlops(const DevicePreset& d, Precision p);

}  // namespace memplan

#endif  // MEMPLAN_PLANNER_DEVICES_H_
