#include "planner/fusion.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "planner/op_registry.h"
#include "planner/ops/op_names.h"
#include "planner/ops/op_util.h"

namespace memplan {
namespace {

// The constant feeding input `slot` of node `ni`, if it is one.
bool ConstantInput(const Graph& g, int ni, int slot, double* v) {
  const Node& n = g.nodes[ni];
  if (slot >= static_cast<int>(n.inputs.size()) || n.inputs[slot] < 0) return false;
  const Tensor& t = g.tensors[n.inputs[slot]];
  int64_t numel = 1;
  for (int64_t d : t.shape) numel *= d;
  if (numel != 1) return false;
  ShapeContext ctx(const_cast<Graph*>(&g), ni);
  return InputConstantFloat(ctx, slot, v);
}

bool Near(double a, double b) { return std::fabs(a - b) < 1e-3 * std::fabs(b); }

// The single consumer of tensor t, or -1.
int OnlyConsumer(const Graph& g, int t) {
  const auto& c = g.tensors[t].consumers;
  if (c.size() != 1) return -1;
  for (int o : g.outputs) {
    if (o == t) return -1;
  }
  return c[0];
}

// The other input of a binary node, given one input tensor.
int OtherInput(const Node& n, int t) {
  if (n.inputs.size() != 2) return -1;
  if (n.inputs[0] == t) return n.inputs[1];
  if (n.inputs[1] == t) return n.inputs[0];
  return -1;
}

// Slot of the input of binary node n that is not t.
int OtherSlot(const Node& n, int t) { return n.inputs[0] == t ? 1 : 0; }

bool TryGelu(const Graph& g, int erf, FusedRegion* r) {
  const Node& e = g.nodes[erf];
  if (e.inputs.empty() || e.inputs[0] < 0 || e.outputs.empty()) return false;
  // x / sqrt(2) or x * (1 / sqrt(2)).
  const int scaled = e.inputs[0];
  const int sp = g.tensors[scaled].producer;
  if (sp < 0) return false;
  const Node& s = g.nodes[sp];
  double c = 0;
  if (s.inputs.size() != 2 || !ConstantInput(g, sp, 1, &c)) return false;
  if (!((s.op_type == op_names::kDiv && Near(c, std::sqrt(2.0))) ||
        (s.op_type == op_names::kMul && Near(c, 1.0 / std::sqrt(2.0))))) {
    return false;
  }
  const int x = s.inputs[0];
  if (OnlyConsumer(g, scaled) != erf) return false;
  // 1 + erf(.)
  const int add = OnlyConsumer(g, e.outputs[0]);
  if (add < 0 || g.nodes[add].op_type != op_names::kAdd) return false;
  double one = 0;
  if (!ConstantInput(g, add, OtherSlot(g.nodes[add], e.outputs[0]), &one) || !Near(one, 1.0)) {
    return false;
  }
  const int a = g.nodes[add].outputs[0];
  // x * (1 + erf) * 0.5, in either association.
  const int m1 = OnlyConsumer(g, a);
  if (m1 < 0 || g.nodes[m1].op_type != op_names::kMul) return false;
  const int other = OtherInput(g.nodes[m1], a);
  std::vector<int> nodes = {sp, erf, add, m1};
  int out = -1;
  if (other == x) {
    const int m2 = OnlyConsumer(g, g.nodes[m1].outputs[0]);
    double half = 0;
    if (m2 < 0 || g.nodes[m2].op_type != op_names::kMul ||
        !ConstantInput(g, m2, OtherSlot(g.nodes[m2], g.nodes[m1].outputs[0]), &half) ||
        !Near(half, 0.5)) {
      return false;
    }
    nodes.push_back(m2);
    out = g.nodes[m2].outputs[0];
  } else {
    // (x * 0.5) * (1 + erf)
    const int hp = other >= 0 ? g.tensors[other].producer : -1;
    double half = 0;
    if (hp < 0 || g.nodes[hp].op_type != op_names::kMul || OnlyConsumer(g, other) != m1 ||
        g.nodes[hp].inputs.size() != 2 || g.nodes[hp].inputs[0] != x ||
        !ConstantInput(g, hp, 1, &half) || !Near(half, 0.5)) {
      return false;
    }
    nodes.push_back(hp);
    out = g.nodes[m1].outputs[0];
  }
  r->op_type = op_names::kGelu;
  r->nodes = nodes;
  r->last_node = g.tensors[out].producer;
  r->input = x;
  r->output = out;
  return true;
}

// x * sigmoid(x): how exporters write F.silu (nn.SiLU). PyTorch runs one
// silu that keeps x; the pieces would keep x and sigmoid(x).
bool TrySilu(const Graph& g, int sig, FusedRegion* r) {
  const Node& s = g.nodes[sig];
  if (s.inputs.size() != 1 || s.inputs[0] < 0 || s.outputs.empty() || s.outputs[0] < 0) {
    return false;
  }
  const int x = s.inputs[0];
  const int m = OnlyConsumer(g, s.outputs[0]);
  if (m < 0 || g.nodes[m].op_type != op_names::kMul || !g.nodes[m].domain.empty() ||
      OtherInput(g.nodes[m], s.outputs[0]) != x || g.nodes[m].outputs.empty()) {
    return false;
  }
  r->op_type = op_names::kSwish;
  r->nodes = {sig, m};
  r->last_node = m;
  r->input = x;
  r->output = g.nodes[m].outputs[0];
  return true;
}

// Split(x) -> (a, b), a * sigmoid(b): how both exporters write F.glu (nn.GLU)
// (torchlib's aten_glu, the TorchScript symbolic). PyTorch runs one glu that
// keeps x; the pieces would keep x (through the view a) and sigmoid(b).
bool TryGlu(const Graph& g, int sig, FusedRegion* r) {
  const Node& s = g.nodes[sig];
  if (s.inputs.size() != 1 || s.inputs[0] < 0 || s.outputs.empty() || s.outputs[0] < 0) {
    return false;
  }
  const int b = s.inputs[0];
  const int sp = g.tensors[b].producer;
  if (sp < 0) return false;
  const Node& split = g.nodes[sp];
  if (split.op_type != op_names::kSplit || !split.domain.empty() || split.inputs.empty() ||
      split.inputs[0] < 0 || split.outputs.size() != 2 || split.outputs[1] != b ||
      split.outputs[0] < 0) {
    return false;
  }
  const int x = split.inputs[0];
  const int a = split.outputs[0];
  if (g.tensors[a].shape != g.tensors[b].shape || OnlyConsumer(g, b) != sig) return false;
  const int m = OnlyConsumer(g, s.outputs[0]);
  if (m < 0 || g.nodes[m].op_type != op_names::kMul || !g.nodes[m].domain.empty() ||
      OtherInput(g.nodes[m], s.outputs[0]) != a || OnlyConsumer(g, a) != m ||
      g.nodes[m].outputs.empty() || g.nodes[m].outputs[0] < 0) {
    return false;
  }
  r->op_type = op_names::kGlu;
  r->nodes = {sp, sig, m};
  r->last_node = m;
  r->input = x;
  r->output = g.nodes[m].outputs[0];
  return true;
}

// The initializer that tensor t is a view or cast of (Unsqueeze, CastLike,
// ...), collecting the nodes on the way; -1 when t is not one.
int ParameterBehind(const Graph& g, int t, std::vector<int>* chain) {
  while (t >= 0) {
    const Tensor& tt = g.tensors[t];
    if (tt.kind == TensorKind::kInitializer) return t;
    const int p = tt.producer;
    const OpDef* def = p >= 0 && g.nodes[p].domain.empty() ? OpOf(g.nodes[p]) : nullptr;
    if (def == nullptr || !(IsReshapeView(*def) || IsCast(*def)) || g.nodes[p].inputs.empty() ||
        OnlyConsumer(g, t) < 0) {
      return -1;
    }
    chain->push_back(p);
    t = g.nodes[p].inputs[0];
  }
  return -1;
}

// The nodes that make constant t (Constant, Expand, CastLike chains) when
// nothing else reads them.
void ConstantMakers(const Graph& g, int t, std::vector<int>* nodes) {
  while (t >= 0) {
    const int p = g.tensors[t].producer;
    const OpDef* def = p >= 0 && g.nodes[p].domain.empty() ? OpOf(g.nodes[p]) : nullptr;
    const bool maker = def != nullptr && (def->fills_constant || IsExpandView(*def) ||
                                          IsReshapeView(*def) || IsCast(*def));
    if (!maker || OnlyConsumer(g, t) < 0) return;
    nodes->push_back(p);
    t = g.nodes[p].inputs.empty() ? -1 : g.nodes[p].inputs[0];
  }
}

// The single node that reads tensor t as data, or -1. CastLike nodes that
// read t only for its dtype (their second input, as torchlib writes
// `weight.to(x.dtype)`) are not counted; they go to `dtype_readers`.
int DataConsumer(const Graph& g, int t, std::vector<int>* dtype_readers) {
  for (int o : g.outputs) {
    if (o == t) return -1;
  }
  int only = -1;
  for (int c : g.tensors[t].consumers) {
    const Node& n = g.nodes[c];
    if (n.op_type == op_names::kCastLike && n.domain.empty() && n.inputs.size() == 2 &&
        n.inputs[1] == t && n.inputs[0] != t) {
      dtype_readers->push_back(c);
      continue;
    }
    if (only >= 0 && only != c) return -1;
    only = c;
  }
  return only;
}

int64_t NumelOf(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// F.group_norm as both exporters write it (torchlib's aten_group_norm and the
// TorchScript symbolic): x [N, C, ...] -> Reshape [N, G, -1] ->
// InstanceNormalization (scale 1, bias 0 of G values) -> Reshape to x's shape
// [-> Mul weight [C, 1, ...] -> Add bias]. PyTorch runs one native_group_norm
// that keeps x, the weight and mean / rstd of [N, G]; the pieces would keep
// the normalised tensor too and allocate one more of x's size.
bool TryGroupNorm(const Graph& g, int inorm, FusedRegion* r) {
  const Node& n = g.nodes[inorm];
  if (n.inputs.size() != 3 || n.outputs.empty() || n.outputs[0] < 0) return false;
  for (int t : n.inputs) {
    if (t < 0) return false;
  }
  const int folded = n.inputs[0];
  const int rp = g.tensors[folded].producer;
  if (rp < 0 || g.nodes[rp].op_type != op_names::kReshape || !g.nodes[rp].domain.empty() ||
      g.nodes[rp].inputs.empty() || g.nodes[rp].inputs[0] < 0 || OnlyConsumer(g, folded) != inorm) {
    return false;
  }
  const int x = g.nodes[rp].inputs[0];
  const std::vector<int64_t>& xs = g.tensors[x].shape;
  const std::vector<int64_t>& fs = g.tensors[folded].shape;
  if (xs.size() < 3 || fs.size() != 3 || fs[0] != xs[0] || fs[1] < 1 || xs[1] % fs[1] != 0 ||
      NumelOf(fs) != NumelOf(xs)) {
    return false;
  }
  const int64_t groups = fs[1];
  for (int slot = 1; slot < 3; ++slot) {
    if (g.tensors[n.inputs[slot]].shape != std::vector<int64_t>{groups}) return false;
  }
  const int normed = n.outputs[0];
  const int back = OnlyConsumer(g, normed);
  if (back < 0 || g.nodes[back].op_type != op_names::kReshape || !g.nodes[back].domain.empty() ||
      g.nodes[back].outputs.empty() || g.nodes[back].outputs[0] < 0 ||
      g.tensors[g.nodes[back].outputs[0]].shape != xs) {
    return false;
  }
  std::vector<int> nodes = {rp, inorm, back};
  ConstantMakers(g, n.inputs[1], &nodes);
  ConstantMakers(g, n.inputs[2], &nodes);
  int out = g.nodes[back].outputs[0];
  int weight = -1;
  int bias = -1;
  // The affine part: * weight [C, 1, ...] + bias [C, 1, ...].
  std::vector<int> dtype_readers;
  const int mul = DataConsumer(g, out, &dtype_readers);
  if (mul >= 0 && g.nodes[mul].op_type == op_names::kMul && g.nodes[mul].domain.empty() &&
      !g.nodes[mul].outputs.empty() && g.nodes[mul].outputs[0] >= 0) {
    std::vector<int> wchain;
    const int w = ParameterBehind(g, OtherInput(g.nodes[mul], out), &wchain);
    const int prod = g.nodes[mul].outputs[0];
    const int add = DataConsumer(g, prod, &dtype_readers);
    std::vector<int> bchain;
    const int b = add >= 0 && g.nodes[add].op_type == op_names::kAdd &&
                          g.nodes[add].domain.empty() && !g.nodes[add].outputs.empty() &&
                          g.nodes[add].outputs[0] >= 0
                      ? ParameterBehind(g, OtherInput(g.nodes[add], prod), &bchain)
                      : -1;
    // Whatever reads the inner tensors for their dtype must be a cast of the
    // weight or bias (replaced too).
    bool readers_inside = true;
    for (int c : dtype_readers) {
      const bool in_w = std::find(wchain.begin(), wchain.end(), c) != wchain.end();
      const bool in_b = std::find(bchain.begin(), bchain.end(), c) != bchain.end();
      readers_inside = readers_inside && (in_w || in_b);
    }
    if (w >= 0 && b >= 0 && readers_inside && NumelOf(g.tensors[w].shape) == xs[1] &&
        NumelOf(g.tensors[b].shape) == xs[1] && g.tensors[g.nodes[add].outputs[0]].shape == xs) {
      weight = w;
      bias = b;
      nodes.push_back(mul);
      nodes.push_back(add);
      nodes.insert(nodes.end(), wchain.begin(), wchain.end());
      nodes.insert(nodes.end(), bchain.begin(), bchain.end());
      out = g.nodes[add].outputs[0];
    }
  }
  r->op_type = op_names::kGroupNormalization;
  r->nodes = nodes;
  r->last_node = g.tensors[out].producer;
  r->input = x;
  r->output = out;
  r->weight = weight;
  r->bias = bias;
  r->groups = groups;
  return true;
}

// Weight norm (torch.nn.utils.parametrizations.weight_norm, or the older
// hook) as the exporters write torch._weight_norm(v, g, dim): ReduceL2 of
// the parameter v over every dim but `dim` (kept) -> Div(v, norm) ->
// Mul(., g), g a parameter of the norm's size. On CUDA PyTorch runs one
// kernel for `dim` first or last (_weight_norm_interface): it makes w and
// the float32 norms and keeps v, g and the norms for backward, where the
// pieces would also make v / ||v|| and keep it.
bool TryWeightNorm(const Graph& g, int reduce, FusedRegion* r) {
  const Node& n = g.nodes[reduce];
  if (n.inputs.empty() || n.inputs[0] < 0 || n.outputs.empty() || n.outputs[0] < 0) return false;
  const int v = n.inputs[0];
  if (g.tensors[v].kind != TensorKind::kInitializer) return false;
  const std::vector<int64_t>& vs = g.tensors[v].shape;
  const int norm = n.outputs[0];
  const std::vector<int64_t>& ns = g.tensors[norm].shape;
  if (vs.size() < 2 || ns.size() != vs.size()) return false;
  int kept = -1;
  for (size_t d = 0; d < vs.size(); ++d) {
    if (ns[d] == vs[d] && vs[d] != 1) {
      if (kept >= 0) return false;
      kept = static_cast<int>(d);
    } else if (ns[d] != 1) {
      return false;
    }
  }
  if (kept != 0 && kept != static_cast<int>(vs.size()) - 1) return false;
  const int div = OnlyConsumer(g, norm);
  if (div < 0 || g.nodes[div].op_type != op_names::kDiv || !g.nodes[div].domain.empty() ||
      g.nodes[div].inputs.size() != 2 || g.nodes[div].inputs[0] != v ||
      g.nodes[div].inputs[1] != norm || g.nodes[div].outputs.empty() ||
      g.nodes[div].outputs[0] < 0) {
    return false;
  }
  const int unit = g.nodes[div].outputs[0];
  const int mul = OnlyConsumer(g, unit);
  if (mul < 0 || g.nodes[mul].op_type != op_names::kMul || !g.nodes[mul].domain.empty() ||
      g.nodes[mul].outputs.empty() || g.nodes[mul].outputs[0] < 0) {
    return false;
  }
  std::vector<int> gchain;
  const int gain = ParameterBehind(g, OtherInput(g.nodes[mul], unit), &gchain);
  const int w = g.nodes[mul].outputs[0];
  if (gain < 0 || NumelOf(g.tensors[gain].shape) != NumelOf(ns) || g.tensors[w].shape != vs) {
    return false;
  }
  r->op_type = op_names::kWeightNorm;
  r->nodes = {reduce, div, mul};
  r->nodes.insert(r->nodes.end(), gchain.begin(), gchain.end());
  r->last_node = mul;
  r->input = v;
  r->output = w;
  r->weight = gain;
  return true;
}

}  // namespace

std::vector<FusedRegion> FindFusedRegions(const Graph& g) {
  std::vector<FusedRegion> out;
  for (int i = 0; i < static_cast<int>(g.nodes.size()); ++i) {
    if (!g.nodes[i].domain.empty()) continue;
    FusedRegion r;
    if (g.nodes[i].op_type == op_names::kErf && TryGelu(g, i, &r)) out.push_back(std::move(r));
    if (g.nodes[i].op_type == op_names::kSigmoid && TrySilu(g, i, &r)) out.push_back(std::move(r));
    if (g.nodes[i].op_type == op_names::kSigmoid && TryGlu(g, i, &r)) out.push_back(std::move(r));
    if (g.nodes[i].op_type == op_names::kInstanceNormalization && TryGroupNorm(g, i, &r)) {
      out.push_back(std::move(r));
    }
    if (g.nodes[i].op_type == op_names::kReduceL2 && TryWeightNorm(g, i, &r)) {
      out.push_back(std::move(r));
    }
  }
  return out;
}

// RMSNorm written as ops: Pow(x, 2) -> ReduceMean -> [Add eps] -> Sqrt ->
// Reciprocal (or Rsqrt) -> Mul(x, .) -> Mul(weight, .).
RmsNormOps FindRmsNormOps(const Graph& g) {
  RmsNormOps found;
  auto only = [&](int t, const char* op) {
    if (t < 0 || g.tensors[t].consumers.size() != 1) return -1;
    const int c = g.tensors[t].consumers[0];
    return g.nodes[c].op_type == op ? c : -1;
  };
  for (int ni = 0; ni < static_cast<int>(g.nodes.size()); ++ni) {
    const Node& p = g.nodes[ni];
    if (p.op_type != op_names::kPow || !p.domain.empty() || p.inputs.size() != 2 ||
        p.outputs.empty()) {
      continue;
    }
    ShapeContext ctx(const_cast<Graph*>(&g), ni);
    double e = 0.0;
    if (!InputConstantFloat(ctx, 1, &e) || e != 2.0) continue;
    int c = only(p.outputs[0], op_names::kReduceMean);
    if (c < 0) continue;
    int t = g.nodes[c].outputs[0];
    const int add = only(t, op_names::kAdd);
    if (add >= 0) t = g.nodes[add].outputs[0];
    int r = -1;
    const int sq = only(t, op_names::kSqrt);
    if (sq >= 0) {
      const int rc = only(g.nodes[sq].outputs[0], op_names::kReciprocal);
      if (rc >= 0) r = g.nodes[rc].outputs[0];
    } else {
      const int rs = only(t, op_names::kRsqrt);
      if (rs >= 0) r = g.nodes[rs].outputs[0];
    }
    if (r < 0) continue;
    bool any = false;
    const int x = p.inputs[0];
    // The Pow's own line (innermost frame) as the stack trace gives it.
    bool upcasts_inline = false;
    if (p.stack >= 0 && static_cast<size_t>(p.stack) < g.stacks.size() &&
        !g.stacks[p.stack].empty()) {
      const int f = g.stacks[p.stack].back();
      upcasts_inline = f >= 0 && static_cast<size_t>(f) < g.frames.size() &&
                       g.frames[f].statement.upcasts_inline;
    }
    for (int m : g.tensors[r].consumers) {
      const Node& mul = g.nodes[m];
      if (mul.op_type != op_names::kMul) continue;
      bool weighted = false;
      for (int w : g.tensors[mul.outputs[0]].consumers) {
        if (g.nodes[w].op_type == op_names::kMul) {
          found.weight_muls.insert(w);
          weighted = true;
        }
      }
      // x * rsqrt(mean(x^2) + eps): the same x the Pow squares.
      if (weighted && (mul.inputs[0] == x || mul.inputs[1] == x)) {
        found.normalize_muls.insert(m);
        if (upcasts_inline) found.half_input_muls.insert(m);
      }
      any = any || weighted;
    }
    if (any) found.mean_square_pows.insert(ni);
  }
  return found;
}

}  // namespace memplan
