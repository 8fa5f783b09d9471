#ifndef MEMPLAN_PLANNER_OPS_OP_UTIL_H_
#define MEMPLAN_PLANNER_OPS_OP_UTIL_H_

// Small helpers shared by the op family files (shape_ops.cc,
// elementwise_ops.cc, nn_ops.cc). All of them are total: bad input gives
// false / an error status, never undefined behaviour.

#include <cstdint>
#include <string>
#include <vector>

#include "planner/graph.h"
#include "planner/op_registry.h"
#include "planner/status.h"

namespace memplan {

/// Largest tensor whose integer values are propagated for shape arithmetic.
constexpr int64_t kMaxPropagatedValues = 4096;

/// "[2, 3, 4]".
std::string ShapeString(const std::vector<int64_t>& shape);

/// Product of dims, or -1 on a negative dim or int64 overflow.
int64_t Numel(const std::vector<int64_t>& shape);

/// Maps `axis` in [-rank, rank) to [0, rank) into *out; false when outside.
bool NormalizeAxis(int64_t axis, int64_t rank, int64_t* out);

/// Normalizes every axis of `axes` for `rank`; false when one is out of range
/// or (when `unique`) an axis repeats.
bool NormalizeAxes(const std::vector<int64_t>& axes, int64_t rank, bool unique,
                   std::vector<int64_t>* out);

/// Multidirectional (numpy) broadcast of a and b into *out; false when the
/// shapes are incompatible.
bool BroadcastShapes(const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                     std::vector<int64_t>* out);

/// Row-major strides of `shape` (elements), for index arithmetic on values.
std::vector<int64_t> Strides(const std::vector<int64_t>& shape);

/// Flat index into a tensor of `shape` for the output multi-index `idx` of a
/// broadcast result (dims of size 1 in `shape` repeat). `shape` is aligned to
/// the right of `idx`.
int64_t BroadcastIndex(const std::vector<int64_t>& idx, const std::vector<int64_t>& shape);

/// Advances the multi-index `idx` over `shape` in row-major order; false after
/// the last element.
bool NextIndex(std::vector<int64_t>* idx, const std::vector<int64_t>& shape);

/// Fails with ctx.Error unless the node has between min_in and max_in inputs
/// (max_in < 0: no upper bound), input 0..min_in-1 present with known shapes.
Status CheckInputs(const ShapeContext& ctx, int min_in, int max_in);

/// True when input i exists and its integer values are known.
bool HasInputValues(const ShapeContext& ctx, int i);

/// Reads an int list given either as attribute `attr` (when present) or as
/// the known values of input `input` (when present). *found is false when
/// neither is given; an input without known values is an error naming `what`.
Status IntsFromAttrOrInput(const ShapeContext& ctx, const std::string& attr, int input,
                           const std::string& what, std::vector<int64_t>* out, bool* found);

/// Scalar (or 1-element) int value of input i, if known.
bool InputScalarInt(const ShapeContext& ctx, int i, int64_t* out);

/// The first value of the constant feeding input i, as a double: known int
/// values, or a Constant node's `value`/`value_float`, looking through
/// Cast/CastLike/Identity. False when not a constant.
bool InputConstantFloat(const ShapeContext& ctx, int i, double* out);

/// A Dropout node's drop probability: its `ratio` input (a constant) or
/// attribute, 0.5 (ONNX's default) when absent or not a constant.
[[nodiscard]] double DropoutRatio(const Graph& g, const Node& n);

/// A Softmax node's axis: its attribute, else ONNX's default (1 before
/// opset 13, -1 from 13). `opset` 0 (unknown) takes the current default.
[[nodiscard]] int64_t SoftmaxAxis(const Node& n, int64_t opset);

/// Appends {kInput, i} to *out.
void SaveInput(int i, std::vector<Saved>* out);
/// Appends {kOutput, i} to *out.
void SaveOutput(int i, std::vector<Saved>* out);

/// True when input i of the save context requires a gradient.
bool InputRequiresGrad(const SaveContext& ctx, int i);

}  // namespace memplan

#endif  // MEMPLAN_PLANNER_OPS_OP_UTIL_H_
