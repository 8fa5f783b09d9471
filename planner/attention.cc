#include "planner/attention.h"

#include <algorithm>
#include <set>
#include <string>

#include "planner/op_registry.h"
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
    if (n.op_type == "MatMul") return p;
    static const std::set<std::string> kOps = {"Add", "Sub", "Mul", "Div", "Where"};
    if (!kOps.count(n.op_type)) return -1;
    if (n.op_type == "Mul" || n.op_type == "Div") *scaled = true;
    int next = -1;
    for (size_t i = (n.op_type == "Where" ? 1 : 0); i < n.inputs.size(); ++i) {
      const int in = n.inputs[i];
      if (in < 0 || g.tensors[in].has_values) continue;
      if (g.tensors[in].shape != g.tensors[t].shape) continue;
      const int pp = Producer(g, in);
      if (pp < 0) continue;
      if (next < 0 || g.nodes[pp].op_type == "MatMul") next = in;
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
      if (n.op_type == "IsNaN") continue;
      if (n.op_type == "MatMul" && n.inputs[0] == t) return c;
      if (n.op_type == "Where" || n.op_type == "Dropout" || n.op_type == "Cast") {
        if (next_node >= 0 && next_node != c) return -1;
        next_node = c;
      } else {
        return -1;
      }
    }
    if (next_node < 0) return -1;
    const Node& n = g.nodes[next_node];
    if (n.op_type == "Dropout") {
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
    if ((n.op_type == "Mul" || n.op_type == "Div") && n.inputs.size() == 2 && n.inputs[1] >= 0 &&
        IsScalar(g.tensors[n.inputs[1]])) {
      *scaled = true;
      t = n.inputs[0];
    } else if (allow_layout && (n.op_type == "Transpose" || n.op_type == "Reshape")) {
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

std::vector<AttentionRegion> FindAttentionRegions(const Graph& g) {
  std::vector<AttentionRegion> out;
  std::set<int> used;
  for (int i = 0; i < static_cast<int>(g.nodes.size()); ++i) {
    if (g.nodes[i].op_type != "Softmax" || !g.nodes[i].domain.empty()) continue;
    AttentionRegion r;
    if (!TryRegion(g, i, &r)) continue;
    bool overlap = false;
    for (int ni : r.nodes) overlap = overlap || used.count(ni);
    if (overlap) continue;
    used.insert(r.nodes.begin(), r.nodes.end());
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace memplan
