#ifndef MEMPLAN_PLANNER_LAYOUT_H_
#define MEMPLAN_PLANNER_LAYOUT_H_

#include <cstdint>
#include <string>
#include <vector>

namespace memplan {

/// An operand of an elementwise op: its shape and strides (in elements).
struct StridedOperand {
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
};

/// The strides PyTorch's TensorIterator gives the output of an elementwise
/// op of shape `out_shape` (aten/src/ATen/TensorIterator.cpp,
/// reorder_dimensions): operands broadcast to the output (a broadcast dim has
/// stride 0 and votes on nothing); dims are ordered innermost first by the
/// first operand whose strides tell two dims apart (equal strides: the
/// smaller size goes inside); the output is dense in that order. So the
/// output of an elementwise op on a transposed view keeps the transposed
/// layout, and contiguous inputs give a contiguous output.
[[nodiscard]] std::vector<int64_t> ElementwiseOutputStrides(
    const std::vector<int64_t>& out_shape, const std::vector<StridedOperand>& inputs);

/// True for the ONNX ops PyTorch runs through TensorIterator (one output
/// element per input element, broadcasting): their output keeps the inputs'
/// layout (ElementwiseOutputStrides).
[[nodiscard]] bool IsTensorIteratorOp(const std::string& op_type);

}  // namespace memplan

#endif  // MEMPLAN_PLANNER_LAYOUT_H_
