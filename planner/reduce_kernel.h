#ifndef MEMPLAN_PLANNER_REDUCE_KERNEL_H_
#define MEMPLAN_PLANNER_REDUCE_KERNEL_H_

/// PyTorch's generic CUDA reduction (aten/src/ATen/native/cuda/Reduce.cuh):
/// the global-memory staging buffer it allocates when it splits one output's
/// inputs across thread blocks.

#include <cstdint>

namespace memplan {

/// The GPU's size as the reduction's launch heuristic sees it: the H200's
/// (and H100 SXM's) 132 multiprocessors of 2,048 threads.
inline constexpr int kReduceMultiprocessors = 132;
inline constexpr int kReduceThreadsPerMultiprocessor = 2048;

/// Bytes of the staging buffer (`cta_buf`) that `sum(0)` over a contiguous
/// [rows, cols] tensor of `elem_bytes` elements allocates and frees inside
/// the call, as setReduceConfig decides it in PyTorch 2.11; 0 when one block
/// reduces each output. `acc_bytes` is the accumulator's size (4: float, for
/// fp32, bf16 and fp16 inputs). An input past 32-bit offsets is reduced in
/// parts, its rows halved until each part fits (TensorIterator's
/// with_32bit_indexing), one part after the other: the largest part's buffer.
/// This is the bias gradient of a Linear in backward (addmm's bias summed
/// over the batch rows).
[[nodiscard]] int64_t ColumnSumStagingBytes(int64_t rows, int64_t cols, int64_t elem_bytes,
                                            int64_t acc_bytes);

}  // namespace memplan

#endif  // MEMPLAN_PLANNER_REDUCE_KERNEL_H_
