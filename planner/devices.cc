#include "planner/devices.h"

#include <cctype>
#include <cstdlib>

namespace memplan {
namespace {

constexpr int64_t kGiB = 1LL << 30;
constexpr int64_t kMiB = 1LL << 20;
constexpr double kT = 1e12;  // TFLOP/s
constexpr double kGBs = 1e9;
// nvidia-smi's memory.total, in MiB.
constexpr int64_t kNvsmi = kMiB;

// Memory sizes: what the card offers to CUDA, not the marketing size (an
// "80 GB" H100 is 81,559 MiB; a "24 GB" L4 is 23,034 MiB = 22.5 GiB). The
// H200's is cudaMemGetInfo's total on the calibration machine
// (bench/calibration/measurements.jsonl, "total"; nvidia-smi showed 143,771
// MiB there, 615 MiB more). For the others, the total nvidia-smi prints for
// that card in published logs, cited per preset below (kNvsmi: MiB); CUDA's
// total may be a few hundred MiB lower still (as on the H200): the default
// 5 % margin (kDefaultMarginPercent) covers that.
//
// FLOP/s: the datasheets' dense figures. Where a datasheet prints only the
// sparse number (marked * there: "with sparsity"), the dense one is half of it.
//
// Context: the device memory used beyond torch.cuda.memory_reserved() while
// training. Measured on the H200 (torch 2.11, CUDA 13): 767 MiB
// (docs: memory-model.md, section 1). The others are assumptions in the usual
// 0.5-0.8 GiB range (the CUDA context and kernel images grow with the SM count
// and the libraries' module sizes): Hopper as measured, Ampere/Ada 640 MiB,
// Volta/Turing 512 MiB. Pass --reserve when you have measured yours.
std::vector<DevicePreset> MakeTable() {
  std::vector<DevicePreset> t;
  auto add = [&t](DevicePreset d) { t.push_back(std::move(d)); };
  // NVIDIA H200 Tensor Core GPU datasheet, H200 SXM column: 141 GB HBM3e,
  // 4.8 TB/s; FP32 67 TFLOPS; TF32 989*, BF16 1,979*, FP16 1,979* TFLOPS.
  add({"h200",
       "NVIDIA H200 SXM 141GB",
       {"h200-sxm", "h200-141gb", "h200-sxm-141gb"},
       150109880320LL,
       767 * kMiB,
       true,
       989.5 * kT,
       989.5 * kT,
       494.5 * kT,
       67 * kT,
       4800 * kGBs,
       "NVIDIA H200 Tensor Core GPU datasheet (H200 SXM)"});
  // NVIDIA H100 Tensor Core GPU datasheet, H100 SXM column: 80 GB, 3.35 TB/s;
  // FP32 67; TF32 989*, BF16 1,979*, FP16 1,979* TFLOPS.
  // Memory: nvidia-smi "NVIDIA H100 80GB HBM3 ... 81559MiB" (github.com/NVIDIA/nccl
  // issue 1264; the same in github.com/modal-labs/modal-client pull 2797).
  add({"h100-sxm",
       "NVIDIA H100 SXM5 80GB",
       {"h100", "h100-80gb", "h100-sxm5", "h100-80gb-hbm3", "h100-sxm-80gb"},
       81559 * kNvsmi,
       767 * kMiB,
       false,
       989.5 * kT,
       989.5 * kT,
       494.5 * kT,
       67 * kT,
       3350 * kGBs,
       "NVIDIA H100 Tensor Core GPU datasheet (H100 SXM)"});
  // Same datasheet, H100 PCIe column: 80 GB, 2 TB/s; FP32 51; TF32 756*,
  // BF16 1,513*, FP16 1,513* TFLOPS.
  // Memory: not checked (no published nvidia-smi total found); assumed the
  // H100 SXM's 81559 MiB (the same 80 GB of HBM).
  add({"h100-pcie",
       "NVIDIA H100 PCIe 80GB",
       {"h100-pcie-80gb"},
       81559 * kNvsmi,
       767 * kMiB,
       false,
       756.5 * kT,
       756.5 * kT,
       378 * kT,
       51 * kT,
       2000 * kGBs,
       "NVIDIA H100 Tensor Core GPU datasheet (H100 PCIe)"});
  // NVIDIA A100 Tensor Core GPU datasheet: FP32 19.5; TF32 156; BF16 312;
  // FP16 312 TFLOPS (dense); A100 40GB SXM 1,555 GB/s, A100 80GB SXM 2,039 GB/s.
  // Memory: nvidia-smi 40960MiB (github.com/modal-labs/modal-client pull 2797;
  // older drivers showed 40536MiB).
  add({"a100-40gb",
       "NVIDIA A100 SXM4 40GB",
       {"a100-sxm4-40gb", "a100-40g", "a100-sxm-40gb"},
       40960 * kNvsmi,
       640 * kMiB,
       false,
       312 * kT,
       312 * kT,
       156 * kT,
       19.5 * kT,
       1555 * kGBs,
       "NVIDIA A100 Tensor Core GPU datasheet (A100 40GB SXM)"});
  // Memory: nvidia-smi 81920MiB (github.com/modal-labs/modal-client pull 2797).
  add({"a100-80gb",
       "NVIDIA A100 SXM4 80GB",
       {"a100", "a100-sxm4-80gb", "a100-80g", "a100-sxm", "a100-sxm-80gb"},
       81920 * kNvsmi,
       640 * kMiB,
       false,
       312 * kT,
       312 * kT,
       156 * kT,
       19.5 * kT,
       2039 * kGBs,
       "NVIDIA A100 Tensor Core GPU datasheet (A100 80GB SXM)"});
  // NVIDIA L40S datasheet: 48 GB GDDR6, 864 GB/s; FP32 91.6; TF32 183 (366*);
  // BF16 362.05 (733*); FP16 362.05 (733*) TFLOPS.
  // Memory: nvidia-smi "NVIDIA L40S, 46068 MiB" (github.com/akash-network/
  // provider-configs pull 99; modal-client pull 2797): 45.0 GiB.
  add({"l40s",
       "NVIDIA L40S 48GB",
       {"l40s-48gb"},
       46068 * kNvsmi,
       640 * kMiB,
       false,
       362.05 * kT,
       362.05 * kT,
       183 * kT,
       91.6 * kT,
       864 * kGBs,
       "NVIDIA L40S datasheet"});
  // NVIDIA L4 datasheet: 24 GB, 300 GB/s; FP32 30.3; TF32 120*; BF16 242*;
  // FP16 242* TFLOPS.
  // Memory: nvidia-smi 23034MiB (github.com/modal-labs/modal-client pull 2797):
  // 22.5 GiB.
  add({"l4",
       "NVIDIA L4 24GB",
       {"l4-24gb"},
       23034 * kNvsmi,
       640 * kMiB,
       false,
       121 * kT,
       121 * kT,
       60 * kT,
       30.3 * kT,
       300 * kGBs,
       "NVIDIA L4 Tensor Core GPU datasheet"});
  // NVIDIA publishes no A10G datasheet (an AWS part, GA102 like the A10, with
  // different clocks): the NVIDIA A10 datasheet's figures, approximate for the
  // A10G: 24 GB, 600 GB/s; FP32 31.2; TF32 62.5; BF16 125; FP16 125 TFLOPS.
  // Memory: nvidia-smi "NVIDIA A10G ... 23028MiB" (github.com/NVIDIA/DCGM issue
  // 232): 22.5 GiB.
  add({"a10g",
       "NVIDIA A10G 24GB (AWS)",
       {"a10g-24gb"},
       23028 * kNvsmi,
       640 * kMiB,
       false,
       125 * kT,
       125 * kT,
       62.5 * kT,
       31.2 * kT,
       600 * kGBs,
       "NVIDIA A10 Tensor Core GPU datasheet (A10G: approximate)"});
  // NVIDIA Ada GPU architecture whitepaper, appendix, GeForce RTX 4090: 24 GB
  // GDDR6X, 1,008 GB/s; FP32 82.6; TF32 82.6; FP16 and BF16 tensor with FP32
  // accumulate 165.2 TFLOPS (dense). PyTorch accumulates in FP32.
  // Memory: nvidia-smi "NVIDIA GeForce RTX 4090 ... 24564MiB" (github.com/RLinf/
  // RLinf issue 255).
  add({"rtx-4090",
       "NVIDIA GeForce RTX 4090 24GB",
       {"4090", "rtx4090"},
       24564 * kNvsmi,
       640 * kMiB,
       false,
       165.2 * kT,
       165.2 * kT,
       82.6 * kT,
       82.6 * kT,
       1008 * kGBs,
       "NVIDIA Ada GPU Architecture whitepaper (RTX 4090)"});
  // NVIDIA Ampere GA102 GPU architecture whitepaper, GeForce RTX 3090: 24 GB
  // GDDR6X, 936 GB/s; FP32 35.6; TF32 35.6; FP16/BF16 tensor with FP32
  // accumulate 71 TFLOPS (dense).
  // Memory: nvidia-smi "NVIDIA GeForce RTX 3090 ... 24576MiB" (github.com/
  // noonghunna/club-3090 issue 390). A desktop card also drives the display.
  add({"rtx-3090",
       "NVIDIA GeForce RTX 3090 24GB",
       {"3090", "rtx3090"},
       24576 * kNvsmi,
       640 * kMiB,
       false,
       71 * kT,
       71 * kT,
       35.6 * kT,
       35.6 * kT,
       936 * kGBs,
       "NVIDIA Ampere GA102 GPU Architecture whitepaper (RTX 3090)"});
  // NVIDIA V100 Tensor Core GPU datasheet, V100 SXM2: 16 or 32 GB HBM2,
  // 900 GB/s; FP32 15.7; tensor (FP16, FP32 accumulate) 125 TFLOPS. No BF16,
  // no TF32.
  // Memory: torch.cuda.get_device_properties() "Tesla V100-SXM2-16GB ...
  // total_memory=16160MB" (MiB; a published profiling log): CUDA's own total.
  add({"v100-16gb",
       "NVIDIA V100 SXM2 16GB",
       {"v100", "v100-sxm2-16gb", "v100-16g"},
       16160 * kNvsmi,
       512 * kMiB,
       false,
       0,
       125 * kT,
       0,
       15.7 * kT,
       900 * kGBs,
       "NVIDIA V100 Tensor Core GPU datasheet (V100 SXM2)"});
  // Memory: nvidia-smi "Tesla V100-PCIE... 32480MiB" (NVIDIA's nvidia-smi
  // walkthrough, four V100 32GB cards); the SXM2 board is assumed the same.
  add({"v100-32gb",
       "NVIDIA V100 SXM2 32GB",
       {"v100-sxm2-32gb", "v100-32g"},
       32480 * kNvsmi,
       512 * kMiB,
       false,
       0,
       125 * kT,
       0,
       15.7 * kT,
       900 * kGBs,
       "NVIDIA V100 Tensor Core GPU datasheet (V100 SXM2)"});
  // NVIDIA T4 datasheet: 16 GB GDDR6, 320+ GB/s; FP32 8.1; mixed precision
  // (FP16/FP32) 65 TFLOPS. No BF16, no TF32.
  // Memory: nvidia-smi 15360MiB (github.com/modal-labs/modal-client pull 2797):
  // 15.0 GiB.
  add({"t4",
       "NVIDIA T4 16GB",
       {"t4-16gb"},
       15360 * kNvsmi,
       512 * kMiB,
       false,
       0,
       65 * kT,
       0,
       8.1 * kT,
       320 * kGBs,
       "NVIDIA T4 Tensor Core GPU datasheet"});
  return t;
}

// Lower case; ' ' and '_' become '-'; vendor prefixes dropped.
std::string Normalize(const std::string& s) {
  std::string out;
  for (char c : s) {
    char l = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (l == ' ' || l == '_') l = '-';
    if (l == '-' && (out.empty() || out.back() == '-')) continue;
    out += l;
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  for (const char* prefix : {"nvidia-", "tesla-", "geforce-"}) {
    const std::string p(prefix);
    if (out.compare(0, p.size(), p) == 0) out = out.substr(p.size());
  }
  return out;
}

}  // namespace

const std::vector<DevicePreset>& ListDevices() {
  static const std::vector<DevicePreset> table = MakeTable();
  return table;
}

const DevicePreset* FindDevice(const std::string& name) {
  const std::string n = Normalize(name);
  if (n.empty()) return nullptr;
  for (const DevicePreset& d : ListDevices()) {
    if (Normalize(d.name) == n) return &d;
    for (const std::string& a : d.aliases) {
      if (Normalize(a) == n) return &d;
    }
  }
  return nullptr;
}

const DevicePreset* MatchProbedDevice(const std::string& probed_name, int64_t total_bytes) {
  if (const DevicePreset* exact = FindDevice(probed_name)) {
    const double ratio = static_cast<double>(total_bytes) / exact->memory_bytes;
    if (total_bytes <= 0 || (ratio > 0.9 && ratio < 1.1)) return exact;
  }
  // The longest name or alias contained in the probed name, among presets
  // whose memory is within 10 %: "a100-sxm4-80gb" beats "a100".
  const std::string n = Normalize(probed_name);
  const DevicePreset* best = nullptr;
  size_t best_len = 0;
  for (const DevicePreset& d : ListDevices()) {
    const double ratio = static_cast<double>(total_bytes) / d.memory_bytes;
    if (!(ratio > 0.9 && ratio < 1.1)) continue;
    std::vector<std::string> keys = d.aliases;
    keys.push_back(d.name);
    for (const std::string& k : keys) {
      const std::string nk = Normalize(k);
      // Whole tokens only: "l4" must not match inside "l40s".
      size_t pos = n.find(nk);
      while (pos != std::string::npos) {
        const bool left = pos == 0 || n[pos - 1] == '-';
        const bool right = pos + nk.size() == n.size() || n[pos + nk.size()] == '-';
        if (left && right) break;
        pos = n.find(nk, pos + 1);
      }
      if (pos != std::string::npos && nk.size() > best_len) {
        best = &d;
        best_len = nk.size();
      }
    }
  }
  return best;
}

double PeakFlops(const DevicePreset& d, Precision p) {
  switch (p) {
    case Precision::kAmpBf16:
    case Precision::kBf16:
      return d.bf16_flops;
    case Precision::kAmpFp16:
    case Precision::kFp16:
      return d.fp16_flops;
    case Precision::kFp32:
      return d.fp32_flops;
  }
  return d.fp32_flops;
}

}  // namespace memplan
