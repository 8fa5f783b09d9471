#ifndef MEMPLAN_PLANNER_OPS_TEST_GRAPH_H_
#define MEMPLAN_PLANNER_OPS_TEST_GRAPH_H_

// Test-only helpers: build small Graphs by hand for the planner's tests.

#include <string>
#include <utility>
#include <vector>

#include "planner/graph.h"

namespace memplan {
namespace testing_util {

/// A declared dim: a number, or a symbol when given a name.
inline Dim D(int64_t v) {
  Dim d;
  d.value = v;
  return d;
}
inline Dim S(const std::string& sym) {
  Dim d;
  d.symbol = sym;
  return d;
}

/// Fluent builder over a Graph.
class GraphBuilder {
 public:
  explicit GraphBuilder(int64_t opset = 17) {
    g.source = "m.onnx";
    g.opsets[""] = opset;
  }

  /// Adds a graph input with declared dims.
  int Input(const std::string& name, std::vector<Dim> dims, DType dt = DType::kFloat) {
    int id = g.FindOrAdd(name);
    Tensor& t = g.tensors[id];
    t.kind = TensorKind::kGraphInput;
    t.dtype = dt;
    t.has_declared = true;
    t.declared = std::move(dims);
    g.inputs.push_back(id);
    return id;
  }

  /// Adds an initializer; int values are kept when given.
  int Init(const std::string& name, std::vector<int64_t> dims, DType dt = DType::kFloat,
           std::vector<int64_t> values = {}, bool has_values = false) {
    int id = g.FindOrAdd(name);
    Tensor& t = g.tensors[id];
    t.kind = TensorKind::kInitializer;
    t.dtype = dt;
    t.has_declared = true;
    for (int64_t d : dims) t.declared.push_back(D(d));
    t.has_values = has_values || !values.empty();
    t.values = std::move(values);
    g.initializers.push_back(id);
    return id;
  }

  /// An int64 1-D initializer holding `v`.
  int Ints(const std::string& name, std::vector<int64_t> v) {
    return Init(name, {static_cast<int64_t>(v.size())}, DType::kInt64, v, true);
  }
  /// An int64 scalar initializer.
  int Scalar(const std::string& name, int64_t v) {
    return Init(name, {}, DType::kInt64, {v}, true);
  }

  /// Adds a node; "" in inputs means an omitted optional input.
  Node& Op(const std::string& op, std::vector<std::string> ins, std::vector<std::string> outs,
           const std::string& name = "") {
    Node n;
    n.op_type = op;
    n.name = name.empty() ? op + "_" + std::to_string(g.nodes.size()) : name;
    for (const auto& i : ins) n.inputs.push_back(i.empty() ? -1 : g.FindOrAdd(i));
    for (const auto& o : outs) n.outputs.push_back(o.empty() ? -1 : g.FindOrAdd(o));
    g.nodes.push_back(std::move(n));
    return g.nodes.back();
  }

  /// Declares value_info for tensor `name`.
  void ValueInfo(const std::string& name, std::vector<Dim> dims, DType dt = DType::kUndefined) {
    Tensor& t = g.tensors[g.FindOrAdd(name)];
    t.has_declared = true;
    t.declared = std::move(dims);
    t.dtype = dt;
  }

  void Output(const std::string& name) { g.outputs.push_back(g.FindOrAdd(name)); }

  const Tensor& T(const std::string& name) const { return g.tensors[g.Find(name)]; }

  Graph g;
};

inline Attribute IntAttr(int64_t v) {
  Attribute a;
  a.type = AttrType::kInt;
  a.i = v;
  return a;
}
inline Attribute IntsAttr(std::vector<int64_t> v) {
  Attribute a;
  a.type = AttrType::kInts;
  a.ints = std::move(v);
  return a;
}
inline Attribute FloatAttr(float v) {
  Attribute a;
  a.type = AttrType::kFloat;
  a.f = v;
  return a;
}
inline Attribute StringAttr(const std::string& v) {
  Attribute a;
  a.type = AttrType::kString;
  a.s = v;
  return a;
}
/// A tensor attribute with dims and int data (or float data).
inline Attribute TensorAttr(DType dt, std::vector<int64_t> dims, std::vector<int64_t> values = {},
                            std::vector<double> fvalues = {}) {
  Attribute a;
  a.type = AttrType::kTensor;
  a.t_dtype = dt;
  a.t_dims = std::move(dims);
  a.t_has_values = !values.empty();
  a.t_values = std::move(values);
  a.t_fvalues = std::move(fvalues);
  return a;
}

/// x[batch,256] -> MatMul W1[256,1024] -> Relu -> MatMul W2[1024,10] -> y,
/// in modules layers.0 and layers.1: the small training graph that the
/// advisor and what-if tests plan at many batches.
inline Graph TwoLayerMlp() {
  GraphBuilder b;
  b.Input("x", {S("batch"), D(256)});
  b.Init("w1", {256, 1024});
  b.Init("w2", {1024, 10});
  b.Op("MatMul", {"x", "w1"}, {"h"}).scope = "layers.0";
  b.Op("Relu", {"h"}, {"a"}).scope = "layers.0";
  b.Op("MatMul", {"a", "w2"}, {"y"}).scope = "layers.1";
  b.Output("y");
  b.g.Link();
  return b.g;
}

}  // namespace testing_util
}  // namespace memplan

#endif  // MEMPLAN_PLANNER_OPS_TEST_GRAPH_H_
