#include "planner/params.h"

#include <set>
#include <string>

#include "planner/checked.h"

namespace memplan {
namespace {

bool IsPassThrough(const std::string& op) {
  static const std::set<std::string> kOps = {"Reshape", "Transpose", "Identity",
                                             "Cast",    "CastLike",  "Unsqueeze",
                                             "Squeeze", "Expand",    "Flatten"};
  return kOps.count(op) != 0;
}

// True when input slot `slot` of `n` is a trainable-weight slot.
bool IsWeightSlot(const Node& n, int slot) {
  if (!n.domain.empty()) return false;
  const std::string& op = n.op_type;
  if (op == "Conv" || op == "ConvTranspose") return slot == 1 || slot == 2;
  if (op == "Gemm" || op == "MatMul" || op == "Einsum") return true;
  if (op == "BatchNormalization") return slot == 1 || slot == 2;
  if (op == "LayerNormalization" || op == "GroupNormalization" || op == "InstanceNormalization" ||
      op == "RMSNormalization" || op == "SimplifiedLayerNormalization") {
    return slot == 1 || slot == 2;
  }
  // A learned table read by index (embeddings, relative position biases).
  if (op == "Gather" || op == "GatherND" || op == "GatherElements") return slot == 0;
  if (op == "LSTM" || op == "GRU" || op == "RNN") return slot >= 1 && slot <= 3;
  if (op == "PRelu") return slot == 1;
  static const std::set<std::string> kElementwise = {"Add", "Sub", "Mul", "Div", "Concat", "Where"};
  return kElementwise.count(op) != 0;
}

// Follows `t` through pass-through ops; true when it reaches a weight slot.
bool ReachesWeightSlot(const Graph& g, int t, int depth) {
  if (depth > 8) return false;
  for (int ni : g.tensors[t].consumers) {
    const Node& n = g.nodes[ni];
    for (int slot = 0; slot < static_cast<int>(n.inputs.size()); ++slot) {
      if (n.inputs[slot] != t) continue;
      if (IsPassThrough(n.op_type) && slot == 0) {
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
      if (n.op_type != "BatchNormalization") continue;
      for (size_t slot = 3; slot < n.inputs.size(); ++slot) {
        if (n.inputs[slot] == id) running_stat = true;
      }
    }
    roles[id] = (!running_stat && !t.exported_buffer && ReachesWeightSlot(g, id, 0))
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
