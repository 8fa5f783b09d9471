#include "planner/loss_target.h"

#include <vector>

#include "planner/dtype.h"
#include "planner/op_registry.h"
#include "planner/ops/op_names.h"

namespace memplan {
namespace {

/// The tensor's dims: inferred sizes, else declared (a symbol or -1).
std::vector<Dim> DimsOf(const Tensor& t) {
  std::vector<Dim> dims;
  if (t.shape_known) {
    for (int64_t d : t.shape) dims.push_back(Dim{d, ""});
  } else if (t.has_declared) {
    dims = t.declared;
  }
  return dims;
}

bool KnownRank(const Tensor& t) { return t.shape_known || t.has_declared; }

/// Same size, or the same symbol.
bool SameDim(const Dim& a, const Dim& b) {
  if (a.known() && b.known()) return a.value == b.value;
  return !a.known() && !b.known() && !a.symbol.empty() && a.symbol == b.symbol;
}

std::string ShapeText(const std::vector<Dim>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    s += i ? ", " : "";
    s += dims[i].known() ? std::to_string(dims[i].value)
                         : (dims[i].symbol.empty() ? "?" : dims[i].symbol);
  }
  return s + "]";
}

/// The node making `id`, through views and casts (they keep the values'
/// meaning); nullptr for an input or an initializer.
const Node* ValueProducer(const Graph& g, int id, int* index) {
  for (int step = 0; step < 32; ++step) {
    if (id < 0 || id >= static_cast<int>(g.tensors.size())) return nullptr;
    const int p = g.tensors[id].producer;
    if (p < 0 || p >= static_cast<int>(g.nodes.size())) return nullptr;
    const Node& n = g.nodes[p];
    const OpDef* def = OpOf(n);
    const bool passes = def != nullptr && (def->alias == Alias::kView ||
                                           def->output_dtype == OutputDType::kCastTarget ||
                                           def->output_dtype == OutputDType::kLikeInput1);
    if (!passes || n.inputs.empty()) {
      *index = p;
      return &n;
    }
    id = n.inputs[0];
  }
  return nullptr;
}

}  // namespace

std::string NotClassLogits(const Graph& g) {
  if (g.outputs.empty()) return "";
  const Tensor& out = g.tensors[g.outputs[0]];
  const std::string name = "the first output '" + out.name + "'";
  if (out.dtype != DType::kUndefined && !IsFloat(out.dtype)) {
    return name + " is " + DTypeName(out.dtype) + ", not float logits";
  }
  const std::vector<Dim> dims = DimsOf(out);
  if (KnownRank(out) && dims.empty()) {
    return name + " is a scalar: the model computes its own loss (then --loss none)";
  }
  if (dims.size() == 1) {
    return name + " " + ShapeText(dims) +
           " has no class dim: one value per sample is a regression or binary output";
  }
  if (!dims.empty()) {
    const Dim& classes = dims.size() >= 4 ? dims[1] : dims.back();
    if (classes.known() && classes.value == 1) {
      return name + " " + ShapeText(dims) +
             " has a class dim of 1: one score per position is a regression or binary output";
    }
  }
  int index = -1;
  if (const Node* p = ValueProducer(g, g.outputs[0], &index); p != nullptr && p->domain.empty()) {
    const std::string node = p->op_type + " node '" + p->Label(index) + "'";
    const std::string& op = p->op_type;
    if (op == op_names::kSigmoid || op == op_names::kHardSigmoid || op == op_names::kTanh) {
      return name + " comes from a " + node +
             ": bounded values (a regression, binary or image output), not class logits";
    }
    if (op == op_names::kSoftmax) {
      return name + " comes from a " + node +
             ": probabilities, while F.cross_entropy takes raw logits";
    }
    if (op == op_names::kLogSoftmax) {
      return name + " comes from a " + node +
             ": log-probabilities, for F.nll_loss (cross entropy would apply log_softmax again)";
    }
  }
  if (dims.size() >= 2) {
    for (int in : g.inputs) {
      const Tensor& t = g.tensors[in];
      if (!IsFloat(t.dtype)) continue;
      const std::vector<Dim> in_dims = DimsOf(t);
      if (in_dims.size() != dims.size()) continue;
      bool same = true;
      for (size_t i = 0; i < dims.size() && same; ++i) same = SameDim(dims[i], in_dims[i]);
      if (same) {
        return name + " " + ShapeText(dims) + " has the shape of input '" + t.name +
               "': an input-to-output map (reconstruction, denoising, a diffusion model's "
               "noise), not class logits";
      }
    }
  }
  return "";
}

}  // namespace memplan
