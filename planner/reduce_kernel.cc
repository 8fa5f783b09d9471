#include "planner/reduce_kernel.h"

#include <algorithm>

namespace memplan {

namespace {

constexpr int64_t kInt32Max = 2147483647;

int64_t DivUp(int64_t a, int64_t b) { return (a + b - 1) / b; }

// floor(log2(n)) as a power of two, at least 1.
int64_t LastPow2(int64_t n) {
  int64_t p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

}  // namespace

// The reduced dim (rows) is not the fastest-moving one, so the kernel
// vectorizes along the output: 4 outputs per thread when cols allows it
// (get_output_vec_size), a block of at most 512 / 4 threads, lanes over
// outputs, warps over inputs once each thread has 16 or more values, and
// blocks over inputs (a global reduction through the staging buffer) once a
// thread would still sum 256 or more values and the outputs alone leave the
// GPU short of blocks.
int64_t ColumnSumStagingBytes(int64_t rows, int64_t cols, int64_t elem_bytes, int64_t acc_bytes) {
  if (rows <= 0 || cols <= 0 || acc_bytes <= 0 || elem_bytes <= 0) return 0;
  if (cols > kInt32Max / elem_bytes) return 0;  // one row past 32-bit offsets: not modelled
  // can_use_32bit_indexing: numel and the largest byte offset + 1 within
  // int32; otherwise the reduced dim (the largest extent) is halved.
  if (rows > kInt32Max / cols || rows * cols * elem_bytes - elem_bytes + 1 > kInt32Max) {
    if (rows < 2) return 0;
    return std::max(ColumnSumStagingBytes(rows / 2, cols, elem_bytes, acc_bytes),
                    ColumnSumStagingBytes(rows - rows / 2, cols, elem_bytes, acc_bytes));
  }
  int64_t vec = 4;
  while (cols % vec != 0) vec /= 2;
  const int64_t max_threads = 512 / vec;
  const int64_t dim0 = cols / vec;
  const int64_t dim1 = rows;
  const int64_t dim0_pow2 = dim0 < max_threads ? LastPow2(dim0) : max_threads;
  const int64_t dim1_pow2 = dim1 < max_threads ? LastPow2(dim1) : max_threads;
  int64_t block_width = std::min<int64_t>(dim0_pow2, 32);
  const int64_t block_height = std::min(dim1_pow2, max_threads / block_width);
  block_width = std::min(dim0_pow2, max_threads / block_height);
  const int64_t num_threads = block_width * block_height;
  const int64_t step_output = block_width;  // lanes split the outputs
  int64_t step_input = 1;
  const int64_t warp_split_threshold = std::min<int64_t>(block_height * 16, 256);
  if (rows < warp_split_threshold) return 0;  // each warp takes its own outputs
  step_input *= block_height;                 // warps split the inputs
  const int64_t values_per_thread = DivUp(rows, step_input);
  const int64_t target_grid =
      kReduceMultiprocessors * (kReduceThreadsPerMultiprocessor / num_threads);
  const int64_t grid = DivUp(cols / vec, step_output);
  if (values_per_thread < 256 || grid > target_grid) return 0;
  const int64_t ctas = std::max(std::min(DivUp(target_grid, grid), DivUp(values_per_thread, 16)),
                                DivUp(values_per_thread, 256));
  if (ctas <= 1) return 0;
  return acc_bytes * cols * ctas * block_width * vec;
}

}  // namespace memplan
