#include "planner/params.h"

#include <string>

#include "planner/checked.h"
#include "planner/op_registry.h"

namespace memplan {
namespace {

// True when input `slot` of `n` may be a trainable weight.
bool IsWeightSlot(const Node& n, int slot) {
  if (!n.domain.empty()) return false;
  const OpDef* def = FindOp(n.domain, n.op_type);
  return def && HasSlot(def->weight_inputs, slot);
}

// True when a weight at input `slot` of `n` stays one through it.
bool PassesWeight(const Node& n, int slot) {
  const OpDef* def = FindOp(n.domain, n.op_type);
  return slot == 0 && def && def->passes_weight;
}

// Follows `t` through pass-through ops; true when it reaches a weight slot.
bool ReachesWeightSlot(const Graph& g, int t, int depth) {
  if (depth > 8) return false;
  for (int ni : g.tensors[t].consumers) {
    const Node& n = g.nodes[ni];
    for (int slot = 0; slot < static_cast<int>(n.inputs.size()); ++slot) {
      if (n.inputs[slot] != t) continue;
      if (PassesWeight(n, slot)) {
        for (int out : n.outputs) {
          if (out >= 0 && ReachesWeightSlot(g, out, depth + 1)) return true;
        }
      } else if (IsWeightSlot(n, slot)) {
        return true;
      }
    }
  }
  return false;
}

int64_t DeclaredNumel(const Tensor& t) {
  int64_t n = 1;
  for (const Dim& d : t.declared) {
    if (!d.known() || !CheckedMul(n, d.value, &n)) return -1;
  }
  return n;
}

}  // namespace

std::vector<InitRole> ClassifyInitializers(const Graph& g) {
  std::vector<InitRole> roles(g.tensors.size(), InitRole::kConstant);
  for (int id : g.initializers) {
    const Tensor& t = g.tensors[id];
    if (!IsFloat(t.dtype) || DeclaredNumel(t) <= 1) continue;
    bool running_stat = false;
    for (int ni : t.consumers) {
      const Node& n = g.nodes[ni];
      const OpDef* def = FindOp(n.domain, n.op_type);
      if (!def) continue;
      for (size_t slot = 0; slot < n.inputs.size(); ++slot) {
        if (n.inputs[slot] == id && HasSlot(def->buffer_inputs, static_cast<int>(slot))) {
          running_stat = true;
        }
      }
    }
    roles[id] =
        (!running_stat && ReachesWeightSlot(g, id, 0)) ? InitRole::kParameter : InitRole::kBuffer;
  }
  return roles;
}

ParamSummary SummarizeParams(const Graph& g, const std::vector<InitRole>& roles) {
  ParamSummary s;
  for (int id : g.initializers) {
    const Tensor& t = g.tensors[id];
    int64_t numel = DeclaredNumel(t);
    int64_t bytes = 0;
    if (numel < 0 || !DTypeBytes(t.dtype, numel, &bytes)) continue;
    switch (roles[id]) {
      case InitRole::kParameter:
        s.parameter_count += numel;
        s.parameter_bytes += bytes;
        s.parameters.push_back(id);
        break;
      case InitRole::kBuffer:
        s.buffer_count += numel;
        s.buffer_bytes += bytes;
        s.buffers.push_back(id);
        break;
      case InitRole::kConstant:
        s.constant_bytes += bytes;
        break;
    }
  }
  return s;
}

}  // namespace memplan
