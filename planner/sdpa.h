#ifndef MEMPLAN_PLANNER_SDPA_H_
#define MEMPLAN_PLANNER_SDPA_H_

#include <cstdint>

#include "planner/dtype.h"

namespace memplan {

/// The kernels behind torch.nn.functional.scaled_dot_product_attention on a
/// CUDA GPU of compute capability 8.0 or later (PyTorch 2.11).
enum class SdpaKernel { kFlash, kCudnn, kMemEfficient, kMath };

/// What the call passes as attn_mask / is_causal.
enum class SdpaMask { kNone, kCausal, kBool, kFloat };

/// One attention call, as the kernel selection sees it.
struct SdpaCall {
  DType dtype = DType::kFloat;  ///< Of q, k and v (after autocast).
  int64_t heads = 1;            ///< Query heads.
  int64_t kv_heads = 1;         ///< Key/value heads; fewer than heads: GQA (enable_gqa).
  int64_t head_dim = 64;        ///< Of q and k.
  int64_t value_head_dim = 64;  ///< Of v.
  int64_t q_len = 1;
  int64_t kv_len = 1;
  SdpaMask mask = SdpaMask::kNone;
  bool mask_requires_grad = false;
  bool mask_last_dim_contiguous = true;  ///< attn_mask.stride(-1) == 1.
  double dropout = 0.0;
  bool requires_grad = false;  ///< q, k or v needs a gradient (grad mode on).
};

/// Which kernels accept the call (each backend's own filters).
struct SdpaEligibility {
  bool flash = false;
  bool cudnn = false;
  bool mem_efficient = false;
  bool math = true;
};

/// The filters of aten/src/ATen/native/transformers/cuda/sdp_utils.cpp as
/// PyTorch 2.11 applies them on sm80+; where the source and the H200
/// measurement (bench/results/sdpa_probe_h200.jsonl) differ, the measurement:
/// - flash: fp16/bf16; no attn_mask (is_causal only, and then q_len ==
///   kv_len); q, k and v head dims equal and <= 256; GQA supported.
/// - memory-efficient: fp32/fp16/bf16; any mask whose last dim has stride 1
///   (a mask that requires grad gets a gradient); head dims divisible by 4
///   (fp32) or 8 (half); no GQA (measured: refused with enable_gqa).
/// - cuDNN: fp16/bf16; a mask that does not require grad, last-dim stride 1;
///   dropout a multiple of 1/16; head dims <= 128 and divisible by 8; GQA.
/// - math: everything.
[[nodiscard]] SdpaEligibility SdpaEligible(const SdpaCall& call);

/// The kernel PyTorch runs: the first eligible one in its priority order
/// (flash, memory-efficient, math; cuDNN first where `cudnn_first`, which
/// 2.11 sets on sm90/sm100 with cuDNN newer than 9.15).
[[nodiscard]] SdpaKernel SelectSdpaKernel(const SdpaCall& call, bool cudnn_first = false);

/// "flash", "cudnn", "mem_efficient" or "math".
[[nodiscard]] const char* SdpaKernelName(SdpaKernel k);

}  // namespace memplan

#endif  // MEMPLAN_PLANNER_SDPA_H_
