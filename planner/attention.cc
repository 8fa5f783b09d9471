#include "planner/attention.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "planner/layout.h"
#include "planner/op_registry.h"
#include "planner/ops/op_names.h"
#include "planner/ops/op_util.h"

namespace memplan {
namespace {

bool IsScalar(const Tensor& t) {
  int64_t n = 1;
  for (int64_t d : t.shape) n *= d;
  return t.shape_known && n == 1;
}

int Producer(const Graph& g, int t) { return t >= 0 ? g.tensors[t].producer : -1; }

// Walks back from the Softmax input through mask/scale ops to the scores MatMul.
int FindScoresMatMul(const Graph& g, int t, bool* scaled) {
  for (int depth = 0; depth < 8 && t >= 0; ++depth) {
    const int p = Producer(g, t);
    if (p < 0) return -1;
    const Node& n = g.nodes[p];
    if (n.op_type == op_names::kMatMul) return p;
    const OpDef* def = OpOf(n);
    const ScoreEdit edit = def ? def->score_edit : ScoreEdit::kNone;
    if (edit == ScoreEdit::kNone) return -1;
    if (edit == ScoreEdit::kScale) *scaled = true;
    int next = -1;
    for (size_t i = (edit == ScoreEdit::kSelect ? 1 : 0); i < n.inputs.size(); ++i) {
      const int in = n.inputs[i];
      if (in < 0 || g.tensors[in].has_values) continue;
      if (g.tensors[in].shape != g.tensors[t].shape) continue;
      const int pp = Producer(g, in);
      if (pp < 0) continue;
      if (next < 0 || g.nodes[pp].op_type == op_names::kMatMul) next = in;
    }
    t = next;
  }
  return -1;
}

// Walks forward from the Softmax output through guard/dropout/cast ops to the
// MatMul that applies the probabilities to v.
int FindValueMatMul(const Graph& g, int t, double* dropout, std::vector<int>* dropout_nodes) {
  for (int depth = 0; depth < 8 && t >= 0; ++depth) {
    int next_node = -1;
    for (int c : g.tensors[t].consumers) {
      const Node& n = g.nodes[c];
      if (n.op_type == op_names::kIsNaN) continue;
      if (n.op_type == op_names::kMatMul && n.inputs[0] == t) return c;
      // A NaN guard's Where, dropout, a cast pass the probabilities on.
      const OpDef* def = OpOf(n);
      if (def && (def->score_edit == ScoreEdit::kSelect || def->eval_identity || IsCast(*def))) {
        if (next_node >= 0 && next_node != c) return -1;
        next_node = c;
      } else {
        return -1;
      }
    }
    if (next_node < 0) return -1;
    const Node& n = g.nodes[next_node];
    if (n.op_type == op_names::kDropout) {
      dropout_nodes->push_back(next_node);
      double ratio = 0.5;
      if (n.inputs.size() > 1 && n.inputs[1] >= 0) {
        ShapeContext ctx(const_cast<Graph*>(&g), next_node);
        if (!InputConstantFloat(ctx, 1, &ratio)) ratio = 0.5;
      } else if (n.Has("ratio")) {
        ratio = n.GetFloat("ratio", 0.5f);
      }
      *dropout = ratio;
    }
    t = n.outputs.empty() ? -1 : n.outputs[0];
  }
  return -1;
}

// Walks back from a MatMul operand through scalar scaling (and, for k,
// transposes and reshapes) to the tensor the attention call received: the
// furthest one whose leading dims match q's and whose last two dims are
// {S, D} in either order (so a head split is not undone).
int OriginOf(const Graph& g, int t, bool allow_layout, const std::vector<int64_t>& lead, int64_t s,
             int64_t d, bool* scaled) {
  auto fits = [&](int x) {
    const std::vector<int64_t>& sh = g.tensors[x].shape;
    if (sh.size() != lead.size() + 2) return false;
    if (!std::equal(lead.begin(), lead.end(), sh.begin())) return false;
    const int64_t a = sh[sh.size() - 2];
    const int64_t b = sh.back();
    return (a == s && b == d) || (a == d && b == s);
  };
  int best = t;
  for (int depth = 0; depth < 8; ++depth) {
    const int p = Producer(g, t);
    if (p < 0) break;
    const Node& n = g.nodes[p];
    const OpDef* def = OpOf(n);
    if (def == nullptr) break;
    if (def->score_edit == ScoreEdit::kScale && n.inputs.size() == 2 && n.inputs[1] >= 0 &&
        IsScalar(g.tensors[n.inputs[1]])) {
      *scaled = true;
      t = n.inputs[0];
    } else if (allow_layout && (IsTransposeView(*def) || IsReshapeView(*def))) {
      t = n.inputs[0];
    } else {
      break;
    }
    if (fits(t)) best = t;
  }
  return best;
}

bool TryRegion(const Graph& g, int softmax, AttentionRegion* r) {
  const Node& s = g.nodes[softmax];
  if (s.inputs.empty() || s.outputs.empty() || s.inputs[0] < 0) return false;
  bool scaled = false;
  const int m1 = FindScoresMatMul(g, s.inputs[0], &scaled);
  if (m1 < 0) return false;
  std::vector<int> dropout_nodes;
  const int m2 = FindValueMatMul(g, s.outputs[0], &r->dropout, &dropout_nodes);
  if (m2 < 0) return false;
  const Node& mm1 = g.nodes[m1];
  const Node& mm2 = g.nodes[m2];
  if (mm1.inputs.size() != 2 || mm2.inputs.size() != 2) return false;
  const std::vector<int64_t>& q0 = g.tensors[mm1.inputs[0]].shape;
  if (q0.size() < 3) return false;
  const std::vector<int64_t> lead(q0.begin(), q0.end() - 2);
  const int64_t d = q0.back();
  const int64_t sq = q0[q0.size() - 2];
  const int64_t sk = g.tensors[s.inputs[0]].shape.back();
  r->q = OriginOf(g, mm1.inputs[0], false, lead, sq, d, &scaled);
  r->k = OriginOf(g, mm1.inputs[1], true, lead, sk, d, &scaled);
  r->v = mm2.inputs[1];
  r->out = mm2.outputs[0];
  r->last_node = m2;
  r->scale_before_matmul = scaled;
  const Tensor& q = g.tensors[r->q];
  const Tensor& k = g.tensors[r->k];
  if (q.shape.size() < 3 || k.shape.size() < 2) return false;
  r->k_transposed = !(k.shape.back() == d && k.shape[k.shape.size() - 2] == sk);
  // Nodes between {q, k, v} and the output: ancestors of the output that
  // depend on q, k or v.
  std::set<int> ancestors;
  std::vector<int> stack = {m2};
  const std::set<int> origins = {r->q, r->k, r->v};
  // Shape arithmetic (known values) never leads into the block.
  while (!stack.empty() && ancestors.size() < 4096) {
    const int ni = stack.back();
    stack.pop_back();
    if (!ancestors.insert(ni).second) continue;
    for (int in : g.nodes[ni].inputs) {
      if (in < 0 || origins.count(in) || g.tensors[in].has_values) continue;
      const int p = Producer(g, in);
      if (p >= 0) stack.push_back(p);
    }
  }
  std::vector<int> sorted(ancestors.begin(), ancestors.end());
  std::set<int> inside_tensors(origins.begin(), origins.end());
  std::set<int> region;
  // Iterate to a fixed point (file order need not be topological).
  for (bool changed = true; changed;) {
    changed = false;
    for (int ni : sorted) {
      if (region.count(ni)) continue;
      for (int in : g.nodes[ni].inputs) {
        if (in >= 0 && inside_tensors.count(in)) {
          region.insert(ni);
          for (int out : g.nodes[ni].outputs) {
            if (out >= 0) inside_tensors.insert(out);
          }
          changed = true;
          break;
        }
      }
    }
  }
  if (!region.count(m1) || !region.count(m2) || !region.count(softmax)) return false;
  // Inner tensors must stay inside; the block's other inputs are masks.
  int64_t mask_numel = 0;
  for (int ni : region) {
    for (int out : g.nodes[ni].outputs) {
      if (out < 0 || out == r->out) continue;
      for (int c : g.tensors[out].consumers) {
        if (!region.count(c)) return false;
      }
      for (int o : g.outputs) {
        if (o == out) return false;
      }
    }
    for (int in : g.nodes[ni].inputs) {
      if (in < 0 || inside_tensors.count(in)) continue;
      const Tensor& t = g.tensors[in];
      if (t.has_values || t.kind == TensorKind::kInitializer) continue;
      int64_t n = 1;
      for (int64_t dd : t.shape) n *= dd;
      if (n > 1 && n > mask_numel) {
        mask_numel = n;
        r->mask = in;
      }
    }
  }
  r->nodes.assign(region.begin(), region.end());
  return true;
}

}  // namespace

namespace {

std::vector<int64_t> Contiguous(const std::vector<int64_t>& shape) {
  std::vector<int64_t> st(shape.size(), 1);
  int64_t acc = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    st[i] = acc;
    acc *= std::max<int64_t>(shape[i], 1);
  }
  return st;
}

// The strides of a view of (shape, strides) as `to`, as aten's computeStride
// finds them; false when the view needs a copy.
bool ViewAs(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides,
            const std::vector<int64_t>& to, std::vector<int64_t>* out) {
  out->assign(to.size(), 1);
  if (shape.empty()) {
    *out = Contiguous(to);
    return true;
  }
  int view_d = static_cast<int>(to.size()) - 1;
  int64_t chunk = strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    tensor_numel *= shape[d];
    if (d == 0 || (shape[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk)) {
      while (view_d >= 0 && (view_numel < tensor_numel || to[view_d] == 1)) {
        (*out)[view_d] = view_numel * chunk;
        view_numel *= to[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return false;
      if (d > 0) {
        chunk = strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  return view_d == -1;
}

std::vector<int64_t> RuntimeStridesOf(const Graph& g, int t, int depth,
                                      std::map<int, std::vector<int64_t>>* memo) {
  const Tensor& x = g.tensors[t];
  const std::vector<int64_t> dense = Contiguous(x.shape);
  if (depth > 64 || x.producer < 0 || !x.shape_known) return dense;
  auto it = memo->find(t);
  if (it != memo->end()) return it->second;
  const Node& n = g.nodes[x.producer];
  std::vector<int64_t> st = dense;
  const int in = n.inputs.empty() ? -1 : n.inputs[0];
  const OpDef* def = n.domain.empty() ? OpOf(n) : nullptr;
  if (in >= 0 && g.tensors[in].shape_known && def != nullptr) {
    const std::vector<int64_t>& ishape = g.tensors[in].shape;
    if (IsTransposeView(*def)) {
      const std::vector<int64_t> is = RuntimeStridesOf(g, in, depth + 1, memo);
      std::vector<int64_t> perm = n.GetInts("perm");
      if (perm.empty()) {
        for (size_t i = ishape.size(); i-- > 0;) perm.push_back(static_cast<int64_t>(i));
      }
      if (perm.size() == is.size() && perm.size() == x.shape.size()) {
        for (size_t i = 0; i < perm.size(); ++i) st[i] = is[perm[i]];
      }
    } else if (IsReshapeView(*def)) {
      const std::vector<int64_t> is = RuntimeStridesOf(g, in, depth + 1, memo);
      std::vector<int64_t> v;
      if (ViewAs(ishape, is, x.shape, &v)) st = v;
    } else if (IsExpandView(*def)) {
      const std::vector<int64_t> is = RuntimeStridesOf(g, in, depth + 1, memo);
      const size_t off = x.shape.size() - std::min(x.shape.size(), ishape.size());
      for (size_t i = 0; i < x.shape.size(); ++i) {
        if (i < off) {
          st[i] = 0;
        } else {
          const size_t k = i - off;
          st[i] = (ishape[k] == 1 && x.shape[i] != 1) ? 0 : is[k];
        }
      }
    } else if (IsTensorIteratorOp(n.op_type)) {
      std::vector<StridedOperand> ops;
      for (int i : n.inputs) {
        if (i < 0 || !g.tensors[i].shape_known) continue;
        ops.push_back({g.tensors[i].shape, RuntimeStridesOf(g, i, depth + 1, memo)});
      }
      st = ElementwiseOutputStrides(x.shape, ops);
    }
  }
  (*memo)[t] = st;
  return st;
}

}  // namespace

std::vector<int64_t> RuntimeStrides(const Graph& g, int t) {
  std::map<int, std::vector<int64_t>> memo;
  return RuntimeStridesOf(g, t, 0, &memo);
}

bool DependsOnShapesOnly(const Graph& g, int t, bool* triangular) {
  if (triangular) *triangular = false;
  std::vector<int> stack = {t};
  std::set<int> seen;
  while (!stack.empty()) {
    const int x = stack.back();
    stack.pop_back();
    if (x < 0 || !seen.insert(x).second) continue;
    if (seen.size() > 4096) return false;
    const Tensor& tx = g.tensors[x];
    if (tx.producer >= 0) {
      const Node& c = g.nodes[tx.producer];
      const OpDef* def = OpOf(c);
      const MaskMaker maker = def ? def->mask_maker : MaskMaker::kNone;
      // Causal: a comparison of two position vectors broadcast against each
      // other (row index against column index), or a triangle (Trilu).
      if (triangular && maker == MaskMaker::kTriangle) *triangular = true;
      if (triangular && maker != MaskMaker::kNone && c.inputs.size() == 2 && c.inputs[0] >= 0 &&
          c.inputs[1] >= 0) {
        const Tensor& a = g.tensors[c.inputs[0]];
        const Tensor& b = g.tensors[c.inputs[1]];
        int64_t na = 1, nb = 1;
        for (int64_t d : a.shape) na *= d;
        for (int64_t d : b.shape) nb *= d;
        if (na > 1 && nb > 1 && a.shape != b.shape) *triangular = true;
      }
    }
    if (tx.has_values) continue;
    if (tx.kind == TensorKind::kGraphInput) return false;
    if (tx.kind == TensorKind::kInitializer) {
      int64_t n = 1;
      for (int64_t d : tx.shape) n *= d;
      if (IsFloat(tx.dtype) && n > 1) return false;
      continue;
    }
    if (tx.producer < 0) return false;
    const Node& n = g.nodes[tx.producer];
    const OpDef* def = OpOf(n);
    if (def && def->reads_dims_only) continue;  // reads no data
    if (!n.domain.empty() || !n.subgraphs.empty()) return false;
    for (int in : n.inputs) stack.push_back(in);
  }
  return true;
}

int BiasUnderFullMask(const Graph& g, int t) {
  const int p = g.tensors[t].producer;
  if (p < 0) return -1;
  const Node& n = g.nodes[p];
  if (n.op_type != op_names::kWhere || !n.domain.empty() || n.inputs.size() != 3) return -1;
  const int cond = n.inputs[0], bias = n.inputs[1], fill = n.inputs[2];
  if (cond < 0 || bias < 0 || fill < 0 || !DependsOnShapesOnly(g, fill)) return -1;
  bool triangular = false;
  if (!DependsOnShapesOnly(g, cond, &triangular) || triangular) return -1;
  return DependsOnShapesOnly(g, bias) ? -1 : bias;
}

int UnrepeatedHeads(const Graph& g, int t) {
  const std::vector<int64_t>& out = g.tensors[t].shape;
  if (out.size() != 4) return -1;
  int x = t;
  bool reshaped = false, expanded = false;
  for (int depth = 0; depth < 6; ++depth) {
    const int p = Producer(g, x);
    if (p < 0) return -1;
    const Node& n = g.nodes[p];
    // repeat_kv: Unsqueeze -> Expand -> Reshape (read backwards).
    if (n.op_type == op_names::kReshape && !reshaped) {
      reshaped = true;
    } else if (n.op_type == op_names::kIdentity) {
    } else if (n.op_type == op_names::kExpand && reshaped && !expanded) {
      expanded = true;
    } else if (n.op_type == op_names::kUnsqueeze && expanded) {
      const int src = n.inputs.empty() ? -1 : n.inputs[0];
      if (src < 0) return -1;
      const std::vector<int64_t>& in = g.tensors[src].shape;
      const std::vector<int64_t>& mid = g.tensors[n.outputs[0]].shape;
      if (in.size() != 4 || mid.size() != 5 || mid[2] != 1) return -1;
      if (in[0] != out[0] || in[2] != out[2] || in[3] != out[3]) return -1;
      if (in[1] <= 0 || in[1] >= out[1] || out[1] % in[1] != 0) return -1;
      return src;
    } else {
      return -1;
    }
    x = n.inputs.empty() ? -1 : n.inputs[0];
    if (x < 0) return -1;
  }
  return -1;
}

std::vector<AttentionRegion> FindAttentionRegions(const Graph& g) {
  std::vector<AttentionRegion> out;
  std::set<int> used;
  for (int i = 0; i < static_cast<int>(g.nodes.size()); ++i) {
    if (g.nodes[i].op_type != op_names::kSoftmax || !g.nodes[i].domain.empty()) continue;
    AttentionRegion r;
    if (!TryRegion(g, i, &r)) continue;
    bool overlap = false;
    for (int ni : r.nodes) overlap = overlap || used.count(ni);
    if (overlap) continue;
    used.insert(r.nodes.begin(), r.nodes.end());
    bool triangular = false;
    const bool shapes_only = r.mask >= 0 && DependsOnShapesOnly(g, r.mask, &triangular);
    r.causal_mask = shapes_only && triangular;
    r.full_mask = shapes_only && !triangular;
    if (r.mask >= 0 && !shapes_only) r.bias_mask = BiasUnderFullMask(g, r.mask);
    r.k_kv = UnrepeatedHeads(g, r.k);
    r.v_kv = UnrepeatedHeads(g, r.v);
    if (r.k_kv < 0 || r.v_kv < 0 || g.tensors[r.k_kv].shape[1] != g.tensors[r.v_kv].shape[1]) {
      r.k_kv = r.v_kv = -1;
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace memplan
