#ifndef MEMPLAN_PLANNER_OP_REGISTRY_H_
#define MEMPLAN_PLANNER_OP_REGISTRY_H_

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "planner/evidence.h"
#include "planner/graph.h"
#include "planner/status.h"

namespace memplan {

/// What a shape function sees: one node, its inputs (already inferred) and
/// its outputs (to fill).
class ShapeContext {
 public:
  ShapeContext(Graph* g, int node_index) : g_(g), index_(node_index) {}
  const Graph& graph() const { return *g_; }
  const Node& node() const { return g_->nodes[index_]; }
  int node_index() const { return index_; }
  int64_t opset() const { return g_->Opset(); }
  int num_inputs() const { return static_cast<int>(node().inputs.size()); }
  int num_outputs() const { return static_cast<int>(node().outputs.size()); }
  /// True when input i exists (ONNX allows "" for an omitted optional input).
  bool HasInput(int i) const { return i < num_inputs() && node().inputs[i] >= 0; }
  bool HasOutput(int i) const { return i < num_outputs() && node().outputs[i] >= 0; }
  const Tensor& Input(int i) const { return g_->tensors[node().inputs[i]]; }
  Tensor& Output(int i) { return g_->tensors[node().outputs[i]]; }
  /// Sets output i's dtype and concrete shape (no-op for an absent output).
  void SetOutput(int i, DType dtype, std::vector<int64_t> shape);
  /// Sets output i's known integer values (for shape arithmetic).
  void SetValues(int i, std::vector<int64_t> values);
  /// "file: node 'name' (Op): what" as an error status.
  Status Error(const std::string& what) const;

 private:
  Graph* g_;
  int index_;
};

using ShapeFn = Status (*)(ShapeContext&);

/// How an op runs under torch.autocast (aten/src/ATen/autocast_mode.cpp).
enum class Autocast {
  kPassthrough,   ///< Runs in its input dtype (relu, add, batch_norm, ...).
  kLowPrecision,  ///< Casts inputs to the autocast dtype (conv, matmul, ...).
  kFp32,          ///< Casts inputs to float32 (layer_norm, exp, pow, ...).
  kFp32Output,    ///< Reads its input as is, writes float32 (softmax, log_softmax, sum).
};

/// Whether the output is a new buffer or a view of input 0.
enum class Alias { kNone, kView };

/// What a backward-saving rule sees, with dtypes as they run (autocast
/// applied) and which inputs need a gradient.
struct SaveContext {
  const Graph* graph = nullptr;
  const Node* node = nullptr;
  std::vector<bool> input_requires_grad;  ///< Per input; false when absent.
  std::vector<DType> input_dtype;         ///< Effective dtypes per input.
  std::vector<DType> output_dtype;        ///< Effective dtypes per output.
  bool AnyInputRequiresGrad() const;
};

/// One tensor autograd keeps for this node's backward.
struct Saved {
  enum Kind { kInput, kOutput, kExtra };
  Kind kind = kInput;
  int index = 0;                ///< Input or output index for kInput/kOutput.
  DType dtype = DType::kFloat;  ///< kExtra: element type.
  std::vector<int64_t> shape;   ///< kExtra: dims.
  std::string what;             ///< kExtra: "mask", "mean", "indices", ...
};

using SavesFn = void (*)(const SaveContext&, std::vector<Saved>*);
/// Forward FLOPs of one node (a multiply-add counts 2).
using FlopsFn = int64_t (*)(const Graph&, const Node&);

/// Everything memplan knows about one op, kept in one place.
struct OpDef {
  ShapeFn shape = nullptr;
  SavesFn saves = nullptr;  ///< nullptr: keeps nothing for backward.
  FlopsFn flops = nullptr;  ///< nullptr: one FLOP per output element.
  Alias alias = Alias::kNone;
  Autocast autocast = Autocast::kPassthrough;
  bool differentiable = true;  ///< False for shape/integer/comparison ops.
  /// Its PyTorch CUDA kernel indexes in 32 bits: it fails (an error or an
  /// illegal memory access) on tensors of kInt32IndexElements or more.
  bool int32_indexing = false;
  /// The measurements that back this op's rules (evidence.cc; none by default).
  Evidence evidence;
};

/// The op for (domain, op_type), or nullptr. "" and "ai.onnx" are the same.
const OpDef* FindOp(const std::string& domain, const std::string& op_type);

/// Registry used while building the table: one function per op family file.
class OpTable {
 public:
  void Add(const std::string& op_type, const OpDef& def);
  void Add(const std::string& domain, const std::string& op_type, const OpDef& def);
  const OpDef* Find(const std::string& domain, const std::string& op_type) const;
  /// Sets the evidence of a registered op (no-op for an unknown one).
  void SetEvidence(const std::string& op_type, const Evidence& evidence);

 private:
  std::unordered_map<std::string, OpDef> entries_;  // key "domain::op"
};

void RegisterShapeOps(OpTable* t);        ///< ops/shape_ops.cc
void RegisterElementwiseOps(OpTable* t);  ///< ops/elementwise_ops.cc
void RegisterNnOps(OpTable* t);           ///< ops/nn_ops.cc

}  // namespace memplan

#endif  // MEMPLAN_PLANNER_OP_REGISTRY_H_
