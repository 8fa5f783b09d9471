// `memplan probe`: the GPUs this machine has and what using one costs.
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/options.h"
#include "gpu_probe/gpu_probe.h"

namespace memplan {
namespace {

int RunProbe(const std::string& format) {
  Result<std::vector<DeviceInfo>> devices = ProbeDevices();
  if (!devices.ok()) {
    std::cerr << "memplan: error: " << devices.message() << "\n";
    return kExitGpu;
  }
  if (format == "json") {
    nlohmann::json list = nlohmann::json::array();
    for (const DeviceInfo& d : devices.value()) {
      list.push_back(
          {{"index", d.index},
           {"name", d.name},
           {"compute_capability", std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor)},
           {"sm_count", d.sm_count},
           {"total_bytes", d.total_bytes},
           {"free_bytes", d.free_bytes},
           {"context_bytes", d.context_bytes},
           {"context_breakdown",
            {{"runtime", d.runtime_bytes},
             {"cublas_handle", d.cublas_bytes},
             {"cudnn_handle", d.cudnn_bytes}}},
           {"mem_bandwidth_gbs", d.mem_bandwidth_gbs}});
    }
    std::cout << nlohmann::json{{"devices", list}}.dump(2) << "\n";
    return kExitOk;
  }
  for (const DeviceInfo& d : devices.value()) {
    char bw[32];
    std::snprintf(bw, sizeof bw, "%.0f GB/s", d.mem_bandwidth_gbs);
    std::cout << "device " << d.index << ": " << d.name << ", compute capability " << d.cc_major
              << "." << d.cc_minor << ", " << d.sm_count << " SMs\n"
              << "  memory     " << FormatBytes(d.total_bytes) << " total, "
              << FormatBytes(d.free_bytes) << " free, ~" << bw << "\n"
              << "  context    " << FormatBytes(d.context_bytes) << " (CUDA context "
              << FormatBytes(d.runtime_bytes) << ", cuBLAS handle " << FormatBytes(d.cublas_bytes)
              << ", cuDNN handle " << FormatBytes(d.cudnn_bytes) << ")\n";
  }
  return kExitOk;
}

}  // namespace

void AddProbeCommand(CLI::App* app, CliState* state) {
  auto* cmd = app->add_subcommand(
      "probe",
      "GPUs found: name, memory, SMs, and the memory a CUDA context with cuBLAS and "
      "cuDNN takes before any allocation (exit 3 without a GPU)");
  auto format = std::make_shared<std::string>();
  AddFormatFlag(cmd, format.get(), {"table", "json"});
  cmd->callback([format, state] { state->exit_code = RunProbe(*format); });
}

}  // namespace memplan
