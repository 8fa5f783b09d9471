#include "planner/fusion.h"

#include <cmath>
#include <set>

#include "planner/op_registry.h"
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
  if (!((s.op_type == "Div" && Near(c, std::sqrt(2.0))) ||
        (s.op_type == "Mul" && Near(c, 1.0 / std::sqrt(2.0))))) {
    return false;
  }
  const int x = s.inputs[0];
  if (OnlyConsumer(g, scaled) != erf) return false;
  // 1 + erf(.)
  const int add = OnlyConsumer(g, e.outputs[0]);
  if (add < 0 || g.nodes[add].op_type != "Add") return false;
  double one = 0;
  if (!ConstantInput(g, add, OtherSlot(g.nodes[add], e.outputs[0]), &one) || !Near(one, 1.0)) {
    return false;
  }
  const int a = g.nodes[add].outputs[0];
  // x * (1 + erf) * 0.5, in either association.
  const int m1 = OnlyConsumer(g, a);
  if (m1 < 0 || g.nodes[m1].op_type != "Mul") return false;
  const int other = OtherInput(g.nodes[m1], a);
  std::vector<int> nodes = {sp, erf, add, m1};
  int out = -1;
  if (other == x) {
    const int m2 = OnlyConsumer(g, g.nodes[m1].outputs[0]);
    double half = 0;
    if (m2 < 0 || g.nodes[m2].op_type != "Mul" ||
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
    if (hp < 0 || g.nodes[hp].op_type != "Mul" || OnlyConsumer(g, other) != m1 ||
        g.nodes[hp].inputs.size() != 2 || g.nodes[hp].inputs[0] != x ||
        !ConstantInput(g, hp, 1, &half) || !Near(half, 0.5)) {
      return false;
    }
    nodes.push_back(hp);
    out = g.nodes[m1].outputs[0];
  }
  r->op_type = "Gelu";
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
  if (m < 0 || g.nodes[m].op_type != "Mul" || !g.nodes[m].domain.empty() ||
      OtherInput(g.nodes[m], s.outputs[0]) != x || g.nodes[m].outputs.empty()) {
    return false;
  }
  r->op_type = "Swish";
  r->nodes = {sig, m};
  r->last_node = m;
  r->input = x;
  r->output = g.nodes[m].outputs[0];
  return true;
}

}  // namespace

std::vector<FusedRegion> FindFusedRegions(const Graph& g) {
  std::vector<FusedRegion> out;
  for (int i = 0; i < static_cast<int>(g.nodes.size()); ++i) {
    if (!g.nodes[i].domain.empty()) continue;
    FusedRegion r;
    if (g.nodes[i].op_type == "Erf" && TryGelu(g, i, &r)) out.push_back(std::move(r));
    if (g.nodes[i].op_type == "Sigmoid" && TrySilu(g, i, &r)) out.push_back(std::move(r));
  }
  return out;
}

}  // namespace memplan
