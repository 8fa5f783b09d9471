// `memplan validate`: plan one step, then replay its allocations on a real GPU
// and run its representative kernels there.
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/options.h"
#include "gpu_probe/gpu_probe.h"

namespace memplan {
namespace {

struct ValidateArgs {
  ModelFlags model;
  PlanFlags plan;
  std::string format;
  int device = 0;
  std::string margin = "512MiB";
  std::string tolerance = "5";  ///< Percent, like every share (see ParsePercent).
  int max_kernels = 24;
};

DType ComputeDType(Precision p) {
  switch (p) {
    case Precision::kAmpBf16:
    case Precision::kBf16:
      return DType::kBFloat16;
    case Precision::kAmpFp16:
    case Precision::kFp16:
      return DType::kFloat16;
    default:
      return DType::kFloat;
  }
}

std::string Num(const char* fmt, double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

std::string DimsText(const std::vector<int64_t>& dims) {
  std::string s;
  for (int64_t d : dims) {
    s += (s.empty() ? "" : "x") + std::to_string(d);
  }
  return s;
}

nlohmann::json ReportJson(const std::string& model, int device, const ValidationReport& r) {
  nlohmann::json kernels = nlohmann::json::array();
  for (const KernelResult& k : r.kernels) {
    kernels.push_back({{"node", k.shape.node},
                       {"pass", k.pass},
                       {"dims", k.shape.dims},
                       {"ms", k.ms},
                       {"tflops", k.tflops},
                       {"gbs", k.gbs},
                       {"workspace_bytes", k.workspace_bytes},
                       {"algo", k.algo}});
  }
  nlohmann::json ws = nlohmann::json::array();
  for (const WorkspaceCheck& w : r.workspaces) {
    ws.push_back({{"node", w.node},
                  {"pass", w.pass},
                  {"cudnn_bytes", w.cudnn_bytes},
                  {"assumed_bytes", w.assumed_bytes}});
  }
  return {{"model", model},
          {"device", device},
          {"fits", r.fits},
          {"oom_at_event", r.oom_at_event},
          {"predicted",
           {{"allocated_bytes", r.predicted_allocated},
            {"reserved_bytes", r.predicted_reserved},
            {"device_bytes", r.predicted_device}}},
          {"simulated",
           {{"allocated_bytes", r.simulated_allocated_peak},
            {"reserved_bytes", r.simulated_reserved_peak}}},
          {"measured",
           {{"allocated_bytes", r.measured_allocated_peak},
            {"reserved_bytes", r.measured_reserved_peak},
            {"device_bytes", r.measured_device_peak},
            {"context_bytes", r.context_bytes},
            {"on_top_bytes", r.extra_bytes_peak}}},
          {"kernels", kernels},
          {"cudnn_workspaces", ws},
          {"within_tolerance", r.within_tolerance},
          {"message", r.message}};
}

void PrintTable(const std::string& model, int device, const ValidationReport& r) {
  std::cout << model << " on GPU " << device << "\n"
            << "              predicted     measured\n";
  auto row = [](const char* name, int64_t predicted, int64_t measured) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "  %-10s %12s %12s\n", name, FormatBytes(predicted).c_str(),
                  FormatBytes(measured).c_str());
    std::cout << buf;
  };
  row("allocated", r.predicted_allocated, r.measured_allocated_peak);
  row("reserved", r.predicted_reserved, r.measured_reserved_peak);
  row("device", r.predicted_device, r.measured_device_peak);
  std::cout << "  context (CUDA + cuBLAS + cuDNN handles) " << FormatBytes(r.context_bytes)
            << "; workspaces and operands on top " << FormatBytes(r.extra_bytes_peak) << "\n";
  if (!r.kernels.empty()) {
    std::cout << "\nkernels\n";
  }
  for (const KernelResult& k : r.kernels) {
    std::cout << "  " << k.pass << " " << k.shape.node << " [" << DimsText(k.shape.dims) << "]  "
              << Num("%.3f", k.ms) << " ms  " << Num("%.1f", k.tflops) << " TFLOP/s  "
              << Num("%.0f", k.gbs) << " GB/s  workspace " << FormatBytes(k.workspace_bytes) << "  "
              << k.algo << "\n";
  }
  std::cout << "\n" << r.message << "\n";
}

int RunValidate(const ValidateArgs& a) {
  auto margin = ParseSize(a.margin);
  if (!margin.ok()) {
    return Fail("--margin: " + margin.message());
  }
  auto tolerance = ParsePercent("--tolerance", a.tolerance);
  if (!tolerance.ok()) {
    return Fail(tolerance.message());
  }
  // Bad input is exit 2 on any build: the model is read before the GPU part.
  auto plan = PlanFromFlags(a.model, a.plan, true);
  if (!plan.ok()) {
    return Fail(plan.message());
  }
  if (!GpuSupportBuilt()) {
    std::cerr << "memplan: error: " << kNoCudaBuildMessage << "\n";
    return kExitGpu;
  }
  PrintWarnings(plan->warnings);

  ValidationRequest req;
  req.events = plan->events;
  req.allocator = plan->options.allocator;
  req.kernels = plan->kernels;  // kernel_event empty: after the last event.
  req.compute_dtype = ComputeDType(plan->options.precision);
  req.device = a.device;
  req.safety_margin_bytes = margin.value();
  req.tolerance = tolerance.value();
  req.max_kernels = a.max_kernels;
  req.predicted_allocated = plan->peak.allocated_bytes;
  req.predicted_reserved = plan->peak.reserved_bytes;
  req.predicted_device = plan->peak.device_bytes;
  // On the GPU the context is measured, not assumed (unless --reserve says).
  req.measured_context = a.plan.reserve.empty();
  Result<ValidationReport> report = ValidateOnGpu(req);
  if (!report.ok()) {
    std::cerr << "memplan: error: " << report.message() << "\n";
    return kExitGpu;
  }
  if (a.format == "json") {
    std::cout << ReportJson(a.model.model, a.device, report.value()).dump(2) << "\n";
  } else {
    PrintTable(a.model.model, a.device, report.value());
  }
  return report->fits && report->within_tolerance ? kExitOk : kExitGpu;
}

}  // namespace

void AddValidateCommand(CLI::App* app, CliState* state) {
  auto* cmd = app->add_subcommand(
      "validate",
      "Replay the plan's allocations on a real GPU and run its kernels there; exit 3 when it "
      "does not fit, is off the prediction by more than --tolerance, or no GPU is usable");
  auto args = std::make_shared<ValidateArgs>();
  AddModelFlags(cmd, &args->model);
  AddPlanFlags(cmd, &args->plan, true);
  AddFormatFlag(cmd, &args->format, {"table", "json"});
  cmd->add_option("--device", args->device, "CUDA device index")->type_name("INT:NONNEGATIVE");
  cmd->add_option("--margin", args->margin, "Device memory kept free at every cudaMalloc");
  cmd->add_option("--tolerance", args->tolerance,
                  "Largest difference from the prediction, in percent (default 5)");
  cmd->add_option("--max-kernels", args->max_kernels, "Distinct kernel shapes run at most")
      ->type_name("INT:NONNEGATIVE");
  cmd->callback([args, state] { state->exit_code = RunValidate(*args); });
}

}  // namespace memplan
