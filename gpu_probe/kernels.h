#ifndef MEMPLAN_GPU_PROBE_KERNELS_H_
#define MEMPLAN_GPU_PROBE_KERNELS_H_

// Our own small CUDA kernels (kernels.cu), callable from host C++.

#include <cuda_runtime.h>

#include <cstdint>

namespace memplan {

/// Element type codes of RowNorm.
enum class ElemType { kF32 = 0, kBF16 = 1, kF16 = 2 };

/// Writes filler to `bytes` bytes at `p`: every 16-bit half is 0x3Cxx, which
/// is finite in fp32, bf16 and fp16, so kernels run on ordinary numbers.
cudaError_t LaunchFill(void* p, int64_t bytes, uint32_t seed, cudaStream_t stream);

/// A layernorm-like pass: rows of 1024 elements (the last may be short), each
/// normalised by its mean and variance; `numel` elements read and written.
cudaError_t LaunchRowNorm(const void* in, void* out, int64_t numel, ElemType t,
                          cudaStream_t stream);

}  // namespace memplan

#endif  // MEMPLAN_GPU_PROBE_KERNELS_H_
