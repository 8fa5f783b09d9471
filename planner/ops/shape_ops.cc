// Shape-manipulating ops: layout, indexing, constants and sequences.
// Integer values are propagated where known so that shape arithmetic
// (Shape -> Gather -> Concat -> Reshape, Range, Expand, ...) evaluates.

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "planner/checked.h"
#include "planner/op_registry.h"
#include "planner/ops/op_util.h"

namespace memplan {
namespace {

using Shape = std::vector<int64_t>;

/// Sets output i's values when the output is integral and small.
void MaybeValues(ShapeContext& ctx, int i, std::vector<int64_t> v) {
  if (!ctx.HasOutput(i)) return;
  const Tensor& t = ctx.Output(i);
  if (!IsIntegral(t.dtype) || !t.shape_known) return;
  if (static_cast<int64_t>(v.size()) > kMaxPropagatedValues) return;
  if (static_cast<int64_t>(v.size()) != Numel(t.shape)) return;
  ctx.SetValues(i, std::move(v));
}

/// Small enough to compute values for.
bool Small(const Shape& s) {
  int64_t n = Numel(s);
  return n >= 0 && n <= kMaxPropagatedValues;
}

/// Copies input 0's values to output 0 (same element order).
void PassValues(ShapeContext& ctx) {
  if (HasInputValues(ctx, 0)) MaybeValues(ctx, 0, ctx.Input(0).values);
}

// ---------------------------------------------------------------- Constant

Status ConstantShape(ShapeContext& ctx) {
  const Node& n = ctx.node();
  if (ctx.num_outputs() < 1) return ctx.Error("has no output");
  auto it = n.attrs.find("value");
  if (it != n.attrs.end()) {
    const Attribute& a = it->second;
    for (int64_t d : a.t_dims) {
      if (d < 0) return ctx.Error("value has a negative dim");
    }
    if (Numel(a.t_dims) < 0) return ctx.Error("value size overflows int64");
    ctx.SetOutput(0, a.t_dtype, a.t_dims);
    if (a.t_has_values) MaybeValues(ctx, 0, a.t_values);
    return Status();
  }
  if ((it = n.attrs.find("value_int")) != n.attrs.end()) {
    ctx.SetOutput(0, DType::kInt64, {});
    ctx.SetValues(0, {it->second.i});
    return Status();
  }
  if ((it = n.attrs.find("value_ints")) != n.attrs.end()) {
    const auto& v = it->second.ints;
    ctx.SetOutput(0, DType::kInt64, {static_cast<int64_t>(v.size())});
    MaybeValues(ctx, 0, v);
    return Status();
  }
  if (n.Has("value_float")) {
    ctx.SetOutput(0, DType::kFloat, {});
    return Status();
  }
  if ((it = n.attrs.find("value_floats")) != n.attrs.end()) {
    ctx.SetOutput(0, DType::kFloat, {static_cast<int64_t>(it->second.floats.size())});
    return Status();
  }
  if (n.Has("value_string")) {
    ctx.SetOutput(0, DType::kString, {});
    return Status();
  }
  if ((it = n.attrs.find("value_strings")) != n.attrs.end()) {
    ctx.SetOutput(0, DType::kString, {static_cast<int64_t>(it->second.strings.size())});
    return Status();
  }
  if (n.Has("sparse_value")) return ctx.Error("sparse_value constants are not supported");
  return ctx.Error("has no value attribute");
}

Status ConstantOfShapeShape(ShapeContext& ctx) {
  Status s = CheckInputs(ctx, 1, 1);
  if (!s.ok()) return s;
  if (!HasInputValues(ctx, 0)) {
    return ctx.Error(
        "cannot infer: the target shape of ConstantOfShape is not a constant or computable from "
        "shapes");
  }
  Shape shape = ctx.Input(0).values;
  for (int64_t d : shape) {
    if (d < 0) return ctx.Error("negative dim in target shape " + ShapeString(shape));
  }
  if (Numel(shape) < 0) return ctx.Error("target shape " + ShapeString(shape) + " overflows");
  DType dt = DType::kFloat;
  int64_t fill = 0;
  auto it = ctx.node().attrs.find("value");
  if (it != ctx.node().attrs.end()) {
    dt = it->second.t_dtype == DType::kUndefined ? DType::kFloat : it->second.t_dtype;
    if (it->second.t_has_values && !it->second.t_values.empty()) fill = it->second.t_values[0];
  }
  ctx.SetOutput(0, dt, shape);
  if (Small(shape)) MaybeValues(ctx, 0, std::vector<int64_t>(Numel(shape), fill));
  return Status();
}

// ---------------------------------------------------------------- Shape, Size, Identity

Status ShapeShape(ShapeContext& ctx) {
  Status s = CheckInputs(ctx, 1, 1);
  if (!s.ok()) return s;
  const Shape& in = ctx.Input(0).shape;
  const int64_t r = static_cast<int64_t>(in.size());
  int64_t start = ctx.node().GetInt("start", 0);
  int64_t end = ctx.node().Has("end") ? ctx.node().GetInt("end", r) : r;
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = std::clamp<int64_t>(start, 0, r);
  end = std::clamp<int64_t>(end, 0, r);
  Shape v;
  for (int64_t i = start; i < end; ++i) v.push_back(in[i]);
  ctx.SetOutput(0, DType::kInt64, {static_cast<int64_t>(v.size())});
  ctx.SetValues(0, v);
  return Status();
}

Status SizeShape(ShapeContext& ctx) {
  Status s = CheckInputs(ctx, 1, 1);
  if (!s.ok()) return s;
  ctx.SetOutput(0, DType::kInt64, {});
  ctx.SetValues(0, {Numel(ctx.Input(0).shape)});
  return Status();
}

Status IdentityShape(ShapeContext& ctx) {
  Status s = CheckInputs(ctx, 1, 1);
  if (!s.ok()) return s;
  const Tensor& in = ctx.Input(0);
  if (in.is_sequence) {
    if (!ctx.HasOutput(0)) return Status();
    Tensor& out = ctx.Output(0);
    out.is_sequence = true;
    out.dtype = in.dtype;
    out.seq_shapes = in.seq_shapes;
    return Status();
  }
  ctx.SetOutput(0, in.dtype, in.shape);
  PassValues(ctx);
  return Status();
}

// ---------------------------------------------------------------- Reshape family

Status ReshapeShape(ShapeContext& ctx) {
  Status s = CheckInputs(ctx, 1, 2);
  if (!s.ok()) return s;
  const Tensor& in = ctx.Input(0);
  Shape target;
  if (ctx.opset() > 0 && ctx.opset() < 5 && ctx.node().Has("shape")) {
    target = ctx.node().GetInts("shape");
  } else if (HasInputValues(ctx, 1)) {
    target = ctx.Input(1).values;
  } else if (!ctx.HasInput(1) && ctx.node().Has("shape")) {
    target = ctx.node().GetInts("shape");
  } else {
    return ctx.Error(
        "cannot infer: the target shape of Reshape is not a constant or computable from shapes");
  }
  const bool allowzero = ctx.node().GetInt("allowzero", 0) != 0;
  const int64_t in_numel = Numel(in.shape);
  Shape out(target.size());
  int infer_at = -1;
  int64_t known = 1;
  for (size_t i = 0; i < target.size(); ++i) {
    int64_t d = target[i];
    if (d == 0 && !allowzero) {
      if (i >= in.shape.size()) {
        return ctx.Error("target shape " + ShapeString(target) + " copies dim " +
                         std::to_string(i) + " but the input " + ShapeString(in.shape) +
                         " has rank " + std::to_string(in.shape.size()));
      }
      d = in.shape[i];
    } else if (d == -1) {
      if (infer_at >= 0) return ctx.Error("target shape " + ShapeString(target) + " has two -1");
      infer_at = static_cast<int>(i);
      continue;
    } else if (d < -1) {
      return ctx.Error("target shape " + ShapeString(target) + " has a negative dim");
    }
    out[i] = d;
    if (!CheckedMul(known, d, &known)) return ctx.Error("target shape overflows int64");
  }
  if (infer_at >= 0) {
    if (allowzero && known == 0) {
      return ctx.Error("target shape " + ShapeString(target) + " has both 0 and -1");
    }
    if (known == 0 || in_numel % known != 0) {
      return ctx.Error("cannot reshape " + ShapeString(in.shape) + " to " + ShapeString(target));
    }
    out[infer_at] = in_numel / known;
  } else if (known != in_numel) {
    return ctx.Error("cannot reshape " + ShapeString(in.shape) + " (" + std::to_string(in_numel) +
                     " elements) to " + ShapeString(out));
  }
  ctx.SetOutput(0, in.dtype, out);
  PassValues(ctx);
  return Status();
}

Status FlattenShape(ShapeContext& ctx) {
  Status s = CheckInputs(ctx, 1, 1);
  if (!s.ok()) return s;
  const Shape& in = ctx.Input(0).shape;
  const int64_t r = static_cast<int64_t>(in.size());
  int64_t axis = ctx.node().GetInt("axis", 1);
  if (axis < -r || axis > r) return ctx.Error("axis " + std::to_string(axis) + " out of range");
  if (axis < 0) axis += r;
  int64_t a = 1, b = 1;
  for (int64_t i = 0; i < r; ++i) {
    if (!CheckedMul(i < axis ? a : b, in[i], i < axis ? &a : &b)) {
      return ctx.Error("size overflows int64");
    }
  }
  ctx.SetOutput(0, ctx.Input(0).dtype, {a, b});
  PassValues(ctx);
  return Status();
}

/// Axes for Squeeze/Unsqueeze: attribute before opset 13, input 1 after.
Status ReadAxes(ShapeContext& ctx, const std::string& op, Shape* axes, bool* found) {
  Status s = IntsFromAttrOrInput(ctx, "axes", 1, "the axes of " + op, axes, found);
  return s;
}

Status SqueezeShape(ShapeContext& ctx) {
  Status s = CheckInputs(ctx, 1, 2);
  if (!s.ok()) return s;
  const Shape& in = ctx.Input(0).shape;
  Shape axes;
  bool found = false;
  s = ReadAxes(ctx, "Squeeze", &axes, &found);
  if (!s.ok()) return s;
  std::vector<bool> drop(in.size(), false);
  if (!found) {
    for (size_t i = 0; i < in.size(); ++i) drop[i] = in[i] == 1;
  } else {
    Shape norm;
    if (!NormalizeAxes(axes, in.size(), false, &norm)) {
      return ctx.Error("axes " + ShapeString(axes) + " out of range for input " + ShapeString(in));
    }
    for (int64_t a : norm) {
      if (in[a] != 1) {
        return ctx.Error("cannot squeeze dim " + std::to_string(a) + " of size " +
                         std::to_string(in[a]) + " in " + ShapeString(in));
      }
      drop[a] = true;
    }
  }
  Shape out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (!drop[i]) out.push_back(in[i]);
  }
  ctx.SetOutput(0, ctx.Input(0).dtype, out);
  PassValues(ctx);
  return Status();
}

Status UnsqueezeShape(ShapeContext& ctx) {
  Status s = CheckInputs(ctx, 1, 2);
  if (!s.ok()) return s;
  const Shape& in = ctx.Input(0).shape;
  Shape axes;
  bool found = false;
  s = ReadAxes(ctx, "Unsqueeze", &axes, &found);
  if (!s.ok()) return s;
  if (!found) return ctx.Error("has no axes");
  const int64_t r = static_cast<int64_t>(in.size() + axes.size());
  Shape norm;
  if (!NormalizeAxes(axes, r, true, &norm)) {
    return ctx.Error("axes " + ShapeString(axes) + " out of range or repeated for output rank " +
                     std::to_string(r));
  }
  std::vector<bool> ins(r, false);
  for (int64_t a : norm) ins[a] = true;
  Shape out;
  size_t k = 0;
  for (int64_t i = 0; i < r; ++i) out.push_back(ins[i] ? 1 : in[k++]);
  ctx.SetOutput(0, ctx.Input(0).dtype, out);
  PassValues(ctx);
  return Status();
}

Status TransposeShape(ShapeContext& ctx) {
  Status s = CheckInputs(ctx, 1, 1);
  if (!s.ok()) return s;
  const Tensor& t = ctx.Input(0);
  const int64_t r = static_cast<int64_t>(t.shape.size());
  Shape perm = ctx.node().GetInts("perm");
  if (!ctx.node().Has("perm")) {
    for (int64_t i = r - 1; i >= 0; --i) perm.push_back(i);
  }
  Shape norm;
  if (static_cast<int64_t>(perm.size()) != r || !NormalizeAxes(perm, r, true, &norm)) {
    return ctx.Error("perm " + ShapeString(perm) + " is not a permutation of rank " +
                     std::to_string(r));
  }
  Shape out(r);
  for (int64_t i = 0; i < r; ++i) out[i] = t.shape[norm[i]];
  ctx.SetOutput(0, t.dtype, out);
  if (HasInputValues(ctx, 0) && Small(out)) {
    const Shape st = Strides(t.shape);
    std::vector<int64_t> v;
    v.reserve(t.values.size());
    Shape idx(r, 0);
    if (Numel(out) > 0) {
      do {
        int64_t flat = 0;
        for (int64_t i = 0; i < r; ++i) flat += idx[i] * st[norm[i]];
        v.push_back(t.values[flat]);
      } while (NextIndex(&idx, out));
    }
    MaybeValues(ctx, 0, std::move(v));
  }
  return Status();
}

/// Values of `t` broadcast to `out` (out must be a broadcast of t.shape).
std::vector<int64_t> BroadcastValues(const Tensor& t, const Shape& out) {
  std::vector<int64_t> v;
  if (Numel(out) <= 0) return v;
  Shape idx(out.size(), 0);
  do {
    v.push_back(t.values[BroadcastIndex(idx, t.shape)]);
  } while (NextIndex(&idx, out));
  return v;
}

Status ExpandShape(ShapeContext& ctx) {
  Status s = CheckInputs(ctx, 2, 2);
  if (!s.ok()) return s;
  if (!HasInputValues(ctx, 1)) {
    return ctx.Error(
        "cannot infer: the target shape of Expand is not a constant or computable from shapes");
  }
  const Tensor& in = ctx.Input(0);
  const Shape& target = ctx.Input(1).values;
  for (int64_t d : target) {
    if (d < 0) return ctx.Error("negative dim in target shape " + ShapeString(target));
  }
  Shape out;
  if (!BroadcastShapes(in.shape, target, &out)) {
    return ctx.Error("cannot broadcast " + ShapeString(in.shape) + " to " + ShapeString(target));
  }
  ctx.SetOutput(0, in.dtype, out);
  if (HasInputValues(ctx, 0) && Small(out)) MaybeValues(ctx, 0, BroadcastValues(in, out));
  return Status();
}

// ---------------------------------------------------------------- Concat / Split

Status ConcatShape(ShapeContext& ctx) {
  if (ctx.num_inputs() < 1) return ctx.Error("expects at least 1 input, got 0");
  Status s = CheckInputs(ctx, ctx.num_inputs(), -1);
  if (!s.ok()) return s;
  if (!ctx.node().Has("axis")) return ctx.Error("has no axis attribute");
  const Tensor& first = ctx.Input(0);
  const int64_t r = static_cast<int64_t>(first.shape.size());
  int64_t axis = 0;
  if (!NormalizeAxis(ctx.node().GetInt("axis", 0), r, &axis)) {
    return ctx.Error("axis " + std::to_string(ctx.node().GetInt("axis", 0)) +
                     " out of range for rank " + std::to_string(r));
  }
  Shape out = first.shape;
  out[axis] = 0;
  bool all_values = true;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor& t = ctx.Input(i);
    if (static_cast<int64_t>(t.shape.size()) != r) {
      return ctx.Error("input '" + t.name + "' " + ShapeString(t.shape) +
                       " has a different rank than " + ShapeString(first.shape));
    }
    for (int64_t k = 0; k < r; ++k) {
      if (k != axis && t.shape[k] != first.shape[k]) {
        return ctx.Error("input '" + t.name + "' " + ShapeString(t.shape) + " does not match " +
                         ShapeString(first.shape) + " outside axis " + std::to_string(axis));
      }
    }
    if (!CheckedAdd(out[axis], t.shape[axis], &out[axis])) return ctx.Error("size overflows");
    all_values = all_values && HasInputValues(ctx, i);
  }
  ctx.SetOutput(0, first.dtype, out);
  if (all_values && Small(out)) {
    // outer x (axis x inner) blocks, appended per input.
    int64_t outer = 1, inner = 1;
    for (int64_t k = 0; k < axis; ++k) outer *= out[k];
    for (int64_t k = axis + 1; k < r; ++k) inner *= out[k];
    std::vector<int64_t> v;
    for (int64_t o = 0; o < outer; ++o) {
      for (int i = 0; i < ctx.num_inputs(); ++i) {
        const Tensor& t = ctx.Input(i);
        const int64_t block = t.shape[axis] * inner;
        for (int64_t e = 0; e < block; ++e) v.push_back(t.values[o * block + e]);
      }
    }
    MaybeValues(ctx, 0, std::move(v));
  }
  return Status();
}

/// Chunk sizes along a dim of size `dim`: given sizes, n equal parts, or
/// parts of `chunk` (last smaller).
Status SplitSizes(ShapeContext& ctx, int64_t dim, Shape* sizes) {
  Shape split;
  bool found = false;
  if (ctx.opset() >= 13 || ctx.opset() == 0) {
    Status s = IntsFromAttrOrInput(ctx, "", 1, "the split sizes of Split", &split, &found);
    if (!s.ok()) return s;
  }
  if (!found && ctx.node().Has("split")) {
    split = ctx.node().GetInts("split");
    found = true;
  }
  const int64_t n = ctx.num_outputs();
  if (found) {
    if (static_cast<int64_t>(split.size()) != n) {
      return ctx.Error("split " + ShapeString(split) + " has " + std::to_string(split.size()) +
                       " entries for " + std::to_string(n) + " outputs");
    }
    int64_t total = 0;
    for (int64_t v : split) {
      if (v < 0 || !CheckedAdd(total, v, &total)) {
        return ctx.Error("split " + ShapeString(split) + " has a negative size");
      }
    }
    if (total != dim) {
      return ctx.Error("split " + ShapeString(split) + " sums to " + std::to_string(total) +
                       ", not the dim size " + std::to_string(dim));
    }
    *sizes = split;
    return Status();
  }
  if (n <= 0) return ctx.Error("has no outputs");
  if (ctx.node().Has("num_outputs")) {
    const int64_t k = ctx.node().GetInt("num_outputs", n);
    if (k != n) {
      return ctx.Error("num_outputs is " + std::to_string(k) + " but the node has " +
                       std::to_string(n) + " outputs");
    }
    const int64_t chunk = dim / n + (dim % n != 0 ? 1 : 0);
    sizes->clear();
    int64_t left = dim;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t c = std::min(chunk, left);
      sizes->push_back(c);
      left -= c;
    }
    return Status();
  }
  if (dim % n != 0) {
    return ctx.Error("dim of size " + std::to_string(dim) + " does not split evenly into " +
                     std::to_string(n) + " outputs");
  }
  sizes->assign(n, dim / n);
  return Status();
}

Status SplitShape(ShapeContext& ctx) {
  Status s = CheckInputs(ctx, 1, 2);
  if (!s.ok()) return s;
  const Tensor& in = ctx.Input(0);
  int64_t axis = 0;
  if (!NormalizeAxis(ctx.node().GetInt("axis", 0), in.shape.size(), &axis)) {
    return ctx.Error("axis out of range for " + ShapeString(in.shape));
  }
  Shape sizes;
  s = SplitSizes(ctx, in.shape[axis], &sizes);
  if (!s.ok()) return s;
  const Shape in_shape = in.shape;
  const DType dt = in.dtype;
  int64_t offset = 0;
  for (int i = 0; i < ctx.num_outputs(); ++i) {
    Shape out = in_shape;
    out[axis] = sizes[i];
    ctx.SetOutput(i, dt, out);
    if (HasInputValues(ctx, 0) && in_shape.size() == 1) {
      const auto& v = ctx.Input(0).values;
      MaybeValues(ctx, i, std::vector<int64_t>(v.begin() + offset, v.begin() + offset + sizes[i]));
    }
    offset += sizes[i];
  }
  return Status();
}

// ---------------------------------------------------------------- Sequences

Tensor* SeqOut(ShapeContext& ctx) {
  if (!ctx.HasOutput(0)) return nullptr;
  Tensor* t = &ctx.Output(0);
  t->is_sequence = true;
  t->seq_shapes.clear();
  return t;
}

/// Most tensors in a sequence (SplitToSequence, SequenceInsert).
constexpr int64_t kMaxSequenceLength = 1 << 16;

Status SplitToSequenceShape(ShapeContext& ctx) {
  Status s = CheckInputs(ctx, 1, 2);
  if (!s.ok()) return s;
  const Tensor& in = ctx.Input(0);
  int64_t axis = 0;
  if (!NormalizeAxis(ctx.node().GetInt("axis", 0), in.shape.size(), &axis)) {
    return ctx.Error("axis out of range for " + ShapeString(in.shape));
  }
  const int64_t dim = in.shape[axis];
  const bool keepdims = ctx.node().GetInt("keepdims", 1) != 0;
  // One entry per element of the sequence is kept: bounded.
  const auto too_many = [&](int64_t n) {
    return ctx.Error("would make a sequence of " + std::to_string(n) +
                     " tensors; memplan plans at most " + std::to_string(kMaxSequenceLength));
  };
  Shape sizes;
  bool drop_axis = false;
  if (!ctx.HasInput(1)) {
    if (dim > kMaxSequenceLength) return too_many(dim);
    sizes.assign(dim, 1);
    drop_axis = !keepdims;
  } else {
    if (!HasInputValues(ctx, 1)) {
      return ctx.Error(
          "cannot infer: the split of SplitToSequence is not a constant or computable from "
          "shapes");
    }
    const Tensor& sp = ctx.Input(1);
    if (sp.shape.empty()) {
      const int64_t c = sp.values[0];
      if (c <= 0) return ctx.Error("split size " + std::to_string(c) + " is not positive");
      if (dim / c > kMaxSequenceLength) return too_many(dim / c);
      for (int64_t left = dim; left > 0; left -= std::min(c, left)) {
        sizes.push_back(std::min(c, left));
      }
    } else {
      int64_t total = 0;
      for (int64_t v : sp.values) {
        if (v < 0 || !CheckedAdd(total, v, &total)) return ctx.Error("negative split size");
      }
      if (total != dim) {
        return ctx.Error("split " + ShapeString(sp.values) + " sums to " + std::to_string(total) +
                         ", not " + std::to_string(dim));
      }
      sizes = sp.values;
    }
  }
  const Shape in_shape = in.shape;
  const DType dt = in.dtype;
  Tensor* out = SeqOut(ctx);
  if (out == nullptr) return Status();
  out->dtype = dt;
  for (int64_t c : sizes) {
    Shape e = in_shape;
    if (drop_axis) {
      e.erase(e.begin() + axis);
    } else {
      e[axis] = c;
    }
    out->seq_shapes.push_back(e);
  }
  return Status();
}

Status SequenceAtShape(ShapeContext& ctx) {
  Status s = CheckInputs(ctx, 2, 2);
  if (!s.ok()) return s;
  const Tensor& seq = ctx.Input(0);
  if (!seq.is_sequence) return ctx.Error("input '" + seq.name + "' is not a sequence");
  int64_t pos = 0;
  if (!InputScalarInt(ctx, 1, &pos)) {
    return ctx.Error("cannot infer: the position of SequenceAt is not a constant");
  }
  const int64_t n = static_cast<int64_t>(seq.seq_shapes.size());
  if (pos < -n || pos >= n) {
    return ctx.Error("position " + std::to_string(pos) + " out of range for a sequence of " +
                     std::to_string(n));
  }
  if (pos < 0) pos += n;
  ctx.SetOutput(0, seq.dtype, seq.seq_shapes[pos]);
  return Status();
}

Status SequenceConstructShape(ShapeContext& ctx) {
  if (ctx.num_inputs() < 1) return ctx.Error("expects at least 1 input, got 0");
  Status s = CheckInputs(ctx, ctx.num_inputs(), -1);
  if (!s.ok()) return s;
  std::vector<Shape> shapes;
  const DType dt = ctx.Input(0).dtype;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (ctx.Input(i).dtype != dt) return ctx.Error("inputs have different dtypes");
    shapes.push_back(ctx.Input(i).shape);
  }
  Tensor* out = SeqOut(ctx);
  if (out == nullptr) return Status();
  out->dtype = dt;
  out->seq_shapes = std::move(shapes);
  return Status();
}

Status SequenceEmptyShape(ShapeContext& ctx) {
  Tensor* out = SeqOut(ctx);
  if (out == nullptr) return Status();
  const int64_t dtype = ctx.node().GetInt("dtype", 1);
  if (dtype < 0 || dtype > std::numeric_limits<int>::max() ||
      !IsKnownDType(static_cast<int>(dtype)) || dtype == 0) {
    return ctx.Error("dtype " + std::to_string(dtype) + " is not an ONNX tensor type");
  }
  out->dtype = static_cast<DType>(dtype);
  return Status();
}

Status SequenceInsertShape(ShapeContext& ctx) {
  Status s = CheckInputs(ctx, 2, 3);
  if (!s.ok()) return s;
  const Tensor& seq = ctx.Input(0);
  if (!seq.is_sequence) return ctx.Error("input '" + seq.name + "' is not a sequence");
  if (static_cast<int64_t>(seq.seq_shapes.size()) >= kMaxSequenceLength) {
    return ctx.Error("would make a sequence of more than " + std::to_string(kMaxSequenceLength) +
                     " tensors");
  }
  std::vector<Shape> shapes = seq.seq_shapes;
  const int64_t n = static_cast<int64_t>(shapes.size());
  int64_t pos = n;
  if (ctx.HasInput(2) && !InputScalarInt(ctx, 2, &pos)) {
    return ctx.Error("cannot infer: the position of SequenceInsert is not a constant");
  }
  if (pos < -n || pos > n) return ctx.Error("position out of range");
  if (pos < 0) pos += n;
  shapes.insert(shapes.begin() + pos, ctx.Input(1).shape);
  const DType dt = ctx.Input(1).dtype;
  Tensor* out = SeqOut(ctx);
  if (out == nullptr) return Status();
  out->dtype = dt;
  out->seq_shapes = std::move(shapes);
  return Status();
}

Status SequenceLengthShape(ShapeContext& ctx) {
  Status s = CheckInputs(ctx, 1, 1);
  if (!s.ok()) return s;
  if (!ctx.Input(0).is_sequence) return ctx.Error("input is not a sequence");
  ctx.SetOutput(0, DType::kInt64, {});
  ctx.SetValues(0, {static_cast<int64_t>(ctx.Input(0).seq_shapes.size())});
  return Status();
}

Status ConcatFromSequenceShape(ShapeContext& ctx) {
  Status s = CheckInputs(ctx, 1, 1);
  if (!s.ok()) return s;
  const Tensor& seq = ctx.Input(0);
  if (!seq.is_sequence) return ctx.Error("input '" + seq.name + "' is not a sequence");
  if (seq.seq_shapes.empty()) return ctx.Error("cannot concatenate an empty sequence");
  if (!ctx.node().Has("axis")) return ctx.Error("has no axis attribute");
  const bool new_axis = ctx.node().GetInt("new_axis", 0) != 0;
  const Shape& first = seq.seq_shapes[0];
  const int64_t r = static_cast<int64_t>(first.size());
  int64_t axis = 0;
  if (!NormalizeAxis(ctx.node().GetInt("axis", 0), new_axis ? r + 1 : r, &axis)) {
    return ctx.Error("axis out of range for element shape " + ShapeString(first));
  }
  Shape out;
  if (new_axis) {
    for (const Shape& e : seq.seq_shapes) {
      if (e != first) return ctx.Error("elements have different shapes; cannot stack");
    }
    out = first;
    out.insert(out.begin() + axis, static_cast<int64_t>(seq.seq_shapes.size()));
  } else {
    out = first;
    out[axis] = 0;
    for (const Shape& e : seq.seq_shapes) {
      if (static_cast<int64_t>(e.size()) != r) return ctx.Error("elements differ in rank");
      for (int64_t k = 0; k < r; ++k) {
        if (k != axis && e[k] != first[k]) {
          return ctx.Error("element " + ShapeString(e) + " does not match " + ShapeString(first) +
                           " outside axis " + std::to_string(axis));
        }
      }
      if (!CheckedAdd(out[axis], e[axis], &out[axis])) return ctx.Error("size overflows");
    }
  }
  ctx.SetOutput(0, seq.dtype, out);
  return Status();
}

// ---------------------------------------------------------------- Slice

/// Output length of a slice of a dim of size d; adjusts *start for values.
Status SliceDim(ShapeContext& ctx, int64_t d, int64_t start, int64_t end, int64_t step,
                int64_t* first, int64_t* len) {
  if (step == 0) return ctx.Error("slice step is 0");
  if (start < 0) start += d;
  if (end < 0) end += d;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, d);
    end = std::clamp<int64_t>(end, 0, d);
    *len = end > start ? 1 + (end - start - 1) / step : 0;
  } else {
    start = std::clamp<int64_t>(start, 0, d > 0 ? d - 1 : 0);
    end = std::clamp<int64_t>(end, -1, d > 0 ? d - 1 : -1);
    if (d == 0 || start <= end) {
      *len = 0;
    } else if (step == std::numeric_limits<int64_t>::min()) {
      *len = 1;
    } else {
      *len = 1 + (start - end - 1) / (-step);
    }
  }
  *first = start;
  return Status();
}

Status SliceShape(ShapeContext& ctx) {
  Status s = CheckInputs(ctx, 1, 5);
  if (!s.ok()) return s;
  const Tensor& in = ctx.Input(0);
  const int64_t r = static_cast<int64_t>(in.shape.size());
  Shape starts, ends, axes, steps;
  bool has_axes = false, has_steps = false;
  const bool attr_form = ctx.num_inputs() == 1 && ctx.node().Has("starts");
  if (attr_form) {
    starts = ctx.node().GetInts("starts");
    ends = ctx.node().GetInts("ends");
    has_axes = ctx.node().Has("axes");
    axes = ctx.node().GetInts("axes");
  } else {
    if (ctx.num_inputs() < 3) {
      return ctx.Error("expects 3..5 inputs, got " + std::to_string(ctx.num_inputs()));
    }
    bool found = false;
    s = IntsFromAttrOrInput(ctx, "", 1, "the starts of Slice", &starts, &found);
    if (!s.ok()) return s;
    s = IntsFromAttrOrInput(ctx, "", 2, "the ends of Slice", &ends, &found);
    if (!s.ok()) return s;
    s = IntsFromAttrOrInput(ctx, "", 3, "the axes of Slice", &axes, &has_axes);
    if (!s.ok()) return s;
    s = IntsFromAttrOrInput(ctx, "", 4, "the steps of Slice", &steps, &has_steps);
    if (!s.ok()) return s;
  }
  if (starts.size() != ends.size()) return ctx.Error("starts and ends differ in length");
  if (!has_axes) {
    axes.clear();
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (!has_steps) steps.assign(starts.size(), 1);
  if (axes.size() != starts.size() || steps.size() != starts.size()) {
    return ctx.Error("starts, ends, axes and steps differ in length");
  }
  Shape norm;
  if (!NormalizeAxes(axes, r, true, &norm)) {
    return ctx.Error("axes " + ShapeString(axes) + " out of range or repeated for input " +
                     ShapeString(in.shape));
  }
  Shape out = in.shape;
  Shape first(r, 0), step(r, 1);
  for (size_t i = 0; i < norm.size(); ++i) {
    const int64_t a = norm[i];
    s = SliceDim(ctx, in.shape[a], starts[i], ends[i], steps[i], &first[a], &out[a]);
    if (!s.ok()) return s;
    step[a] = steps[i];
  }
  ctx.SetOutput(0, in.dtype, out);
  if (HasInputValues(ctx, 0) && Small(out)) {
    const Shape st = Strides(in.shape);
    std::vector<int64_t> v;
    Shape idx(r, 0);
    if (Numel(out) > 0) {
      do {
        int64_t flat = 0;
        for (int64_t k = 0; k < r; ++k) flat += (first[k] + idx[k] * step[k]) * st[k];
        v.push_back(in.values[flat]);
      } while (NextIndex(&idx, out));
    }
    MaybeValues(ctx, 0, std::move(v));
  }
  return Status();
}

// ---------------------------------------------------------------- Gather family

Status GatherShape(ShapeContext& ctx) {
  Status s = CheckInputs(ctx, 2, 2);
  if (!s.ok()) return s;
  const Tensor& data = ctx.Input(0);
  const Tensor& ind = ctx.Input(1);
  const int64_t r = static_cast<int64_t>(data.shape.size());
  int64_t axis = 0;
  if (r == 0) return ctx.Error("cannot gather from a scalar");
  if (!NormalizeAxis(ctx.node().GetInt("axis", 0), r, &axis)) {
    return ctx.Error("axis out of range for " + ShapeString(data.shape));
  }
  Shape out(data.shape.begin(), data.shape.begin() + axis);
  out.insert(out.end(), ind.shape.begin(), ind.shape.end());
  out.insert(out.end(), data.shape.begin() + axis + 1, data.shape.end());
  const int64_t dim = data.shape[axis];
  if (HasInputValues(ctx, 1)) {
    for (int64_t i : ind.values) {
      if (i < -dim || i >= dim) {
        return ctx.Error("index " + std::to_string(i) + " out of range for dim " +
                         std::to_string(axis) + " of size " + std::to_string(dim));
      }
    }
  }
  ctx.SetOutput(0, data.dtype, out);
  if (HasInputValues(ctx, 0) && HasInputValues(ctx, 1) && Small(out)) {
    int64_t outer = 1, inner = 1;
    for (int64_t k = 0; k < axis; ++k) outer *= data.shape[k];
    for (int64_t k = axis + 1; k < r; ++k) inner *= data.shape[k];
    std::vector<int64_t> v;
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i : ind.values) {
        const int64_t j = i < 0 ? i + dim : i;
        for (int64_t e = 0; e < inner; ++e) v.push_back(data.values[(o * dim + j) * inner + e]);
      }
    }
    MaybeValues(ctx, 0, std::move(v));
  }
  return Status();
}

Status GatherElementsShape(ShapeContext& ctx) {
  Status s = CheckInputs(ctx, 2, 2);
  if (!s.ok()) return s;
  const Tensor& data = ctx.Input(0);
  const Tensor& ind = ctx.Input(1);
  const int64_t r = static_cast<int64_t>(data.shape.size());
  if (static_cast<int64_t>(ind.shape.size()) != r || r == 0) {
    return ctx.Error("indices " + ShapeString(ind.shape) + " and data " + ShapeString(data.shape) +
                     " must have the same nonzero rank");
  }
  int64_t axis = 0;
  if (!NormalizeAxis(ctx.node().GetInt("axis", 0), r, &axis)) {
    return ctx.Error("axis out of range for " + ShapeString(data.shape));
  }
  ctx.SetOutput(0, data.dtype, ind.shape);
  if (HasInputValues(ctx, 0) && HasInputValues(ctx, 1) && Small(ind.shape)) {
    const Shape st = Strides(data.shape);
    std::vector<int64_t> v;
    Shape idx(r, 0);
    if (Numel(ind.shape) > 0) {
      int64_t e = 0;
      do {
        int64_t j = ind.values[e++];
        if (j < 0) j += data.shape[axis];
        if (j < 0 || j >= data.shape[axis]) return ctx.Error("index out of range");
        int64_t flat = 0;
        for (int64_t k = 0; k < r; ++k) {
          const int64_t c = k == axis ? j : idx[k];
          if (c >= data.shape[k]) return ctx.Error("indices exceed the data shape");
          flat += c * st[k];
        }
        v.push_back(data.values[flat]);
      } while (NextIndex(&idx, ind.shape));
    }
    MaybeValues(ctx, 0, std::move(v));
  }
  return Status();
}

Status GatherNDShape(ShapeContext& ctx) {
  Status s = CheckInputs(ctx, 2, 2);
  if (!s.ok()) return s;
  const Shape& d = ctx.Input(0).shape;
  const Shape& q = ctx.Input(1).shape;
  const int64_t b = ctx.node().GetInt("batch_dims", 0);
  const int64_t r = static_cast<int64_t>(d.size()), qr = static_cast<int64_t>(q.size());
  if (r < 1 || qr < 1) return ctx.Error("data and indices must have rank >= 1");
  if (b < 0 || b >= std::min(r, qr)) {
    return ctx.Error("batch_dims " + std::to_string(b) + " out of range");
  }
  for (int64_t k = 0; k < b; ++k) {
    if (d[k] != q[k]) return ctx.Error("batch dims of data and indices differ");
  }
  const int64_t m = q.back();
  if (m < 1 || m > r - b) {
    return ctx.Error("last indices dim " + std::to_string(m) + " out of range for data " +
                     ShapeString(d));
  }
  Shape out(q.begin(), q.end() - 1);
  out.insert(out.end(), d.begin() + b + m, d.end());
  ctx.SetOutput(0, ctx.Input(0).dtype, out);
  return Status();
}

Status ScatterShape(ShapeContext& ctx) {
  Status s = CheckInputs(ctx, 3, 3);
  if (!s.ok()) return s;
  const Tensor& data = ctx.Input(0);
  const Shape& ind = ctx.Input(1).shape;
  const Shape& upd = ctx.Input(2).shape;
  if (ctx.node().op_type == "ScatterND") {
    if (ind.empty()) return ctx.Error("indices must have rank >= 1");
    const int64_t k = ind.back();
    if (k < 0 || k > static_cast<int64_t>(data.shape.size())) {
      return ctx.Error("last indices dim out of range for data " + ShapeString(data.shape));
    }
    Shape want(ind.begin(), ind.end() - 1);
    want.insert(want.end(), data.shape.begin() + k, data.shape.end());
    if (want != upd) {
      return ctx.Error("updates " + ShapeString(upd) + " should be " + ShapeString(want));
    }
  } else {
    if (ind.size() != data.shape.size() || upd != ind) {
      return ctx.Error("indices " + ShapeString(ind) + " and updates " + ShapeString(upd) +
                       " must match in shape and have the rank of data");
    }
    int64_t axis = 0;
    if (!NormalizeAxis(ctx.node().GetInt("axis", 0), data.shape.size(), &axis)) {
      return ctx.Error("axis out of range");
    }
  }
  ctx.SetOutput(0, data.dtype, data.shape);
  return Status();
}

// ---------------------------------------------------------------- Tile, Pad, Range

Status TileShape(ShapeContext& ctx) {
  Status s = CheckInputs(ctx, 2, 2);
  if (!s.ok()) return s;
  const Tensor& in = ctx.Input(0);
  if (!HasInputValues(ctx, 1)) {
    return ctx.Error("cannot infer: the repeats of Tile are not a constant");
  }
  const Shape& rep = ctx.Input(1).values;
  if (rep.size() != in.shape.size()) {
    return ctx.Error("repeats " + ShapeString(rep) + " do not match the rank of " +
                     ShapeString(in.shape));
  }
  Shape out(rep.size());
  for (size_t i = 0; i < rep.size(); ++i) {
    if (rep[i] < 0) return ctx.Error("negative repeat");
    if (!CheckedMul(in.shape[i], rep[i], &out[i])) return ctx.Error("size overflows int64");
  }
  ctx.SetOutput(0, in.dtype, out);
  if (HasInputValues(ctx, 0) && Small(out)) {
    std::vector<int64_t> v;
    Shape idx(out.size(), 0);
    const Shape st = Strides(in.shape);
    if (Numel(out) > 0) {
      do {
        int64_t flat = 0;
        for (size_t k = 0; k < out.size(); ++k) flat += (idx[k] % in.shape[k]) * st[k];
        v.push_back(in.values[flat]);
      } while (NextIndex(&idx, out));
    }
    MaybeValues(ctx, 0, std::move(v));
  }
  return Status();
}

Status PadShape(ShapeContext& ctx) {
  Status s = CheckInputs(ctx, 1, 4);
  if (!s.ok()) return s;
  const Tensor& in = ctx.Input(0);
  const int64_t r = static_cast<int64_t>(in.shape.size());
  Shape pads, axes;
  bool found = false, has_axes = false;
  s = IntsFromAttrOrInput(ctx, ctx.HasInput(1) ? "" : "pads", ctx.HasInput(1) ? 1 : -1,
                          "the pads of Pad", &pads, &found);
  if (!s.ok()) return s;
  if (!found) return ctx.Error("has no pads");
  s = IntsFromAttrOrInput(ctx, "", 3, "the axes of Pad", &axes, &has_axes);
  if (!s.ok()) return s;
  if (!has_axes) {
    for (int64_t i = 0; i < r; ++i) axes.push_back(i);
  }
  Shape norm;
  if (!NormalizeAxes(axes, r, true, &norm)) return ctx.Error("axes out of range");
  if (pads.size() != 2 * norm.size()) {
    return ctx.Error("pads " + ShapeString(pads) + " should have " +
                     std::to_string(2 * norm.size()) + " entries for input " +
                     ShapeString(in.shape));
  }
  Shape out = in.shape;
  for (size_t i = 0; i < norm.size(); ++i) {
    int64_t d = out[norm[i]];
    if (!CheckedAdd(d, pads[i], &d) || !CheckedAdd(d, pads[i + norm.size()], &d) || d < 0) {
      return ctx.Error("pads " + ShapeString(pads) + " give a negative or huge dim for " +
                       ShapeString(in.shape));
    }
    out[norm[i]] = d;
  }
  ctx.SetOutput(0, in.dtype, out);
  return Status();
}

Status RangeShape(ShapeContext& ctx) {
  Status s = CheckInputs(ctx, 3, 3);
  if (!s.ok()) return s;
  for (int i = 0; i < 3; ++i) {
    if (!ctx.Input(i).shape.empty() && Numel(ctx.Input(i).shape) != 1) {
      return ctx.Error("start, limit and delta must be scalars");
    }
  }
  const DType dt = ctx.Input(0).dtype;
  int64_t a = 0, b = 0, c = 0;
  if (InputScalarInt(ctx, 0, &a) && InputScalarInt(ctx, 1, &b) && InputScalarInt(ctx, 2, &c)) {
    if (c == 0) return ctx.Error("delta is 0");
    int64_t n = 0;
    // ceil((b - a) / c) without overflow, via long double for huge spans.
    const long double span = static_cast<long double>(b) - static_cast<long double>(a);
    const long double q = std::ceil(span / static_cast<long double>(c));
    if (q > 0) {
      if (q > static_cast<long double>(std::numeric_limits<int64_t>::max() / 2)) {
        return ctx.Error("Range output size overflows");
      }
      n = static_cast<int64_t>(q);
    }
    ctx.SetOutput(0, dt, {n});
    if (n <= kMaxPropagatedValues) {
      std::vector<int64_t> v;
      for (int64_t i = 0; i < n; ++i) v.push_back(a + i * c);
      MaybeValues(ctx, 0, std::move(v));
    }
    return Status();
  }
  double fa = 0, fb = 0, fc = 0;
  if (InputConstantFloat(ctx, 0, &fa) && InputConstantFloat(ctx, 1, &fb) &&
      InputConstantFloat(ctx, 2, &fc)) {
    if (fc == 0) return ctx.Error("delta is 0");
    const double q = std::ceil((fb - fa) / fc);
    if (!(q < 9.0e18)) return ctx.Error("Range output size overflows");
    ctx.SetOutput(0, dt, {q > 0 ? static_cast<int64_t>(q) : 0});
    return Status();
  }
  return ctx.Error("cannot infer: start, limit or delta of Range is not a constant");
}

// ---------------------------------------------------------------- Cast

/// Converts integer values to `to` (bool: nonzero -> 1). Float targets drop.
void CastValues(ShapeContext& ctx, DType to) {
  if (!IsIntegral(to)) return;
  double f = 0;
  if (!IsIntegral(ctx.Input(0).dtype) && Numel(ctx.Input(0).shape) == 1 &&
      InputConstantFloat(ctx, 0, &f) && std::fabs(f) < 9.0e18) {
    int64_t v = static_cast<int64_t>(f);
    if (to == DType::kBool) v = f != 0;
    MaybeValues(ctx, 0, {v});
    return;
  }
  if (!HasInputValues(ctx, 0) || !IsIntegral(ctx.Input(0).dtype)) return;
  std::vector<int64_t> v = ctx.Input(0).values;
  if (to == DType::kBool) {
    for (int64_t& x : v) x = x != 0;
  }
  MaybeValues(ctx, 0, std::move(v));
}

Status CastShape(ShapeContext& ctx) {
  Status s = CheckInputs(ctx, 1, 1);
  if (!s.ok()) return s;
  const int64_t to = ctx.node().GetInt("to", 0);
  if (!IsKnownDType(static_cast<int32_t>(to))) {
    return ctx.Error("unknown target type " + std::to_string(to));
  }
  ctx.SetOutput(0, static_cast<DType>(to), ctx.Input(0).shape);
  CastValues(ctx, static_cast<DType>(to));
  return Status();
}

Status CastLikeShape(ShapeContext& ctx) {
  Status s = CheckInputs(ctx, 2, 2);
  if (!s.ok()) return s;
  const DType to = ctx.Input(1).dtype;
  ctx.SetOutput(0, to, ctx.Input(0).shape);
  CastValues(ctx, to);
  return Status();
}

// ---------------------------------------------------------------- misc

Status NonZeroShape(ShapeContext& ctx) {
  Status s = CheckInputs(ctx, 1, 1);
  if (!s.ok()) return s;
  if (!HasInputValues(ctx, 0)) {
    return ctx.Error(
        "cannot infer: the output size of NonZero depends on the input data, which is not known");
  }
  const Tensor& in = ctx.Input(0);
  const int64_t r = static_cast<int64_t>(in.shape.size());
  int64_t count = 0;
  for (int64_t v : in.values) count += v != 0;
  ctx.SetOutput(0, DType::kInt64, {r, count});
  if (Small({r, count})) {
    std::vector<int64_t> v(r * count);
    Shape idx(r, 0);
    int64_t e = 0, c = 0;
    if (Numel(in.shape) > 0) {
      do {
        if (in.values[e++] != 0) {
          for (int64_t k = 0; k < r; ++k) v[k * count + c] = idx[k];
          ++c;
        }
      } while (NextIndex(&idx, in.shape));
    }
    MaybeValues(ctx, 0, std::move(v));
  }
  return Status();
}

Status TopKShape(ShapeContext& ctx) {
  Status s = CheckInputs(ctx, 1, 2);
  if (!s.ok()) return s;
  const Tensor& in = ctx.Input(0);
  int64_t axis = 0;
  if (!NormalizeAxis(ctx.node().GetInt("axis", -1), in.shape.size(), &axis)) {
    return ctx.Error("axis out of range for " + ShapeString(in.shape));
  }
  int64_t k = 0;
  if (ctx.HasInput(1)) {
    if (!InputScalarInt(ctx, 1, &k)) return ctx.Error("cannot infer: K of TopK is not a constant");
  } else if (ctx.node().Has("k")) {
    k = ctx.node().GetInt("k", 0);
  } else {
    return ctx.Error("has no K");
  }
  if (k < 0 || k > in.shape[axis]) {
    return ctx.Error("K " + std::to_string(k) + " out of range for a dim of size " +
                     std::to_string(in.shape[axis]));
  }
  Shape out = in.shape;
  out[axis] = k;
  const DType dt = in.dtype;
  ctx.SetOutput(0, dt, out);
  ctx.SetOutput(1, DType::kInt64, out);
  return Status();
}

Status CumSumShape(ShapeContext& ctx) {
  Status s = CheckInputs(ctx, 2, 2);
  if (!s.ok()) return s;
  const Tensor& in = ctx.Input(0);
  int64_t axis = 0;
  const bool has_axis = InputScalarInt(ctx, 1, &axis);
  if (has_axis && !NormalizeAxis(axis, in.shape.size(), &axis)) {
    return ctx.Error("axis out of range for " + ShapeString(in.shape));
  }
  ctx.SetOutput(0, in.dtype, in.shape);
  if (has_axis && HasInputValues(ctx, 0)) {
    const bool exclusive = ctx.node().GetInt("exclusive", 0) != 0;
    const bool reverse = ctx.node().GetInt("reverse", 0) != 0;
    const int64_t n = in.shape[axis];
    int64_t outer = 1, inner = 1;
    for (int64_t k = 0; k < axis; ++k) outer *= in.shape[k];
    for (size_t k = axis + 1; k < in.shape.size(); ++k) inner *= in.shape[k];
    std::vector<int64_t> v(in.values.size());
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t e = 0; e < inner; ++e) {
        int64_t acc = 0;
        for (int64_t j = 0; j < n; ++j) {
          const int64_t jj = reverse ? n - 1 - j : j;
          const int64_t at = (o * n + jj) * inner + e;
          if (exclusive) {
            v[at] = acc;
            if (!CheckedAdd(acc, in.values[at], &acc)) return Status();
          } else {
            if (!CheckedAdd(acc, in.values[at], &acc)) return Status();
            v[at] = acc;
          }
        }
      }
    }
    MaybeValues(ctx, 0, std::move(v));
  }
  return Status();
}

Status TriluShape(ShapeContext& ctx) {
  Status s = CheckInputs(ctx, 1, 2);
  if (!s.ok()) return s;
  const Tensor& in = ctx.Input(0);
  if (in.shape.size() < 2) return ctx.Error("input must have rank >= 2");
  ctx.SetOutput(0, in.dtype, in.shape);
  return Status();
}

Status OneHotShape(ShapeContext& ctx) {
  Status s = CheckInputs(ctx, 3, 3);
  if (!s.ok()) return s;
  const Shape& ind = ctx.Input(0).shape;
  int64_t depth = 0;
  if (!InputScalarInt(ctx, 1, &depth)) {
    return ctx.Error("cannot infer: the depth of OneHot is not a constant");
  }
  if (depth < 0) return ctx.Error("negative depth");
  if (Numel(ctx.Input(2).shape) != 2) return ctx.Error("values must have 2 elements");
  const int64_t r = static_cast<int64_t>(ind.size()) + 1;
  int64_t axis = 0;
  if (!NormalizeAxis(ctx.node().GetInt("axis", -1), r, &axis)) {
    return ctx.Error("axis out of range");
  }
  Shape out = ind;
  out.insert(out.begin() + axis, depth);
  ctx.SetOutput(0, ctx.Input(2).dtype, out);
  return Status();
}

// The dtype attribute of generator ops, or `def` when absent.
Status GeneratorDType(ShapeContext& ctx, DType def, DType* out) {
  if (!ctx.node().Has("dtype")) {
    *out = def;
    return Status();
  }
  const int64_t dt = ctx.node().GetInt("dtype", 0);
  if (!IsKnownDType(static_cast<int32_t>(dt))) {
    return ctx.Error("unknown dtype " + std::to_string(dt));
  }
  *out = static_cast<DType>(dt);
  return Status();
}

Status EyeLikeShape(ShapeContext& ctx) {
  Status s = CheckInputs(ctx, 1, 1);
  if (!s.ok()) return s;
  const Tensor& in = ctx.Input(0);
  if (in.shape.size() != 2) return ctx.Error("input must be 2-D, got " + ShapeString(in.shape));
  DType dt = DType::kUndefined;
  s = GeneratorDType(ctx, in.dtype, &dt);
  if (!s.ok()) return s;
  ctx.SetOutput(0, dt, in.shape);
  return Status();
}

// RandomUniformLike, RandomNormalLike, Bernoulli: the input's shape.
Status RandomLikeShape(ShapeContext& ctx) {
  Status s = CheckInputs(ctx, 1, 1);
  if (!s.ok()) return s;
  DType dt = DType::kUndefined;
  s = GeneratorDType(ctx, ctx.Input(0).dtype, &dt);
  if (!s.ok()) return s;
  ctx.SetOutput(0, dt, ctx.Input(0).shape);
  return Status();
}

// RandomUniform, RandomNormal: the shape attribute.
Status RandomShape(ShapeContext& ctx) {
  Status s = CheckInputs(ctx, 0, 0);
  if (!s.ok()) return s;
  DType dt = DType::kUndefined;
  s = GeneratorDType(ctx, DType::kFloat, &dt);
  if (!s.ok()) return s;
  if (!ctx.node().Has("shape")) return ctx.Error("needs a shape attribute");
  Shape out = ctx.node().GetInts("shape");
  for (int64_t d : out) {
    if (d < 0) return ctx.Error("negative dim in shape attribute");
  }
  ctx.SetOutput(0, dt, out);
  return Status();
}

// Multinomial: [batch, sample_size] draws, int32 unless dtype says.
Status MultinomialShape(ShapeContext& ctx) {
  Status s = CheckInputs(ctx, 1, 1);
  if (!s.ok()) return s;
  const Tensor& in = ctx.Input(0);
  if (in.shape.size() != 2) return ctx.Error("input must be 2-D, got " + ShapeString(in.shape));
  DType dt = DType::kUndefined;
  s = GeneratorDType(ctx, DType::kInt32, &dt);
  if (!s.ok()) return s;
  const int64_t n = ctx.node().GetInt("sample_size", 1);
  if (n < 0) return ctx.Error("negative sample_size");
  ctx.SetOutput(0, dt, {in.shape[0], n});
  return Status();
}

Status DepthSpaceShape(ShapeContext& ctx) {
  Status s = CheckInputs(ctx, 1, 1);
  if (!s.ok()) return s;
  const Tensor& in = ctx.Input(0);
  if (in.shape.size() != 4) return ctx.Error("input must be 4-D, got " + ShapeString(in.shape));
  const int64_t b = ctx.node().GetInt("blocksize", 0);
  int64_t bb = 0;
  if (b <= 0 || !CheckedMul(b, b, &bb)) return ctx.Error("blocksize must be positive");
  Shape out = in.shape;
  if (ctx.node().op_type == "DepthToSpace") {
    if (out[1] % bb != 0) return ctx.Error("channels not divisible by blocksize^2");
    out[1] /= bb;
    if (!CheckedMul(out[2], b, &out[2]) || !CheckedMul(out[3], b, &out[3])) {
      return ctx.Error("size overflows int64");
    }
  } else {
    if (out[2] % b != 0 || out[3] % b != 0) {
      return ctx.Error("spatial dims not divisible by blocksize");
    }
    if (!CheckedMul(out[1], bb, &out[1])) return ctx.Error("size overflows int64");
    out[2] /= b;
    out[3] /= b;
  }
  ctx.SetOutput(0, in.dtype, out);
  return Status();
}

// ---------------------------------------------------------------- saves

/// Indices (input 1) are kept for the data gradient.
void SaveIndices(const SaveContext& c, std::vector<Saved>* out) {
  if (InputRequiresGrad(c, 0)) SaveInput(1, out);
}

/// Scatter: the index is kept for the updates' gradient.
void SaveScatterIndices(const SaveContext& c, std::vector<Saved>* out) {
  if (InputRequiresGrad(c, 2)) SaveInput(1, out);
}

/// TopK: the indices output selects the gradient.
void SaveTopKIndices(const SaveContext& c, std::vector<Saved>* out) {
  if (c.AnyInputRequiresGrad()) SaveOutput(1, out);
}

OpDef Def(ShapeFn fn, Alias alias = Alias::kNone, bool differentiable = true,
          SavesFn saves = nullptr) {
  OpDef d;
  d.shape = fn;
  d.alias = alias;
  d.differentiable = differentiable;
  d.saves = saves;
  return d;
}

/// A view op's facts: how its strides follow, its gradient, and whether a
/// weight stays a weight through it.
void Viewing(OpDef& d, ViewRule rule, GradKind grad, bool passes_weight) {
  d.view = rule;
  d.grad = grad;
  d.passes_weight = passes_weight;
}

}  // namespace

void RegisterShapeOps(OpTable* t) {
  const Alias V = Alias::kView;
  const Alias N = Alias::kNone;
  OpDef& constant = t->Add("Constant", Def(ConstantShape, N, false));
  constant.host_only = true;
  constant.fills_constant = true;
  t->Add("ConstantOfShape", Def(ConstantOfShapeShape, N, false)).fills_constant = true;
  t->Add("Shape", Def(ShapeShape, N, false)).reads_dims_only = true;
  t->Add("Size", Def(SizeShape, N, false)).reads_dims_only = true;
  Viewing(t->Add("Identity", Def(IdentityShape, V)), ViewRule::kSame, GradKind::kAlias, true);
  Viewing(t->Add("Reshape", Def(ReshapeShape, V)), ViewRule::kReshape, GradKind::kAlias, true);
  Viewing(t->Add("Flatten", Def(FlattenShape, V)), ViewRule::kReshape, GradKind::kAlias, true);
  Viewing(t->Add("Squeeze", Def(SqueezeShape, V)), ViewRule::kReshape, GradKind::kAlias, true);
  Viewing(t->Add("Unsqueeze", Def(UnsqueezeShape, V)), ViewRule::kReshape, GradKind::kAlias, true);
  Viewing(t->Add("Transpose", Def(TransposeShape, V)), ViewRule::kTranspose, GradKind::kAlias,
          true);
  Viewing(t->Add("Expand", Def(ExpandShape, V)), ViewRule::kExpand, GradKind::kGather, true);
  OpDef& concat = t->Add("Concat", Def(ConcatShape));
  concat.grad = GradKind::kAlias;  // Each input's gradient is a slice of the output's.
  concat.output_dtype = OutputDType::kPromote;
  concat.combines_weight = true;
  concat.rearranges_weight = WeightRearrange::kAllInputs;
  concat.channels_last = ChannelsLastRule::kAllInputs;  // cat's memory format
  Viewing(t->Add("Split", Def(SplitShape, V)), ViewRule::kSplit, GradKind::kGather, false);
  t->Mutable("Split")->rearranges_weight = WeightRearrange::kInput0;
  Viewing(t->Add("SplitToSequence", Def(SplitToSequenceShape, V)), ViewRule::kSequence,
          GradKind::kGather, false);
  Viewing(t->Add("SequenceAt", Def(SequenceAtShape, V)), ViewRule::kSequence, GradKind::kAlias,
          false);
  t->Add("SequenceConstruct", Def(SequenceConstructShape));
  t->Add("SequenceEmpty", Def(SequenceEmptyShape, N, false));
  t->Add("SequenceInsert", Def(SequenceInsertShape));
  t->Add("SequenceLength", Def(SequenceLengthShape, N, false));
  t->Add("ConcatFromSequence", Def(ConcatFromSequenceShape));
  Viewing(t->Add("Slice", Def(SliceShape, V)), ViewRule::kSlice, GradKind::kGather, false);
  t->Mutable("Slice")->rearranges_weight = WeightRearrange::kInput0;
  // A learned table read by index (embeddings, relative position biases).
  t->Add("Gather", Def(GatherShape, N, true, SaveIndices)).weight_inputs = InputBits(0, 0);
  t->Add("GatherElements", Def(GatherElementsShape, N, true, SaveIndices)).weight_inputs =
      InputBits(0, 0);
  t->Add("GatherND", Def(GatherNDShape, N, true, SaveIndices)).weight_inputs = InputBits(0, 0);
  t->Add("ScatterND", Def(ScatterShape, N, true, SaveScatterIndices));
  t->Add("ScatterElements", Def(ScatterShape, N, true, SaveScatterIndices));
  t->Add("Tile", Def(TileShape));
  t->Add("Pad", Def(PadShape));
  t->Add("Range", Def(RangeShape, N, false));
  OpDef& cast = t->Add("Cast", Def(CastShape));
  cast.output_dtype = OutputDType::kCastTarget;
  cast.passes_weight = true;
  OpDef& cast_like = t->Add("CastLike", Def(CastLikeShape));
  cast_like.output_dtype = OutputDType::kLikeInput1;
  cast_like.passes_weight = true;
  // The dynamo exporter's conv2d without a bias writes a zero bias as
  // CastLike(0, x): PyTorch has no such op, and no gradient reaches x there.
  cast_like.dtype_only_inputs = InputBits(1, 1);
  t->Add("NonZero", Def(NonZeroShape, N, false));
  t->Add("TopK", Def(TopKShape, N, true, SaveTopKIndices));
  OpDef cumsum = Def(CumSumShape);
  cumsum.autocast = Autocast::kFp32Output;  // fp32_set_opt_dtype in autocast_mode.cpp
  t->Add("CumSum", cumsum);
  t->Add("Trilu", Def(TriluShape)).mask_maker = MaskMaker::kTriangle;
  t->Add("OneHot", Def(OneHotShape, N, false));
  t->Add("EyeLike", Def(EyeLikeShape, N, false));
  // Random generators (stochastic depth, noise): no gradient.
  t->Add("RandomUniformLike", Def(RandomLikeShape, N, false));
  t->Add("RandomNormalLike", Def(RandomLikeShape, N, false));
  t->Add("Bernoulli", Def(RandomLikeShape, N, false));
  t->Add("RandomUniform", Def(RandomShape, N, false));
  t->Add("RandomNormal", Def(RandomShape, N, false));
  t->Add("Multinomial", Def(MultinomialShape, N, false));
  t->Add("DepthToSpace", Def(DepthSpaceShape));
  t->Add("SpaceToDepth", Def(DepthSpaceShape));
}

}  // namespace memplan
