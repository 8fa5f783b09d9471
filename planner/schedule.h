#ifndef MEMPLAN_PLANNER_SCHEDULE_H_
#define MEMPLAN_PLANNER_SCHEDULE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "planner/attention.h"
#include "planner/finetune.h"
#include "planner/fusion.h"
#include "planner/graph.h"
#include "planner/op_registry.h"
#include "planner/options.h"
#include "planner/params.h"
#include "planner/rnn.h"
#include "planner/status.h"

namespace memplan {

/// A value as PyTorch holds it: dtype as it runs, strides, and which storage
/// it lives in (views share their base's storage).
struct Val {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;  ///< In elements, within the storage.
  DType dtype = DType::kFloat;
  int64_t bytes = 0;  ///< Of this value's own storage.
  int base = -1;      ///< Val whose storage this one views; -1: own.
  bool requires_grad = false;
  bool is_param = false;
  /// A parameter whose tensor has requires_grad set (not frozen), in
  /// inference plans too, where no gradient is recorded (torch.no_grad()).
  bool trainable_param = false;
  bool is_buffer = false;  ///< Non-trainable initializer or graph input.
  bool phantom = false;    ///< Never allocated (in-place stats, aux outputs).
  /// A same-dtype flat copy of parameters (a bf16 nn.LSTM's weights): its
  /// gradient is theirs, views of one buffer AccumulateGrad keeps as .grad.
  bool param_copy = false;
  /// Op index until which a module call's argument list or a Python local
  /// (planner/python_locals.h) holds it; -1: none.
  int held_until = -1;
  bool held_by_local = false;  ///< A Python local raised held_until.
};

/// A tensor kept for backward: a reference to a Val or a new allocation.
struct SavedRef {
  int val = -1;       ///< >= 0: a reference (no new memory).
  int64_t bytes = 0;  ///< val < 0: bytes of the new tensor (mask, mean, ...).
  std::string what;
};

/// One executed operation of the forward pass (graph node or synthetic).
struct ExecOp {
  std::string label;
  std::string op_type;
  int node = -1;  ///< Graph node, -1 for synthetic ops.
  GradKind grad_kind = GradKind::kNew;
  /// The registered op it runs (synthetic compute ops too); nullptr for
  /// casts, copies and views the schedule makes itself.
  const OpDef* def = nullptr;
  std::vector<int> in;  ///< Val ids; -1 for absent inputs.
  std::vector<int> out;
  std::vector<SavedRef> saved;
  std::vector<bool> grad_in;  ///< Per input: receives a gradient.
  int64_t fwd_workspace = 0;  ///< Transient bytes inside the forward call.
  int64_t bwd_workspace = 0;  ///< Transient bytes inside the backward call.
  /// A second backward pass's (convolution weight gradient), after the first.
  int64_t bwd_weight_workspace = 0;
  /// Temporaries the call allocates before its outputs and frees at its end
  /// (cuDNN RNN: the contiguous copy of a batch-first input).
  int64_t fwd_temp_bytes = 0;
  /// What that temporary is made from: allocated just before it and freed
  /// once it is made, before the outputs (`ones(L, S).tril()`: the ones).
  int64_t fwd_temp_source_bytes = 0;
  /// Temporaries allocated after the outputs, before the workspace, each on
  /// its own, freed at the call's end (cuDNN RNN: the hy/cy nobody reads).
  std::vector<int64_t> fwd_late_temp_bytes;
  /// Tensors the kernel allocates after its outputs and its saved extras,
  /// each on its own, freed last first when it returns (native_group_norm:
  /// mean and rstd where backward keeps neither, float32 copies of them for
  /// 16-bit inputs, the fused per-channel scale and shift).
  std::vector<int64_t> fwd_kernel_temp_bytes;
  /// The backward kernel's tensors, allocated after the inputs' gradients
  /// and freed last first at its end (native_group_norm_backward: ds, db,
  /// then c2, c3 and c1 for the input's gradient; c1-c3 go before ds and db,
  /// with nothing allocated between).
  std::vector<int64_t> bwd_kernel_temp_bytes;
  /// The backward call's allocations in cuDNN RNN's order
  /// (aten/src/ATen/native/cudnn/RNN.cpp _cudnn_rnn_backward): first the
  /// zeros standing for absent output gradients (dhy, dcy), kept to the end;
  std::vector<int64_t> bwd_zero_bytes;
  /// then copies for the data pass (contiguous x, then dy), freed in reverse
  /// order after its workspace;
  std::vector<int64_t> bwd_copy_bytes;
  /// then the inputs' gradients, then outputs the call makes that nobody
  /// needs (an unused dx, dhx, dcx), freed at the end after the zeros;
  std::vector<int64_t> bwd_temp_bytes;
  /// and, for the weight pass, a copy made before its gradients (x again),
  /// freed after its workspace.
  int64_t bwd_weight_copy_bytes = 0;
  /// A contiguous copy of a saved input the backward call makes before its
  /// gradients and frees at its end (OpDef::contiguous_in_kernel).
  int64_t bwd_input_copy_bytes = 0;
  /// Input 0's gradient comes laid out for another dim order than input 0
  /// (a batch-first cuDNN RNN: _cudnn_rnn_backward_input computes dx
  /// sequence-major and transposes it back).
  bool grad_in0_transposed = false;
  /// Allocated at the first run of any op that sets it and kept for the
  /// process: cuDNN's RNN dropout states (one cache per device).
  int64_t process_state_bytes = 0;
  int64_t flops = 0;  ///< Forward FLOPs.
  /// Per input: its gradient is made after the bwd_workspace pass, before
  /// the bwd_weight_workspace one (cuDNN RNN: backward data, then weights).
  /// Empty: every gradient comes first.
  std::vector<bool> grad_in_weight_pass;
  int segment = -1;  ///< Checkpoint segment index (MarkCheckpointSegments).
  /// A Slice of an `aten.unbind` call (Node::unbind_call) with the others
  /// of that call on the same input: the first of them in forward order, for
  /// each of them (-1: none). PyTorch runs the call's backward once
  /// (UnbindBackward: one stack of the outputs' gradients), when the last
  /// of them is reached, as the first one's backward here.
  int stack_leader = -1;
  /// The graph node whose processing made the op (synthetic ops too): its
  /// scope decides the checkpoint segment.
  int scope_node = -1;
  bool view = false;  ///< Outputs are views of in[0].
  /// Its backward hands in[0] a view of the output's gradient, as PyTorch's
  /// reshape, transpose and permute backwards do (ViewBackward,
  /// UnsqueezeBackward, SqueezeBackward, TBackward, PermuteBackward); autograd
  /// never adds another gradient into such a view in place (Simulator::AddGrad).
  /// Identity and sequence items (export artifacts, no view in PyTorch): false.
  bool grad_is_view = false;
  /// New saved tensors (Saved::kExtra) are allocated inside the call, while
  /// its workspace is held (cuDNN RNN's reserve space).
  bool saved_in_kernel = false;
  /// The weight pass's gradients are views of one allocation (cuDNN's dw).
  bool flat_weight_grads = false;
  /// The outputs are allocated by the next op, after its own outputs and
  /// fwd_late_temp_bytes, before its workspace (the flat copy of bf16 RNN
  /// weights, which _cudnn_rnn makes after y, hy and cy).
  bool outputs_made_by_next = false;
  /// A cuDNN RNN call some of whose workspaces the least-squares fit sized
  /// (planner/rnn.h RnnWorkspace::derived false): their own rule.
  bool rnn_workspace_fitted = false;
  bool uses_cublas = false;
  /// An addmm with a 1-D bias that PyTorch runs through cuBLASLt (Blas.cpp,
  /// isInputCompliesAddmmCudaLt: beta 1, a 2-D contiguous result, every
  /// matrix dim above 1): the first on a thread makes that thread's 1 MiB
  /// cuBLASLt workspace (CublasHandlePool.cpp, getCUDABlasLtWorkspace).
  bool lt_bias = false;
  /// A MatMul whose in[0], as the op received it, was 2-D or contiguous:
  /// at::linear runs such a layer with bias as one addmm (_flatten_nd_linear
  /// for N-d input); a non-contiguous N-d input goes through matmul, then
  /// add_ of the bias.
  bool addmm_input = false;
  /// BiasAdd of a layer PyTorch runs as addmm: the bias gradient (addmm's
  /// `self`, summed to the bias's shape by the engine's validate_outputs
  /// after the node ran) is made by this op index's backward, after its
  /// gradients; -1: by the BiasAdd (a separate add_, whose AddBackward0
  /// runs before the product's backward).
  int bias_grad_by_op = -1;
  /// Gemm with a bias C that is broadcast over the rows: the engine sums C's
  /// gradient (the incoming [M, N] gradient) to C's shape after the node's
  /// gradients (validate_outputs, at::sum_to), through the reduction's
  /// staging buffer (planner/reduce_kernel.h), allocated after C's gradient
  /// and freed at once; 0: none.
  int64_t bias_sum_staging_bytes = 0;
  bool hold_to_forward_end = false;  ///< Autocast weight cache entries.
  /// An activation or residual add that model code often runs in place
  /// (nn.ReLU(inplace=True), `out += identity`): output shaped like in[0].
  bool inplace_candidate = false;
};

/// The forward pass as PyTorch runs it, plus what the step needs around it.
struct Schedule {
  std::vector<Val> vals;
  std::vector<ExecOp> ops;
  /// Val ids of parameters (file order, then LoRA adapters); frozen ones
  /// have requires_grad false (no gradient, no optimizer state).
  std::vector<int> params;
  std::vector<int> buffers;     ///< Val ids of non-trainable initializers.
  std::vector<int> inputs;      ///< Val ids of graph inputs.
  int logits = -1;              ///< Val of the first graph output.
  int64_t parameter_count = 0;  ///< Trainable parameters (LoRA adapters included).
  int64_t frozen_count = 0;     ///< Frozen parameters.
  int64_t lora_count = 0;       ///< LoRA adapter parameters.
  /// Quantized frozen weights (Val id -> storage): Val::bytes is the packed
  /// data; the state's tensors are loaded beside it.
  std::map<int, QuantizedWeight> quantized;
  /// Per nn.LSTM / nn.GRU / nn.RNN module: its parameters' Val ids. Moving
  /// the module to the GPU in fp32 (RNNBase._apply) copies them into one flat
  /// buffer they then view, and frees what they were moved into
  /// (flatten_parameters); again after model.half(), never after a cast to
  /// bf16 (cudnn.is_acceptable rejects it).
  std::vector<std::vector<int>> flattened_rnn_weights;
  int attention_regions = 0;
  bool fp32_convs = false;  ///< Some convolution runs in fp32 (see Fp32ConvCopies).
  /// Some activation could run in place (then residual adds may too; see InPlace).
  bool inplace_activations = false;
  std::vector<std::string> warnings;
};

/// Builds the schedule of `g` (shapes inferred) for `options`: dtypes under
/// the precision, autocast casts and the weight cache, views and the copies
/// PyTorch makes for non-viewable reshapes and non-contiguous inputs,
/// attention regions per options.attention, and per-op saved tensors.
Result<Schedule> BuildSchedule(const Graph& g, const PlanOptions& options);

/// What BuildSchedule reads off a graph before it schedules it, whatever the
/// options: the initializers' roles, the Linear layers, the node order, and
/// the regions it replaces by one op. The roles, layers and order depend on
/// the imported graph alone, the regions on its inferred shapes too: one
/// analysis serves every precision and placement planned at one binding
/// (CandidatePlanner).
struct ScheduleAnalysis {
  std::vector<InitRole> roles;                          ///< ClassifyInitializers.
  std::vector<LinearLayer> linears;                     ///< FindLinearLayers.
  Result<std::vector<int>> order = std::vector<int>();  ///< TopologicalOrder (or its error).
  std::vector<AttentionRegion> attention;
  std::vector<RnnRegion> rnn;
  std::vector<FusedRegion> fused;
  RmsNormOps rms_norms;
};
/// The whole analysis of `g` (shapes inferred).
[[nodiscard]] ScheduleAnalysis AnalyzeForSchedule(const Graph& g);
/// The regions of `a` found again for `g` (another binding of the graph
/// `a` was made for), the roles and order kept.
void ReanalyzeRegions(const Graph& g, ScheduleAnalysis* a);
/// BuildSchedule(g, options) from `a`, AnalyzeForSchedule(g)'s result (or
/// one that equals it): the same schedule, without analysing `g` again.
[[nodiscard]] Result<Schedule> BuildSchedule(const Graph& g, const PlanOptions& options,
                                             const ScheduleAnalysis& a);

/// Sets every op's checkpoint segment: the index into
/// options.checkpoint_segments of the outermost listed module around its
/// scope_node's scope (-1: none, and always -1 outside training). Nothing
/// else of a schedule depends on the checkpoint placement, so one schedule
/// serves every placement once this is run again.
void MarkCheckpointSegments(const Graph& g, const PlanOptions& options, Schedule* s);

/// Row-major strides of `shape`.
std::vector<int64_t> ContiguousStrides(const std::vector<int64_t>& shape);
/// True when `strides` are row-major for `shape` (size-1 dims ignored).
bool IsContiguous(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides);
/// Channels-last strides of a 4-D or 5-D `shape` (N, C, spatial...: C
/// innermost, then the spatial dims, N outermost); row-major otherwise.
std::vector<int64_t> ChannelsLastStrides(const std::vector<int64_t>& shape);
/// True when a 4-D or 5-D tensor is dense in channels-last order and not
/// also row-major (a permuted [N, H, W, C] tensor viewed as [N, C, H, W]):
/// what PyTorch's suggest_memory_format calls ChannelsLast(3d).
bool IsChannelsLast(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides);
/// Strides for viewing (shape, strides) as new_shape without a copy, as
/// PyTorch's view/reshape decides; false when a copy is needed.
bool ViewStrides(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides,
                 const std::vector<int64_t>& new_shape, std::vector<int64_t>* out);

}  // namespace memplan

#endif  // MEMPLAN_PLANNER_SCHEDULE_H_
