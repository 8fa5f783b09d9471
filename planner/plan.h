#ifndef MEMPLAN_PLANNER_PLAN_H_
#define MEMPLAN_PLANNER_PLAN_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "planner/allocator_sim.h"
#include "planner/evidence.h"
#include "planner/graph.h"
#include "planner/options.h"
#include "planner/status.h"

namespace memplan {

enum class Phase { kForward, kBackward, kOptimizer };

/// What the memory is for (one byte: a simulation holds one per allocation).
enum class Category : uint8_t {
  kParameters,
  kGradients,
  kOptimizerState,
  kSavedActivations,
  kTransients,
  kWorkspaces,
};
constexpr int kNumCategories = 6;

const char* PhaseName(Phase p);
const char* CategoryName(Category c);

/// Bytes per category.
struct Breakdown {
  int64_t bytes[kNumCategories] = {0, 0, 0, 0, 0, 0};
  int64_t Total() const;
};

/// A point of the memory-over-time picture.
struct TimelinePoint {
  int step = 0;  ///< Op index in the schedule.
  Phase phase = Phase::kForward;
  std::string node;  ///< Node label.
  /// At the step's highest moment (an op's workspace and temporaries come and
  /// go inside the step): allocated bytes per category, memory_allocated.
  Breakdown live;
  int64_t allocated = 0;
  int64_t reserved = 0;       ///< The most memory_reserved during the step.
  int64_t allocated_end = 0;  ///< memory_allocated after the step.
};

/// One rule's part of the peak (see evidence.h): an op's rule or a PyTorch
/// mechanism, whether measurements back it for this mode and precision.
struct RuleShare {
  std::string rule;        ///< "Conv", "cuDNN convolution workspaces", ...
  bool backed = false;     ///< Measured in this mode and precision.
  std::string evidence;    ///< The measurements behind it; "" when none.
  int64_t peak_bytes = 0;  ///< Allocated blocks it holds at the allocated peak.
};

/// How much of the plan rests on measured rules.
struct Coverage {
  int64_t peak_bytes = 0;        ///< All blocks at the allocated peak.
  int64_t unbacked_bytes = 0;    ///< Those allocated by unmeasured rules.
  std::vector<RuleShare> rules;  ///< Every rule the step uses, most bytes first.
  /// unbacked_bytes / peak_bytes (0 for an empty peak).
  [[nodiscard]] double UnbackedShare() const;
};

/// The largest tensor a 32-bit-indexing kernel would see.
struct KernelLimit {
  int64_t elements = 0;  ///< Its element count.
  std::string node;      ///< The op reading or writing it.
  std::string op_type;
  /// True when that op's PyTorch CUDA kernel indexes in 32 bits (OpDef).
  bool int32_kernel = false;
};

/// The maximum and what it is made of.
struct Peak {
  int64_t allocated_bytes = 0;    ///< max_memory_allocated, fresh process.
  int64_t reserved_bytes = 0;     ///< max_memory_reserved.
  int64_t device_bytes = 0;       ///< reserved + context (nvidia-smi view).
  int64_t lower_bound_bytes = 0;  ///< Max live bytes without rounding.
  std::string node;               ///< Op at the allocated peak.
  /// The innermost module running that op ("layer3.0.conv1"); "" when the
  /// export does not say (a root-level op, the loss, the optimizer).
  std::string module;
  Phase phase = Phase::kForward;
  Breakdown breakdown;         ///< At the allocated peak.
  double fragmentation = 0.0;  ///< 1 - allocated/reserved at the peak.
  /// Per Phase (forward, backward, optimizer): the peaks within that phase of
  /// the step, the level at the phase's start included (what a monitor that
  /// resets the peak counters at each phase boundary reads).
  int64_t phase_allocated[3] = {0, 0, 0};
  int64_t phase_reserved[3] = {0, 0, 0};
  /// Blocks at the allocated peak by the rule that allocated them.
  std::vector<RuleShare> rules;
};

/// The allocated peak while a module runs, in forward and in backward.
struct ModulePeak {
  std::string module;  ///< Module path, as Node::modules names it ("layer1.0").
  /// Highest allocated while an op of the module runs in forward (the level
  /// before it included); 0 when it has no forward op.
  int64_t forward_allocated = 0;
  /// The same over its ops' backward, and their recomputation when the module
  /// is inside a checkpointed segment.
  int64_t backward_allocated = 0;
  /// Relative to where each call starts (a run of the module's ops without
  /// other ops between), so what comes before does not shift them: the most a
  /// forward call rises above its start, what forward calls keep (allocated at
  /// their end minus at their start, summed), the most a backward run rises.
  int64_t forward_rise = 0;
  int64_t forward_kept = 0;
  int64_t backward_rise = 0;
};

/// A representative kernel for GPU validation.
struct KernelShape {
  enum Kind { kGemm, kConv, kElementwise } kind = kGemm;
  std::vector<int64_t>
      dims;  ///< GEMM: m,n,k,batch. Conv: n,c,h,w,k,r,s,stride,pad. Elementwise: numel.
  DType dtype = DType::kFloat;
  std::string node;
};

/// One simulated variant of a training step as the allocator replay reads
/// it (PlanDetail::kStreams): every iteration's events (none read off
/// another), where each iteration's events start and end, and per storage
/// (a MemEvent id - 1) whether no measurement backs the rule that allocated
/// it under the plan's options (PeakOf's unbacked share). BatchModel
/// (batch_model.h) replays it at other sizes.
struct StepStream {
  std::vector<MemEvent> events;
  std::vector<std::pair<size_t, size_t>> iterations;
  std::vector<bool> storage_unbacked;
  /// Per storage, the evidence of the rule that allocated it (an index
  /// into rule_evidence, -1: no rule), from which storage_unbacked is read
  /// for the plan's mode and precision (for another precision as well).
  std::vector<int> storage_rule;
  std::vector<Evidence> rule_evidence;
};

/// Whether a plan with PlanDetail::kStreams has Plan::streams under
/// `options`: a training step on one GPU without a device limit (a limit
/// can stop the replay; data parallelism simulates per rank).
[[nodiscard]] bool PlansStepStreams(const PlanOptions& options);

/// StepStream::storage_unbacked under `options`: per storage, whether no
/// measurement in `rule_evidence` backs its rule in `storage_rule` for the
/// options' mode and precision (RuleShare::backed); a storage without a rule
/// (-1) is unbacked.
[[nodiscard]] std::vector<bool> UnbackedStorages(const std::vector<int>& storage_rule,
                                                 const std::vector<Evidence>& rule_evidence,
                                                 const PlanOptions& options);

/// One rank of a data-parallel job at its allocated peak (planner/distributed.h):
/// what it holds, in allocator blocks; the parts sum to Peak::allocated_bytes.
struct RankBreakdown {
  ParallelStrategy strategy = ParallelStrategy::kSingle;
  int64_t world_size = 1;
  int units = 0;                ///< FSDP/ZeRO-3 units sharded together (root included).
  int64_t params_local = 0;     ///< Parameters the rank keeps (its shards, or a replica).
  int64_t params_gathered = 0;  ///< All-gathered full parameters and all-gather buffers.
  int64_t grads = 0;            ///< Parameter gradients (unsharded ones before reduction).
  int64_t optimizer_state = 0;  ///< Its part of the optimizer state and foreach temporaries.
  int64_t grad_buckets = 0;     ///< DDP / ZeRO gradient buckets and partitions.
  int64_t reduce_scatter = 0;   ///< FSDP reduce-scatter input buffers.
  int64_t other = 0;            ///< Activations, transients, workspaces, inputs.
  int64_t nccl_bytes = 0;       ///< NCCL's device memory outside the allocator.
  std::string unit_running;     ///< The unit whose op holds the peak ("" when none).
  std::vector<std::string> unit_modules;  ///< FSDP/ZeRO-3 units but the root, in run order.
};

/// The memory plan for one configuration.
struct Plan {
  PlanOptions options;
  /// The value of the batch symbol; -1 when the model has none (fixed shapes).
  int64_t batch = 0;
  std::string batch_symbol;             ///< "" when the model has none.
  std::map<std::string, int64_t> dims;  ///< Every symbol bound, the batch's included.
  int64_t parameter_count = 0;          ///< Trainable parameters (LoRA adapters included).
  int64_t frozen_count = 0;             ///< Parameters kept fixed (fine-tuning).
  int64_t lora_count = 0;               ///< LoRA adapter parameters.
  /// As stored on the GPU (after casting; quantized weights packed, with
  /// their quantization state), frozen ones included.
  int64_t parameter_bytes = 0;
  int64_t quantized_bytes = 0;  ///< Of which quantized weights and their state.
  int64_t buffer_bytes = 0;     ///< Non-trainable initializers.
  Peak peak;                    ///< The configured step (steady or first).
  Peak first_step;              ///< Train: the first step (state created).
  Peak steady;                  ///< Train: a later step.
  int64_t context_bytes = 0;
  int64_t forward_flops = 0;
  int64_t backward_flops = 0;
  int64_t recompute_flops = 0;
  int64_t arena_lower_bound = 0;  ///< Inference: most activation bytes live at once.
  std::vector<TimelinePoint> timeline;
  /// Per module of the planned step, in the order they first run.
  std::vector<ModulePeak> modules;
  std::vector<MemEvent> events;  ///< When options.keep_events.
  /// When options.keep_events: per event, the op (node label) and phase it
  /// belongs to and what the memory is for (debugging, bench/plan_events).
  std::vector<std::string> event_nodes;
  std::vector<Phase> event_phases;
  std::vector<Category> event_categories;
  /// When options.keep_events: per event, the trainable parameter whose
  /// storage it is (its weight, gradient, optimizer state or foreach
  /// temporary: an index into param_names), -1 for any other; and the module
  /// scope (Node::scope) of the op it belongs to, "" for none.
  std::vector<int> event_params;
  std::vector<std::string> event_scopes;
  std::vector<size_t> iteration_starts;   ///< First event of each simulated step.
  std::vector<std::string> param_names;   ///< Trainable parameters, schedule order.
  std::vector<int64_t> param_bytes_each;  ///< Their bytes, same order.
  /// PlanDetail::kStreams, single-GPU training: each variant MakePlanFrom
  /// simulated (fp32 cuDNN engine kinds, in-place activations), in order.
  std::vector<StepStream> streams;
  /// Data parallelism: the rank's peak and what it holds (zero when single).
  RankBreakdown rank;
  std::vector<KernelShape> kernels;
  std::vector<std::string> warnings;
  Coverage coverage;  ///< Of `peak`: what measurements back it.
  /// The largest tensor over kInt32IndexElements read or written by an op
  /// whose CUDA kernel indexes in 32 bits (elements 0: none); see
  /// `largest_tensor` for any op.
  KernelLimit int32_overflow;
  KernelLimit largest_tensor;  ///< The tensor with the most elements.
  /// MakePlanFrom stopped at its reserved_limit: only peak.reserved_bytes (a
  /// lower bound of the reserved peak, above the limit) and
  /// peak.allocated_bytes (a lower bound of the allocated peak) are filled in.
  bool over_limit = false;
};

/// The default CUDA context + library state, measured on an H200 (torch 2.11).
constexpr int64_t kDefaultContextBytes = 767LL << 20;

/// Plans one step of `g` (shapes already inferred for `batch`).
Result<Plan> MakePlan(const Graph& g, int64_t batch, const PlanOptions& options);

/// What a plan fills in: everything, or only what a fit test reads (kPeaks:
/// no per-module peaks, no kernel shapes; peaks, timeline, coverage, FLOPs,
/// kernel limits and the rank's breakdown as kFull has them); kStreams is
/// kPeaks with Plan::streams (a single-GPU training step simulated through
/// all its iterations).
enum class PlanDetail { kFull, kPeaks, kStreams };

struct Schedule;
/// The schedule of the graph for `options` (one fp32_conv variant), its
/// checkpoint segments marked for options.checkpoint_segments; kept by the
/// caller for as long as MakePlanFrom runs.
using ScheduleSource = std::function<Result<const Schedule*>(const PlanOptions& options)>;

/// MakePlan from schedules the caller builds or keeps, with
/// options.checkpoint_segments already resolved to module paths
/// (ResolveCheckpointModules): the same plan MakePlan makes from the same
/// schedules, less what `detail` leaves out.
///
/// `reserved_limit` >= 0 is a fit test's: as soon as one variant's reserved
/// peak is sure to be above it (the most live bytes its simulation holds,
/// which the reserved bytes never go below, or its replayed reserved peak),
/// the plan stops and comes back with over_limit set. The plan's reserved
/// peak, the largest over its variants, would be above the limit too.
/// Ignored (the full plan is made) with options.allocator.device_limit set
/// (the replay may stop at an out-of-memory) and for data-parallel
/// strategies (a rank's peak is not the process's).
Result<Plan> MakePlanFrom(const Graph& g, int64_t batch, const PlanOptions& options,
                          const ScheduleSource& schedules, PlanDetail detail,
                          int64_t reserved_limit = -1);

}  // namespace memplan

#endif  // MEMPLAN_PLANNER_PLAN_H_
