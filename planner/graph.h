#ifndef MEMPLAN_PLANNER_GRAPH_H_
#define MEMPLAN_PLANNER_GRAPH_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "planner/dtype.h"

namespace memplan {

/// A declared dimension: a known size, a named symbol, or unknown.
struct Dim {
  int64_t value = -1;  ///< >= 0 when known.
  std::string symbol;  ///< Set for symbolic dims such as "batch".
  bool known() const { return value >= 0; }
};

/// Where a tensor comes from.
enum class TensorKind { kActivation, kGraphInput, kInitializer };

/// A value in the graph. Shapes are concrete after shape inference.
struct Tensor {
  std::string name;
  DType dtype = DType::kUndefined;
  TensorKind kind = TensorKind::kActivation;
  int producer = -1;  ///< Node index, -1 for inputs/initializers.
  // The flags sit together (a large graph holds a million tensors).
  bool is_sequence = false;      ///< ONNX sequence type; see seq_shapes.
  bool has_declared = false;     ///< Input/output/value_info/initializer shape.
  bool shape_known = false;      ///< Set by shape inference.
  bool has_values = false;       ///< Small integer data is known (shape math).
  bool exported_buffer = false;  ///< The exporter recorded a module buffer (not trained).
  bool external = false;         ///< Initializer stored as external data.

  std::vector<std::vector<int64_t>> seq_shapes;  ///< Element shapes of a sequence.
  std::vector<Dim> declared;                     ///< The declared shape, as in the file.
  std::vector<int64_t> shape;                    ///< Concrete dims after inference.
  std::vector<int64_t> values;                   ///< Row-major; bool as 0/1.
  std::vector<int> consumers;                    ///< Node indices, in graph order, may repeat.
};

/// ONNX attribute kinds we keep.
enum class AttrType { kFloat, kInt, kString, kTensor, kGraph, kFloats, kInts, kStrings, kOther };

/// A node attribute. Tensor attributes keep dims, dtype and small int data.
struct Attribute {
  AttrType type = AttrType::kOther;
  float f = 0.0f;
  int64_t i = 0;
  std::string s;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  std::vector<std::string> strings;
  DType t_dtype = DType::kUndefined;  ///< kTensor: element type.
  std::vector<int64_t> t_dims;        ///< kTensor: dims.
  bool t_has_values = false;          ///< kTensor: int/bool data known.
  std::vector<int64_t> t_values;      ///< kTensor: data as int64.
  std::vector<double> t_fvalues;      ///< kTensor: small float data.
};

struct Graph;

/// What the first source line of a Python statement binds (the dynamo
/// exporter's stack trace shows one line per frame): `a = ...`,
/// `a, b = ...`, `a: T = ...`, `a += ...`, `a = b = ...`, `return ...`, or
/// neither (an expression statement, a compound statement's header, a
/// continuation line of a longer statement).
struct PyStatement {
  enum class Kind : uint8_t {
    kOther,   ///< Binds no local (expression, `if ...:`, `for ...:`).
    kAssign,  ///< Assignment, annotated or augmented.
    kReturn,
    kUnknown,  ///< Not the statement's first line, or not parsed.
  };
  Kind kind = Kind::kUnknown;
  /// kAssign: one list per `=` (chained assignment), each the targets in
  /// order; "" for a target that is no plain name (`self.x`, `a[i]`, `*r`).
  std::vector<std::vector<std::string>> targets;
  /// Local names of lists or tuples whose tensors a `cat` or `stack` call on
  /// the line joins (`torch.cat(feats[::-1], dim=1)`): the container keeps
  /// every element alive while its name refers to it.
  std::vector<std::string> joined;
  /// The line converts a value to float32 inside an expression
  /// (`x.to(torch.float32).pow(2)`, `x.float()`): a copy only that expression
  /// reads, where `x = x.to(torch.float32)` rebinds x for later lines.
  bool upcasts_inline = false;
};

/// One Python frame of a node's stack trace: a module's forward, running
/// the statement at `line`.
struct SourceFrame {
  std::string file;
  int line = 0;
  std::string function;
  PyStatement statement;
};

/// An operator application. Inputs/outputs are tensor indices; -1 = absent.
struct Node {
  std::string name;
  std::string op_type;
  std::string domain;  ///< "" for the default ONNX domain.
  std::string scope;   ///< Module path ("layer1.0.conv1"), from exporter metadata or the name.
  /// The modules whose call runs this node, outermost first (scope is last).
  std::vector<std::string> modules;
  bool modules_known = false;  ///< The exporter recorded them (none: a root-level op).
  /// The innermost module is an activation module without an `inplace`
  /// argument (transformers.activations: SiLUActivation, GELUActivation, ...
  /// call the out-of-place functional), so the op never runs in place.
  bool runs_out_of_place = false;
  /// The innermost module runs its forward with autocast off (transformers'
  /// rotary embeddings: `torch.autocast(..., enabled=False)`, "Force float32"),
  /// so under AMP the node runs in the dtypes of its inputs.
  bool autocast_disabled = false;
  /// The Python frames that ran the node (the dynamo exporter's
  /// `pkg.torch.onnx.stack_trace`): an index into Graph::stacks, whose
  /// frames are the root module's forward, then one per entry of `modules`;
  /// -1 when not recorded or when the frames do not match the modules.
  int stack = -1;
  /// The FX-generated file (`<eval_with_key>.N`) of a node the exporter
  /// traced into a subgraph of its own (a module under torch.no_grad() or
  /// with autocast off, run through a higher-order op): its stack trace is
  /// that one frame, the subgraph's code, not the module's; "" otherwise.
  std::string fx_region;
  /// The ONNX nodes one `aten.unbind` call became (the dynamo exporter's
  /// `pkg.torch.onnx.fx_node`) share this number; -1 for other nodes. Its
  /// Slices are one UnbindBackward in PyTorch (ExecOp::stack_leader).
  int unbind_call = -1;
  /// The ONNX nodes one `aten.softmax.int` call with a dtype became (the
  /// dynamo exporter writes `softmax(x, dim, dtype=torch.float32)` as
  /// Softmax then Cast) share this number; -1 for other nodes. PyTorch runs
  /// one kernel that writes the dtype asked for (`_softmax` with
  /// half_to_float for a half input, nothing more for a float one).
  int softmax_dtype_call = -1;
  std::vector<int> inputs;
  std::vector<int> outputs;
  std::map<std::string, Attribute> attrs;
  std::vector<std::shared_ptr<Graph>> subgraphs;  ///< If/Loop/Scan bodies.

  bool Has(const std::string& attr) const { return attrs.count(attr) != 0; }
  int64_t GetInt(const std::string& attr, int64_t def) const;
  float GetFloat(const std::string& attr, float def) const;
  std::string GetString(const std::string& attr, const std::string& def) const;
  std::vector<int64_t> GetInts(const std::string& attr) const;
  /// Human-readable name: the node name, or "op_type#index" when unnamed.
  std::string Label(int index) const;
};

/// What torch.onnx's dynamo exporter recorded about the PyTorch ops it
/// lowered (node metadata `pkg.torch.onnx.fx_node` and `class_hierarchy`),
/// counted per FX node (the ONNX nodes one PyTorch op became count once).
/// Empty for other exporters.
struct ExporterRecord {
  int64_t fx_nodes = 0;  ///< PyTorch ops recorded.
  /// ATen op -> FX nodes: "aten.native_dropout.default" -> 12.
  std::map<std::string, int64_t> aten_ops;
  /// Class of the innermost module running the op -> FX nodes:
  /// "torch.nn.modules.dropout.Dropout" -> 25.
  std::map<std::string, int64_t> module_classes;
};

/// A model: tensors, nodes in file order, and metadata.
struct Graph {
  std::string source;  ///< File path, used in error messages.
  std::string name;
  std::string producer_name;
  std::string producer_version;
  int64_t ir_version = 0;
  std::map<std::string, int64_t> opsets;  ///< domain -> version.
  ExporterRecord exporter;                ///< What torch.onnx's dynamo exporter recorded.
  /// Set by InferShapes: the value of every symbol it bound, and which one
  /// is the batch ("" when the model has none).
  std::map<std::string, int64_t> bound_symbols;
  std::string batch_symbol;

  std::vector<Tensor> tensors;
  std::vector<Node> nodes;
  std::vector<int> inputs;  ///< Graph inputs that are not initializers.
  std::vector<int> outputs;
  std::vector<int> initializers;
  /// Initializer id -> the path its external data names, as written; never
  /// opened (kept off Tensor: a large graph holds a million tensors).
  std::map<int, std::string> external_locations;
  /// The Python frames of the nodes' stack traces (Node::stack), each once;
  /// a stack lists indices into `frames`, outermost first.
  std::vector<SourceFrame> frames;
  std::vector<std::vector<int>> stacks;

  /// Index of the tensor called `name`, or -1.
  int Find(const std::string& name) const;
  /// Index of `name`, creating an activation tensor when absent.
  int FindOrAdd(const std::string& name);
  /// Default-domain opset version (0 when not imported).
  int64_t Opset() const;
  /// Rebuilds producer/consumer links from the nodes.
  void Link();

 private:
  /// The name index: an open-addressing table of tensor ids (-1 empty),
  /// hashed on tensors[id].name, so that a name is stored once (a table of
  /// strings would hold every name a second time, plus a node per name).
  std::vector<int> name_slots_;
  size_t indexed_ = 0;  ///< Ids in name_slots_.
  /// The slot of `n`: its id's, or the empty one where it would go.
  size_t SlotOf(const std::string& n, size_t hash) const;
  void GrowIndex();
};

}  // namespace memplan

#endif  // MEMPLAN_PLANNER_GRAPH_H_
