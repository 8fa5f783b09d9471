// Neural-network ops: convolution, matrix products, normalisation, pooling,
// resizing, recurrent layers, reductions and attention. Each op's shape
// function, backward-saving rule, FLOP count, alias and autocast class live
// together here (README: How the memory model works).
//
// FLOP conventions (forward only, a multiply-add counts 2):
// - Conv: 2 * N * Cout * (Cin / group) * prod(kernel) * prod(out spatial),
//   plus one add per output element when there is a bias.
// - ConvTranspose: 2 * N * Cin * (Cout / group) * prod(kernel) *
//   prod(in spatial), plus the bias adds.
// - MatMul: 2 * M * N * K * batch. Gemm: 2 * M * N * K, plus M * N with C.
// - Einsum: 2 * the product of every index size (one multiply-add per point
//   of the full iteration space; no contraction-order optimisation).
// - Normalisations, per input element (rough counts of the fused kernels):
//   BatchNorm 5, LayerNorm / GroupNorm / InstanceNorm 8 (mean, variance,
//   normalise, affine), RMSNorm 5, LpNormalization 4.
// - Pooling: prod(kernel) per output element; global pooling and reductions:
//   one per input element (every input element is read and combined once).
// - LSTM/GRU/RNN: 2 * gates * (input + hidden) * hidden * seq * batch * dirs.
// - Attention: 2 * B * H * Sq * Skv * (Dh + Dv) for the two products plus 5
//   per score element for the softmax.
// - Everything else: one per output element.
// Counts saturate at INT64_MAX instead of overflowing.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "planner/checked.h"
#include "planner/dtype.h"
#include "planner/graph.h"
#include "planner/op_registry.h"
#include "planner/ops/op_util.h"
#include "planner/status.h"
#include "planner/text.h"

namespace memplan {
namespace {

#define NN_TRY(expr)                         \
  do {                                       \
    Status nn_status_ = (expr);              \
    if (!nn_status_.ok()) return nn_status_; \
  } while (0)

std::string Str(int64_t v) { return std::to_string(v); }

// ---------------------------------------------------------------------------
// Graph access for FLOP and save functions (which see no ShapeContext).

const std::vector<int64_t>* InShape(const Graph& g, const Node& n, int i) {
  if (i < 0 || i >= static_cast<int>(n.inputs.size())) return nullptr;
  const int t = n.inputs[i];
  if (t < 0 || t >= static_cast<int>(g.tensors.size())) return nullptr;
  return g.tensors[t].shape_known ? &g.tensors[t].shape : nullptr;
}

const std::vector<int64_t>* OutShape(const Graph& g, const Node& n, int i) {
  if (i < 0 || i >= static_cast<int>(n.outputs.size())) return nullptr;
  const int t = n.outputs[i];
  if (t < 0 || t >= static_cast<int>(g.tensors.size())) return nullptr;
  return g.tensors[t].shape_known ? &g.tensors[t].shape : nullptr;
}

bool NodeHasInput(const Node& n, int i) {
  return i >= 0 && i < static_cast<int>(n.inputs.size()) && n.inputs[i] >= 0;
}

bool NodeHasOutput(const Node& n, int i) {
  return i >= 0 && i < static_cast<int>(n.outputs.size()) && n.outputs[i] >= 0;
}

int64_t InNumel(const Graph& g, const Node& n, int i) {
  const auto* s = InShape(g, n, i);
  return s ? SatNumel(*s) : 0;
}

int64_t OutNumel(const Graph& g, const Node& n, int i) {
  const auto* s = OutShape(g, n, i);
  return s ? SatNumel(*s) : 0;
}

void SaveExtra(DType dtype, std::vector<int64_t> shape, const std::string& what,
               std::vector<Saved>* out) {
  Saved s;
  s.kind = Saved::kExtra;
  s.dtype = dtype;
  s.shape = std::move(shape);
  s.what = what;
  out->push_back(std::move(s));
}

DType InDType(const SaveContext& sc, int i) {
  if (i >= 0 && i < static_cast<int>(sc.input_dtype.size()) &&
      sc.input_dtype[i] != DType::kUndefined) {
    return sc.input_dtype[i];
  }
  if (NodeHasInput(*sc.node, i)) return sc.graph->tensors[sc.node->inputs[i]].dtype;
  return DType::kFloat;
}

// ---------------------------------------------------------------------------
// Shape-function helpers.

/// Sets output i after checking that its element count fits in int64.
Status SetOut(ShapeContext& ctx, int i, DType dtype, std::vector<int64_t> shape) {
  if (Numel(shape) < 0) {
    return ctx.Error("output " + Str(i) + " shape " + ShapeString(shape) + " overflows int64");
  }
  ctx.SetOutput(i, dtype, std::move(shape));
  return Status();
}

std::string InName(const ShapeContext& ctx, int i) { return "'" + ctx.Input(i).name + "'"; }

/// Reads int list attribute `name` of exactly n values (default `def` each)
/// whose values are all >= min_value.
Status SpatialAttr(const ShapeContext& ctx, const std::string& name, size_t n, int64_t def,
                   int64_t min_value, std::vector<int64_t>* out) {
  if (!ctx.node().Has(name)) {
    out->assign(n, def);
    return Status();
  }
  *out = ctx.node().GetInts(name);
  if (out->size() != n) {
    return ctx.Error("attribute '" + name + "' has " + Str(out->size()) + " values, expected " +
                     Str(n));
  }
  for (int64_t v : *out) {
    if (v < min_value) {
      return ctx.Error("attribute '" + name + "' has value " + Str(v) +
                       ", expected >= " + Str(min_value));
    }
  }
  return Status();
}

/// Kernel, strides, dilations and pads of a sliding-window op.
struct Window {
  std::vector<int64_t> kernel;
  std::vector<int64_t> strides;
  std::vector<int64_t> dilations;
  std::vector<int64_t> pads;  ///< begins then ends, 2 * n.
  std::string auto_pad;
};

Status ReadWindow(const ShapeContext& ctx, std::vector<int64_t> kernel, Window* w) {
  const size_t n = kernel.size();
  w->kernel = std::move(kernel);
  for (int64_t k : w->kernel) {
    if (k < 1) return ctx.Error("kernel size " + Str(k) + " is not positive");
  }
  NN_TRY(SpatialAttr(ctx, "strides", n, 1, 1, &w->strides));
  NN_TRY(SpatialAttr(ctx, "dilations", n, 1, 1, &w->dilations));
  NN_TRY(SpatialAttr(ctx, "pads", 2 * n, 0, 0, &w->pads));
  w->auto_pad = ctx.node().GetString("auto_pad", "NOTSET");
  if (w->auto_pad.empty()) w->auto_pad = "NOTSET";
  if (w->auto_pad != "NOTSET" && w->auto_pad != "SAME_UPPER" && w->auto_pad != "SAME_LOWER" &&
      w->auto_pad != "VALID") {
    return ctx.Error("unknown auto_pad '" + w->auto_pad + "'");
  }
  return Status();
}

/// Output spatial sizes of a forward sliding window (Conv and pooling).
Status WindowOutput(const ShapeContext& ctx, const Window& w, const std::vector<int64_t>& in,
                    bool ceil_mode, std::vector<int64_t>* out) {
  const size_t n = in.size();
  out->assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    const int64_t s = w.strides[i];
    int64_t dk = 0;
    if (!CheckedMul(w.kernel[i] - 1, w.dilations[i], &dk) || !CheckedAdd(dk, 1, &dk)) {
      return ctx.Error("dilated kernel size overflows int64");
    }
    if (w.auto_pad == "SAME_UPPER" || w.auto_pad == "SAME_LOWER") {
      (*out)[i] = in[i] / s + (in[i] % s != 0 ? 1 : 0);
      continue;
    }
    const bool valid = w.auto_pad == "VALID";
    const int64_t pb = valid ? 0 : w.pads[i];
    const int64_t pe = valid ? 0 : w.pads[i + n];
    int64_t padded = 0;
    if (!CheckedAdd(in[i], pb, &padded) || !CheckedAdd(padded, pe, &padded)) {
      return ctx.Error("padded input size overflows int64");
    }
    const int64_t span = padded - dk;
    if (span < 0) {
      return ctx.Error("spatial dim " + Str(i) + ": padded input " + Str(padded) +
                       " is smaller than the dilated kernel " + Str(dk) +
                       " (output size would be negative)");
    }
    int64_t o = ceil_mode ? (span + s - 1) / s + 1 : span / s + 1;
    // The last window must start inside the input or the left padding.
    if (ceil_mode && (o - 1) * s >= in[i] + pb) --o;
    (*out)[i] = o;
  }
  return Status();
}

// ---------------------------------------------------------------------------
// Conv and ConvTranspose.

/// True when Conv input i is a scalar broadcast by Expand: how torch.onnx's
/// dynamo exporter writes the bias of a convolution called with bias=None
/// (onnxscript's aten_conv2d expands a zero to [M]; its aten_conv3d to
/// [M, 2], which ONNX's Conv does not accept as a bias). PyTorch runs such a
/// convolution without a bias, so its shape is not checked.
bool IsBroadcastScalar(const ShapeContext& ctx, int i) {
  const int producer = ctx.Input(i).producer;
  if (producer < 0) return false;
  const Node& p = ctx.graph().nodes[producer];
  if (p.op_type != "Expand" || p.inputs.empty() || p.inputs[0] < 0) return false;
  const Tensor& value = ctx.graph().tensors[p.inputs[0]];
  return value.shape_known && value.shape.empty();
}

Status ConvShape(ShapeContext& ctx) {
  NN_TRY(CheckInputs(ctx, 2, 3));
  const auto& x = ctx.Input(0).shape;
  const auto& wt = ctx.Input(1).shape;
  if (x.size() < 3) return ctx.Error("input X has rank " + Str(x.size()) + ", expected >= 3");
  if (wt.size() != x.size()) {
    return ctx.Error("weight has rank " + Str(wt.size()) + ", expected " + Str(x.size()) +
                     " like X");
  }
  const int64_t group = ctx.node().GetInt("group", 1);
  if (group < 1) return ctx.Error("group " + Str(group) + " is not positive");
  int64_t cin = 0;
  if (!CheckedMul(wt[1], group, &cin) || cin != x[1]) {
    return ctx.Error("input channels " + Str(x[1]) + " do not match weight " + ShapeString(wt) +
                     " with group " + Str(group));
  }
  if (wt[0] % group != 0) {
    return ctx.Error("output channels " + Str(wt[0]) + " are not divisible by group " + Str(group));
  }
  std::vector<int64_t> kernel(wt.begin() + 2, wt.end());
  if (ctx.node().Has("kernel_shape") && ctx.node().GetInts("kernel_shape") != kernel) {
    return ctx.Error("kernel_shape " + ShapeString(ctx.node().GetInts("kernel_shape")) +
                     " does not match weight " + ShapeString(wt));
  }
  if (ctx.HasInput(2) && ctx.Input(2).shape != std::vector<int64_t>{wt[0]} &&
      !IsBroadcastScalar(ctx, 2)) {
    return ctx.Error("bias has shape " + ShapeString(ctx.Input(2).shape) + ", expected [" +
                     Str(wt[0]) + "]");
  }
  Window w;
  NN_TRY(ReadWindow(ctx, kernel, &w));
  std::vector<int64_t> spatial;
  NN_TRY(WindowOutput(ctx, w, std::vector<int64_t>(x.begin() + 2, x.end()), false, &spatial));
  std::vector<int64_t> out = {x[0], wt[0]};
  out.insert(out.end(), spatial.begin(), spatial.end());
  return SetOut(ctx, 0, ctx.Input(0).dtype, out);
}

Status ConvTransposeShape(ShapeContext& ctx) {
  NN_TRY(CheckInputs(ctx, 2, 3));
  const auto& x = ctx.Input(0).shape;
  const auto& wt = ctx.Input(1).shape;
  if (x.size() < 3) return ctx.Error("input X has rank " + Str(x.size()) + ", expected >= 3");
  if (wt.size() != x.size()) {
    return ctx.Error("weight has rank " + Str(wt.size()) + ", expected " + Str(x.size()) +
                     " like X");
  }
  const int64_t group = ctx.node().GetInt("group", 1);
  if (group < 1) return ctx.Error("group " + Str(group) + " is not positive");
  if (wt[0] != x[1]) {
    return ctx.Error("input channels " + Str(x[1]) + " do not match weight " + ShapeString(wt) +
                     " (dim 0)");
  }
  if (x[1] % group != 0) {
    return ctx.Error("input channels " + Str(x[1]) + " are not divisible by group " + Str(group));
  }
  int64_t cout = 0;
  if (!CheckedMul(wt[1], group, &cout)) return ctx.Error("output channels overflow int64");
  if (ctx.HasInput(2) && ctx.Input(2).shape != std::vector<int64_t>{cout}) {
    return ctx.Error("bias has shape " + ShapeString(ctx.Input(2).shape) + ", expected [" +
                     Str(cout) + "]");
  }
  const size_t n = x.size() - 2;
  std::vector<int64_t> kernel(wt.begin() + 2, wt.end());
  if (ctx.node().Has("kernel_shape") && ctx.node().GetInts("kernel_shape") != kernel) {
    return ctx.Error("kernel_shape " + ShapeString(ctx.node().GetInts("kernel_shape")) +
                     " does not match weight " + ShapeString(wt));
  }
  Window w;
  NN_TRY(ReadWindow(ctx, kernel, &w));
  std::vector<int64_t> opad;
  NN_TRY(SpatialAttr(ctx, "output_padding", n, 0, 0, &opad));
  std::vector<int64_t> spatial(n, 0);
  if (ctx.node().Has("output_shape")) {
    std::vector<int64_t> os = ctx.node().GetInts("output_shape");
    if (os.size() == n + 2) os.erase(os.begin(), os.begin() + 2);
    if (os.size() != n) {
      return ctx.Error("attribute 'output_shape' has " + Str(os.size()) + " values, expected " +
                       Str(n));
    }
    spatial = os;
  } else {
    for (size_t i = 0; i < n; ++i) {
      int64_t v = 0;
      bool ok = true;
      if (w.auto_pad == "SAME_UPPER" || w.auto_pad == "SAME_LOWER") {
        ok = CheckedMul(x[i + 2], w.strides[i], &v);
      } else {
        int64_t dk = 0;
        ok = CheckedMul(kernel[i] - 1, w.dilations[i], &dk) && CheckedAdd(dk, 1, &dk) &&
             CheckedMul(x[i + 2] - 1 < 0 ? 0 : x[i + 2] - 1, w.strides[i], &v) &&
             CheckedAdd(v, opad[i], &v) && CheckedAdd(v, dk, &v);
        if (ok && w.auto_pad != "VALID") v = v - w.pads[i] - w.pads[i + n];
      }
      if (!ok) return ctx.Error("output size overflows int64");
      spatial[i] = v;
    }
  }
  for (size_t i = 0; i < n; ++i) {
    if (spatial[i] < 1) {
      return ctx.Error("spatial dim " + Str(i) + ": output size " + Str(spatial[i]) +
                       " is not positive");
    }
  }
  std::vector<int64_t> out = {x[0], cout};
  out.insert(out.end(), spatial.begin(), spatial.end());
  return SetOut(ctx, 0, ctx.Input(0).dtype, out);
}

/// Conv and ConvTranspose: PyTorch's `convolution` has one backward formula
/// for input, weight and bias, so autograd keeps both input and weight
/// whenever any of them needs a gradient. The bias keeps nothing.
void ConvSaves(const SaveContext& sc, std::vector<Saved>* out) {
  if (!sc.AnyInputRequiresGrad()) return;
  SaveInput(0, out);
  SaveInput(1, out);
}

int64_t ConvFlops(const Graph& g, const Node& n) {
  const auto* w = InShape(g, n, 1);
  const int64_t out = OutNumel(g, n, 0);
  if (!w || w->size() < 2) return 0;
  // Per output element: Cin/group * prod(kernel) multiply-adds.
  int64_t f =
      SatMulNonNeg(2, SatMulNonNeg(out, SatNumel(std::vector<int64_t>(w->begin() + 1, w->end()))));
  if (NodeHasInput(n, 2)) f = SatAdd(f, out);
  return f;
}

int64_t ConvTransposeFlops(const Graph& g, const Node& n) {
  const auto* w = InShape(g, n, 1);
  if (!w || w->size() < 2) return 0;
  // Per input element: Cout/group * prod(kernel) multiply-adds.
  int64_t f = SatMulNonNeg(
      2, SatMulNonNeg(InNumel(g, n, 0), SatNumel(std::vector<int64_t>(w->begin() + 1, w->end()))));
  if (NodeHasInput(n, 2)) f = SatAdd(f, OutNumel(g, n, 0));
  return f;
}

// ---------------------------------------------------------------------------
// MatMul, Gemm, Einsum.

Status MatMulShape(ShapeContext& ctx) {
  NN_TRY(CheckInputs(ctx, 2, 2));
  std::vector<int64_t> a = ctx.Input(0).shape;
  std::vector<int64_t> b = ctx.Input(1).shape;
  if (a.empty() || b.empty()) return ctx.Error("MatMul operands must have rank >= 1");
  const bool a_vec = a.size() == 1;
  const bool b_vec = b.size() == 1;
  if (a_vec) a.insert(a.begin(), 1);
  if (b_vec) b.push_back(1);
  const int64_t k_a = a[a.size() - 1];
  const int64_t k_b = b[b.size() - 2];
  if (k_a != k_b) {
    return ctx.Error("inner dimensions differ: " + ShapeString(ctx.Input(0).shape) + " x " +
                     ShapeString(ctx.Input(1).shape));
  }
  std::vector<int64_t> batch;
  if (!BroadcastShapes(std::vector<int64_t>(a.begin(), a.end() - 2),
                       std::vector<int64_t>(b.begin(), b.end() - 2), &batch)) {
    return ctx.Error("batch dimensions do not broadcast: " + ShapeString(ctx.Input(0).shape) +
                     " x " + ShapeString(ctx.Input(1).shape));
  }
  std::vector<int64_t> out = batch;
  if (!a_vec) out.push_back(a[a.size() - 2]);
  if (!b_vec) out.push_back(b[b.size() - 1]);
  return SetOut(ctx, 0, ctx.Input(0).dtype, out);
}

/// mm/bmm: each operand is kept only when the other one needs a gradient.
void MatMulSaves(const SaveContext& sc, std::vector<Saved>* out) {
  if (!sc.AnyInputRequiresGrad()) return;
  if (InputRequiresGrad(sc, 1)) SaveInput(0, out);
  if (InputRequiresGrad(sc, 0)) SaveInput(1, out);
}

int64_t MatMulFlops(const Graph& g, const Node& n) {
  const auto* a = InShape(g, n, 0);
  if (!a || a->empty()) return 0;
  return SatMulNonNeg(2, SatMulNonNeg(OutNumel(g, n, 0), a->back()));
}

Status GemmShape(ShapeContext& ctx) {
  NN_TRY(CheckInputs(ctx, 2, 3));
  const auto& a = ctx.Input(0).shape;
  const auto& b = ctx.Input(1).shape;
  if (a.size() != 2 || b.size() != 2) {
    return ctx.Error("Gemm operands must have rank 2, got " + ShapeString(a) + " and " +
                     ShapeString(b));
  }
  const bool ta = ctx.node().GetInt("transA", 0) != 0;
  const bool tb = ctx.node().GetInt("transB", 0) != 0;
  const int64_t m = ta ? a[1] : a[0];
  const int64_t ka = ta ? a[0] : a[1];
  const int64_t kb = tb ? b[1] : b[0];
  const int64_t n = tb ? b[0] : b[1];
  if (ka != kb) {
    return ctx.Error("inner dimensions differ: A " + ShapeString(a) + (ta ? " (transposed)" : "") +
                     ", B " + ShapeString(b) + (tb ? " (transposed)" : ""));
  }
  std::vector<int64_t> out = {m, n};
  if (ctx.HasInput(2)) {
    std::vector<int64_t> bc;
    if (!BroadcastShapes(out, ctx.Input(2).shape, &bc) || bc != out) {
      return ctx.Error("C " + ShapeString(ctx.Input(2).shape) + " does not broadcast to " +
                       ShapeString(out));
    }
  }
  return SetOut(ctx, 0, ctx.Input(0).dtype, out);
}

int64_t GemmFlops(const Graph& g, const Node& n) {
  const auto* a = InShape(g, n, 0);
  if (!a || a->size() != 2) return 0;
  const int64_t k = n.GetInt("transA", 0) != 0 ? (*a)[0] : (*a)[1];
  const int64_t mn = OutNumel(g, n, 0);
  int64_t f = SatMulNonNeg(2, SatMulNonNeg(mn, k));
  if (NodeHasInput(n, 2)) f = SatAdd(f, mn);
  return f;
}

/// A parsed and sized einsum equation.
struct EinsumInfo {
  std::vector<int64_t> output;
  int64_t iteration_space = 1;  ///< Product of every index size (saturated).
};

constexpr int kEllipsis = -1;

/// Parses one term ("ij", "...ij", "b...") into labels (kEllipsis marks the
/// ellipsis); false with *err set on a bad character or a repeated ellipsis.
bool ParseTerm(const std::string& term, std::vector<int>* labels, std::string* err) {
  labels->clear();
  bool seen_ellipsis = false;
  for (size_t i = 0; i < term.size(); ++i) {
    const char c = term[i];
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
      labels->push_back(c);
    } else if (c == '.') {
      if (term.compare(i, 3, "...") != 0 || seen_ellipsis) {
        *err = "bad ellipsis in term '" + term + "'";
        return false;
      }
      seen_ellipsis = true;
      labels->push_back(kEllipsis);
      i += 2;
    } else {
      *err = std::string("bad character '") + c + "' in term '" + term + "'";
      return false;
    }
  }
  return true;
}

/// Computes the output shape of einsum `equation` over `shapes`.
bool AnalyzeEinsum(const std::string& equation_in, const std::vector<std::vector<int64_t>>& shapes,
                   EinsumInfo* info, std::string* err) {
  std::string eq;
  for (char c : equation_in) {
    if (c != ' ') eq += c;
  }
  const size_t arrow = eq.find("->");
  const bool explicit_out = arrow != std::string::npos;
  const std::string lhs = explicit_out ? eq.substr(0, arrow) : eq;
  const std::string rhs = explicit_out ? eq.substr(arrow + 2) : "";
  if (explicit_out && rhs.find("->") != std::string::npos) {
    *err = "more than one '->'";
    return false;
  }
  std::vector<std::string> terms;
  size_t start = 0;
  while (true) {
    const size_t comma = lhs.find(',', start);
    terms.push_back(
        lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (terms.size() != shapes.size()) {
    *err = "equation has " + Str(terms.size()) + " terms for " + Str(shapes.size()) + " inputs";
    return false;
  }
  std::map<int, int64_t> size;    // label -> size
  std::map<int, int> count;       // label -> occurrences over all inputs
  std::vector<int64_t> ellipsis;  // broadcast ellipsis dims
  bool any_ellipsis = false;
  for (size_t t = 0; t < terms.size(); ++t) {
    std::vector<int> labels;
    if (!ParseTerm(terms[t], &labels, err)) return false;
    const auto& shape = shapes[t];
    const bool has_ell = std::count(labels.begin(), labels.end(), kEllipsis) > 0;
    const size_t letters = labels.size() - (has_ell ? 1 : 0);
    if (shape.size() < letters || (!has_ell && shape.size() != letters)) {
      *err = "term '" + terms[t] + "' does not match input " + Str(t) + " of shape " +
             ShapeString(shape);
      return false;
    }
    const size_t ell_rank = shape.size() - letters;
    size_t d = 0;
    for (int label : labels) {
      if (label == kEllipsis) {
        any_ellipsis = true;
        std::vector<int64_t> part(shape.begin() + d, shape.begin() + d + ell_rank);
        if (!BroadcastShapes(ellipsis, part, &ellipsis)) {
          *err = "ellipsis dimensions " + ShapeString(part) + " of input " + Str(t) +
                 " do not broadcast";
          return false;
        }
        d += ell_rank;
        continue;
      }
      const int64_t dim = shape[d++];
      auto it = size.find(label);
      if (it == size.end() || it->second == 1) {
        size[label] = dim;
      } else if (dim != it->second && dim != 1) {
        *err = std::string("index '") + static_cast<char>(label) + "' has sizes " +
               Str(it->second) + " and " + Str(dim);
        return false;
      }
      ++count[label];
    }
  }
  info->output.clear();
  if (explicit_out) {
    std::vector<int> labels;
    if (!ParseTerm(rhs, &labels, err)) return false;
    std::vector<int> seen;
    for (int label : labels) {
      if (label == kEllipsis) {
        info->output.insert(info->output.end(), ellipsis.begin(), ellipsis.end());
        continue;
      }
      if (!size.count(label)) {
        *err = std::string("output index '") + static_cast<char>(label) +
               "' does not appear in the inputs";
        return false;
      }
      if (std::find(seen.begin(), seen.end(), label) != seen.end()) {
        *err = std::string("output index '") + static_cast<char>(label) + "' repeats";
        return false;
      }
      seen.push_back(label);
      info->output.push_back(size[label]);
    }
  } else {
    if (any_ellipsis) info->output = ellipsis;
    for (const auto& kv : size) {  // std::map: ascending label order.
      if (count[kv.first] == 1) info->output.push_back(kv.second);
    }
  }
  info->iteration_space = SatNumel(ellipsis);
  for (const auto& kv : size)
    info->iteration_space = SatMulNonNeg(info->iteration_space, kv.second);
  return true;
}

Status EinsumShape(ShapeContext& ctx) {
  NN_TRY(CheckInputs(ctx, 1, -1));
  if (!ctx.node().Has("equation")) return ctx.Error("missing attribute 'equation'");
  std::vector<std::vector<int64_t>> shapes;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.HasInput(i)) return ctx.Error("input " + Str(i) + " is missing");
    shapes.push_back(ctx.Input(i).shape);
  }
  EinsumInfo info;
  std::string err;
  const std::string eq = ctx.node().GetString("equation", "");
  if (!AnalyzeEinsum(eq, shapes, &info, &err)) {
    return ctx.Error("bad equation '" + Clip(eq, 200) + "': " + err);
  }
  return SetOut(ctx, 0, ctx.Input(0).dtype, info.output);
}

/// Like mm: each operand is kept when another operand needs a gradient.
void EinsumSaves(const SaveContext& sc, std::vector<Saved>* out) {
  if (!sc.AnyInputRequiresGrad()) return;
  const int n = static_cast<int>(sc.node->inputs.size());
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      if (j != i && InputRequiresGrad(sc, j)) {
        SaveInput(i, out);
        break;
      }
    }
  }
}

int64_t EinsumFlops(const Graph& g, const Node& n) {
  std::vector<std::vector<int64_t>> shapes;
  for (int i = 0; i < static_cast<int>(n.inputs.size()); ++i) {
    const auto* s = InShape(g, n, i);
    if (!s) return 0;
    shapes.push_back(*s);
  }
  EinsumInfo info;
  std::string err;
  if (!AnalyzeEinsum(n.GetString("equation", ""), shapes, &info, &err)) return 0;
  return SatMulNonNeg(2, info.iteration_space);
}

// ---------------------------------------------------------------------------
// Normalisations.

/// Fails unless input i (when present) has shape `want`.
Status ExpectShape(const ShapeContext& ctx, int i, const std::string& what,
                   const std::vector<int64_t>& want) {
  if (!ctx.HasInput(i) || ctx.Input(i).shape == want) return Status();
  return ctx.Error(what + " " + InName(ctx, i) + " has shape " + ShapeString(ctx.Input(i).shape) +
                   ", expected " + ShapeString(want));
}

bool BatchNormTraining(const Node& n) {
  if (n.GetInt("training_mode", 0) == 1) return true;
  int outputs = 0;
  for (size_t i = 0; i < n.outputs.size(); ++i) outputs += NodeHasOutput(n, static_cast<int>(i));
  return outputs > 1;
}

Status BatchNormShape(ShapeContext& ctx) {
  NN_TRY(CheckInputs(ctx, 5, 5));
  const auto& x = ctx.Input(0).shape;
  if (x.size() < 2) return ctx.Error("input X has rank " + Str(x.size()) + ", expected >= 2");
  const std::vector<int64_t> c = {x[1]};
  NN_TRY(ExpectShape(ctx, 1, "scale", c));
  NN_TRY(ExpectShape(ctx, 2, "bias", c));
  NN_TRY(ExpectShape(ctx, 3, "mean", c));
  NN_TRY(ExpectShape(ctx, 4, "var", c));
  const DType dt = ctx.Input(0).dtype;
  // Running (and, before opset 14, saved) statistics take the dtype of the
  // running-mean input (opset 15 allows it to differ from X).
  const DType stat = ctx.Input(3).dtype != DType::kUndefined ? ctx.Input(3).dtype : dt;
  NN_TRY(SetOut(ctx, 0, dt, x));
  for (int i = 1; i < ctx.num_outputs() && i < 5; ++i) NN_TRY(SetOut(ctx, i, stat, c));
  return Status();
}

/// Training: input, weight and fp32 per-channel save_mean / save_invstd (the
/// opset < 14 saved_mean / saved_var outputs when the graph has them).
/// Inference form (training_mode 0 and one output): input, weight and the
/// running statistics, which are references to existing buffers.
void BatchNormSaves(const SaveContext& sc, std::vector<Saved>* out) {
  if (!sc.AnyInputRequiresGrad()) return;
  SaveInput(0, out);
  SaveInput(1, out);
  if (!BatchNormTraining(*sc.node)) {
    SaveInput(3, out);
    SaveInput(4, out);
    return;
  }
  const auto* x = InShape(*sc.graph, *sc.node, 0);
  if (!x || x->size() < 2) return;
  const char* names[2] = {"save_mean", "save_invstd"};
  for (int k = 0; k < 2; ++k) {
    if (NodeHasOutput(*sc.node, 3 + k)) {
      SaveOutput(3 + k, out);
    } else {
      SaveExtra(DType::kFloat, {(*x)[1]}, names[k], out);
    }
  }
}

int64_t BatchNormFlops(const Graph& g, const Node& n) { return SatMulNonNeg(5, InNumel(g, n, 0)); }

/// dtype named by `stash_type` (default float32).
DType StashType(const Node& n) {
  const int64_t code = n.GetInt("stash_type", 1);
  if (code <= 0 || code > 23 || !IsKnownDType(static_cast<int32_t>(code))) return DType::kFloat;
  return static_cast<DType>(code);
}

/// X's shape with dims axis.. set to 1: one statistic per row.
std::vector<int64_t> RowStatShape(const std::vector<int64_t>& x, int64_t axis) {
  std::vector<int64_t> s = x;
  for (size_t i = static_cast<size_t>(axis); i < s.size(); ++i) s[i] = 1;
  return s;
}

/// Normalised-axis start of LayerNorm/RMSNorm into *axis.
Status NormAxis(const ShapeContext& ctx, int64_t* axis) {
  const auto& x = ctx.Input(0).shape;
  const int64_t a = ctx.node().GetInt("axis", -1);
  if (!NormalizeAxis(a, static_cast<int64_t>(x.size()), axis)) {
    return ctx.Error("axis " + Str(a) + " is out of range for input of rank " + Str(x.size()));
  }
  return Status();
}

/// Fails unless input i broadcasts onto the normalised dims x[axis..].
Status ExpectRowBroadcast(const ShapeContext& ctx, int i, const std::string& what, int64_t axis) {
  if (!ctx.HasInput(i)) return Status();
  const auto& x = ctx.Input(0).shape;
  const std::vector<int64_t> norm(x.begin() + axis, x.end());
  std::vector<int64_t> bc;
  if (!BroadcastShapes(norm, ctx.Input(i).shape, &bc) || bc != norm) {
    return ctx.Error(what + " " + InName(ctx, i) + " has shape " + ShapeString(ctx.Input(i).shape) +
                     ", expected to broadcast to " + ShapeString(norm));
  }
  return Status();
}

Status LayerNormShape(ShapeContext& ctx) {
  NN_TRY(CheckInputs(ctx, 2, 3));
  int64_t axis = 0;
  NN_TRY(NormAxis(ctx, &axis));
  NN_TRY(ExpectRowBroadcast(ctx, 1, "scale", axis));
  NN_TRY(ExpectRowBroadcast(ctx, 2, "bias", axis));
  const auto& x = ctx.Input(0).shape;
  NN_TRY(SetOut(ctx, 0, ctx.Input(0).dtype, x));
  const DType st = StashType(ctx.node());
  NN_TRY(SetOut(ctx, 1, st, RowStatShape(x, axis)));
  NN_TRY(SetOut(ctx, 2, st, RowStatShape(x, axis)));
  return Status();
}

int64_t NodeAxis(const Node& n, size_t rank) {
  int64_t axis = 0;
  if (!NormalizeAxis(n.GetInt("axis", -1), static_cast<int64_t>(rank), &axis)) return -1;
  return axis;
}

/// native_layer_norm: input, weight, bias, fp32 mean and rstd per row (the
/// Mean / InvStdDev outputs when the graph has them).
void LayerNormSaves(const SaveContext& sc, std::vector<Saved>* out) {
  if (!sc.AnyInputRequiresGrad()) return;
  for (int i = 0; i < 3; ++i) {
    if (NodeHasInput(*sc.node, i)) SaveInput(i, out);
  }
  const auto* x = InShape(*sc.graph, *sc.node, 0);
  if (!x) return;
  const int64_t axis = NodeAxis(*sc.node, x->size());
  if (axis < 0) return;
  const char* names[2] = {"mean", "rstd"};
  for (int k = 0; k < 2; ++k) {
    if (NodeHasOutput(*sc.node, 1 + k)) {
      SaveOutput(1 + k, out);
    } else {
      SaveExtra(DType::kFloat, RowStatShape(*x, axis), names[k], out);
    }
  }
}

int64_t Norm8Flops(const Graph& g, const Node& n) { return SatMulNonNeg(8, InNumel(g, n, 0)); }
int64_t Norm5Flops(const Graph& g, const Node& n) { return SatMulNonNeg(5, InNumel(g, n, 0)); }
int64_t Norm4Flops(const Graph& g, const Node& n) { return SatMulNonNeg(4, InNumel(g, n, 0)); }

Status RmsNormShape(ShapeContext& ctx) {
  NN_TRY(CheckInputs(ctx, 2, 2));
  int64_t axis = 0;
  NN_TRY(NormAxis(ctx, &axis));
  NN_TRY(ExpectRowBroadcast(ctx, 1, "scale", axis));
  return SetOut(ctx, 0, ctx.Input(0).dtype, ctx.Input(0).shape);
}

/// Fused RMSNorm: input, weight and the fp32 rstd per row.
void RmsNormSaves(const SaveContext& sc, std::vector<Saved>* out) {
  if (!sc.AnyInputRequiresGrad()) return;
  SaveInput(0, out);
  SaveInput(1, out);
  const auto* x = InShape(*sc.graph, *sc.node, 0);
  if (!x) return;
  const int64_t axis = NodeAxis(*sc.node, x->size());
  if (axis >= 0) SaveExtra(DType::kFloat, RowStatShape(*x, axis), "rstd", out);
}

Status GroupNormShape(ShapeContext& ctx) {
  NN_TRY(CheckInputs(ctx, 3, 3));
  const auto& x = ctx.Input(0).shape;
  if (x.size() < 2) return ctx.Error("input X has rank " + Str(x.size()) + ", expected >= 2");
  if (!ctx.node().Has("num_groups")) return ctx.Error("missing attribute 'num_groups'");
  const int64_t groups = ctx.node().GetInt("num_groups", 1);
  if (groups < 1 || x[1] % groups != 0) {
    return ctx.Error("channels " + Str(x[1]) + " are not divisible by num_groups " + Str(groups));
  }
  // Opset 21 uses per-channel scale and bias; opset 18 per-group.
  for (int i = 1; i < 3; ++i) {
    const auto& s = ctx.Input(i).shape;
    if (s != std::vector<int64_t>{x[1]} && s != std::vector<int64_t>{groups}) {
      return ctx.Error((i == 1 ? "scale " : "bias ") + InName(ctx, i) + " has shape " +
                       ShapeString(s) + ", expected [" + Str(x[1]) + "] or [" + Str(groups) + "]");
    }
  }
  return SetOut(ctx, 0, ctx.Input(0).dtype, x);
}

/// native_group_norm: input, weight, mean and rstd of shape [N, groups] in
/// the input's dtype as it runs (float32 under autocast, which runs
/// group_norm in float32; aten/src/ATen/native/cuda/group_norm_kernel.cu).
void GroupNormSaves(const SaveContext& sc, std::vector<Saved>* out) {
  if (!sc.AnyInputRequiresGrad()) return;
  SaveInput(0, out);
  SaveInput(1, out);
  const auto* x = InShape(*sc.graph, *sc.node, 0);
  if (!x || x->empty()) return;
  const int64_t groups = sc.node->GetInt("num_groups", 1);
  if (groups < 1) return;
  const DType dt =
      !sc.input_dtype.empty() && IsFloat(sc.input_dtype[0]) ? sc.input_dtype[0] : DType::kFloat;
  SaveExtra(dt, {(*x)[0], groups}, "mean", out);
  SaveExtra(dt, {(*x)[0], groups}, "rstd", out);
}

Status InstanceNormShape(ShapeContext& ctx) {
  NN_TRY(CheckInputs(ctx, 3, 3));
  const auto& x = ctx.Input(0).shape;
  if (x.size() < 3) return ctx.Error("input X has rank " + Str(x.size()) + ", expected >= 3");
  NN_TRY(ExpectShape(ctx, 1, "scale", {x[1]}));
  NN_TRY(ExpectShape(ctx, 2, "bias", {x[1]}));
  return SetOut(ctx, 0, ctx.Input(0).dtype, x);
}

/// instance_norm runs batch_norm over a [1, N*C, ...] view in training mode:
/// input, weight and fp32 save_mean / save_invstd of N*C values.
void InstanceNormSaves(const SaveContext& sc, std::vector<Saved>* out) {
  if (!sc.AnyInputRequiresGrad()) return;
  SaveInput(0, out);
  SaveInput(1, out);
  const auto* x = InShape(*sc.graph, *sc.node, 0);
  if (!x || x->size() < 2) return;
  const int64_t nc = SatMulNonNeg((*x)[0], (*x)[1]);
  SaveExtra(DType::kFloat, {nc}, "save_mean", out);
  SaveExtra(DType::kFloat, {nc}, "save_invstd", out);
}

Status LpNormShape(ShapeContext& ctx) {
  NN_TRY(CheckInputs(ctx, 1, 1));
  int64_t axis = 0;
  NN_TRY(NormAxis(ctx, &axis));
  const int64_t p = ctx.node().GetInt("p", 2);
  if (p != 1 && p != 2) return ctx.Error("p " + Str(p) + " is not 1 or 2");
  return SetOut(ctx, 0, ctx.Input(0).dtype, ctx.Input(0).shape);
}

/// x / norm(x): the input and the norm (one value per slice along axis, in
/// the output dtype: float32 under autocast).
void LpNormSaves(const SaveContext& sc, std::vector<Saved>* out) {
  if (!sc.AnyInputRequiresGrad()) return;
  SaveInput(0, out);
  const auto* x = InShape(*sc.graph, *sc.node, 0);
  if (!x) return;
  int64_t axis = 0;
  if (!NormalizeAxis(sc.node->GetInt("axis", -1), static_cast<int64_t>(x->size()), &axis)) return;
  std::vector<int64_t> s = *x;
  s[axis] = 1;
  const DType dt = !sc.output_dtype.empty() && sc.output_dtype[0] != DType::kUndefined
                       ? sc.output_dtype[0]
                       : InDType(sc, 0);
  SaveExtra(dt, s, "norm", out);
}

// ---------------------------------------------------------------------------
// Pooling.

Status PoolShape(ShapeContext& ctx) {
  NN_TRY(CheckInputs(ctx, 1, 1));
  const auto& x = ctx.Input(0).shape;
  if (x.size() < 3) return ctx.Error("input X has rank " + Str(x.size()) + ", expected >= 3");
  if (!ctx.node().Has("kernel_shape")) return ctx.Error("missing attribute 'kernel_shape'");
  const std::vector<int64_t> kernel = ctx.node().GetInts("kernel_shape");
  if (kernel.size() != x.size() - 2) {
    return ctx.Error("kernel_shape " + ShapeString(kernel) + " does not match input of rank " +
                     Str(x.size()));
  }
  Window w;
  NN_TRY(ReadWindow(ctx, kernel, &w));
  std::vector<int64_t> spatial;
  NN_TRY(WindowOutput(ctx, w, std::vector<int64_t>(x.begin() + 2, x.end()),
                      ctx.node().GetInt("ceil_mode", 0) != 0, &spatial));
  std::vector<int64_t> out = {x[0], x[1]};
  out.insert(out.end(), spatial.begin(), spatial.end());
  NN_TRY(SetOut(ctx, 0, ctx.Input(0).dtype, out));
  if (ctx.node().op_type == "MaxPool") NN_TRY(SetOut(ctx, 1, DType::kInt64, out));
  return Status();
}

/// max_pool / adaptive_max_pool: the input and int64 indices of the output's
/// shape (the Indices output when the graph has it).
void MaxPoolSaves(const SaveContext& sc, std::vector<Saved>* out) {
  if (!sc.AnyInputRequiresGrad()) return;
  SaveInput(0, out);
  if (NodeHasOutput(*sc.node, 1)) {
    SaveOutput(1, out);
    return;
  }
  const auto* y = OutShape(*sc.graph, *sc.node, 0);
  if (y) SaveExtra(DType::kInt64, *y, "indices", out);
}

void SaveInput0(const SaveContext& sc, std::vector<Saved>* out) {
  if (sc.AnyInputRequiresGrad()) SaveInput(0, out);
}

void SaveInput0Output0(const SaveContext& sc, std::vector<Saved>* out) {
  if (!sc.AnyInputRequiresGrad()) return;
  SaveInput(0, out);
  SaveOutput(0, out);
}

int64_t PoolFlops(const Graph& g, const Node& n) {
  return SatMulNonNeg(OutNumel(g, n, 0), SatNumel(n.GetInts("kernel_shape")));
}

Status GlobalPoolShape(ShapeContext& ctx) {
  NN_TRY(CheckInputs(ctx, 1, 1));
  std::vector<int64_t> out = ctx.Input(0).shape;
  if (out.size() < 3) {
    return ctx.Error("input X has rank " + Str(out.size()) + ", expected >= 3");
  }
  std::fill(out.begin() + 2, out.end(), 1);
  return SetOut(ctx, 0, ctx.Input(0).dtype, out);
}

int64_t InputNumelFlops(const Graph& g, const Node& n) { return InNumel(g, n, 0); }

// ---------------------------------------------------------------------------
// Resize / Upsample.

/// Float data of the constant in tensor `t`: integer values it carries, or
/// the data of the Constant node producing it.
bool ConstFloats(const Graph& g, int t, std::vector<double>* out) {
  if (t < 0 || t >= static_cast<int>(g.tensors.size())) return false;
  const Tensor& tensor = g.tensors[t];
  if (tensor.has_values) {
    out->assign(tensor.values.begin(), tensor.values.end());
    return true;
  }
  if (tensor.producer < 0 || tensor.producer >= static_cast<int>(g.nodes.size())) return false;
  const Node& p = g.nodes[tensor.producer];
  if (p.op_type != "Constant") return false;
  auto it = p.attrs.find("value");
  if (it != p.attrs.end()) {
    const Attribute& a = it->second;
    if (!a.t_fvalues.empty() || Numel(a.t_dims) == 0) {
      *out = a.t_fvalues;
      return true;
    }
    if (a.t_has_values) {
      out->assign(a.t_values.begin(), a.t_values.end());
      return true;
    }
    return false;
  }
  it = p.attrs.find("value_floats");
  if (it != p.attrs.end()) {
    out->assign(it->second.floats.begin(), it->second.floats.end());
    return true;
  }
  return false;
}

/// True when input i is absent or an empty tensor (opset 11+ placeholders).
bool AbsentOrEmpty(const ShapeContext& ctx, int i) {
  if (!ctx.HasInput(i)) return true;
  const Tensor& t = ctx.Input(i);
  return t.shape_known && Numel(t.shape) == 0;
}

Status ResizeShape(ShapeContext& ctx) {
  const bool upsample = ctx.node().op_type == "Upsample";
  NN_TRY(CheckInputs(ctx, 1, upsample ? 2 : 4));
  const auto& x = ctx.Input(0).shape;
  const int64_t rank = static_cast<int64_t>(x.size());
  // Opset 10 Resize and opset 9 Upsample: (X, scales). Opset 11+: (X, roi,
  // scales, sizes) with empty or omitted placeholders.
  const int scales_in = (upsample || ctx.num_inputs() == 2) ? 1 : 2;
  const int sizes_in = (upsample || ctx.num_inputs() == 2) ? -1 : 3;
  std::vector<int64_t> axes(rank);
  for (int64_t i = 0; i < rank; ++i) axes[i] = i;
  if (ctx.node().Has("axes")) {
    if (!NormalizeAxes(ctx.node().GetInts("axes"), rank, true, &axes)) {
      return ctx.Error("attribute 'axes' " + ShapeString(ctx.node().GetInts("axes")) +
                       " is invalid for input of rank " + Str(rank));
    }
  }
  std::vector<int64_t> out = x;
  if (sizes_in >= 0 && !AbsentOrEmpty(ctx, sizes_in)) {
    if (!HasInputValues(ctx, sizes_in)) {
      return ctx.Error("cannot infer: sizes " + InName(ctx, sizes_in) + " is not a constant");
    }
    const auto& sizes = ctx.Input(sizes_in).values;
    if (sizes.size() != axes.size()) {
      return ctx.Error("sizes has " + Str(sizes.size()) + " values, expected " + Str(axes.size()));
    }
    for (int64_t s : sizes) {
      if (s < 0) return ctx.Error("sizes " + ShapeString(sizes) + " has a negative value");
    }
    const std::string policy = ctx.node().GetString("keep_aspect_ratio_policy", "stretch");
    if (policy == "stretch") {
      for (size_t k = 0; k < axes.size(); ++k) out[axes[k]] = sizes[k];
    } else if (policy == "not_larger" || policy == "not_smaller") {
      double scale = policy == "not_larger" ? 1e300 : 0.0;
      for (size_t k = 0; k < axes.size(); ++k) {
        if (x[axes[k]] == 0) continue;
        const double r = static_cast<double>(sizes[k]) / static_cast<double>(x[axes[k]]);
        scale = policy == "not_larger" ? std::min(scale, r) : std::max(scale, r);
      }
      if (scale > 1e18) scale = 1.0;
      for (int64_t a : axes) {
        const double v = std::round(scale * static_cast<double>(x[a]));
        if (!(v < 9.0e18)) return ctx.Error("output size overflows int64");
        out[a] = static_cast<int64_t>(v);
      }
    } else {
      return ctx.Error("unknown keep_aspect_ratio_policy '" + policy + "'");
    }
    return SetOut(ctx, 0, ctx.Input(0).dtype, out);
  }
  std::vector<double> scales;
  bool have_scales = false;
  if (upsample && ctx.node().Has("scales")) {
    const auto& f = ctx.node().attrs.at("scales").floats;
    scales.assign(f.begin(), f.end());
    have_scales = true;
  } else if (ctx.HasInput(scales_in) && !AbsentOrEmpty(ctx, scales_in)) {
    have_scales = ConstFloats(ctx.graph(), ctx.node().inputs[scales_in], &scales);
  } else {
    return ctx.Error("neither scales nor sizes is given");
  }
  if (have_scales) {
    if (scales.size() != axes.size()) {
      return ctx.Error("scales has " + Str(scales.size()) + " values, expected " +
                       Str(axes.size()));
    }
    for (size_t k = 0; k < axes.size(); ++k) {
      const double v = std::floor(static_cast<double>(x[axes[k]]) * scales[k]);
      if (!(scales[k] > 0.0) || !(v < 9.0e18)) {
        return ctx.Error("scale " + std::to_string(scales[k]) + " is invalid");
      }
      out[axes[k]] = static_cast<int64_t>(v);
    }
    return SetOut(ctx, 0, ctx.Input(0).dtype, out);
  }
  // Scales are a float tensor whose data we do not have (the importer keeps
  // integer data only): trust the declared output shape (value_info). Its
  // fixed dims are taken as is; a symbolic dim (the batch) is assumed not to
  // be resized and takes X's size.
  if (ctx.HasOutput(0)) {
    const Tensor& y = ctx.Output(0);
    if (y.has_declared && y.declared.size() == x.size()) {
      std::vector<int64_t> d;
      bool any_fixed = false;
      for (size_t k = 0; k < x.size(); ++k) {
        const Dim& dim = y.declared[k];
        if (dim.known()) {
          d.push_back(dim.value);
          any_fixed = true;
        } else if (!dim.symbol.empty()) {
          d.push_back(x[k]);
        } else {
          break;
        }
      }
      if (d.size() == x.size() && any_fixed) return SetOut(ctx, 0, ctx.Input(0).dtype, d);
    }
  }
  return ctx.Error("cannot infer: scales " + InName(ctx, scales_in) + " is not a constant");
}

// ---------------------------------------------------------------------------
// LSTM, GRU, RNN.

int Gates(const std::string& op) {
  if (op == "LSTM") return 4;
  if (op == "GRU") return 3;
  return 1;
}

Status RnnShape(ShapeContext& ctx) {
  const std::string& op = ctx.node().op_type;
  const int gates = Gates(op);
  NN_TRY(CheckInputs(ctx, 3, op == "LSTM" ? 8 : 6));
  const auto& x = ctx.Input(0).shape;
  const auto& r = ctx.Input(2).shape;
  if (x.size() != 3) return ctx.Error("input X has rank " + Str(x.size()) + ", expected 3");
  const std::string dir = ctx.node().GetString("direction", "forward");
  if (dir != "forward" && dir != "reverse" && dir != "bidirectional") {
    return ctx.Error("unknown direction '" + dir + "'");
  }
  const int64_t dirs = dir == "bidirectional" ? 2 : 1;
  const int64_t layout = ctx.node().GetInt("layout", 0);
  if (layout != 0 && layout != 1) return ctx.Error("layout " + Str(layout) + " is not 0 or 1");
  const int64_t seq = layout == 0 ? x[0] : x[1];
  const int64_t batch = layout == 0 ? x[1] : x[0];
  if (r.size() != 3) return ctx.Error("R has rank " + Str(r.size()) + ", expected 3");
  const int64_t hidden = ctx.node().GetInt("hidden_size", r[2]);
  if (hidden < 1) return ctx.Error("hidden_size " + Str(hidden) + " is not positive");
  int64_t gh = 0;
  if (!CheckedMul(gates, hidden, &gh)) return ctx.Error("hidden_size overflows int64");
  NN_TRY(ExpectShape(ctx, 1, "W", {dirs, gh, x[2]}));
  NN_TRY(ExpectShape(ctx, 2, "R", {dirs, gh, hidden}));
  int64_t bias = 0;
  if (!CheckedMul(2, gh, &bias)) return ctx.Error("hidden_size overflows int64");
  if (ctx.HasInput(3)) NN_TRY(ExpectShape(ctx, 3, "B", {dirs, bias}));
  const DType dt = ctx.Input(0).dtype;
  NN_TRY(SetOut(ctx, 0, dt,
                layout == 0 ? std::vector<int64_t>{seq, dirs, batch, hidden}
                            : std::vector<int64_t>{batch, seq, dirs, hidden}));
  const std::vector<int64_t> state = layout == 0 ? std::vector<int64_t>{dirs, batch, hidden}
                                                 : std::vector<int64_t>{batch, dirs, hidden};
  NN_TRY(SetOut(ctx, 1, dt, state));
  if (op == "LSTM") NN_TRY(SetOut(ctx, 2, dt, state));
  return Status();
}

/// Hidden size, sequence length, batch, directions and input size of a
/// recurrent node, from the shapes of X and R; false when unknown.
bool RnnDims(const Graph& g, const Node& n, int64_t* hidden, int64_t* seq, int64_t* batch,
             int64_t* dirs, int64_t* input) {
  const auto* x = InShape(g, n, 0);
  const auto* r = InShape(g, n, 2);
  if (!x || x->size() != 3 || !r || r->size() != 3) return false;
  const bool layout0 = n.GetInt("layout", 0) == 0;
  *seq = layout0 ? (*x)[0] : (*x)[1];
  *batch = layout0 ? (*x)[1] : (*x)[0];
  *input = (*x)[2];
  *hidden = (*r)[2];
  *dirs = (*r)[0];
  return true;
}

/// cuDNN RNN training keeps the input, the weights, the output Y and its
/// reserve space. The reserve is approximated as one value per gate per
/// hidden unit per step (LSTM 4, GRU 3, RNN 1, times hidden * seq * batch *
/// dirs) in the compute dtype; the real reserve also holds cell states and
/// workspace padding and depends on the cuDNN algorithm.
void RnnSaves(const SaveContext& sc, std::vector<Saved>* out) {
  if (!sc.AnyInputRequiresGrad()) return;
  for (int i = 0; i < 3; ++i) SaveInput(i, out);
  int64_t hidden, seq, batch, dirs, input;
  if (!RnnDims(*sc.graph, *sc.node, &hidden, &seq, &batch, &dirs, &input)) return;
  if (NodeHasOutput(*sc.node, 0)) {
    SaveOutput(0, out);
  } else {
    SaveExtra(InDType(sc, 0), {seq, dirs, batch, hidden}, "y", out);
  }
  const int64_t gates = Gates(sc.node->op_type);
  SaveExtra(InDType(sc, 0), {SatNumel({gates, hidden, seq, batch, dirs})}, "reserve", out);
}

int64_t RnnFlops(const Graph& g, const Node& n) {
  int64_t hidden, seq, batch, dirs, input;
  if (!RnnDims(g, n, &hidden, &seq, &batch, &dirs, &input)) return 0;
  return SatNumel({2, Gates(n.op_type), SatAdd(input, hidden), hidden, seq, batch, dirs});
}

// ---------------------------------------------------------------------------
// Reductions, ArgMax, ArgMin.

Status ReduceShape(ShapeContext& ctx) {
  NN_TRY(CheckInputs(ctx, 1, 2));
  const auto& x = ctx.Input(0).shape;
  const int64_t rank = static_cast<int64_t>(x.size());
  if (ctx.node().Has("axes") && ctx.HasInput(1)) {
    return ctx.Error("axes given both as attribute and as input");
  }
  std::vector<int64_t> axes;
  bool found = false;
  NN_TRY(IntsFromAttrOrInput(ctx, "axes", 1, "axes", &axes, &found));
  const bool keepdims = ctx.node().GetInt("keepdims", 1) != 0;
  if (axes.empty()) {
    if (ctx.node().GetInt("noop_with_empty_axes", 0) != 0) {
      return SetOut(ctx, 0, ctx.Input(0).dtype, x);
    }
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  }
  std::vector<int64_t> norm;
  if (!NormalizeAxes(axes, rank, true, &norm)) {
    return ctx.Error("axes " + ShapeString(axes) + " are invalid for input of rank " + Str(rank));
  }
  std::vector<char> is_reduced(static_cast<size_t>(rank), 0);
  for (int64_t a : norm) is_reduced[a] = 1;
  std::vector<int64_t> out;
  for (int64_t i = 0; i < rank; ++i) {
    const bool reduced = is_reduced[i] != 0;
    if (!reduced) {
      out.push_back(x[i]);
    } else if (keepdims) {
      out.push_back(1);
    }
  }
  return SetOut(ctx, 0, ctx.Input(0).dtype, out);
}

Status ArgShape(ShapeContext& ctx) {
  NN_TRY(CheckInputs(ctx, 1, 1));
  const auto& x = ctx.Input(0).shape;
  const int64_t a = ctx.node().GetInt("axis", 0);
  int64_t axis = 0;
  if (!NormalizeAxis(a, static_cast<int64_t>(x.size()), &axis)) {
    return ctx.Error("axis " + Str(a) + " is out of range for input of rank " + Str(x.size()));
  }
  std::vector<int64_t> out = x;
  if (ctx.node().GetInt("keepdims", 1) != 0) {
    out[axis] = 1;
  } else {
    out.erase(out.begin() + axis);
  }
  return SetOut(ctx, 0, DType::kInt64, out);
}

// ---------------------------------------------------------------------------
// Attention (opset 23).

struct AttnDims {
  int64_t b = 0, hq = 0, hkv = 0, sq = 0, skv = 0, past = 0, dh = 0, dv = 0;
  bool four_d = false;
};

Status AttentionDims(const ShapeContext& ctx, AttnDims* d) {
  const auto& q = ctx.Input(0).shape;
  const auto& k = ctx.Input(1).shape;
  const auto& v = ctx.Input(2).shape;
  if (q.size() != k.size() || q.size() != v.size() || (q.size() != 3 && q.size() != 4)) {
    return ctx.Error("Q, K, V must all have rank 3 or all rank 4, got " + ShapeString(q) + ", " +
                     ShapeString(k) + ", " + ShapeString(v));
  }
  if (k[0] != q[0] || v[0] != q[0]) return ctx.Error("Q, K, V have different batch sizes");
  d->b = q[0];
  if (q.size() == 4) {
    d->four_d = true;
    d->hq = q[1];
    d->sq = q[2];
    d->dh = q[3];
    d->hkv = k[1];
    d->skv = k[2];
    if (k[3] != d->dh) {
      return ctx.Error("head sizes of Q " + ShapeString(q) + " and K " + ShapeString(k) +
                       " differ");
    }
    if (v[1] != d->hkv || v[2] != d->skv) {
      return ctx.Error("V " + ShapeString(v) + " does not match K " + ShapeString(k));
    }
    d->dv = v[3];
  } else {
    if (!ctx.node().Has("q_num_heads") || !ctx.node().Has("kv_num_heads")) {
      return ctx.Error("3-D inputs need attributes 'q_num_heads' and 'kv_num_heads'");
    }
    d->hq = ctx.node().GetInt("q_num_heads", 1);
    d->hkv = ctx.node().GetInt("kv_num_heads", 1);
    if (d->hq < 1 || d->hkv < 1 || q[2] % d->hq != 0 || v[2] % d->hkv != 0) {
      return ctx.Error("hidden sizes of Q " + ShapeString(q) + " and V " + ShapeString(v) +
                       " are not divisible by the head counts " + Str(d->hq) + " and " +
                       Str(d->hkv));
    }
    d->sq = q[1];
    d->skv = k[1];
    d->dh = q[2] / d->hq;
    d->dv = v[2] / d->hkv;
    int64_t kh = 0;
    if (!CheckedMul(d->hkv, d->dh, &kh) || k[2] != kh) {
      return ctx.Error("K " + ShapeString(k) + " does not have " + Str(d->hkv) + " heads of size " +
                       Str(d->dh));
    }
    if (v[1] != d->skv)
      return ctx.Error("V " + ShapeString(v) + " does not match K " + ShapeString(k));
  }
  if (d->hq < 1 || d->hkv < 1 || d->hq % d->hkv != 0) {
    return ctx.Error("query heads " + Str(d->hq) + " are not a multiple of key/value heads " +
                     Str(d->hkv));
  }
  if (ctx.HasInput(4)) {
    const auto& pk = ctx.Input(4).shape;
    if (pk.size() != 4 || pk[0] != d->b || pk[1] != d->hkv || pk[3] != d->dh) {
      return ctx.Error("past_key " + ShapeString(pk) + " does not match K");
    }
    d->past = pk[2];
  }
  return Status();
}

Status AttentionShape(ShapeContext& ctx) {
  NN_TRY(CheckInputs(ctx, 3, 6));
  AttnDims d;
  NN_TRY(AttentionDims(ctx, &d));
  const DType dt = ctx.Input(0).dtype;
  int64_t total = 0;
  if (!CheckedAdd(d.past, d.skv, &total)) return ctx.Error("sequence length overflows int64");
  int64_t hidden = 0;
  if (!CheckedMul(d.hq, d.dv, &hidden)) return ctx.Error("output size overflows int64");
  NN_TRY(SetOut(ctx, 0, dt,
                d.four_d ? std::vector<int64_t>{d.b, d.hq, d.sq, d.dv}
                         : std::vector<int64_t>{d.b, d.sq, hidden}));
  NN_TRY(SetOut(ctx, 1, ctx.Input(1).dtype, {d.b, d.hkv, total, d.dh}));
  NN_TRY(SetOut(ctx, 2, ctx.Input(2).dtype, {d.b, d.hkv, total, d.dv}));
  NN_TRY(SetOut(ctx, 3, dt, {d.b, d.hq, d.sq, total}));
  return Status();
}

/// Fused SDPA: q, k, v, the output and an fp32 logsumexp [B, H, S].
void AttentionSaves(const SaveContext& sc, std::vector<Saved>* out) {
  if (!sc.AnyInputRequiresGrad()) return;
  for (int i = 0; i < 3; ++i) SaveInput(i, out);
  SaveOutput(0, out);
  const auto* q = InShape(*sc.graph, *sc.node, 0);
  if (!q || (q->size() != 3 && q->size() != 4)) return;
  const int64_t heads = q->size() == 4 ? (*q)[1] : sc.node->GetInt("q_num_heads", 1);
  const int64_t seq = q->size() == 4 ? (*q)[2] : (*q)[1];
  if (heads < 1) return;
  SaveExtra(DType::kFloat, {(*q)[0], heads, seq}, "logsumexp", out);
}

int64_t AttentionFlops(const Graph& g, const Node& n) {
  // The scores output (or, when absent, the inferred dims) sizes the work.
  const auto* q = InShape(g, n, 0);
  const auto* k = InShape(g, n, 1);
  const auto* y = OutShape(g, n, 0);
  if (!q || !k || !y || q->size() != k->size() || y->size() != q->size()) return 0;
  const bool four = q->size() == 4;
  const int64_t b = (*q)[0];
  const int64_t hq = four ? (*q)[1] : n.GetInt("q_num_heads", 1);
  const int64_t hkv = four ? (*k)[1] : n.GetInt("kv_num_heads", 1);
  if (hq < 1 || hkv < 1) return 0;
  const int64_t sq = four ? (*q)[2] : (*q)[1];
  const int64_t skv = four ? (*k)[2] : (*k)[1];
  const int64_t dh = four ? (*q)[3] : (*q)[2] / hq;
  const int64_t dv = four ? y->back() : y->back() / hq;
  const int64_t scores = SatNumel({b, hq, sq, skv});
  return SatAdd(SatMulNonNeg(scores, SatMulNonNeg(2, SatAdd(dh, dv))), SatMulNonNeg(5, scores));
}

// ---------------------------------------------------------------------------

OpDef Def(ShapeFn shape, SavesFn saves, FlopsFn flops, Autocast autocast,
          bool differentiable = true) {
  OpDef d;
  d.shape = shape;
  d.saves = saves;
  d.flops = flops;
  d.alias = Alias::kNone;
  d.autocast = autocast;
  d.differentiable = differentiable;
  return d;
}

#undef NN_TRY

}  // namespace

void RegisterNnOps(OpTable* t) {
  const Autocast low = Autocast::kLowPrecision;
  const Autocast fp32 = Autocast::kFp32;
  const Autocast pass = Autocast::kPassthrough;
  const Autocast fp32_out = Autocast::kFp32Output;

  t->Add("Conv", Def(ConvShape, ConvSaves, ConvFlops, low));
  t->Add("ConvTranspose", Def(ConvTransposeShape, ConvSaves, ConvTransposeFlops, low));
  t->Add("MatMul", Def(MatMulShape, MatMulSaves, MatMulFlops, low));
  t->Add("Gemm", Def(GemmShape, MatMulSaves, GemmFlops, low));
  t->Add("Einsum", Def(EinsumShape, EinsumSaves, EinsumFlops, low));

  // batch_norm and instance_norm run in their input dtype; layer_norm and
  // group_norm are on autocast's fp32 list. RMSNorm is treated like
  // layer_norm (its decomposition, pow/mean/rsqrt, is fp32 under autocast).
  t->Add("BatchNormalization", Def(BatchNormShape, BatchNormSaves, BatchNormFlops, pass));
  t->Add("LayerNormalization", Def(LayerNormShape, LayerNormSaves, Norm8Flops, fp32));
  t->Add("GroupNormalization", Def(GroupNormShape, GroupNormSaves, Norm8Flops, fp32));
  t->Add("InstanceNormalization", Def(InstanceNormShape, InstanceNormSaves, Norm8Flops, pass));
  t->Add("RMSNormalization", Def(RmsNormShape, RmsNormSaves, Norm5Flops, fp32));
  // F.normalize: the norm (linalg_vector_norm) writes float32 from the input
  // as is.
  t->Add("LpNormalization", Def(LpNormShape, LpNormSaves, Norm4Flops, fp32_out));

  t->Add("MaxPool", Def(PoolShape, MaxPoolSaves, PoolFlops, pass));
  t->Add("AveragePool", Def(PoolShape, SaveInput0, PoolFlops, pass));
  // LpPool = pow, avg_pool, pow: keeps its input and output.
  t->Add("LpPool", Def(PoolShape, SaveInput0Output0, PoolFlops, pass));
  t->Add("GlobalAveragePool", Def(GlobalPoolShape, nullptr, InputNumelFlops, pass));
  t->Add("GlobalMaxPool", Def(GlobalPoolShape, MaxPoolSaves, InputNumelFlops, pass));
  t->Add("GlobalLpPool", Def(GlobalPoolShape, SaveInput0Output0, InputNumelFlops, pass));

  // Nearest/linear backward needs only the sizes. Autocast runs every
  // upsample_* kernel in float32 (aten/src/ATen/autocast_mode.h,
  // AT_FORALL_FP32): a half input is copied to float32 and the output is
  // float32 (measured: bench/results/traces/families/unet_ldm_train_32_amp_bf16
  // and deeplab_mnv3_train_16_amp_bf16).
  // The CUDA upsampling kernels index in 32 bits: the channels-last ones
  // check numel < INT_MAX, others compute int offsets
  // (aten/src/ATen/native/cuda/UpSampleBilinear2d.cu, UpSampleNearest1d.cu,
  // UpSampleNearest3d.cu); bilinear upsampling over more than 2^31 elements
  // crashed with an illegal memory access on the H200 (torch 2.11).
  OpDef resize = Def(ResizeShape, nullptr, nullptr, fp32);
  resize.int32_indexing = true;
  t->Add("Resize", resize);
  t->Add("Upsample", resize);

  t->Add("LSTM", Def(RnnShape, RnnSaves, RnnFlops, low));
  t->Add("GRU", Def(RnnShape, RnnSaves, RnnFlops, low));
  t->Add("RNN", Def(RnnShape, RnnSaves, RnnFlops, low));

  // mean/max/min run in the input dtype. sum, prod and the vector norms
  // (L1, L2) are "fp32_set_opt_dtype" in autocast: they read the input as is
  // and write float32; logsumexp and sum-of-squares (pow) cast to float32.
  // Mean and sum need only the input shape; max/min, prod, L2 and logsumexp
  // keep input and result; L1 and sum-of-squares keep the input.
  t->Add("ReduceMean", Def(ReduceShape, nullptr, InputNumelFlops, pass));
  t->Add("ReduceSum", Def(ReduceShape, nullptr, InputNumelFlops, fp32_out));
  t->Add("ReduceMax", Def(ReduceShape, SaveInput0Output0, InputNumelFlops, pass));
  t->Add("ReduceMin", Def(ReduceShape, SaveInput0Output0, InputNumelFlops, pass));
  t->Add("ReduceProd", Def(ReduceShape, SaveInput0Output0, InputNumelFlops, fp32_out));
  t->Add("ReduceL1", Def(ReduceShape, SaveInput0, InputNumelFlops, fp32_out));
  t->Add("ReduceL2", Def(ReduceShape, SaveInput0Output0, InputNumelFlops, fp32_out));
  t->Add("ReduceLogSumExp", Def(ReduceShape, SaveInput0Output0, InputNumelFlops, fp32));
  t->Add("ReduceSumSquare", Def(ReduceShape, SaveInput0, InputNumelFlops, fp32));
  t->Add("ArgMax", Def(ArgShape, nullptr, InputNumelFlops, pass, false));
  t->Add("ArgMin", Def(ArgShape, nullptr, InputNumelFlops, pass, false));

  t->Add("Attention", Def(AttentionShape, AttentionSaves, AttentionFlops, low));

  for (const char* op : {"LSTM", "GRU", "RNN"}) t->Mutable(op)->cudnn_rnn = true;

  // cuDNN convolutions: contiguous input, workspaces, weight and bias slots.
  for (const char* op : {"Conv", "ConvTranspose"}) {
    OpDef* d = t->Mutable(op);
    d->contiguous_input0 = true;
    d->contiguous_in_kernel = true;  // _convolution, convolution_backward
    d->grad_output_copy = GradOutputCopy::kBeforeGrads;
    d->cudnn_conv = true;
    d->weight_inputs = InputBits(1, 2);
  }
  t->Mutable("Conv")->kernel = ValidationKernel::kConv;
  // cuBLAS: matrix products and the recurrent layers' GEMMs.
  for (const char* op : {"MatMul", "Gemm", "Einsum", "LSTM", "GRU", "RNN", "Attention"}) {
    t->Mutable(op)->uses_cublas = true;
  }
  for (const char* op : {"MatMul", "Gemm"}) {
    OpDef* d = t->Mutable(op);
    d->matmul_operands = true;
    d->kernel = ValidationKernel::kGemm;
  }
  for (const char* op : {"MatMul", "Gemm", "Einsum"}) t->Mutable(op)->weight_inputs = kAllInputs;
  // Normalisation: scale and bias are weights; BatchNorm's running statistics buffers.
  for (const char* op : {"BatchNormalization", "LayerNormalization", "GroupNormalization",
                         "InstanceNormalization", "RMSNormalization"}) {
    OpDef* d = t->Mutable(op);
    d->contiguous_input0 = true;
    d->weight_inputs = InputBits(1, 2);
  }
  // layer_norm_cuda and layer_norm_backward_cuda: input.expect_contiguous()
  // inside the op autograd records (native_layer_norm saves its input as
  // given); group_norm and batch_norm copy before it (the copy is saved).
  t->Mutable("LayerNormalization")->contiguous_in_kernel = true;
  t->Mutable("LayerNormalization")->grad_output_copy = GradOutputCopy::kAfterGrads;
  t->Mutable("Gather")->grad_output_copy = GradOutputCopy::kBeforeGradsOfAWeight;
  t->Mutable("BatchNormalization")->buffer_inputs = InputBits(3, 31);
  t->Mutable("GroupNormalization")->group_norm_workspaces = true;
  // Pooling and resizing call .contiguous() on their input; CUDA max pooling
  // always writes its indices.
  for (const char* op : {"MaxPool", "AveragePool", "LpPool", "GlobalAveragePool", "GlobalMaxPool",
                         "Resize", "Upsample"}) {
    t->Mutable(op)->contiguous_input0 = true;
  }
  t->Mutable("MaxPool")->makes_indices = true;
  // Channels-last inputs (a permuted [N, H, W, C] tensor: ConvNeXt's
  // LayerNorm2d, SegFormer's decoder) stay channels-last: cudnn_convolution
  // and cudnn_batch_norm take cudnn_conv_suggest_memory_format /
  // suggest_memory_format, max_pool2d, avg_pool2d, adaptive_avg_pool2d and
  // upsample_{nearest,bilinear}2d have NHWC kernels (aten/src/ATen/native/
  // cuda/). Measured: the H200 trace of segformer_n b8 amp_bf16
  // (bench/results/traces/families_new2/) upsamples a channels-last view
  // without a copy, and 392 convolutions of channels-last inputs
  // (bench/results/cudnn_channels_last_ws_h200.jsonl) all write channels-last
  // outputs.
  for (const char* op : {"Conv", "ConvTranspose", "BatchNormalization", "MaxPool", "AveragePool",
                         "GlobalAveragePool", "Resize", "Upsample"}) {
    t->Mutable(op)->channels_last = ChannelsLastRule::kKeepsInput0;
  }
  for (const char* op : {"LSTM", "GRU", "RNN"}) {
    OpDef* d = t->Mutable(op);
    d->recurrent = true;
    d->contiguous_input0 = true;
    d->weight_inputs = InputBits(1, 3);
  }
  // TensorIterator kernels (elementwise, comparisons, casts, dropout):
  // their outputs keep their inputs' layout (planner/layout.cc).
  for (const char* op : {"Add",     "Sub",       "Mul",         "Div",         "Pow",
                         "Where",   "Cast",      "CastLike",    "Neg",         "Abs",
                         "Exp",     "Log",       "Sqrt",        "Reciprocal",  "Relu",
                         "Sigmoid", "Tanh",      "Erf",         "Max",         "Min",
                         "Equal",   "Less",      "Greater",     "LessOrEqual", "GreaterOrEqual",
                         "Not",     "And",       "Or",          "Sin",         "Cos",
                         "Clip",    "LeakyRelu", "HardSigmoid", "HardSwish",   "Swish",
                         "Gelu",    "Softplus",  "IsNaN",       "Floor",       "Ceil",
                         "Round",   "Sign",      "Mod",         "Elu",         "Selu",
                         "Mish",    "PRelu",     "Dropout"}) {
    if (OpDef* d = t->Mutable(op)) d->tensor_iterator = true;
  }
}

}  // namespace memplan
