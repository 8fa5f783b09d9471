#include "planner/params.h"

#include <string>

#include "planner/checked.h"
#include "planner/op_registry.h"
#include "planner/shape_inference.h"

namespace memplan {
namespace {

// A weight stays one through it (reshape, transpose, cast).
bool IsPassThrough(const OpDef* def) { return def && def->passes_weight; }

// True when input slot `slot` of `n` is the weight slot of a compute op.
bool IsComputeWeightSlot(const Node& n, const OpDef* def, int slot) {
  return n.domain.empty() && def && HasSlot(def->weight_inputs, slot);
}

// Ops that only rearrange a weight's values on its way to a compute op:
// slices and their concatenation, as exporters write the gate reordering of
// recurrent weights (PyTorch's i,f,g,o rows become ONNX's i,o,f,c by Slice
// and Concat before the LSTM node).
bool IsRearranging(const Node& n, const OpDef* def, int slot) {
  if (!n.domain.empty() || !def) return false;
  if (def->rearranges_weight == WeightRearrange::kAllInputs) return true;
  return slot == 0 && (IsPassThrough(def) || def->rearranges_weight == WeightRearrange::kInput0);
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
  // Two reachabilities per tensor, from the last node back (each node and
  // each input edge once): `weight` reaches a compute op's weight slot
  // through pass-through and rearranging ops; `elementwise` reaches an
  // elementwise or Concat input through pass-through ops only (a slice of a
  // buffer multiplied in, such as a rotary cos/sin table, stays a buffer).
  std::vector<char> weight(g.tensors.size(), 0);
  std::vector<char> elementwise(g.tensors.size(), 0);
  Result<std::vector<int>> topo = TopologicalOrder(g);
  std::vector<int> order;
  if (topo.ok()) {
    order = std::move(topo.value());
  } else {
    for (int i = 0; i < static_cast<int>(g.nodes.size()); ++i) order.push_back(i);
  }
  for (size_t k = order.size(); k-- > 0;) {
    const Node& n = g.nodes[order[k]];
    bool out_weight = false;
    bool out_elementwise = false;
    for (int out : n.outputs) {
      if (out < 0) continue;
      out_weight = out_weight || weight[out];
      out_elementwise = out_elementwise || elementwise[out];
    }
    const OpDef* def = n.domain.empty() ? FindOp(n.domain, n.op_type) : nullptr;
    const bool pass = IsPassThrough(def);
    const bool elementwise_op = def && def->combines_weight;
    for (int slot = 0; slot < static_cast<int>(n.inputs.size()); ++slot) {
      const int t = n.inputs[slot];
      if (t < 0) continue;
      if (IsComputeWeightSlot(n, def, slot) || (out_weight && IsRearranging(n, def, slot))) {
        weight[t] = 1;
      }
      if (elementwise_op || (out_elementwise && pass && slot == 0)) elementwise[t] = 1;
    }
  }
  // Tensors a node reads in a buffer slot (batch norm's running statistics):
  // one pass over the edges (a node with 200 k inputs is not scanned once
  // per input).
  std::vector<char> running_stat(g.tensors.size(), 0);
  for (const Node& n : g.nodes) {
    const OpDef* def = FindOp(n.domain, n.op_type);
    if (!def) continue;
    for (size_t slot = 0; slot < n.inputs.size(); ++slot) {
      const int t = n.inputs[slot];
      if (t >= 0 && HasSlot(def->buffer_inputs, static_cast<int>(slot))) running_stat[t] = 1;
    }
  }
  for (int id : g.initializers) {
    const Tensor& t = g.tensors[id];
    if (!IsFloat(t.dtype) || DeclaredNumel(t) <= 1) continue;
    roles[id] = (!running_stat[id] && !t.exported_buffer && (weight[id] || elementwise[id]))
                    ? InitRole::kParameter
                    : InitRole::kBuffer;
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
