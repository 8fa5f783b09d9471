// Elementwise ops: broadcasting binary/variadic ops, unary activations,
// Where, Dropout and the softmax family. Small integer values are evaluated
// so that shape arithmetic (Add/Sub/Mul/Div on dims, masks) stays known.

#include <algorithm>
#include <utility>

#include "planner/checked.h"
#include "planner/op_registry.h"
#include "planner/ops/op_names.h"
#include "planner/ops/op_util.h"
#include "planner/text.h"

namespace memplan {
namespace {

using Shape = std::vector<int64_t>;
/// Integer kernel: false when the result is not representable.
using IntFn = bool (*)(const Node&, int64_t, int64_t, int64_t*);

bool AddFn(const Node&, int64_t a, int64_t b, int64_t* r) { return CheckedAdd(a, b, r); }
bool SubFn(const Node&, int64_t a, int64_t b, int64_t* r) {
  return !__builtin_sub_overflow(a, b, r);
}
bool MulFn(const Node&, int64_t a, int64_t b, int64_t* r) {
  return !__builtin_mul_overflow(a, b, r);
}
bool DivFn(const Node&, int64_t a, int64_t b, int64_t* r) {
  if (b == 0 || (b == -1 && a == INT64_MIN)) return false;
  *r = a / b;
  return true;
}
bool ModFn(const Node& n, int64_t a, int64_t b, int64_t* r) {
  if (b == 0 || (b == -1 && a == INT64_MIN)) return false;
  int64_t m = a % b;
  if (n.GetInt("fmod", 0) == 0 && m != 0 && ((m < 0) != (b < 0))) m += b;
  *r = m;
  return true;
}
bool PowFn(const Node&, int64_t a, int64_t b, int64_t* r) {
  if (b < 0 || b > 64) return false;
  int64_t acc = 1;
  for (int64_t i = 0; i < b; ++i) {
    if (__builtin_mul_overflow(acc, a, &acc)) return false;
  }
  *r = acc;
  return true;
}
bool MaxFn(const Node&, int64_t a, int64_t b, int64_t* r) { return *r = std::max(a, b), true; }
bool MinFn(const Node&, int64_t a, int64_t b, int64_t* r) { return *r = std::min(a, b), true; }
bool EqFn(const Node&, int64_t a, int64_t b, int64_t* r) { return *r = a == b, true; }
bool LtFn(const Node&, int64_t a, int64_t b, int64_t* r) { return *r = a < b, true; }
bool LeFn(const Node&, int64_t a, int64_t b, int64_t* r) { return *r = a <= b, true; }
bool GtFn(const Node&, int64_t a, int64_t b, int64_t* r) { return *r = a > b, true; }
bool GeFn(const Node&, int64_t a, int64_t b, int64_t* r) { return *r = a >= b, true; }
bool AndFn(const Node&, int64_t a, int64_t b, int64_t* r) {
  return *r = (a != 0) && (b != 0), true;
}
bool OrFn(const Node&, int64_t a, int64_t b, int64_t* r) { return *r = (a != 0) || (b != 0), true; }
bool XorFn(const Node&, int64_t a, int64_t b, int64_t* r) {
  return *r = (a != 0) != (b != 0), true;
}
bool BitAndFn(const Node&, int64_t a, int64_t b, int64_t* r) { return *r = a & b, true; }
bool BitOrFn(const Node&, int64_t a, int64_t b, int64_t* r) { return *r = a | b, true; }
bool BitXorFn(const Node&, int64_t a, int64_t b, int64_t* r) { return *r = a ^ b, true; }
bool ShiftFn(const Node& n, int64_t a, int64_t b, int64_t* r) {
  if (b < 0 || b >= 64 || a < 0) return false;
  const uint64_t ua = static_cast<uint64_t>(a);
  const uint64_t v = n.GetString("direction", "") == "LEFT" ? ua << b : ua >> b;
  if (v > static_cast<uint64_t>(INT64_MAX)) return false;
  *r = static_cast<int64_t>(v);
  return true;
}

/// How the output dtype follows from the inputs.
enum class OutType { kSame, kBool };

struct BinaryInfo {
  const char* op;
  IntFn fn;
  OutType out;
  bool variadic;
  bool same_dtype;  ///< Inputs must share a dtype.
};

const BinaryInfo kBinary[] = {
    {"Add", AddFn, OutType::kSame, false, true},
    {"Sub", SubFn, OutType::kSame, false, true},
    {"Mul", MulFn, OutType::kSame, false, true},
    {"Div", DivFn, OutType::kSame, false, true},
    {"Mod", ModFn, OutType::kSame, false, true},
    {"Pow", PowFn, OutType::kSame, false, false},
    {"Max", MaxFn, OutType::kSame, true, true},
    {"Min", MinFn, OutType::kSame, true, true},
    {"Sum", AddFn, OutType::kSame, true, true},
    {"Mean", nullptr, OutType::kSame, true, true},
    {"Equal", EqFn, OutType::kBool, false, true},
    {"Less", LtFn, OutType::kBool, false, true},
    {"LessOrEqual", LeFn, OutType::kBool, false, true},
    {"Greater", GtFn, OutType::kBool, false, true},
    {"GreaterOrEqual", GeFn, OutType::kBool, false, true},
    {"And", AndFn, OutType::kBool, false, true},
    {"Or", OrFn, OutType::kBool, false, true},
    {"Xor", XorFn, OutType::kBool, false, true},
    {"BitShift", ShiftFn, OutType::kSame, false, true},
    {"BitwiseAnd", BitAndFn, OutType::kSame, false, true},
    {"BitwiseOr", BitOrFn, OutType::kSame, false, true},
    {"BitwiseXor", BitXorFn, OutType::kSame, false, true},
};

const BinaryInfo* FindBinary(const std::string& op) {
  for (const BinaryInfo& b : kBinary) {
    if (op == b.op) return &b;
  }
  return nullptr;
}

/// Broadcast shape of all inputs, or an error naming them.
Status BroadcastAll(const ShapeContext& ctx, int first, int last, Shape* out) {
  Shape s = ctx.Input(first).shape;
  for (int i = first + 1; i <= last; ++i) {
    Shape next;
    if (!BroadcastShapes(s, ctx.Input(i).shape, &next)) {
      return ctx.Error("cannot broadcast " + ShapeString(s) + " with " +
                       ShapeString(ctx.Input(i).shape) + " (input '" + ctx.Input(i).name + "')");
    }
    s = std::move(next);
  }
  *out = std::move(s);
  return Status();
}

bool Small(const Shape& s) {
  const int64_t n = Numel(s);
  return n >= 0 && n <= kMaxPropagatedValues;
}

Status BinaryShape(ShapeContext& ctx) {
  const BinaryInfo* info = FindBinary(ctx.node().op_type);
  if (info == nullptr) return ctx.Error("not a broadcasting op");
  const int n = ctx.num_inputs();
  Status s = info->variadic ? CheckInputs(ctx, std::max(n, 1), -1) : CheckInputs(ctx, 2, 2);
  if (!s.ok()) return s;
  const DType dt = ctx.Input(0).dtype;
  if (info->same_dtype) {
    for (int i = 1; i < n; ++i) {
      const DType o = ctx.Input(i).dtype;
      if (dt != DType::kUndefined && o != DType::kUndefined && o != dt) {
        return ctx.Error("inputs have different dtypes (" + DTypeName(dt) + " and " + DTypeName(o) +
                         ")");
      }
    }
  }
  Shape out;
  s = BroadcastAll(ctx, 0, n - 1, &out);
  if (!s.ok()) return s;
  const DType out_dt = info->out == OutType::kBool ? DType::kBool : dt;
  ctx.SetOutput(0, out_dt, out);
  bool all = info->fn != nullptr && IsIntegral(out_dt) && Small(out);
  for (int i = 0; i < n && all; ++i) {
    all = HasInputValues(ctx, i) && IsIntegral(ctx.Input(i).dtype);
  }
  if (!all) return Status();
  std::vector<int64_t> v;
  if (Numel(out) > 0) {
    Shape idx(out.size(), 0);
    do {
      int64_t acc = ctx.Input(0).values[BroadcastIndex(idx, ctx.Input(0).shape)];
      for (int i = 1; i < n; ++i) {
        const Tensor& t = ctx.Input(i);
        if (!info->fn(ctx.node(), acc, t.values[BroadcastIndex(idx, t.shape)], &acc)) {
          return Status();  // Not representable: leave values unknown.
        }
      }
      v.push_back(acc);
    } while (NextIndex(&idx, out));
  }
  ctx.SetValues(0, std::move(v));
  return Status();
}

Status WhereShape(ShapeContext& ctx) {
  Status s = CheckInputs(ctx, 3, 3);
  if (!s.ok()) return s;
  if (ctx.Input(0).dtype != DType::kBool && ctx.Input(0).dtype != DType::kUndefined) {
    return ctx.Error("condition '" + ctx.Input(0).name + "' is " + DTypeName(ctx.Input(0).dtype) +
                     ", not bool");
  }
  const DType dt = ctx.Input(1).dtype;
  if (ctx.Input(2).dtype != dt && dt != DType::kUndefined &&
      ctx.Input(2).dtype != DType::kUndefined) {
    return ctx.Error("X and Y have different dtypes (" + DTypeName(dt) + " and " +
                     DTypeName(ctx.Input(2).dtype) + ")");
  }
  Shape out;
  s = BroadcastAll(ctx, 0, 2, &out);
  if (!s.ok()) return s;
  ctx.SetOutput(0, dt, out);
  if (IsIntegral(dt) && Small(out) && HasInputValues(ctx, 0) && HasInputValues(ctx, 1) &&
      HasInputValues(ctx, 2)) {
    std::vector<int64_t> v;
    if (Numel(out) > 0) {
      Shape idx(out.size(), 0);
      do {
        const Tensor& c = ctx.Input(0);
        const Tensor& t = c.values[BroadcastIndex(idx, c.shape)] ? ctx.Input(1) : ctx.Input(2);
        v.push_back(t.values[BroadcastIndex(idx, t.shape)]);
      } while (NextIndex(&idx, out));
    }
    ctx.SetValues(0, std::move(v));
  }
  return Status();
}

// ---------------------------------------------------------------- unary

bool IsBoolOut(const std::string& op) { return op == "IsNaN" || op == "IsInf"; }

Status UnaryShape(ShapeContext& ctx) {
  const std::string& op = ctx.node().op_type;
  const int max_in = op == "Clip" ? 3 : 1;
  Status s = CheckInputs(ctx, 1, max_in);
  if (!s.ok()) return s;
  const Tensor& in = ctx.Input(0);
  if (op == "Not" && in.dtype != DType::kBool && in.dtype != DType::kUndefined) {
    return ctx.Error("input '" + in.name + "' is " + DTypeName(in.dtype) + ", not bool");
  }
  const DType dt = IsBoolOut(op) ? DType::kBool : in.dtype;
  ctx.SetOutput(0, dt, in.shape);
  if (!HasInputValues(ctx, 0) || !IsIntegral(dt) || !IsIntegral(in.dtype)) return Status();
  std::vector<int64_t> v = in.values;
  for (int64_t& x : v) {
    if (op == "Neg") {
      if (x == INT64_MIN) return Status();
      x = -x;
    } else if (op == "Abs") {
      if (x == INT64_MIN) return Status();
      x = x < 0 ? -x : x;
    } else if (op == "Not") {
      x = x == 0;
    } else if (op == "Sign") {
      x = (x > 0) - (x < 0);
    } else if (op == "BitwiseNot") {
      x = ~x;
    } else if (op == "Relu") {
      x = std::max<int64_t>(x, 0);
    } else if (op == "Floor" || op == "Ceil" || op == "Round") {
      // Integers are unchanged.
    } else {
      return Status();
    }
  }
  ctx.SetValues(0, std::move(v));
  return Status();
}

Status PReluShape(ShapeContext& ctx) {
  Status s = CheckInputs(ctx, 2, 2);
  if (!s.ok()) return s;
  const Tensor& x = ctx.Input(0);
  Shape b;
  if (!BroadcastShapes(x.shape, ctx.Input(1).shape, &b) || b != x.shape) {
    return ctx.Error("slope " + ShapeString(ctx.Input(1).shape) + " does not broadcast to " +
                     ShapeString(x.shape));
  }
  ctx.SetOutput(0, x.dtype, x.shape);
  return Status();
}

Status DropoutShape(ShapeContext& ctx) {
  Status s = CheckInputs(ctx, 1, 3);
  if (!s.ok()) return s;
  const Tensor& in = ctx.Input(0);
  const DType dt = in.dtype;
  const Shape shape = in.shape;
  ctx.SetOutput(0, dt, shape);
  ctx.SetOutput(1, DType::kBool, shape);
  return Status();
}

Status SoftmaxShape(ShapeContext& ctx) {
  Status s = CheckInputs(ctx, 1, 1);
  if (!s.ok()) return s;
  const Tensor& in = ctx.Input(0);
  const int64_t axis = SoftmaxAxis(ctx.node(), ctx.opset());
  int64_t a = 0;
  const int64_t r = static_cast<int64_t>(in.shape.size());
  if (!(r == 0 && (axis == 0 || axis == -1)) && !NormalizeAxis(axis, r, &a)) {
    return ctx.Error("axis " + std::to_string(axis) + " out of range for " + ShapeString(in.shape));
  }
  ctx.SetOutput(0, in.dtype, in.shape);
  return Status();
}

// ---------------------------------------------------------------- saves

void SaveOutput0(const SaveContext& c, std::vector<Saved>* out) {
  if (c.AnyInputRequiresGrad()) SaveOutput(0, out);
}

void SaveInput0(const SaveContext& c, std::vector<Saved>* out) {
  if (c.AnyInputRequiresGrad()) SaveInput(0, out);
}

/// Mul: each operand is kept for the other's gradient.
void SaveMul(const SaveContext& c, std::vector<Saved>* out) {
  if (InputRequiresGrad(c, 0)) SaveInput(1, out);
  if (InputRequiresGrad(c, 1)) SaveInput(0, out);
}

/// Div: the divisor, and the dividend when the divisor needs a gradient.
void SaveDiv(const SaveContext& c, std::vector<Saved>* out) {
  if (!c.AnyInputRequiresGrad()) return;
  SaveInput(1, out);
  if (InputRequiresGrad(c, 1)) SaveInput(0, out);
}

/// Pow: the base, and the exponent when it needs a gradient.
void SavePow(const SaveContext& c, std::vector<Saved>* out) {
  if (!c.AnyInputRequiresGrad()) return;
  SaveInput(0, out);
  if (InputRequiresGrad(c, 1)) SaveInput(1, out);
}

/// Mod: both operands when the divisor needs a gradient.
void SaveMod(const SaveContext& c, std::vector<Saved>* out) {
  if (!InputRequiresGrad(c, 1)) return;
  SaveInput(0, out);
  SaveInput(1, out);
}

/// Max/Min: every input (the gradient goes to the selected one).
void SaveAllInputs(const SaveContext& c, std::vector<Saved>* out) {
  if (!c.AnyInputRequiresGrad()) return;
  for (size_t i = 0; i < c.node->inputs.size(); ++i) {
    if (c.node->inputs[i] >= 0) SaveInput(static_cast<int>(i), out);
  }
}

/// Clip: the input, and tensor bounds that need a gradient.
void SaveClip(const SaveContext& c, std::vector<Saved>* out) {
  if (!c.AnyInputRequiresGrad()) return;
  SaveInput(0, out);
  for (int i = 1; i < 3; ++i) {
    if (InputRequiresGrad(c, i)) SaveInput(i, out);
  }
}

/// PRelu: input and slope.
void SavePRelu(const SaveContext& c, std::vector<Saved>* out) {
  if (!c.AnyInputRequiresGrad()) return;
  SaveInput(0, out);
  SaveInput(1, out);
}

/// Where: the bool condition.
void SaveWhere(const SaveContext& c, std::vector<Saved>* out) {
  if (c.AnyInputRequiresGrad()) SaveInput(0, out);
}

/// The first float of the Constant (looking through Cast/Identity) that
/// produces tensor `id`; false when unknown.
bool ConstantFloat(const Graph& g, int id, double* out) {
  for (int step = 0; step < 8 && id >= 0 && id < static_cast<int>(g.tensors.size()); ++step) {
    const Tensor& t = g.tensors[id];
    if (t.has_values && !t.values.empty()) {
      *out = static_cast<double>(t.values[0]);
      return true;
    }
    if (t.producer < 0 || t.producer >= static_cast<int>(g.nodes.size())) return false;
    const Node& p = g.nodes[t.producer];
    if (p.op_type == "Constant") {
      auto it = p.attrs.find("value");
      if (it != p.attrs.end() && !it->second.t_fvalues.empty()) {
        *out = it->second.t_fvalues[0];
        return true;
      }
      if (it != p.attrs.end() && !it->second.t_values.empty()) {
        *out = static_cast<double>(it->second.t_values[0]);
        return true;
      }
      if ((it = p.attrs.find("value_float")) != p.attrs.end()) {
        *out = it->second.f;
        return true;
      }
      return false;
    }
    if (p.op_type != "Cast" && p.op_type != "CastLike" && p.op_type != "Identity") return false;
    id = p.inputs.empty() ? -1 : p.inputs[0];
  }
  return false;
}

/// Dropout: a bool mask shaped like the output when ratio > 0, unless the
/// training_mode input is known to be false. An absent training_mode counts
/// as training: the planner only asks for saves when planning a training step.
void SaveDropout(const SaveContext& c, std::vector<Saved>* out) {
  if (!c.AnyInputRequiresGrad() || c.graph == nullptr || c.node == nullptr) return;
  const Graph& g = *c.graph;
  const Node& n = *c.node;
  if (!(DropoutRatio(g, n) > 0)) return;
  if (n.inputs.size() > 2 && n.inputs[2] >= 0) {
    const Tensor& tm = g.tensors[n.inputs[2]];
    if (tm.has_values && !tm.values.empty() && tm.values[0] == 0) return;
  }
  if (n.outputs.empty() || n.outputs[0] < 0) return;
  Saved s;
  s.kind = Saved::kExtra;
  s.dtype = DType::kBool;
  s.shape = g.tensors[n.outputs[0]].shape;
  s.what = "mask";
  out->push_back(s);
}

/// Glu: PyTorch's glu(x, dim) = a * sigmoid(b) for the two halves a, b of x
/// along `axis` (default -1, as F.glu's dim). ONNX has no such op: it is what
/// the schedule runs for the exporters' Split -> Sigmoid -> Mul (fusion.h).
Status GluShape(ShapeContext& ctx) {
  Status s = CheckInputs(ctx, 1, 1);
  if (!s.ok()) return s;
  const Tensor& in = ctx.Input(0);
  int64_t axis = 0;
  if (!NormalizeAxis(ctx.node().GetInt("axis", -1), static_cast<int64_t>(in.shape.size()), &axis)) {
    return ctx.Error("axis " + std::to_string(ctx.node().GetInt("axis", -1)) +
                     " is out of range for rank " + std::to_string(in.shape.size()));
  }
  std::vector<int64_t> out = in.shape;
  if (out[axis] % 2 != 0) {
    return ctx.Error("dim " + std::to_string(axis) + " of input '" + in.name + "' is " +
                     std::to_string(out[axis]) + ", not even");
  }
  out[axis] /= 2;
  ctx.SetOutput(0, in.dtype, out);
  return Status();
}

OpDef Def(ShapeFn fn, SavesFn saves = nullptr, Autocast ac = Autocast::kPassthrough,
          bool differentiable = true) {
  OpDef d;
  d.shape = fn;
  d.saves = saves;
  d.autocast = ac;
  d.differentiable = differentiable;
  return d;
}

}  // namespace

int64_t SoftmaxAxis(const Node& n, int64_t opset) {
  // Before opset 13 Softmax coerces its input to 2-D at the axis (default 1).
  const bool coerced = opset > 0 && opset < 13;
  return n.GetInt("axis", coerced ? 1 : -1);
}

double DropoutRatio(const Graph& g, const Node& n) {
  double ratio = 0.5;
  if (n.inputs.size() > 1 && n.inputs[1] >= 0) {
    if (!ConstantFloat(g, n.inputs[1], &ratio)) ratio = 0.5;
  } else if (n.Has("ratio")) {
    ratio = n.GetFloat("ratio", 0.5f);
  }
  return ratio;
}

void RegisterElementwiseOps(OpTable* t) {
  const Autocast F = Autocast::kFp32;
  const Autocast P = Autocast::kPassthrough;
  // Broadcasting binary and variadic ops.
  OpDef& add = t->Add("Add", Def(BinaryShape));
  add.is_add = true;
  add.same_shape_grad_passes = true;
  add.inplace = InPlaceUse::kResidualAdd;
  t->Add("Sub", Def(BinaryShape));
  t->Add("Mul", Def(BinaryShape, SaveMul));
  t->Add("Div", Def(BinaryShape, SaveDiv));
  t->Add("Mod", Def(BinaryShape, SaveMod));
  t->Add("Pow", Def(BinaryShape, SavePow, F));
  t->Add("Max", Def(BinaryShape, SaveAllInputs));
  t->Add("Min", Def(BinaryShape, SaveAllInputs));
  t->Add("Sum", Def(BinaryShape));
  t->Add("Mean", Def(BinaryShape));
  for (const char* op : {"Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "And", "Or",
                         "Xor", "BitShift", "BitwiseAnd", "BitwiseOr", "BitwiseXor"}) {
    t->Add(op, Def(BinaryShape, nullptr, P, false));
  }
  t->Add("Where", Def(WhereShape, SaveWhere));

  // Unary ops that keep their output.
  for (const char* op : {"Relu", "Sigmoid", "Tanh", "Sqrt", "Elu", "Selu", "Celu"}) {
    t->Add(op, Def(UnaryShape, SaveOutput0));
  }
  t->Add("Exp", Def(UnaryShape, SaveOutput0, F));
  t->Add("Reciprocal", Def(UnaryShape, SaveOutput0, F));
  // Unary ops that keep their input.
  // Swish (opset 24) is PyTorch's silu, also fused from x * sigmoid(x).
  for (const char* op : {"Gelu", "Mish", "Erf", "Sin", "Cos", "Abs", "LeakyRelu", "HardSigmoid",
                         "HardSwish", "Softsign", "ThresholdedRelu", "Swish"}) {
    t->Add(op, Def(UnaryShape, SaveInput0));
  }
  // glu keeps its input (derivatives.yaml: glu_backward(grad, self, dim)).
  t->Add("Glu", Def(GluShape, SaveInput0));
  // torch._weight_norm(v, g, dim) as one kernel (_weight_norm_interface),
  // fused from ReduceL2 -> Div -> Mul on the two parameters: w = g * v /
  // ||v||, of v's shape; backward reads v, g and the float32 norms, which the
  // schedule adds (FusedRegion, Builder::AddWeightNorm).
  t->Add(op_names::kWeightNorm, Def(BinaryShape, SaveAllInputs));
  t->Add("Log", Def(UnaryShape, SaveInput0, F));
  t->Add("Softplus", Def(UnaryShape, SaveInput0, F));
  // Unary ops whose gradient needs nothing (or is zero).
  for (const char* op : {"Neg", "Floor", "Ceil", "Round", "Sign"}) {
    t->Add(op, Def(UnaryShape));
  }
  for (const char* op : {"Not", "IsNaN", "IsInf", "BitwiseNot"}) {
    t->Add(op, Def(UnaryShape, nullptr, P, false));
  }
  t->Add("Clip", Def(UnaryShape, SaveClip));
  t->Add("PRelu", Def(PReluShape, SavePRelu));
  OpDef& dropout = t->Add("Dropout", Def(DropoutShape, SaveDropout));
  dropout.eval_identity = true;  // nn.Dropout in eval mode returns its input.
  dropout.view = ViewRule::kSame;
  dropout.view_outputs = 1;  // No mask then.
  dropout.output_like_input0 = true;
  dropout.saved_extra_first = true;  // Its only saved tensor: the mask.
  OpDef& softmax = t->Add("Softmax", Def(SoftmaxShape, SaveOutput0, Autocast::kFp32Output));
  softmax.contiguous_input0 = true;
  softmax.softmax_grad_product = true;
  t->Add("LogSoftmax", Def(SoftmaxShape, SaveOutput0, Autocast::kFp32Output)).contiguous_input0 =
      true;
  t->Add("Hardmax", Def(SoftmaxShape, nullptr, P, false));

  // Elementwise ops whose output dtype is the promotion of their inputs'
  // (TensorIterator's type promotion); the arithmetic ones may take weights.
  for (const char* op :
       {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Sum", "Mean", "Where", "Mod", "PRelu"}) {
    t->Mutable(op)->output_dtype = OutputDType::kPromote;
  }
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Where"}) {
    t->Mutable(op)->combines_weight = true;
  }
  t->Mutable("PRelu")->weight_inputs = InputBits(1, 1);
  // What attention's scores go through between the two matmuls (masks,
  // scaling) and what makes a causal mask.
  for (const char* op : {"Add", "Sub"}) t->Mutable(op)->score_edit = ScoreEdit::kShift;
  for (const char* op : {"Mul", "Div"}) t->Mutable(op)->score_edit = ScoreEdit::kScale;
  t->Mutable("Where")->score_edit = ScoreEdit::kSelect;
  for (const char* op : {"Less", "LessOrEqual", "Greater", "GreaterOrEqual"}) {
    t->Mutable(op)->mask_maker = MaskMaker::kComparison;
  }
  // Activations model code often runs in place (torchvision: ReLU(inplace=True),
  // SiLU(inplace=True) in EfficientNet); the export does not say, so both are
  // planned (a transformers activation module never runs in place:
  // Node::runs_out_of_place).
  for (const char* op : {"Relu", "Clip", "LeakyRelu", "HardSwish", "HardSigmoid", "Swish"}) {
    t->Mutable(op)->inplace = InPlaceUse::kActivation;
  }
  // relu_ and leaky_relu_ differentiate through their result; the others
  // read the input the kernel overwrites (ReLU6 is hardtanh_).
  for (const char* op : {"Clip", "HardSwish", "HardSigmoid", "Swish"}) {
    t->Mutable(op)->inplace_copies_input = true;
  }
}

bool ModuleRunsOutOfPlace(const std::string& module_class) {
  static const std::string kSuffix = "Activation";
  return module_class.rfind("torch.", 0) != 0 && module_class.size() > kSuffix.size() &&
         EndsWith(module_class, kSuffix);
}

}  // namespace memplan
