#include "planner/schedule.h"

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

#include "planner/attention.h"
#include "planner/checked.h"
#include "planner/fusion.h"
#include "planner/module_calls.h"
#include "planner/op_registry.h"
#include "planner/ops/op_names.h"
#include "planner/ops/op_util.h"
#include "planner/params.h"
#include "planner/shape_inference.h"

namespace memplan {

std::vector<int64_t> ContiguousStrides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  int64_t acc = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    s[i] = acc;
    acc *= std::max<int64_t>(shape[i], 1);
  }
  return s;
}

bool IsContiguous(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides) {
  for (int64_t d : shape) {
    if (d == 0) return true;  // Empty tensors are contiguous whatever their strides.
  }
  int64_t expected = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] == 1) continue;
    if (shape[i] == 0) return true;
    if (strides[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

bool ViewStrides(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides,
                 const std::vector<int64_t>& new_shape, std::vector<int64_t>* out) {
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  if (numel == 0) {
    *out = ContiguousStrides(new_shape);
    return true;
  }
  // Old dims without the size-1 ones, grouped into chunks that are laid out
  // contiguously among themselves; new dims must split/merge within chunks.
  std::vector<int64_t> s;
  std::vector<int64_t> t;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] != 1) {
      s.push_back(shape[i]);
      t.push_back(strides[i]);
    }
  }
  out->assign(new_shape.size(), 1);
  size_t nj = 0;
  size_t i = 0;
  while (i < s.size()) {
    size_t end = i;
    while (end + 1 < s.size() && t[end] == t[end + 1] * s[end + 1]) ++end;
    int64_t chunk = 1;
    for (size_t k = i; k <= end; ++k) chunk *= s[k];
    const int64_t base = t[end];
    std::vector<size_t> dims;
    int64_t acc = 1;
    while (acc < chunk) {
      if (nj >= new_shape.size()) return false;
      if (new_shape[nj] != 1) {
        acc *= new_shape[nj];
        dims.push_back(nj);
      }
      ++nj;
    }
    if (acc != chunk) return false;
    int64_t stride = base;
    for (size_t k = dims.size(); k-- > 0;) {
      (*out)[dims[k]] = stride;
      stride *= new_shape[dims[k]];
    }
    i = end + 1;
  }
  for (; nj < new_shape.size(); ++nj) {
    if (new_shape[nj] != 1) return false;
  }
  // Size-1 dims: the stride of the next dim times its size (any works).
  for (size_t k = new_shape.size(); k-- > 0;) {
    if (new_shape[k] == 1) {
      (*out)[k] = k + 1 < new_shape.size() ? (*out)[k + 1] * new_shape[k + 1] : 1;
    }
  }
  return true;
}

namespace {

bool IsHalf(DType t) { return t == DType::kFloat16 || t == DType::kBFloat16; }

DType HalfType(Precision p) {
  return (p == Precision::kAmpFp16 || p == Precision::kFp16) ? DType::kFloat16 : DType::kBFloat16;
}

bool IsAmp(Precision p) { return p == Precision::kAmpBf16 || p == Precision::kAmpFp16; }
bool IsWholeCast(Precision p) { return p == Precision::kBf16 || p == Precision::kFp16; }

int64_t BytesOf(const std::vector<int64_t>& shape, DType dt) {
  int64_t n = 0;
  int64_t b = 0;
  if (!CheckedNumel(shape, &n) || !DTypeBytes(dt, n, &b)) return 0;
  return b;
}

// The builder: walks the graph in order and appends ops and vals.
// cuDNN in heuristic mode (PyTorch's default, cudnn.benchmark off) runs
// NCHW convolutions with NHWC tensor-core kernels: the engine copies the
// input, the weight and the output through a workspace that PyTorch takes
// from the caching allocator for the call, after the output. Measured per
// convolution on the H200 (bench/results/cudnn_workspace_h200.jsonl, and
// 522 shapes in cudnn_ws_grid_h200.jsonl): exact for bf16 (inputs padded to
// 8 channels). For fp32 the heuristics pick, shape by shape, engines that
// copy all three (104 of 248 shapes) or the input and weight only (82): see
// Fp32ConvCopies.
// Depthwise convolutions have NCHW kernels and unstrided 1x1 ones run as
// GEMMs on NCHW: no workspace (their weight gradient's split-K buffers, a few
// MiB, are left out). Backward takes one workspace of the same size for the
// input gradient, then one for the weight gradient that is larger by its
// split-K partial sums. That excess varies with the shape (0 to 240 MiB over
// 406 convolutions of the grid); its medians are 4.5 MiB (fp32) and 2.25 MiB
// (bf16): one global constant. Being larger, the second workspace often needs
// a new segment: that is most of what a CNN's backward adds to
// memory_reserved. 16-bit 1-D convolutions (Conv1d, run by cuDNN as 2-D with
// height 1) have no such excess: their weight gradient takes exactly the
// input gradient's workspace (wav2vec2's feature encoder: 18 of 18 strided
// convolutions at batches 4, 16 and 64, cudnn_ws_models_h200.jsonl).
constexpr int64_t kConvWeightGradExtraBytes = 4LL << 20;

void ConvWorkspaces(const Node& n, const std::vector<Val>& vals, Fp32ConvCopies fp32, ExecOp* op,
                    bool* fp32_conv) {
  if (op->in.size() < 2 || op->in[0] < 0 || op->in[1] < 0 || op->out.empty() || op->out[0] < 0) {
    return;
  }
  const Val& x = vals[op->in[0]];
  const Val& w = vals[op->in[1]];
  const Val& y = vals[op->out[0]];
  if (x.shape.size() < 3 || w.shape.size() < 3) return;
  const int64_t channels = x.shape[1];
  const int64_t groups = n.GetInt("group", 1);
  if (groups > 1 && groups == channels) return;  // depthwise
  bool unit = true;
  for (size_t d = 2; d < w.shape.size(); ++d) unit = unit && w.shape[d] == 1;
  for (int64_t st : n.GetInts("strides")) unit = unit && st == 1;
  for (int64_t p : n.GetInts("pads")) unit = unit && p == 0;
  int64_t elem = 0;
  DTypeBytes(x.dtype, 1, &elem);
  const bool input_only = elem == 4 && fp32 == Fp32ConvCopies::kInputOnly;
  if (elem == 4) *fp32_conv = true;
  if (unit) {
    if (input_only && w.requires_grad) {
      op->bwd_weight_workspace = SatAdd(SatAdd(x.bytes, y.bytes), w.bytes);
    }
    return;
  }
  int64_t in_bytes = x.bytes;
  if (elem == 2 && channels > 0 && channels % 8 != 0) {
    in_bytes = SatMulNonNeg(x.bytes / channels, (channels + 7) / 8 * 8);
  }
  const int64_t ws = SatAdd(SatAdd(in_bytes, w.bytes), y.bytes);
  op->fwd_workspace = input_only ? SatAdd(in_bytes, w.bytes) : ws;
  if (x.requires_grad) op->bwd_workspace = ws;
  if (w.requires_grad) {
    const bool half_1d = elem == 2 && x.shape.size() == 3;
    op->bwd_weight_workspace = half_1d ? ws : SatAdd(ws, kConvWeightGradExtraBytes);
  }
}

// native_group_norm on CUDA (aten/src/ATen/native/cuda/group_norm_kernel.cu):
// the forward writes mean and rstd of [N, G] in the input's dtype (with
// float32 copies for half inputs) and, with weight and bias, folds them into
// per-channel scale and shift of [N, C] in the accumulation type (float32
// for half inputs) that die with the kernel. The backward, after dX, dgamma
// and dbeta, takes ds, db and c1 of [N, C] and c2, c3 of [N, G].
void GroupNormWorkspaces(const Val& x, int64_t groups, bool affine, ExecOp* op) {
  if (x.shape.size() < 2 || groups < 1) return;
  const int64_t n = x.shape[0];
  const int64_t c = x.shape[1];
  int64_t acc = 0;
  DTypeBytes(x.dtype, 1, &acc);
  const bool half = IsHalf(x.dtype);
  if (half) acc = 4;
  const int64_t nc = SatMulNonNeg(SatMulNonNeg(n, c), acc);
  const int64_t ng = SatMulNonNeg(SatMulNonNeg(n, groups), acc);
  int64_t fwd = half ? SatMulNonNeg(2, ng) : 0;
  if (affine) fwd = SatAdd(fwd, SatMulNonNeg(2, nc));
  op->fwd_workspace = fwd;
  op->bwd_workspace = SatAdd(SatMulNonNeg(affine ? 3 : 2, nc), SatMulNonNeg(2, ng));
}

class Builder {
 public:
  Builder(const Graph& g, const PlanOptions& o) : g_(g), o_(o) {}

  Result<Schedule> Build();

 private:
  int NewVal(Val v) {
    s_.vals.push_back(std::move(v));
    return static_cast<int>(s_.vals.size()) - 1;
  }
  int Root(int v) const {
    while (s_.vals[v].base >= 0) v = s_.vals[v].base;
    return v;
  }
  DType RunDtype(DType graph_dtype) const {
    if (IsWholeCast(o_.precision) && IsFloat(graph_dtype)) return HalfType(o_.precision);
    return graph_dtype;
  }
  void InitVals();
  void AddNode(int ni);
  void ProcessNode(int ni);
  bool IsLinearBias(int ni, std::vector<int>& in) const;
  void AddBiasAdd(int ni, const std::vector<int>& in);
  int SegmentOf(const std::string& scope) const;
  int CastVal(int v, DType to, bool weight_cache, const std::string& why);
  int ContiguousCopy(int v, const std::string& label);
  void AddViewOp(int ni, const OpDef& def, std::vector<int> in);
  void AddComputeOp(int ni, const OpDef* def, std::vector<int> in);
  /// Appends a compute op: node ni (or -1 for synthetic ops, whose outputs
  /// are already made and whose saved tensors are given).
  void AddCompute(const std::string& op_type, const std::string& label, int ni, const OpDef* def,
                  std::vector<int> in, const std::vector<int>& outs,
                  const std::vector<SavedRef>* explicit_saves, int64_t flops);
  void AppendAttention(const AttentionRegion& r, const std::string& label);
  void AddGroupNorm(const FusedRegion& r, int ni, const OpDef* def);
  int Synthetic(const std::string& name, const std::vector<int64_t>& shape, DType dt,
                const std::vector<int64_t>& strides, int base);
  bool ComputeViewOutput(const Node& n, const OpDef& def, int in_val, int out_tensor,
                         Val* out) const;
  bool MatMulNeedsCopy(int v, int rank_other) const;

  const Graph& g_;
  const PlanOptions& o_;
  Schedule s_;
  std::vector<int> val_of_;                    // graph tensor -> current val
  std::unordered_map<int, int> weight_cache_;  // param val -> cast val
  std::set<int> skipped_nodes_;
  std::map<int, AttentionRegion> regions_;  // keyed by the last node
  std::map<int, FusedRegion> fused_;        // keyed by the last node
};

void Builder::InitVals() {
  const std::vector<InitRole> roles = ClassifyInitializers(g_);
  s_.vals.resize(g_.tensors.size());
  val_of_.resize(g_.tensors.size());
  for (size_t i = 0; i < g_.tensors.size(); ++i) {
    const Tensor& t = g_.tensors[i];
    Val& v = s_.vals[i];
    v.name = t.name;
    v.shape = t.shape;
    v.strides = ContiguousStrides(t.shape);
    v.dtype = RunDtype(t.dtype);
    v.bytes = BytesOf(t.shape, v.dtype);
    val_of_[i] = static_cast<int>(i);
    if (t.kind == TensorKind::kInitializer) {
      if (roles[i] == InitRole::kParameter) {
        v.is_param = true;
        v.requires_grad = o_.mode == Mode::kTrain;
      } else {
        v.is_buffer = true;
      }
    }
  }
  for (int id : g_.initializers) {
    if (s_.vals[id].is_param) {
      s_.params.push_back(id);
      int64_t n = 0;
      CheckedNumel(g_.tensors[id].shape, &n);
      s_.parameter_count += n;
    } else if (IsFloat(g_.tensors[id].dtype) && s_.vals[id].bytes > 0) {
      s_.buffers.push_back(id);
    }
  }
  for (int id : g_.inputs) s_.inputs.push_back(id);
  if (!g_.outputs.empty()) s_.logits = g_.outputs[0];
}

int Builder::CastVal(int v, DType to, bool weight_cache, const std::string& why) {
  const int root = Root(v);
  if (weight_cache) {
    auto it = weight_cache_.find(root);
    if (it == weight_cache_.end()) {
      Val c = s_.vals[root];
      c.name = s_.vals[root].name + ":" + DTypeName(to);
      c.dtype = to;
      c.bytes = BytesOf(c.shape, to);
      c.base = -1;
      c.is_param = false;
      c.strides = ContiguousStrides(c.shape);
      const int cv = NewVal(c);
      ExecOp op;
      op.label = "autocast(" + s_.vals[root].name + ")";
      op.op_type = op_names::kCast;
      op.in = {root};
      op.out = {cv};
      op.grad_in = {s_.vals[root].requires_grad};
      op.hold_to_forward_end = true;
      op.flops = 0;
      s_.ops.push_back(op);
      it = weight_cache_.emplace(root, cv).first;
    }
    if (root == v) return it->second;
    // Re-apply the view (e.g. a transposed weight) to the cached copy.
    Val view = s_.vals[v];
    view.name = s_.vals[v].name + ":" + DTypeName(to);
    view.dtype = to;
    view.base = it->second;
    view.is_param = false;
    view.bytes = 0;
    const int vv = NewVal(view);
    ExecOp op;
    op.label = view.name;
    op.op_type = "View";
    op.view = true;
    op.in = {it->second};
    op.out = {vv};
    op.grad_in = {s_.vals[it->second].requires_grad};
    op.grad_kind = GradKind::kAlias;
    s_.ops.push_back(op);
    return vv;
  }
  Val c = s_.vals[v];
  c.name = s_.vals[v].name + ":" + DTypeName(to);
  c.dtype = to;
  c.bytes = BytesOf(c.shape, to);
  c.base = -1;
  c.is_param = false;
  c.is_buffer = false;
  c.strides = ContiguousStrides(c.shape);
  const int cv = NewVal(c);
  ExecOp op;
  op.label = why;
  op.op_type = op_names::kCast;
  op.in = {v};
  op.out = {cv};
  op.grad_in = {s_.vals[v].requires_grad};
  op.flops = 0;
  s_.ops.push_back(op);
  return cv;
}

int Builder::ContiguousCopy(int v, const std::string& label) {
  Val c = s_.vals[v];
  c.name = s_.vals[v].name + ":contiguous";
  c.base = -1;
  c.is_param = false;
  c.is_buffer = false;
  c.strides = ContiguousStrides(c.shape);
  c.bytes = BytesOf(c.shape, c.dtype);
  const int cv = NewVal(c);
  ExecOp op;
  op.label = label;
  op.op_type = "Contiguous";
  op.in = {v};
  op.out = {cv};
  op.grad_in = {s_.vals[v].requires_grad};
  op.grad_kind = GradKind::kAlias;
  s_.ops.push_back(op);
  return cv;
}

// Strides of a view op's output; false when PyTorch would copy instead.
bool Builder::ComputeViewOutput(const Node& n, const OpDef& def, int in_val, int out_tensor,
                                Val* out) const {
  const Val& in = s_.vals[in_val];
  const std::vector<int64_t>& new_shape = g_.tensors[out_tensor].shape;
  out->strides = ContiguousStrides(new_shape);
  if (def.view == ViewRule::kSame) {
    out->strides = in.strides;
    return true;
  }
  if (def.view == ViewRule::kTranspose) {
    std::vector<int64_t> perm = n.GetInts("perm");
    const size_t r = in.shape.size();
    if (perm.empty()) {
      for (size_t i = 0; i < r; ++i) perm.push_back(static_cast<int64_t>(r - 1 - i));
    }
    if (perm.size() != r) return false;
    for (size_t i = 0; i < r; ++i) {
      if (perm[i] < 0 || perm[i] >= static_cast<int64_t>(r)) return false;
      out->strides[i] = in.strides[perm[i]];
    }
    return true;
  }
  if (def.view == ViewRule::kExpand) {
    const size_t r = new_shape.size();
    const size_t off = r - in.shape.size();
    for (size_t i = 0; i < r; ++i) {
      if (i < off) {
        out->strides[i] = 0;
      } else {
        out->strides[i] = (in.shape[i - off] == 1 && new_shape[i] != 1) ? 0 : in.strides[i - off];
      }
    }
    return true;
  }
  if (def.view == ViewRule::kSlice || def.view == ViewRule::kSplit ||
      def.view == ViewRule::kSequence) {
    // Same strides.
    if (in.shape.size() != new_shape.size()) return false;
    out->strides = in.strides;
    if (def.view == ViewRule::kSlice) {
      // x[a:b:step] multiplies the stride of each sliced axis by its step.
      const Tensor* axes =
          n.inputs.size() > 3 && n.inputs[3] >= 0 ? &g_.tensors[n.inputs[3]] : nullptr;
      const Tensor* steps =
          n.inputs.size() > 4 && n.inputs[4] >= 0 ? &g_.tensors[n.inputs[4]] : nullptr;
      if (steps && !steps->has_values) return false;
      if (steps) {
        const int64_t r = static_cast<int64_t>(in.shape.size());
        for (size_t i = 0; i < steps->values.size(); ++i) {
          int64_t axis = static_cast<int64_t>(i);
          if (axes) {
            if (!axes->has_values || i >= axes->values.size()) return false;
            axis = axes->values[i];
          }
          if (axis < 0) axis += r;
          if (axis < 0 || axis >= r) return false;
          out->strides[axis] *= steps->values[i];
        }
      }
    }
    return true;
  }
  // Reshape, Flatten, Squeeze, Unsqueeze: a view when the strides allow.
  return ViewStrides(in.shape, in.strides, new_shape, &out->strides);
}

void Builder::AddViewOp(int ni, const OpDef& def, std::vector<int> in) {
  const Node& n = g_.nodes[ni];
  const int src = in[0];
  ExecOp op;
  op.label = n.Label(ni);
  op.op_type = n.op_type;
  op.node = ni;
  op.in = in;
  op.def = &def;
  op.view = true;
  op.grad_kind = def.grad == GradKind::kGather ? GradKind::kGather : GradKind::kAlias;
  bool copy = false;
  for (size_t k = 0; k < n.outputs.size(); ++k) {
    const int t = n.outputs[k];
    if (t < 0 || (def.view_outputs >= 0 && k >= static_cast<size_t>(def.view_outputs))) continue;
    Val& v = s_.vals[t];
    v.dtype = s_.vals[src].dtype;
    v.requires_grad = s_.vals[src].requires_grad;
    if (def.view == ViewRule::kSequence) {
      v.strides = s_.vals[src].strides;
      if (v.strides.size() != v.shape.size()) v.strides = ContiguousStrides(v.shape);
    } else if (!ComputeViewOutput(n, def, src, t, &v)) {
      copy = true;
      v.strides = ContiguousStrides(v.shape);
    }
    v.base = copy ? -1 : src;
    v.bytes = BytesOf(v.shape, v.dtype);
    op.out.push_back(t);
  }
  if (copy) {
    // PyTorch's reshape of a non-viewable tensor copies.
    op.view = false;
    op.op_type = n.op_type + "(copy)";
    op.grad_kind = GradKind::kAlias;
  }
  op.grad_in.assign(in.size(), false);
  op.grad_in[0] = s_.vals[src].requires_grad;
  s_.ops.push_back(op);
}

bool Builder::MatMulNeedsCopy(int v, int rank_other) const {
  const Val& x = s_.vals[v];
  const size_t r = x.shape.size();
  if (r <= 1) return false;
  auto last_two_ok = [&](const std::vector<int64_t>& sh, const std::vector<int64_t>& st) {
    const size_t k = sh.size();
    return (st[k - 1] == 1 || sh[k - 1] == 1) || (st[k - 2] == 1 || sh[k - 2] == 1);
  };
  if (r == 2) return !last_two_ok(x.shape, x.strides);
  // N-d: folded to 2-d (against a 2-d operand) or 3-d batches.
  std::vector<int64_t> folded;
  std::vector<int64_t> st;
  if (rank_other <= 2) {
    int64_t rows = 1;
    for (size_t i = 0; i + 1 < r; ++i) rows *= x.shape[i];
    folded = {rows, x.shape[r - 1]};
  } else {
    int64_t b = 1;
    for (size_t i = 0; i + 2 < r; ++i) b *= x.shape[i];
    folded = {b, x.shape[r - 2], x.shape[r - 1]};
  }
  if (!ViewStrides(x.shape, x.strides, folded, &st)) return true;
  return !last_two_ok(folded, st);
}

void Builder::AddComputeOp(int ni, const OpDef* def, std::vector<int> in) {
  const Node& n = g_.nodes[ni];
  AddCompute(n.op_type, n.Label(ni), ni, def, std::move(in), n.outputs, nullptr, -1);
}

void Builder::AddCompute(const std::string& op_type, const std::string& label, int ni,
                         const OpDef* def, std::vector<int> in, const std::vector<int>& outs,
                         const std::vector<SavedRef>* explicit_saves, int64_t flops) {
  const bool amp = IsAmp(o_.precision);
  const DType half = HalfType(o_.precision);
  const Autocast ac = def ? def->autocast : Autocast::kPassthrough;
  // Autocast input casts.
  if (amp && (ac == Autocast::kLowPrecision || ac == Autocast::kFp32)) {
    for (size_t i = 0; i < in.size(); ++i) {
      if (in[i] < 0 || !IsFloat(s_.vals[in[i]].dtype)) continue;
      const DType have = s_.vals[in[i]].dtype;
      if (ac == Autocast::kLowPrecision && have == DType::kFloat) {
        const bool weight = s_.vals[Root(in[i])].is_param;
        in[i] = CastVal(in[i], half, weight, "autocast(" + label + ")");
      } else if (ac == Autocast::kFp32 && IsHalf(have)) {
        in[i] = CastVal(in[i], DType::kFloat, false, "autocast(" + label + ")");
      }
    }
  }
  // Copies PyTorch makes for inputs it needs contiguous.
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] < 0) continue;
    const Val& v = s_.vals[in[i]];
    // Ops that PyTorch runs on contiguous memory call .contiguous().
    bool need = def && def->contiguous_input0 && i == 0 && !IsContiguous(v.shape, v.strides);
    if (def && def->matmul_operands && i < 2) {
      const int other = in[1 - i];
      const int rank_other = other >= 0 ? static_cast<int>(s_.vals[other].shape.size()) : 2;
      need = MatMulNeedsCopy(in[i], rank_other);
    }
    if (need) in[i] = ContiguousCopy(in[i], "contiguous(" + label + ")");
  }
  ExecOp op;
  op.label = label;
  op.op_type = op_type;
  op.node = ni;
  op.def = def;
  op.in = in;
  op.uses_cublas = def && def->uses_cublas;
  // Output dtypes as they run: elementwise ops promote among their
  // (non-scalar) float inputs; others follow their data input.
  const OutputDType out_dtype = def ? def->output_dtype : OutputDType::kFollowInput;
  const bool promoting = out_dtype == OutputDType::kPromote;
  DType promoted = DType::kUndefined;
  bool any_ranked = false;
  for (int v : in) {
    if (v >= 0 && !s_.vals[v].shape.empty()) any_ranked = true;
  }
  for (size_t i = 0; i < in.size(); ++i) {
    const int v = in[i];
    if (v < 0 || !IsFloat(s_.vals[v].dtype)) continue;
    if (!promoting && promoted != DType::kUndefined) break;
    if (promoting && any_ranked && s_.vals[v].shape.empty()) continue;
    const DType d = s_.vals[v].dtype;
    if (promoted == DType::kUndefined || (d == DType::kFloat && IsHalf(promoted)) ||
        d == DType::kDouble) {
      promoted = d;
    }
  }
  bool any_grad = false;
  for (int v : in) any_grad = any_grad || (v >= 0 && s_.vals[v].requires_grad);
  const bool differentiable = def ? def->differentiable : false;
  for (size_t k = 0; k < outs.size(); ++k) {
    const int t = outs[k];
    if (t < 0) {
      op.out.push_back(-1);
      continue;
    }
    Val& v = s_.vals[t];
    const DType gdt = t < static_cast<int>(g_.tensors.size()) ? g_.tensors[t].dtype : v.dtype;
    if (IsFloat(gdt)) {
      if (out_dtype == OutputDType::kCastTarget) {
        v.dtype = amp ? gdt : RunDtype(gdt);
      } else if (out_dtype == OutputDType::kLikeInput1 && in.size() > 1 && in[1] >= 0) {
        v.dtype = s_.vals[in[1]].dtype;
      } else if (amp && ac == Autocast::kLowPrecision) {
        v.dtype = half;
      } else if (amp && (ac == Autocast::kFp32 || ac == Autocast::kFp32Output)) {
        v.dtype = DType::kFloat;
      } else if (promoted != DType::kUndefined) {
        v.dtype = promoted;
      } else {
        v.dtype = RunDtype(gdt);
      }
    }
    v.strides = ContiguousStrides(v.shape);
    v.bytes = BytesOf(v.shape, v.dtype);
    v.requires_grad = differentiable && any_grad && IsFloat(v.dtype);
    // Auxiliary outputs nobody reads are in-place updates (BatchNorm running
    // statistics) or the saved tensors themselves (mask, mean, indices).
    if (k > 0 && ni >= 0) {
      bool used = false;
      for (int c : g_.tensors[t].consumers) used = used || !skipped_nodes_.count(c);
      for (int o : g_.outputs) used = used || o == t;
      if (!used) v.phantom = true;
    }
    op.out.push_back(t);
  }
  // What backward keeps.
  if (o_.mode == Mode::kTrain && explicit_saves && any_grad) {
    op.saved = *explicit_saves;
  } else if (o_.mode == Mode::kTrain && ni >= 0 && def && def->saves && any_grad) {
    SaveContext ctx;
    ctx.graph = &g_;
    ctx.node = &g_.nodes[ni];
    for (int v : in) {
      ctx.input_requires_grad.push_back(v >= 0 && s_.vals[v].requires_grad);
      ctx.input_dtype.push_back(v >= 0 ? s_.vals[v].dtype : DType::kUndefined);
    }
    for (int v : op.out) ctx.output_dtype.push_back(v >= 0 ? s_.vals[v].dtype : DType::kUndefined);
    std::vector<Saved> saved;
    def->saves(ctx, &saved);
    for (const Saved& sv : saved) {
      SavedRef r;
      if (sv.kind == Saved::kInput && sv.index < static_cast<int>(in.size())) {
        r.val = in[sv.index];
      } else if (sv.kind == Saved::kOutput && sv.index < static_cast<int>(op.out.size())) {
        r.val = op.out[sv.index];
      } else if (sv.kind == Saved::kExtra) {
        r.bytes = BytesOf(sv.shape, sv.dtype);
        r.what = sv.what;
      }
      if (r.val >= 0 || r.bytes > 0) op.saved.push_back(r);
    }
  }
  op.grad_in.assign(in.size(), false);
  if (differentiable) {
    for (size_t i = 0; i < in.size(); ++i) {
      op.grad_in[i] = in[i] >= 0 && s_.vals[in[i]].requires_grad && IsFloat(s_.vals[in[i]].dtype);
    }
  }
  if (def && def->alias != Alias::kView) op.grad_kind = def->grad;
  const InPlaceUse inplace = def ? def->inplace : InPlaceUse::kNever;
  if (inplace != InPlaceUse::kNever && !op.in.empty() && op.in[0] >= 0 && !op.out.empty() &&
      op.out[0] >= 0) {
    const Val& a = s_.vals[op.in[0]];
    const Val& y = s_.vals[op.out[0]];
    op.inplace_candidate = a.dtype == y.dtype && a.shape == y.shape;
    // In-place code is a CNN habit (torchvision: ReLU(inplace=True) and
    // `out += identity`); transformers (GELU, residual `x + y`) have neither.
    if (op.inplace_candidate && inplace == InPlaceUse::kActivation) {
      s_.inplace_activations = true;
    }
  }
  // CUDA max pooling (2-D, 3-D) always computes its int64 indices; without
  // autograd they are dropped right after the kernel.
  if (def && def->makes_indices && op.saved.empty() && !op.out.empty() && op.out[0] >= 0 &&
      s_.vals[op.out[0]].shape.size() >= 4) {
    op.fwd_workspace = BytesOf(s_.vals[op.out[0]].shape, DType::kInt64);
  }
  if (ni >= 0 && def && def->cudnn_conv) {
    ConvWorkspaces(g_.nodes[ni], s_.vals, o_.fp32_conv, &op, &s_.fp32_convs);
  }
  if (ni >= 0 && def && def->group_norm_workspaces &&
      def == FindOp(g_.nodes[ni].domain, g_.nodes[ni].op_type) && !op.in.empty() && op.in[0] >= 0) {
    GroupNormWorkspaces(s_.vals[op.in[0]], g_.nodes[ni].GetInt("num_groups", 1), true, &op);
  }
  op.flops = flops >= 0 ? flops : (ni >= 0 && def && def->flops ? def->flops(g_, g_.nodes[ni]) : 0);
  if (flops < 0 && (ni < 0 || !def || !def->flops)) {
    for (int v : op.out) {
      if (v >= 0) {
        int64_t numel = 0;
        if (CheckedNumel(s_.vals[v].shape, &numel)) op.flops = SatAdd(op.flops, numel);
      }
    }
  }
  s_.ops.push_back(op);
}

// MatMul followed by Add of a 1-D parameter is how exporters write a linear
// layer with bias; PyTorch runs it as one addmm: the bias joins the product
// in place, in the product's dtype (autocast casts the bias too).
bool Builder::IsLinearBias(int ni, std::vector<int>& in) const {
  const Node& n = g_.nodes[ni];
  const OpDef* def = FindOp(n.domain, n.op_type);
  if (!def || !def->is_add || in.size() != 2 || in[0] < 0 || in[1] < 0) return false;
  for (int k = 0; k < 2; ++k) {
    const int prod = in[k];
    const int bias = in[1 - k];
    const Val& b = s_.vals[Root(bias)];
    if (!b.is_param || s_.vals[bias].shape.size() != 1) continue;
    const int t = n.inputs[k];
    const int p = g_.tensors[t].producer;
    const OpDef* producer = p >= 0 ? FindOp(g_.nodes[p].domain, g_.nodes[p].op_type) : nullptr;
    if (!producer || !producer->matmul_operands) continue;
    if (g_.tensors[t].consumers.size() != 1 || s_.vals[prod].base >= 0) continue;
    if (s_.vals[prod].shape.empty() || s_.vals[prod].shape.back() != s_.vals[bias].shape[0]) {
      continue;
    }
    if (k == 1) std::swap(in[0], in[1]);
    return true;
  }
  return false;
}

void Builder::AddBiasAdd(int ni, const std::vector<int>& in) {
  const Node& n = g_.nodes[ni];
  ExecOp op;
  op.label = n.Label(ni);
  op.op_type = "BiasAdd";
  op.node = ni;
  op.in = in;
  op.view = true;
  op.grad_kind = GradKind::kBiasAdd;
  const int t = n.outputs[0];
  Val& v = s_.vals[t];
  v.dtype = s_.vals[in[0]].dtype;
  v.base = in[0];
  v.strides = s_.vals[in[0]].strides;
  v.bytes = 0;
  v.requires_grad = s_.vals[in[0]].requires_grad || s_.vals[in[1]].requires_grad;
  op.out = {t};
  op.grad_in = {s_.vals[in[0]].requires_grad, s_.vals[in[1]].requires_grad};
  int64_t numel = 0;
  CheckedNumel(v.shape, &numel);
  op.flops = numel;
  s_.ops.push_back(op);
}

void Builder::AddNode(int ni) {
  const Node& n = g_.nodes[ni];
  // Shape arithmetic and constants never reach the GPU.
  bool all_values = true;
  bool any_output = false;
  for (int t : n.outputs) {
    if (t < 0) continue;
    any_output = true;
    if (!g_.tensors[t].has_values) all_values = false;
  }
  const OpDef* def = FindOp(n.domain, n.op_type);
  if (!any_output || all_values || (def && def->host_only)) {
    skipped_nodes_.insert(ni);
    return;
  }
  std::vector<int> in;
  for (int t : n.inputs) in.push_back(t >= 0 ? val_of_[t] : -1);
  if (IsLinearBias(ni, in)) {
    AddBiasAdd(ni, in);
    return;
  }
  bool view = def && def->alias == Alias::kView && !in.empty() && in[0] >= 0;
  // Dropout in eval mode returns its input itself (and makes no mask).
  if (def && def->eval_identity && o_.mode == Mode::kInference && !in.empty() && in[0] >= 0) {
    const bool mask_read =
        n.outputs.size() > 1 && n.outputs[1] >= 0 && !g_.tensors[n.outputs[1]].consumers.empty();
    view = !mask_read;
  }
  if (view) {
    AddViewOp(ni, *def, in);
  } else {
    AddComputeOp(ni, def, in);
  }
}

int Builder::Synthetic(const std::string& name, const std::vector<int64_t>& shape, DType dt,
                       const std::vector<int64_t>& strides, int base) {
  Val v;
  v.name = name;
  v.shape = shape;
  v.dtype = dt;
  v.strides = strides.empty() ? ContiguousStrides(shape) : strides;
  v.base = base;
  v.bytes = base >= 0 ? 0 : BytesOf(shape, dt);
  return NewVal(v);
}

// Replaces an exported attention block by what PyTorch runs: one fused
// scaled_dot_product_attention call, or the eager matmul-softmax-matmul.
void Builder::AppendAttention(const AttentionRegion& r, const std::string& label) {
  int q = val_of_[r.q];
  int k = val_of_[r.k];
  int v = val_of_[r.v];
  const int mask = r.mask >= 0 ? val_of_[r.mask] : -1;
  const int out = r.out;
  const bool amp = IsAmp(o_.precision);
  const DType half = HalfType(o_.precision);
  // Autocast runs attention in half precision.
  if (amp) {
    for (int* x : {&q, &k, &v}) {
      if (s_.vals[*x].dtype == DType::kFloat)
        *x = CastVal(*x, half, false, "autocast(" + label + ")");
    }
  }
  const Val& qv = s_.vals[q];
  const DType dt = qv.dtype;
  const std::vector<int64_t> qshape = qv.shape;
  const size_t rank = qshape.size();
  const int64_t sq = qshape[rank - 2];
  const int64_t d = qshape[rank - 1];
  const std::vector<int64_t>& kshape = s_.vals[k].shape;
  const int64_t sk = r.k_transposed ? kshape.back() : kshape[kshape.size() - 2];
  int64_t bh = 1;
  for (size_t i = 0; i + 2 < rank; ++i) bh *= qshape[i];
  const std::vector<int64_t>& oshape = g_.tensors[out].shape;
  const int64_t dv = oshape.back();
  Val& ov = s_.vals[out];
  ov.dtype = dt;
  ov.requires_grad =
      o_.mode == Mode::kTrain &&
      (s_.vals[q].requires_grad || s_.vals[k].requires_grad || s_.vals[v].requires_grad);
  ov.bytes = BytesOf(oshape, dt);
  ov.base = -1;
  const bool train = o_.mode == Mode::kTrain;
  if (o_.attention == Attention::kFused) {
    // Flash / memory-efficient kernels write [B, S, H, D] and return it
    // transposed to [B, H, S, D]; they keep q, k, v, out and an fp32
    // logsumexp [B, H, S] for backward.
    ov.strides = ContiguousStrides(oshape);
    if (oshape.size() == 4) {
      const int64_t h = oshape[1];
      ov.strides = {sq * h * dv, dv, h * dv, 1};
    }
    ExecOp op;
    op.label = label;
    op.op_type = "ScaledDotProductAttention";
    op.in = {q, k, v, mask};
    op.out = {out};
    op.grad_in = {s_.vals[q].requires_grad, s_.vals[k].requires_grad, s_.vals[v].requires_grad,
                  false};
    if (train && ov.requires_grad) {
      for (int x : {q, k, v, out, mask}) {
        if (x >= 0) op.saved.push_back(SavedRef{x, 0, ""});
      }
      op.saved.push_back(SavedRef{-1, BytesOf({bh, sq}, DType::kFloat), "logsumexp"});
      // Backward accumulates dq in fp32 and keeps fp32 row sums.
      op.bwd_workspace = BytesOf({bh, sq, d}, DType::kFloat) + BytesOf({bh, sq}, DType::kFloat);
    }
    op.flops = SatProduct({4, bh, sq, sk, d});
    s_.ops.push_back(op);
    return;
  }
  // Eager: scores = q @ k^T; scale; mask; softmax; dropout; @ v.
  int kt = k;
  if (!r.k_transposed) {
    std::vector<int64_t> shape = kshape;
    std::vector<int64_t> strides = s_.vals[k].strides;
    std::swap(shape[shape.size() - 1], shape[shape.size() - 2]);
    std::swap(strides[strides.size() - 1], strides[strides.size() - 2]);
    kt = Synthetic(s_.vals[k].name + ".T", shape, s_.vals[k].dtype, strides, k);
    s_.vals[kt].requires_grad = s_.vals[k].requires_grad;
    ExecOp op;
    op.label = label + "/transpose";
    op.op_type = op_names::kTranspose;
    op.view = true;
    op.in = {k};
    op.out = {kt};
    op.grad_in = {s_.vals[k].requires_grad};
    op.grad_kind = GradKind::kAlias;
    s_.ops.push_back(op);
  }
  std::vector<int64_t> sshape(qshape.begin(), qshape.end() - 1);
  sshape.push_back(sk);
  const OpDef* matmul = FindOp("", op_names::kMatMul);
  auto make = [&](const std::string& suffix, DType t) {
    const int x = Synthetic(label + "/" + suffix, sshape, t, {}, -1);
    return x;
  };
  const int64_t s2 = SatProduct({bh, sq, sk});
  int scores = make("scores", dt);
  AddCompute(op_names::kMatMul, label + "/scores", -1, matmul, {q, kt}, {scores}, nullptr,
             SatProduct({2, s2, d}));
  // The saved operands are the (possibly copied) inputs of that matmul.
  ExecOp& mm = s_.ops.back();
  std::vector<SavedRef> mm_saves = {{mm.in[0], 0, ""}, {mm.in[1], 0, ""}};
  mm.saved = train ? mm_saves : std::vector<SavedRef>{};
  int cur = scores;
  const int scaled = make("scaled", s_.vals[cur].dtype);
  const std::vector<SavedRef> none;
  AddCompute(op_names::kDiv, label + "/scale", -1, FindOp("", op_names::kDiv), {cur, -1}, {scaled},
             &none, s2);
  cur = scaled;
  if (mask >= 0) {
    const int masked = make("masked", s_.vals[cur].dtype);
    AddCompute(op_names::kAdd, label + "/mask", -1, FindOp("", op_names::kAdd), {cur, mask},
               {masked}, &none, s2);
    cur = masked;
  }
  // Autocast's softmax writes fp32 from half input.
  const int probs = make("probs", amp ? DType::kFloat : dt);
  std::vector<SavedRef> soft_saves = {{probs, 0, ""}};
  AddCompute(op_names::kSoftmax, label + "/softmax", -1, FindOp("", op_names::kSoftmax), {cur},
             {probs}, &soft_saves, SatMulNonNeg(5, s2));
  cur = probs;
  if (r.dropout > 0.0) {
    const int dropped = make("dropout", s_.vals[cur].dtype);
    std::vector<SavedRef> drop_saves = {{-1, BytesOf(sshape, DType::kBool), "mask"}};
    AddCompute(op_names::kDropout, label + "/dropout", -1, FindOp("", op_names::kDropout), {cur},
               {dropped}, &drop_saves, s2);
    cur = dropped;
  }
  if (amp && s_.vals[cur].dtype == DType::kFloat) {
    cur = CastVal(cur, half, false, "autocast(" + label + "/context)");
  }
  AddCompute(op_names::kMatMul, label + "/context", -1, matmul, {cur, v}, {out}, nullptr,
             SatProduct({2, bh, sq, sk, dv}));
  ExecOp& mm2 = s_.ops.back();
  std::vector<SavedRef> mm2_saves = {{mm2.in[0], 0, ""}, {mm2.in[1], 0, ""}};
  mm2.saved = train ? mm2_saves : std::vector<SavedRef>{};
  s_.vals[out].strides = ContiguousStrides(oshape);
}

Result<Schedule> Builder::Build() {
  InitVals();
  auto order = TopologicalOrder(g_);
  if (!order.ok()) return order.status();
  for (AttentionRegion& r : FindAttentionRegions(g_)) {
    for (int ni : r.nodes) skipped_nodes_.insert(ni);
    regions_[r.last_node] = std::move(r);
  }
  for (FusedRegion& r : FindFusedRegions(g_)) {
    for (int ni : r.nodes) skipped_nodes_.insert(ni);
    fused_[r.last_node] = std::move(r);
  }
  for (int ni : order.value()) {
    const size_t first_op = s_.ops.size();
    ProcessNode(ni);
    const int seg = SegmentOf(g_.nodes[ni].scope);
    for (size_t k = first_op; k < s_.ops.size(); ++k) s_.ops[k].segment = seg;
  }
  return std::move(s_);
}

int Builder::SegmentOf(const std::string& scope) const {
  if (o_.mode != Mode::kTrain) return -1;
  for (size_t i = 0; i < o_.checkpoint_segments.size(); ++i) {
    const std::string& m = o_.checkpoint_segments[i];
    if (scope == m ||
        (scope.size() > m.size() && scope.compare(0, m.size(), m) == 0 && scope[m.size()] == '.')) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

// One native_group_norm for an exported decomposition (see fusion.h). It
// runs in float32 under autocast (autocast_mode.h, AT_FORALL_FP32) and keeps
// its input, the weight, and mean and rstd of [N, G] in the input's dtype
// (tools/autograd/derivatives.yaml, native_group_norm).
void Builder::AddGroupNorm(const FusedRegion& r, int ni, const OpDef* def) {
  const std::string label = g_.nodes[ni].Label(ni);
  int x = val_of_[r.input];
  if (IsAmp(o_.precision) && IsHalf(s_.vals[x].dtype)) {
    x = CastVal(x, DType::kFloat, false, "autocast(" + label + ")");
  }
  std::vector<int> in = {x};
  if (r.weight >= 0) {
    in.push_back(val_of_[r.weight]);
    in.push_back(val_of_[r.bias]);
  }
  const Val& xv = s_.vals[x];
  std::vector<SavedRef> saves = {{x, 0, ""}};
  if (r.weight >= 0) saves.push_back({in[1], 0, ""});
  const std::vector<int64_t> stats = {xv.shape.empty() ? 0 : xv.shape[0], r.groups};
  saves.push_back({-1, BytesOf(stats, xv.dtype), "mean"});
  saves.push_back({-1, BytesOf(stats, xv.dtype), "rstd"});
  int64_t numel = 0;
  CheckedNumel(xv.shape, &numel);
  AddCompute(r.op_type, label, ni, def, in, {r.output}, &saves, SatMulNonNeg(8, numel));
  GroupNormWorkspaces(xv, r.groups, r.weight >= 0, &s_.ops.back());
}

void Builder::ProcessNode(int ni) {
  {
    auto fit = fused_.find(ni);
    if (fit != fused_.end()) {
      const FusedRegion& r = fit->second;
      const OpDef* def = FindOp("", r.op_type);
      if (def && def->group_norm_workspaces) {
        AddGroupNorm(r, ni, def);
        return;
      }
      AddCompute(r.op_type, g_.nodes[ni].Label(ni), ni, def, {val_of_[r.input]}, {r.output},
                 nullptr, -1);
      if (o_.mode == Mode::kTrain && s_.vals[val_of_[r.input]].requires_grad) {
        s_.ops.back().saved = {SavedRef{s_.ops.back().in[0], 0, ""}};
      }
      return;
    }
    auto it = regions_.find(ni);
    if (it != regions_.end()) {
      AppendAttention(it->second, g_.nodes[ni].Label(ni));
      ++s_.attention_regions;
      return;
    }
    if (skipped_nodes_.count(ni)) return;
    AddNode(ni);
  }
}

}  // namespace

Result<Schedule> BuildSchedule(const Graph& g, const PlanOptions& options) {
  Builder b(g, options);
  Result<Schedule> s = b.Build();
  if (s.ok()) MarkModuleArguments(g, &s.value());
  return s;
}

}  // namespace memplan
