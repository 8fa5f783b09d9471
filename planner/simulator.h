#ifndef MEMPLAN_PLANNER_SIMULATOR_H_
#define MEMPLAN_PLANNER_SIMULATOR_H_

/// The step simulation: replays the calibration protocol (model load,
/// forward, loss, backward, optimizer step) over a schedule and records the
/// allocator events, each annotated with its storage, step, op and rule.

#include <cstdint>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "planner/allocator_sim.h"
#include "planner/op_registry.h"
#include "planner/options.h"
#include "planner/plan.h"
#include "planner/rules.h"
#include "planner/schedule.h"

namespace memplan {

// One allocation the simulated process owns (24 bytes: a large graph's
// simulation holds millions). Its MemEvent id is its index + 1
// (Simulator::EventId): each storage is allocated once, when it is made.
struct Storage {
  int64_t bytes = 0;
  int refs = 0;
  int rule = -1;   // Simulator::rules index: what allocated it
  int param = -1;  // Schedule::params index of the weight it holds, grads or keeps state for
  Category cat = Category::kTransients;        // Current (after retags).
  Category first_cat = Category::kTransients;  // At allocation.
  bool live = false;
};
static_assert(sizeof(Storage) <= 24, "Storage is held per allocation: keep it small");

// The order in which an op's backward makes its inputs' gradients. Autograd
// computes a node's gradients in the sorted order of the argument names
// (tools/autograd/load_derivatives.py, sorted(defn.keys())): mm and bmm
// (self, mat2) make mat2's first, addmm (self, mat1, mat2) mat1's first
// (H200 traces: a bias-free head's weight gradient before its input
// gradient, lstm_lm_b fp32 b28, qwen_bigvocab amp_bf16 b16; a linear with
// bias on 2-D input the reverse, resnet18 fp32 b32). A MatMul runs as mm or
// bmm on (in[0], in[1]) unless in[1] is a vector (mv, dot: self first) or
// in[0] has at most 2 dimensions against in[1]'s 3 or more (matmul folds
// the larger operand: mm(in[1]^T, in[0]^T), whose mat2 is in[0]). A Gemm
// with C is addmm, without it mm. Other ops: input order. Written to
// `order` (its memory reused from call to call).
void BackwardInputOrder(const Schedule& s, const ExecOp& op, bool addmm,
                        std::vector<size_t>* order);

// Replays the training (or inference) protocol of the calibration script
// over a schedule and records allocator events.
class Simulator {
 public:
  Simulator(const Schedule& s, const PlanOptions& o) : s_(s), o_(o) {
    root_.resize(s.vals.size());
    for (size_t v = 0; v < s.vals.size(); ++v) {
      int r = static_cast<int>(v);
      while (s.vals[r].base >= 0) r = s.vals[r].base;
      root_[v] = r;
    }
    storage_of_val_.assign(s.vals.size(), -1);
    param_index_.assign(s.vals.size(), -1);
    for (size_t k = 0; k < s.params.size(); ++k) param_index_[s.params[k]] = static_cast<int>(k);
    op_rule_.reserve(s.ops.size());
    op_workspace_.reserve(s.ops.size());
    for (const ExecOp& op : s.ops) {
      op_rule_.push_back(Intern(RuleOfOp(s, op)));
      const OpDef* def = FindOp("", op.op_type);
      WorkspaceKind kind = WorkspaceKind::kOp;
      if (def != nullptr && def->cudnn_conv) kind = WorkspaceKind::kCudnnConv;
      if (def != nullptr && def->cudnn_rnn) kind = WorkspaceKind::kCudnnRnn;
      op_workspace_.push_back(kind);
      if (def != nullptr && def->channels_last == ChannelsLastRule::kKeepsInput0 &&
          !op.in.empty() && op.in[0] >= 0 &&
          IsChannelsLast(s.vals[op.in[0]].shape, s.vals[op.in[0]].strides)) {
        Use(Mech(Mechanism::kChannelsLast));
      }
    }
    Use(Mech(Mechanism::kAllocator));
    for (const Val& v : s.vals) {
      if (v.held_until >= 0) Use(Mech(Mechanism::kModuleCallHolding));
      if (v.held_by_local) Use(Mech(Mechanism::kPythonLocals));
    }
    saved_root_.assign(s.vals.size(), false);
    for (const ExecOp& op : s.ops) {
      for (const SavedRef& r : op.saved) {
        if (r.val >= 0) saved_root_[root_[r.val]] = true;
      }
    }
    last_use_.assign(s.vals.size(), -1);
    producer_.assign(s.vals.size(), -1);
    for (size_t i = 0; i < s.ops.size(); ++i) {
      for (int v : s.ops[i].in) {
        if (v >= 0) last_use_[v] = static_cast<int>(i);
      }
      for (int v : s.ops[i].out) {
        if (v >= 0) producer_[v] = static_cast<int>(i);
      }
      const int seg = s.ops[i].segment;
      if (seg < 0) continue;
      if (seg >= static_cast<int>(seg_first_.size())) {
        seg_first_.resize(seg + 1, -1);
        seg_last_.resize(seg + 1, -1);
        seg_inputs_.resize(seg + 1);
      }
      if (seg_first_[seg] < 0) seg_first_[seg] = static_cast<int>(i);
      seg_last_[seg] = static_cast<int>(i);
    }
    // A value dies after its last reader, or when the module call that got
    // it as an argument returns, whichever is later.
    // Kept as one array sorted by op (values in increasing order within
    // one), not a vector per op.
    // A value nobody reads that something holds past the op making it (a
    // C++ local of a kernel the plan spells out as ops) dies when that hold
    // ends; otherwise when the op making it ends (RunOps).
    auto release_op = [&](size_t v) {
      if (last_use_[v] >= 0) return std::max(last_use_[v], s.vals[v].held_until);
      return producer_[v] >= 0 && s.vals[v].held_until > producer_[v] ? s.vals[v].held_until : -1;
    };
    release_start_.assign(s.ops.size() + 1, 0);
    for (size_t v = 0; v < s.vals.size(); ++v) {
      if (release_op(v) >= 0) ++release_start_[release_op(v) + 1];
    }
    for (size_t i = 0; i < s.ops.size(); ++i) release_start_[i + 1] += release_start_[i];
    release_vals_.resize(release_start_.back());
    {
      std::vector<int> at(release_start_.begin(), release_start_.end() - 1);
      for (size_t v = 0; v < s.vals.size(); ++v) {
        if (release_op(v) < 0) continue;
        release_vals_[at[release_op(v)]++] = static_cast<int>(v);
      }
    }
    // A checkpointed segment keeps the tensors entering it.
    for (size_t i = 0; i < s.ops.size(); ++i) {
      const int seg = s.ops[i].segment;
      if (seg < 0) continue;
      for (int v : s.ops[i].in) {
        if (v < 0) continue;
        const int p = producer_[v];
        if (p < 0 || s.ops[p].segment != seg) seg_inputs_[seg].push_back(v);
      }
    }
  }

  // Events and their annotations.
  std::vector<MemEvent> events;
  std::vector<int> event_step;  // timeline step per event
  std::vector<int> event_op;    // schedule op whose kernel (or backward) made it; -1: none
  std::vector<Phase> steps_phase;
  /// The storage event `e` allocates or frees (-1: an empty_cache): read off
  /// its id (EventId), not kept per event (a large graph makes tens of
  /// millions).
  int EventStorage(size_t e) const {
    return events[e].empty_cache ? -1 : static_cast<int>(events[e].id - 1);
  }
  /// The label of timeline step `step` (an op's label, or "loss", ...).
  const std::string& StepLabel(int step) const {
    const int id = steps_label_[step];
    return id >= 0 ? s_.ops[id].label : other_labels_[-id - 1];
  }
  std::vector<int> iteration_start;  // first step index of each iteration
  std::vector<std::pair<size_t, size_t>> iteration_events;
  std::vector<Storage> storages;
  // (event index, storage, new category) applied when replaying categories.
  std::vector<std::tuple<size_t, int, Category>> retags;
  int64_t forward_flops = 0;
  int64_t backward_flops = 0;
  // The rules that allocate (evidence.h), and whether the step used each.
  std::vector<RuleRef> rules;
  std::vector<bool> rule_used;
  /// Whether some op ran in place, or (InPlace::kOff) would have run in place
  /// had the options said kOn. False: the other setting of o.inplace
  /// simulates this very step (InPlaceStorage is where they part).
  bool in_place_matters = false;

  void Run();

  /// Set before Run() (training only): stop after the second steady
  /// iteration when the third would repeat it, i.e. when the state the
  /// second one left (the live storages with every field, which storage
  /// each value, gradient and kept list names, the flags and interned rules)
  /// is the state the first one left, new storages aside: the iterations are
  /// one deterministic function of that state, so the third would make the
  /// second's events again (new ids and storages renumbered). Whether the
  /// allocator also ends where it began is the caller's to check.
  bool stop_when_steady = false;
  /// Run() stopped so: iteration_events has two steady entries less one.
  bool steady_repeats = false;
  /// After such a stop: runs the third iteration after all (steady_repeats
  /// becomes false).
  void RunRepeatedIteration();
  /// After such a stop, where the caller keeps the second iteration as the
  /// third: the FLOP counters count it twice, as three iterations would.
  void CountRepeatedIteration();

 private:
  int Intern(const RuleRef& r) {
    auto it = rule_ids_.find(r.name);
    if (it != rule_ids_.end()) return it->second;
    rules.push_back(r);
    rule_used.push_back(false);
    const int id = static_cast<int>(rules.size()) - 1;
    rule_ids_.emplace(r.name, id);
    return id;
  }
  // The rule of mechanism `m`, interned at its first use.
  int Mech(Mechanism m) {
    int& id = mech_rule_[static_cast<int>(m)];
    if (id < 0) id = Intern(RuleOfMechanism(m));
    return id;
  }
  // Marks a rule used and makes it the one allocating from now on.
  void Use(int rule) {
    cur_rule_ = rule;
    if (rule >= 0) rule_used[rule] = true;
  }
  // The rule of op i's outputs, saved tensors and gradients.
  int OpRule(size_t i) {
    return recomputing_ ? Mech(Mechanism::kCheckpointRecompute) : op_rule_[i];
  }
  // The rule of op i's workspaces.
  int WorkspaceRule(size_t i) {
    if (op_workspace_[i] == WorkspaceKind::kCudnnRnn) {
      return Mech(s_.ops[i].rnn_workspace_fitted ? Mechanism::kRnnWorkspaceFitted
                                                 : Mechanism::kRnnWorkspace);
    }
    return TempRule(i);
  }
  // The rule of op i's backward temporaries and copies around its workspaces.
  int TempRule(size_t i) {
    if (op_workspace_[i] == WorkspaceKind::kCudnnConv) return Mech(Mechanism::kConvWorkspace);
    return OpRule(i);
  }
  int NewStorage(int64_t bytes, Category cat) {
    Storage st;
    st.bytes = bytes;
    st.cat = cat;
    st.first_cat = cat;
    st.rule = cur_rule_;
    storages.push_back(st);
    return static_cast<int>(storages.size()) - 1;
  }
  // A step of the timeline, labelled by schedule op `op` (no copy of its
  // label per step and iteration) or by `label`.
  void OpStep(Phase phase, size_t op) {
    steps_phase.push_back(phase);
    steps_label_.push_back(static_cast<int>(op));
  }
  void Step(Phase phase, const std::string& label) {
    steps_phase.push_back(phase);
    auto it = other_label_ids_.find(label);
    if (it == other_label_ids_.end()) {
      other_labels_.push_back(label);
      it = other_label_ids_.emplace(label, -static_cast<int>(other_labels_.size())).first;
    }
    steps_label_.push_back(it->second);
  }
  int CurStep() const { return static_cast<int>(steps_phase.size()) - 1; }
  void Alloc(int st) {
    Storage& s = storages[st];
    s.live = true;
    events.push_back(MemEvent{EventId(st), s.bytes, true});
    event_step.push_back(CurStep());
    event_op.push_back(cur_op_);
  }
  void Free(int st) {
    Storage& s = storages[st];
    if (!s.live) return;
    s.live = false;
    events.push_back(MemEvent{EventId(st), 0, false});
    event_step.push_back(CurStep());
    event_op.push_back(cur_op_);
  }
  int AllocNew(int64_t bytes, Category cat) {
    const int st = NewStorage(bytes, cat);
    Alloc(st);
    return st;
  }
  /// One allocation per positive size, in order.
  std::vector<int> AllocEach(const std::vector<int64_t>& sizes, Category cat) {
    std::vector<int> out;
    for (int64_t b : sizes) {
      if (b > 0) out.push_back(AllocNew(b, cat));
    }
    return out;
  }
  void FreeLastFirst(const std::vector<int>& sts) {
    for (auto it = sts.rbegin(); it != sts.rend(); ++it) Free(*it);
  }
  // Values without a storage (constants PyTorch keeps on the host) are
  // skipped.
  void Ref(int st) {
    if (st >= 0) ++storages[st].refs;
  }
  void Unref(int st) {
    if (st < 0) return;
    if (--storages[st].refs <= 0) Free(st);
  }
  void Retag(int st, Category c) {
    if (storages[st].cat == c) return;
    storages[st].cat = c;
    retags.emplace_back(events.size(), st, c);
  }

  void LoadModel();
  void Iteration(bool first);
  void Forward(bool grad_mode);
  void Loss();
  void Backward();
  void OptimizerStep(bool first);
  void ReleaseForward();
  /// `is_view`: the gradient is a view of another (a view op's backward).
  void AddGrad(int val, int grad_storage, bool is_view);
  // The gradients of a grad_in_weight_pass op's weights: one allocation
  // each, or one for all (flat_weight_grads).
  void WeightPassGrads(const ExecOp& op, std::vector<std::pair<int, int>>* produced);
  // The rule the loss and its backward allocate under.
  int LossRule() {
    if (o_.loss == Loss::kMse) return Mech(Mechanism::kMseLoss);
    if (o_.loss == Loss::kCrossEntropy) {
      const bool pixels = s_.logits >= 0 && s_.vals[s_.logits].shape.size() >= 4;
      return Mech(pixels ? Mechanism::kCrossEntropyPixels : Mechanism::kCrossEntropy);
    }
    // No loss: a scalar of the output's op.
    const int p = s_.logits >= 0 ? producer_[s_.logits] : -1;
    return p >= 0 ? op_rule_[p] : -1;
  }
  int ValStorage(int v) const { return storage_of_val_[root_[v]]; }
  bool IsGraphInput(int v) const {
    for (int x : s_.inputs) {
      if (x == v) return true;
    }
    return false;
  }
  // Runs `op`'s kernel: its outputs get storage (a view's base, the input it
  // overwrites in place, or a new allocation), then its workspace comes and
  // goes. `grad_mode`: outputs that backward keeps count as saved.
  // `keep_at` >= 0: what the op keeps for backward is referenced as op
  // `keep_at`'s (inside the call for saved_in_kernel ops, else after it).
  void RunKernel(size_t i, bool grad_mode, bool input_dies_here, int keep_at);
  // References what `op` keeps for backward (new tensors allocated).
  // `input_copy`: the storage an in-place op saves for its input (-1: none).
  void KeepSaved(const ExecOp& op, size_t i, int input_copy);
  // The storage an in-place run of `op` would write into (its first input's,
  // when the input dies with this op and nothing else holds it), else -1;
  // whatever o_.inplace says.
  int InPlaceStorage(const ExecOp& op, bool input_dies_here) const {
    if (!op.inplace_candidate || !input_dies_here) return -1;
    const int v = op.in[0];
    const Val& val = s_.vals[v];
    if (root_[v] != v || val.is_param || val.is_buffer || val.held_until > last_use_[v] ||
        IsGraphInput(v)) {
      return -1;
    }
    const int st = storage_of_val_[v];
    if (st < 0 || storages[st].refs != 1 || storages[st].bytes != s_.vals[op.out[0]].bytes) {
      return -1;
    }
    return st;
  }
  int Root(int v) const { return root_[v]; }

  const Schedule& s_;
  const PlanOptions& o_;
  // Per step: a schedule op's index (its label), or -(k + 1) for other_labels_[k].
  std::vector<int> steps_label_;
  std::vector<std::string> other_labels_;  // the few labels that are no op's
  std::unordered_map<std::string, int> other_label_ids_;
  static int64_t EventId(int st) { return int64_t{st} + 1; }
  int cur_op_ = -1;  // the op running now (events are attributed to it)
  std::unordered_map<std::string, int> rule_ids_;
  std::vector<int> op_rule_;  // per op
  // Whose rule an op's workspace belongs to: the op's, cuDNN convolution's
  // (OpDef::cudnn_conv) or cuDNN RNN's (OpDef::cudnn_rnn).
  enum class WorkspaceKind : uint8_t { kOp, kCudnnConv, kCudnnRnn };
  std::vector<WorkspaceKind> op_workspace_;                            // per op
  std::vector<int> mech_rule_ = std::vector<int>(kNumMechanisms, -1);  // per Mechanism, -1: unused
  int cur_rule_ = -1;
  bool recomputing_ = false;
  std::vector<int> root_;
  std::vector<int> storage_of_val_;  // by root val
  std::vector<int> param_index_;     // by val: index into Schedule::params, -1
  std::vector<bool> saved_root_;
  std::vector<int> last_use_;
  // Values that die after op i: release_vals_[release_start_[i] .. release_start_[i + 1]).
  std::vector<int> release_start_;
  std::vector<int> release_vals_;
  bool fwd_workspace_ = false;
  bool bwd_workspace_ = false;
  // The cuBLASLt workspaces of the forward thread and autograd's (ExecOp::lt_bias).
  bool fwd_lt_workspace_ = false;
  bool bwd_lt_workspace_ = false;
  // Outputs of an outputs_made_by_next op, waiting for the next op.
  std::vector<int> deferred_outputs_;
  // addmm's bias, waiting for the product's backward: op -> its BiasAdd op.
  std::unordered_map<int, int> addmm_bias_;
  bool process_state_ = false;
  // Per iteration.
  std::vector<std::vector<int>> saved_storages_;  // per op: storages referenced
  std::vector<int> held_;                         // weight-cache refs
  std::unordered_map<int, int> grad_of_;          // val -> grad storage
  /// Gradient storages laid out contiguous for a forward value that is a
  /// non-contiguous view (a Slice's zeros, an unbind's stack of a permuted
  /// tensor): reshaped back through a view, PyTorch copies them.
  std::unordered_set<int> permuted_grads_;
  /// Gradient storages a transpose's backward handed on in another order
  /// than the value they are the gradient of (a convolution copies them).
  std::unordered_set<int> transposed_grads_;
  /// Values whose gradient is a view another op's backward made of a
  /// gradient (ExecOp::grad_is_view): the view keeps its base alive.
  std::unordered_set<int> view_grad_vals_;
  // Backward's per-op lists, kept so that their memory is reused from op to
  // op: the gradients an op produced, and its inputs in backward order.
  std::vector<std::pair<int, int>> produced_;
  std::vector<size_t> input_order_;
  /// Per Slice of an unbind call (ExecOp::stack_leader): the ops of its call.
  std::unordered_map<int, std::vector<int>> stack_members_;
  std::vector<int> param_grad_;  // by param index
  std::vector<int> state_;       // optimizer state storages
  int logits_storage_ = -1;
  std::vector<int> loss_storages_;
  std::vector<int> loss_saved_;
  // Checkpointed segments (torch.utils.checkpoint, non-reentrant).
  std::vector<int> producer_;
  std::vector<int> seg_first_, seg_last_;
  std::vector<std::vector<int>> seg_inputs_;
  std::vector<std::vector<int>> seg_held_;
  std::vector<bool> recomputed_;

 public:
  int64_t recompute_flops = 0;

 private:
  void Recompute(int seg);
  void ReleaseSegment(int seg);
  // The state between iterations that decides the next one (stop_when_steady),
  // handed to `emit` one value at a time until it returns false (then false).
  template <typename Emit>
  bool EmitIterationState(Emit&& emit) const;
  std::vector<int64_t> IterationState() const;
  // IterationState() == state, without building it.
  bool IterationStateEquals(const std::vector<int64_t>& state) const;
  // Room in the per-event, per-storage and per-step vectors for `n` more
  // iterations the size of the first (iteration_sizes_).
  void ReserveIterations(size_t n);
  size_t iteration_sizes_[3] = {0, 0, 0};  // events, storages, steps of the first iteration
  int64_t repeat_flops_[3] = {0, 0, 0};    // forward, backward, recompute of the last iteration
};

}  // namespace memplan

#endif  // MEMPLAN_PLANNER_SIMULATOR_H_
