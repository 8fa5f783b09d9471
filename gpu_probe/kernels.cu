#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "gpu_probe/kernels.h"

namespace memplan {

namespace {

constexpr int kRowLen = 1024;
constexpr int kRowThreads = 256;

__device__ __forceinline__ uint32_t Mix(uint64_t i, uint32_t seed) {
  uint32_t x = static_cast<uint32_t>(i) * 2654435761u ^ seed ^ static_cast<uint32_t>(i >> 32);
  x ^= x >> 15;
  x *= 2246822519u;
  x ^= x >> 13;
  return x;
}

__global__ void FillWords(uint32_t* p, int64_t words, uint32_t seed) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < words;
       i += stride) {
    p[i] = 0x3C003C00u | (Mix(i, seed) & 0x00FF00FFu);
  }
}

template <typename T>
__device__ __forceinline__ float ToF(T v) {
  return static_cast<float>(v);
}
template <>
__device__ __forceinline__ float ToF(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
template <>
__device__ __forceinline__ float ToF(__half v) {
  return __half2float(v);
}
template <typename T>
__device__ __forceinline__ T FromF(float v) {
  return static_cast<T>(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 FromF(float v) {
  return __float2bfloat16(v);
}
template <>
__device__ __forceinline__ __half FromF(float v) {
  return __float2half(v);
}

// One block per row of up to kRowLen elements; mean and variance in fp32.
template <typename T>
__global__ void RowNorm(const T* in, T* out, int64_t numel) {
  constexpr int kPer = kRowLen / kRowThreads;
  const int64_t row_start = static_cast<int64_t>(blockIdx.x) * kRowLen;
  const int64_t remaining = numel - row_start;
  const int n = remaining < kRowLen ? static_cast<int>(remaining) : kRowLen;
  float v[kPer];
  float sum = 0, sq = 0;
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const int c = j * kRowThreads + threadIdx.x;
    v[j] = c < n ? ToF(in[row_start + c]) : 0.f;
    sum += v[j];
    sq += v[j] * v[j];
  }
  for (int o = 16; o > 0; o >>= 1) {
    sum += __shfl_xor_sync(0xffffffffu, sum, o);
    sq += __shfl_xor_sync(0xffffffffu, sq, o);
  }
  __shared__ float s_sum[kRowThreads / 32], s_sq[kRowThreads / 32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) {
    s_sum[warp] = sum;
    s_sq[warp] = sq;
  }
  __syncthreads();
  sum = 0;
  sq = 0;
#pragma unroll
  for (int w = 0; w < kRowThreads / 32; ++w) {
    sum += s_sum[w];
    sq += s_sq[w];
  }
  const float mean = sum / n;
  const float rstd = rsqrtf(fmaxf(sq / n - mean * mean, 0.f) + 1e-5f);
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const int c = j * kRowThreads + threadIdx.x;
    if (c < n) out[row_start + c] = FromF<T>((v[j] - mean) * rstd);
  }
}

}  // namespace

cudaError_t LaunchFill(void* p, int64_t bytes, uint32_t seed, cudaStream_t stream) {
  if (bytes <= 0) return cudaSuccess;
  const int64_t words = bytes / 4;
  if (words > 0) {
    const int threads = 256;
    int64_t blocks = (words + threads - 1) / threads;
    if (blocks > 65536) blocks = 65536;
    FillWords<<<static_cast<unsigned>(blocks), threads, 0, stream>>>(static_cast<uint32_t*>(p),
                                                                     words, seed);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
  }
  const int64_t tail = bytes - words * 4;
  if (tail > 0) return cudaMemsetAsync(static_cast<char*>(p) + words * 4, 0x3C, tail, stream);
  return cudaSuccess;
}

cudaError_t LaunchRowNorm(const void* in, void* out, int64_t numel, ElemType t,
                          cudaStream_t stream) {
  if (numel <= 0) return cudaSuccess;
  const int64_t rows = (numel + kRowLen - 1) / kRowLen;
  if (rows > 0x7fffffff) return cudaErrorInvalidValue;
  const unsigned grid = static_cast<unsigned>(rows);
  switch (t) {
    case ElemType::kF32:
      RowNorm<float><<<grid, kRowThreads, 0, stream>>>(static_cast<const float*>(in),
                                                       static_cast<float*>(out), numel);
      break;
    case ElemType::kBF16:
      RowNorm<__nv_bfloat16><<<grid, kRowThreads, 0, stream>>>(
          static_cast<const __nv_bfloat16*>(in), static_cast<__nv_bfloat16*>(out), numel);
      break;
    case ElemType::kF16:
      RowNorm<__half><<<grid, kRowThreads, 0, stream>>>(static_cast<const __half*>(in),
                                                        static_cast<__half*>(out), numel);
      break;
  }
  return cudaGetLastError();
}

}  // namespace memplan
