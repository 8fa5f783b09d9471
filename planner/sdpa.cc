#include "planner/sdpa.h"

#include <cmath>

namespace memplan {
namespace {

bool IsHalf(DType t) { return t == DType::kFloat16 || t == DType::kBFloat16; }

bool GqaShapesOk(const SdpaCall& c) {
  return c.kv_heads > 0 && c.heads >= c.kv_heads && c.heads % c.kv_heads == 0;
}

}  // namespace

SdpaEligibility SdpaEligible(const SdpaCall& c) {
  SdpaEligibility e;
  const bool gqa = c.kv_heads != c.heads;
  const bool half = IsHalf(c.dtype);
  const bool has_mask = c.mask == SdpaMask::kBool || c.mask == SdpaMask::kFloat;
  const bool mask_layout_ok = !has_mask || c.mask_last_dim_contiguous;
  const bool gqa_ok = !gqa || GqaShapesOk(c);
  // check_dtypes_flash_attention, check_for_attn_mask, check_head_dim_size_flash,
  // check_flash_causal_non_square_seqlens; GQA in check_batch_size_and_num_heads_dense.
  e.flash = half && !has_mask && c.head_dim == c.value_head_dim && c.head_dim <= 256 &&
            (c.mask != SdpaMask::kCausal || c.q_len == c.kv_len) && gqa_ok;
  // check_head_dim_size_mem_efficient: minimum_gemm_alignment is 128 bits of
  // tensor-core input on sm80+ (4 fp32, 8 half elements).
  const int64_t align = half ? 8 : 4;
  const bool dtype_ok = half || c.dtype == DType::kFloat;
  e.mem_efficient = dtype_ok && c.head_dim % align == 0 && c.value_head_dim % align == 0 &&
                    c.head_dim > 0 && c.value_head_dim > 0 && !gqa && mask_layout_ok;
  // check_attn_mask_shape refuses a mask that requires grad; check_cudnn_dropout,
  // check_cudnn_tensor_shapes (head dim limit 128, multiples of 8).
  const bool dropout_ok = c.dropout * 16.0 == std::floor(c.dropout * 16.0);
  e.cudnn = half && !(has_mask && c.mask_requires_grad) && mask_layout_ok && dropout_ok &&
            c.head_dim <= 128 && c.value_head_dim <= 128 && c.head_dim % 8 == 0 &&
            c.value_head_dim % 8 == 0 && gqa_ok && c.kv_len != 1;
  e.math = true;
  return e;
}

SdpaKernel SelectSdpaKernel(const SdpaCall& c, bool cudnn_first) {
  const SdpaEligibility e = SdpaEligible(c);
  if (cudnn_first && e.cudnn) return SdpaKernel::kCudnn;
  if (e.flash) return SdpaKernel::kFlash;
  if (e.mem_efficient) return SdpaKernel::kMemEfficient;
  return SdpaKernel::kMath;
}

const char* SdpaKernelName(SdpaKernel k) {
  switch (k) {
    case SdpaKernel::kFlash:
      return "flash";
    case SdpaKernel::kCudnn:
      return "cudnn";
    case SdpaKernel::kMemEfficient:
      return "mem_efficient";
    case SdpaKernel::kMath:
      return "math";
  }
  return "math";
}

}  // namespace memplan
