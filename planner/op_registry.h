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

/// How an op produces its inputs' gradients.
enum class GradKind {
  kNew,      ///< A new tensor per input needing a gradient.
  kAlias,    ///< A view of the output's gradient (reshape, transpose, concat).
  kGather,   ///< One input-sized tensor from all outputs' gradients (slice, split).
  kBiasAdd,  ///< Input 0 gets a view of the output's gradient, the bias a new one.
};

/// How a view op's output strides follow its input's (as PyTorch's view
/// functions set them).
enum class ViewRule {
  kReshape,    ///< reshape/flatten/squeeze/unsqueeze: a view when the strides allow, else a copy.
  kSame,       ///< The input's strides (identity, eval-mode dropout).
  kTranspose,  ///< Permuted by the `perm` attribute.
  kExpand,     ///< Broadcast dims get stride 0.
  kSlice,      ///< Same rank; each sliced axis's stride times its step.
  kSplit,      ///< Same rank, same strides.
  kSequence,   ///< Sequence elements: the input's strides, never a copy.
};

/// The dtype an op's float outputs run in, where autocast does not decide.
enum class OutputDType {
  kFollowInput,  ///< Its first float input's (else the precision's).
  kPromote,      ///< The promotion of its float, non-scalar inputs (elementwise ops).
  kCastTarget,   ///< The dtype it casts to (Cast).
  kLikeInput1,   ///< Input 1's (CastLike).
};

/// Whether model code commonly runs the op in place (the export does not say).
enum class InPlaceUse {
  kNever,
  kActivation,   ///< nn.ReLU(inplace=True) and the like.
  kResidualAdd,  ///< `out += identity`.
};

/// The kernel `validate` runs for the heaviest instance of the op.
enum class ValidationKernel { kNone, kGemm, kConv };

/// How a weight's values pass through a rearranging op.
enum class WeightRearrange : uint8_t { kNone, kInput0, kAllInputs };

/// How an elementwise op may edit attention scores between the scores matmul
/// and the softmax (planner/attention.cc).
enum class ScoreEdit {
  kNone,
  kShift,   ///< A mask or bias added (Add, Sub).
  kScale,   ///< Scaled by 1/sqrt(d) (Mul, Div).
  kSelect,  ///< Masked by a condition at input 0 (Where).
};

/// How an op builds a causal mask from positions (planner/attention.cc).
enum class MaskMaker {
  kNone,
  kComparison,  ///< Row index against column index (Less, Greater, ...).
  kTriangle,    ///< A triangle of a matrix (Trilu).
};

/// Where an op's backward makes its incoming gradient contiguous, when that
/// gradient reaches it in another order (through a transpose's backward).
enum class GradOutputCopy : uint8_t {
  kNone,
  /// Before the inputs' gradients: cudnn_convolution_backward's
  /// grad_output.contiguous(memory_format).
  kBeforeGrads,
  /// After them: layer_norm_backward_cuda allocates dX, dgamma and dbeta,
  /// then calls its kernel with dY.contiguous()
  /// (aten/src/ATen/native/cuda/layer_norm_kernel.cu).
  kAfterGrads,
  /// Before the gradients where input 0 is a weight (an embedding:
  /// embedding_dense_backward_cuda's grad_.contiguous(),
  /// aten/src/ATen/native/cuda/Embedding.cu); never for a Gather of
  /// activations (index_select_backward adds into zeros as it is).
  kBeforeGradsOfAWeight,
};

/// How an op's output takes a channels-last layout.
enum class ChannelsLastRule : uint8_t {
  kNever,
  /// A channels-last input 0 is run as it is, with no copy, and output 0 is
  /// channels-last too: the op asks for
  /// input.contiguous(input.suggest_memory_format()) (cuDNN convolution and
  /// batch norm, the NHWC kernels of max and average pooling and of
  /// upsampling).
  kKeepsInput0,
  /// Output 0 is channels-last when every input is (cat's output takes its
  /// inputs' memory format when they agree).
  kAllInputs,
};

/// Everything memplan knows about one op, kept in one place: the schedule,
/// the parameter classifier and the simulation read these fields and never
/// the op's name. registry_test checks every entry.
struct OpDef {
  ShapeFn shape = nullptr;
  SavesFn saves = nullptr;  ///< nullptr: keeps nothing for backward.
  FlopsFn flops = nullptr;  ///< nullptr: one FLOP per output element.
  Alias alias = Alias::kNone;
  Autocast autocast = Autocast::kPassthrough;
  bool differentiable = true;  ///< False for shape/integer/comparison ops.
  /// Backward: how the inputs' gradients are made.
  GradKind grad = GradKind::kNew;
  /// Views (alias kView, or eval_identity in inference): output strides.
  ViewRule view = ViewRule::kReshape;
  /// Views: outputs [0, view_outputs) are views of input 0, the rest are
  /// never made (dropout's mask); -1: all outputs.
  int view_outputs = -1;
  OutputDType output_dtype = OutputDType::kFollowInput;
  /// PyTorch calls .contiguous() on input 0 (cuDNN, normalisation, softmax, pooling).
  bool contiguous_input0 = false;
  /// That copy is made inside the kernel (native_layer_norm's and
  /// convolution's expect_contiguous / contiguous): a temporary of the call,
  /// while autograd saves the input as given, and the backward, which reads
  /// it, copies it again for the length of its call.
  bool contiguous_in_kernel = false;
  /// When output 0 is channels-last (IsChannelsLast).
  ChannelsLastRule channels_last = ChannelsLastRule::kNever;
  /// The backward's copy of a transposed incoming gradient.
  GradOutputCopy grad_output_copy = GradOutputCopy::kNone;
  /// Inputs 0 and 1 are matmul operands: copied when matmul's stride rules
  /// need it; a following bias Add joins it as one addmm.
  bool matmul_operands = false;
  bool uses_cublas = false;
  InPlaceUse inplace = InPlaceUse::kNever;
  /// Run in place, autograd keeps a copy of the input: the derivative reads
  /// `self` and the in-place variant has no formula of its own
  /// (tools/autograd/derivatives.yaml: hardswish_, hardsigmoid_, silu_,
  /// hardtanh_), so the original is saved before the kernel overwrites it.
  bool inplace_copies_input = false;
  /// The CUDA kernel writes int64 indices shaped like the output even
  /// without autograd (max pooling), freed right after.
  bool makes_indices = false;
  /// Elementwise a + b: a bias Add right after a matmul joins it as one addmm.
  bool is_add = false;
  /// Backward: where every input has the output's shape and dtype, each gets
  /// the incoming gradient itself, nothing allocated (AddBackward0:
  /// derivatives.yaml gives `grad` and `maybe_multiply(grad, alpha)`, which
  /// returns `grad` for alpha 1; resnext_n's amp_bf16 trace).
  bool same_shape_grad_passes = false;
  /// Backward multiplies the incoming gradient by the output into a
  /// temporary of the gradient's size, after the input's gradient, freed at
  /// the end of the call (softmax_backward_cuda_out's `grad * output`, made
  /// whatever the rows). Measured: math attention's softmax over 512, 1024
  /// and 2048 keys (families_check7 t5_encdec_g, families llama_gqa and
  /// families_check5 llama_gqa_e traces).
  bool softmax_grad_product = false;
  /// native_group_norm's temporaries (schedule.cc GroupNormWorkspaces).
  bool group_norm_workspaces = false;
  /// Takes cuDNN convolution workspaces (schedule.cc ConvWorkspaces).
  bool cudnn_conv = false;
  /// Takes cuDNN RNN workspaces (planner/rnn.h RnnForwardWorkspace).
  bool cudnn_rnn = false;
  /// Returns its input itself in inference (eval-mode dropout).
  bool eval_identity = false;
  /// Its new saved tensors (Saved::kExtra) are allocated before its outputs:
  /// CUDA native_dropout makes the mask, then the output
  /// (aten/src/ATen/native/cuda/Dropout.cu, dropout_cuda).
  bool saved_extra_first = false;
  /// A TensorIterator kernel: its output takes the memory layout of its
  /// inputs (a channels-last or transposed input stays so).
  bool tensor_iterator = false;
  /// The schedule gives its outputs input 0's layout, channels-last
  /// included: CUDA native_dropout allocates them with empty_like
  /// (aten/src/ATen/native/cuda/Dropout.cu). Other TensorIterator ops take
  /// their operands' layout by TensorIterator's rule (the schedule's
  /// PermutedElementwiseLayout).
  bool output_like_input0 = false;
  /// Never runs on the GPU (constants).
  bool host_only = false;
  /// Bit i: input i of this compute op may be a trainable weight (a conv
  /// kernel, a matmul operand, a norm's scale, an embedding table).
  uint32_t weight_inputs = 0;
  /// Bit i: input i is read for its dtype alone (CastLike's target_type): it
  /// gets no gradient and does not make the output require one.
  uint32_t dtype_only_inputs = 0;
  /// Any input may be a learned tensor combined with activations (a
  /// positional embedding added, a class token concatenated).
  bool combines_weight = false;
  /// Rearranges a weight's values on its way to a compute op (the Slice and
  /// Concat of recurrent gate reordering).
  WeightRearrange rearranges_weight = WeightRearrange::kNone;
  /// Bit i: an initializer at input i is a buffer, never a weight (running statistics).
  uint32_t buffer_inputs = 0;
  /// Input 0 reaches the outputs unchanged for parameter classification
  /// (reshape, transpose, cast: a weight stays a weight through it).
  bool passes_weight = false;
  ValidationKernel kernel = ValidationKernel::kNone;
  /// Attention patterns: how it may edit the scores, build a causal mask.
  ScoreEdit score_edit = ScoreEdit::kNone;
  MaskMaker mask_maker = MaskMaker::kNone;
  /// Reads only its input's dims, never its data (Shape, Size).
  bool reads_dims_only = false;
  /// Makes a tensor from its attributes or a shape, without a data input
  /// (Constant, ConstantOfShape).
  bool fills_constant = false;
  /// A recurrent layer cuDNN runs as one call (nn.LSTM, nn.GRU, nn.RNN).
  bool recurrent = false;
  /// Its PyTorch CUDA kernel indexes in 32 bits: it fails (an error or an
  /// illegal memory access) on tensors of kInt32IndexElements or more.
  bool int32_indexing = false;
  /// The measurements that back this op's rules (evidence.cc; none by default).
  Evidence evidence;
};

/// Bit mask of input slots [first, last].
constexpr uint32_t InputBits(int first, int last) {
  uint32_t m = 0;
  for (int i = first; i <= last; ++i) m |= 1u << i;
  return m;
}
/// Every input slot.
constexpr uint32_t kAllInputs = ~0u;

/// True when bit `slot` of `mask` is set (slots past 31 only in kAllInputs).
inline bool HasSlot(uint32_t mask, int slot) {
  return slot >= 0 && (slot < 32 ? ((mask >> slot) & 1u) != 0 : mask == kAllInputs);
}

/// The op for (domain, op_type), or nullptr. "" and "ai.onnx" are the same.
const OpDef* FindOp(const std::string& domain, const std::string& op_type);

/// The op a node runs, or nullptr when it is not registered.
inline const OpDef* OpOf(const Node& n) { return FindOp(n.domain, n.op_type); }

/// A view whose output holds input 0's values in their order, reshaped
/// (reshape, flatten, squeeze, unsqueeze, identity).
inline bool IsReshapeView(const OpDef& d) {
  return d.alias == Alias::kView && (d.view == ViewRule::kReshape || d.view == ViewRule::kSame);
}
/// A view that permutes input 0's dims (transpose).
inline bool IsTransposeView(const OpDef& d) {
  return d.alias == Alias::kView && d.view == ViewRule::kTranspose;
}
/// A view that broadcasts input 0 (expand).
inline bool IsExpandView(const OpDef& d) {
  return d.alias == Alias::kView && d.view == ViewRule::kExpand;
}
/// Changes only the dtype of input 0 (Cast, CastLike).
inline bool IsCast(const OpDef& d) {
  return d.output_dtype == OutputDType::kCastTarget || d.output_dtype == OutputDType::kLikeInput1;
}

/// Whether ops run by a module of class `module_class` (the innermost module
/// the dynamo exporter's class_hierarchy names) never run in place: an
/// activation module without an `inplace` argument, one outside torch whose
/// class name ends in "Activation" (transformers.activations.SiLUActivation,
/// GELUActivation, ...: their forward calls the out-of-place functional).
/// torch.nn's activation modules (nn.SiLU, nn.ReLU(inplace=True)) and
/// functional calls inside other modules may run in place; the export does
/// not say. Defined beside the in-place activations (ops/elementwise_ops.cc).
[[nodiscard]] bool ModuleRunsOutOfPlace(const std::string& module_class);

/// Whether a module of class `module_class` (as above) runs its forward with
/// autocast disabled: transformers' rotary embeddings (a class of the
/// `transformers.` package whose name ends in "RotaryEmbedding") compute
/// their cos/sin tables under `torch.autocast(device_type, enabled=False)`
/// ("Force float32", modeling_llama.py and the models copied from it) and
/// return them in the dtype of the hidden states, float32 under AMP. Defined
/// in op_registry.cc.
[[nodiscard]] bool ModuleDisablesAutocast(const std::string& module_class);

/// Every registered op: "domain::op" (or "op" for the default domain) -> def.
const std::unordered_map<std::string, OpDef>& AllOps();

/// Registry used while building the table: one function per op family file.
class OpTable {
 public:
  OpTable() = default;
  OpTable(const OpTable&) = delete;  ///< default_domain_ points into entries_.
  OpTable& operator=(const OpTable&) = delete;
  /// Registers `def` and returns the stored entry (to set further facts).
  OpDef& Add(const std::string& op_type, const OpDef& def);
  OpDef& Add(const std::string& domain, const std::string& op_type, const OpDef& def);
  const OpDef* Find(const std::string& domain, const std::string& op_type) const;
  /// A registered op of the default domain, to set further facts (registration only).
  OpDef* Mutable(const std::string& op_type);
  const std::unordered_map<std::string, OpDef>& entries() const { return entries_; }
  /// Sets the evidence of a registered op (no-op for an unknown one).
  void SetEvidence(const std::string& op_type, const Evidence& evidence);

 private:
  std::unordered_map<std::string, OpDef> entries_;  // key "domain::op"
  /// The default domain's entries by op type (a lookup builds no key; the
  /// planner looks ops up several times per node and plan): open addressing
  /// over a power of two, probed linearly from the op type's FNV-1a hash,
  /// at most half full (an empty name is a free slot).
  struct Slot {
    std::string op_type;
    const OpDef* def = nullptr;
  };
  std::vector<Slot> default_domain_;
  size_t default_count_ = 0;
  void IndexDefault(const std::string& op_type, const OpDef* def);
};

void RegisterShapeOps(OpTable* t);        ///< ops/shape_ops.cc
void RegisterElementwiseOps(OpTable* t);  ///< ops/elementwise_ops.cc
void RegisterNnOps(OpTable* t);           ///< ops/nn_ops.cc

}  // namespace memplan

#endif  // MEMPLAN_PLANNER_OP_REGISTRY_H_
