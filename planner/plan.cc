#include "planner/plan.h"

#include <algorithm>
#include <map>
#include <unordered_map>

#include "planner/arena.h"
#include "planner/checked.h"
#include "planner/checkpoint.h"
#include "planner/op_registry.h"
#include "planner/rules.h"
#include "planner/schedule.h"

namespace memplan {

const char* PhaseName(Phase p) {
  switch (p) {
    case Phase::kForward:
      return "forward";
    case Phase::kBackward:
      return "backward";
    case Phase::kOptimizer:
      return "optimizer";
  }
  return "?";
}

const char* CategoryName(Category c) {
  switch (c) {
    case Category::kParameters:
      return "parameters";
    case Category::kGradients:
      return "gradients";
    case Category::kOptimizerState:
      return "optimizer_state";
    case Category::kSavedActivations:
      return "saved_activations";
    case Category::kTransients:
      return "transients";
    case Category::kWorkspaces:
      return "workspaces";
  }
  return "?";
}

double Coverage::UnbackedShare() const {
  return peak_bytes > 0 ? static_cast<double>(unbacked_bytes) / static_cast<double>(peak_bytes)
                        : 0.0;
}

int64_t Breakdown::Total() const {
  int64_t t = 0;
  for (int64_t b : bytes) t += b;
  return t;
}

namespace {

// cuBLAS workspace per handle on sm90 (CublasHandlePool.cpp): the forward
// thread's handle gets one at the first GEMM, autograd's thread another at
// the first backward GEMM.
constexpr int64_t kCublasWorkspaceBytes = 32LL << 20;
// Measured on the H200 (fresh.jsonl): 1 MiB more persists from the first
// backward on (README of the calibration data).
constexpr int64_t kBackwardExtraBytes = 1LL << 20;

// One allocation the simulated process owns.
struct Storage {
  int64_t bytes = 0;
  Category cat = Category::kTransients;        // Current (after retags).
  Category first_cat = Category::kTransients;  // At allocation.
  int refs = 0;
  bool live = false;
  int64_t id = -1;  // MemEvent id while live
  int rule = -1;    // Simulator::rules index: what allocated it
};

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
    for (const ExecOp& op : s.ops) op_rule_.push_back(Intern(RuleOfOp(s, op)));
    Use(Mech(Mechanism::kAllocator));
    for (const Val& v : s.vals) {
      if (v.held_until >= 0) Use(Mech(Mechanism::kModuleCallHolding));
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
    release_.assign(s.ops.size(), {});
    for (size_t v = 0; v < s.vals.size(); ++v) {
      if (last_use_[v] < 0) continue;
      release_[std::max(last_use_[v], s.vals[v].held_until)].push_back(static_cast<int>(v));
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
  std::vector<int> event_storage;  // storage index per event
  std::vector<int> event_step;     // timeline step per event
  std::vector<int> event_op;       // schedule op whose kernel (or backward) made it; -1: none
  std::vector<Phase> steps_phase;
  std::vector<std::string> steps_label;
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

  void Run();

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
  int Mech(Mechanism m) { return Intern(RuleOfMechanism(m)); }
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
    const OpDef* def = FindOp("", s_.ops[i].op_type);
    if (def && def->cudnn_conv) return Mech(Mechanism::kConvWorkspace);
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
  void Step(Phase phase, const std::string& label) {
    steps_phase.push_back(phase);
    steps_label.push_back(label);
  }
  int CurStep() const { return static_cast<int>(steps_phase.size()) - 1; }
  void Alloc(int st) {
    Storage& s = storages[st];
    s.live = true;
    s.id = next_id_++;
    events.push_back(MemEvent{s.id, s.bytes, true});
    event_storage.push_back(st);
    event_step.push_back(CurStep());
    event_op.push_back(cur_op_);
  }
  void Free(int st) {
    Storage& s = storages[st];
    if (!s.live) return;
    s.live = false;
    events.push_back(MemEvent{s.id, 0, false});
    event_storage.push_back(st);
    event_step.push_back(CurStep());
    event_op.push_back(cur_op_);
  }
  int AllocNew(int64_t bytes, Category cat) {
    const int st = NewStorage(bytes, cat);
    Alloc(st);
    return st;
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
  void AddGrad(int val, int grad_storage);
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
  void KeepSaved(const ExecOp& op, size_t i);
  // The storage an in-place run of `op` writes into (its first input's, when
  // the input dies with this op and nothing else holds it), else -1.
  int InPlaceStorage(const ExecOp& op, bool input_dies_here) const {
    if (o_.inplace != InPlace::kOn || !op.inplace_candidate || !input_dies_here) return -1;
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
  int64_t next_id_ = 1;
  int cur_op_ = -1;  // the op running now (events are attributed to it)
  std::unordered_map<std::string, int> rule_ids_;
  std::vector<int> op_rule_;  // per op
  int cur_rule_ = -1;
  bool recomputing_ = false;
  std::vector<int> root_;
  std::vector<int> storage_of_val_;  // by root val
  std::vector<bool> saved_root_;
  std::vector<int> last_use_;
  std::vector<std::vector<int>> release_;  // per op: values that die after it
  bool fwd_workspace_ = false;
  bool bwd_workspace_ = false;
  bool process_state_ = false;
  // Per iteration.
  std::vector<std::vector<int>> saved_storages_;  // per op: storages referenced
  std::vector<int> held_;                         // weight-cache refs
  std::unordered_map<int, int> grad_of_;          // val -> grad storage
  std::vector<int> param_grad_;                   // by param index
  std::vector<int> state_;                        // optimizer state storages
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
};

void Simulator::LoadModel() {
  Step(Phase::kForward, "model.cuda()");
  // model.cuda() moves parameters and buffers in module order.
  std::vector<int> order = s_.params;
  order.insert(order.end(), s_.buffers.begin(), s_.buffers.end());
  std::sort(order.begin(), order.end());
  const bool cast = o_.precision == Precision::kBf16 || o_.precision == Precision::kFp16;
  Use(Mech(Mechanism::kParameters));
  for (int v : order) {
    // A model cast to half is loaded in fp32 first (model.cuda().half()).
    const int64_t bytes = cast ? 2 * s_.vals[v].bytes : s_.vals[v].bytes;
    const int st = AllocNew(bytes, Category::kParameters);
    Ref(st);
    storage_of_val_[v] = st;
  }
  if (cast) {
    Step(Phase::kForward, "model.half()");
    Use(Mech(Mechanism::kModelCast));
    for (int v : order) {
      const int old = storage_of_val_[v];
      const int st = AllocNew(s_.vals[v].bytes, Category::kParameters);
      Ref(st);
      storage_of_val_[v] = st;
      Unref(old);
    }
    // Training scripts empty the cache after the cast (the calibration
    // protocol does); inference ones rarely do.
    if (o_.mode == Mode::kTrain) {
      MemEvent e;
      e.empty_cache = true;
      e.is_alloc = false;
      events.push_back(e);
      event_storage.push_back(-1);
      event_step.push_back(CurStep());
      event_op.push_back(-1);
    }
  }
  Step(Phase::kForward, "input");
  Use(Mech(Mechanism::kInputBatch));
  for (int v : s_.inputs) {
    const int st = AllocNew(s_.vals[v].bytes, Category::kParameters);
    Ref(st);
    storage_of_val_[v] = st;
  }
}

void Simulator::RunKernel(size_t i, bool grad_mode, bool input_dies_here, int keep_at) {
  const ExecOp& op = s_.ops[i];
  Use(OpRule(i));
  if (op.process_state_bytes > 0 && !process_state_) {
    process_state_ = true;
    Ref(AllocNew(op.process_state_bytes, Category::kWorkspaces));
  }
  const int temp = op.fwd_temp_bytes > 0 ? AllocNew(op.fwd_temp_bytes, Category::kTransients) : -1;
  const int inplace = InPlaceStorage(op, input_dies_here);
  for (int v : op.out) {
    if (v < 0 || s_.vals[v].phantom) continue;
    const int r = root_[v];
    if (op.view && r != v) {
      // A view: keeps its base's storage alive while it lives.
      Ref(storage_of_val_[r]);
      continue;
    }
    const Category cat =
        (grad_mode && saved_root_[r]) ? Category::kSavedActivations : Category::kTransients;
    if (inplace >= 0 && v == op.out[0]) {
      storage_of_val_[r] = inplace;
      Ref(inplace);
      Retag(inplace, cat);
      continue;
    }
    const int st = AllocNew(s_.vals[v].bytes, cat);
    storage_of_val_[r] = st;
    Ref(st);
  }
  // Kernels take their workspace after the outputs exist.
  int ws = -1;
  if (op.fwd_workspace > 0) {
    Use(WorkspaceRule(i));
    ws = AllocNew(op.fwd_workspace, Category::kWorkspaces);
  }
  if (keep_at >= 0 && op.saved_in_kernel) KeepSaved(op, keep_at);
  if (ws >= 0) Free(ws);
  if (temp >= 0) Free(temp);
  if (keep_at >= 0 && !op.saved_in_kernel) KeepSaved(op, keep_at);
}

void Simulator::KeepSaved(const ExecOp& op, size_t i) {
  Use(OpRule(i));
  for (const SavedRef& sr : op.saved) {
    int st;
    if (sr.val >= 0) {
      st = ValStorage(sr.val);
      if (st < 0) continue;
    } else {
      st = AllocNew(sr.bytes, Category::kSavedActivations);
    }
    Ref(st);
    saved_storages_[i].push_back(st);
  }
}

void Simulator::Forward(bool grad_mode) {
  saved_storages_.assign(s_.ops.size(), {});
  held_.clear();
  seg_held_.assign(seg_first_.size(), {});
  recomputed_.assign(seg_first_.size(), false);
  for (size_t i = 0; i < s_.ops.size(); ++i) {
    const ExecOp& op = s_.ops[i];
    cur_op_ = static_cast<int>(i);
    Step(Phase::kForward, op.label);
    const bool checkpointed = grad_mode && op.segment >= 0;
    if (checkpointed && seg_first_[op.segment] == static_cast<int>(i)) {
      for (int v : seg_inputs_[op.segment]) {
        const int st = ValStorage(v);
        if (st < 0) continue;
        Ref(st);
        seg_held_[op.segment].push_back(st);
      }
    }
    forward_flops = SatAdd(forward_flops, op.flops);
    if (op.uses_cublas && !fwd_workspace_) {
      fwd_workspace_ = true;
      Use(Mech(Mechanism::kCublasWorkspace));
      Ref(AllocNew(kCublasWorkspaceBytes, Category::kWorkspaces));
    }
    RunKernel(i, grad_mode,
              !op.in.empty() && op.in[0] >= 0 && last_use_[op.in[0]] == static_cast<int>(i),
              grad_mode && !checkpointed ? static_cast<int>(i) : -1);
    if (grad_mode) {
      if (op.hold_to_forward_end) {
        for (int v : op.out) {
          if (v >= 0) {
            Ref(ValStorage(v));
            held_.push_back(ValStorage(v));
          }
        }
      }
    }
    // Values whose last reader was this op die (the logits live on as `out`).
    for (int v : release_[i]) {
      if (v == s_.logits) continue;
      if (s_.vals[v].is_param || s_.vals[v].is_buffer || IsGraphInput(v)) continue;
      Unref(ValStorage(v));
    }
    for (int v : op.out) {
      if (v < 0 || s_.vals[v].phantom || v == s_.logits) continue;
      if (last_use_[v] < 0) Unref(ValStorage(v));
    }
  }
  cur_op_ = -1;
}

void Simulator::Loss() {
  const int L = s_.logits;
  if (L < 0) return;
  logits_storage_ = ValStorage(L);
  const Val& lv = s_.vals[L];
  int64_t numel = 1;
  for (int64_t d : lv.shape) numel *= d;
  // F.cross_entropy takes the classes on dim 1 of an [N, C, d1, ...] input
  // (nll_loss2d: per-pixel labels [N, d1, ...]); logits of rank 2 or 3 are
  // [N, C] or [B, S, V] flattened to [B * S, V].
  const int64_t classes = lv.shape.empty()       ? 1
                          : lv.shape.size() >= 4 ? lv.shape[1]
                                                 : lv.shape.back();
  const int64_t rows = classes > 0 ? numel / classes : 0;
  const bool amp = o_.precision == Precision::kAmpBf16 || o_.precision == Precision::kAmpFp16;
  int64_t elem = 0;
  DTypeBytes(lv.dtype, 1, &elem);
  loss_storages_.clear();
  loss_saved_.clear();
  Step(Phase::kForward, "loss");
  Use(LossRule());
  if (o_.loss == Loss::kCrossEntropy) {
    // Labels (int64), log p, the scalar loss and nll_loss's total weight.
    // cross_entropy_loss (aten/src/ATen/native/LossNLL.cpp) calls
    // log_softmax(self, class_dim, self.scalar_type()): an explicit dtype,
    // which autocast's fp32_set_opt_dtype policy leaves alone, so log p has
    // the logits' dtype and is saved by log_softmax. cross_entropy_loss is
    // not on autocast's CUDA lists, nll_loss / nll_loss2d are (fp32): with
    // half logits under autocast nll_loss gets an fp32 copy of log p, which
    // it saves as its `self` (autocast_mode.cpp; derivatives.yaml).
    const bool half_logits = amp && elem == 2;
    const int64_t scalar_elem = amp ? 4 : elem;
    const int labels = AllocNew(rows * 8, Category::kTransients);
    const int logp = AllocNew(SatMulNonNeg(numel, elem), Category::kSavedActivations);
    const int logp_fp32 =
        half_logits ? AllocNew(SatMulNonNeg(numel, 4), Category::kSavedActivations) : -1;
    const int loss = AllocNew(scalar_elem, Category::kTransients);
    const int weight = AllocNew(scalar_elem, Category::kSavedActivations);
    loss_saved_ = {labels, logp, weight, logp_fp32};
    loss_storages_ = {loss};
  } else if (o_.loss == Loss::kMse) {
    const int target = AllocNew(numel * elem, Category::kSavedActivations);
    int input_copy = -1;
    if (amp && elem != 4) input_copy = AllocNew(numel * 4, Category::kSavedActivations);
    const int loss = AllocNew(4, Category::kTransients);
    loss_saved_ = {target};
    if (input_copy >= 0) loss_saved_.push_back(input_copy);
    loss_storages_ = {loss};
  } else {
    loss_storages_ = {AllocNew(elem, Category::kTransients)};
  }
  // Leaving autocast drops the weight cache.
  for (int st : held_) Unref(st);
  held_.clear();
}

void Simulator::AddGrad(int val, int g) {
  if (g < 0) return;
  const Val& v = s_.vals[val];
  if (!v.requires_grad) {
    Unref(g);
    return;
  }
  auto it = grad_of_.find(val);
  if (it != grad_of_.end()) {
    // Accumulated in place into the first gradient.
    Unref(g);
    return;
  }
  if (v.is_param) {
    Retag(g, Category::kGradients);
  }
  grad_of_[val] = g;
}

void Simulator::WeightPassGrads(const ExecOp& op, std::vector<std::pair<int, int>>* produced) {
  std::vector<int> weights;
  int64_t total = 0;
  for (size_t i = 0; i < op.in.size() && i < op.grad_in_weight_pass.size(); ++i) {
    if (!op.grad_in[i] || !op.grad_in_weight_pass[i]) continue;
    weights.push_back(op.in[i]);
    total = SatAdd(total, s_.vals[op.in[i]].bytes);
  }
  if (weights.empty()) return;
  bool params = true;
  for (int v : weights) params = params && s_.vals[v].is_param;
  const Category cat = params ? Category::kGradients : Category::kTransients;
  if (op.flat_weight_grads) {
    const int st = AllocNew(total, cat);
    for (int v : weights) {
      Ref(st);
      produced->emplace_back(v, st);
    }
    return;
  }
  for (int v : weights) {
    const int st = AllocNew(s_.vals[v].bytes, s_.vals[v].is_param ? cat : Category::kTransients);
    Ref(st);
    produced->emplace_back(v, st);
  }
}

void Simulator::Backward() {
  const int L = s_.logits;
  const Val& lv = s_.vals[L];
  int64_t numel = 1;
  for (int64_t d : lv.shape) numel *= d;
  const bool amp = o_.precision == Precision::kAmpBf16 || o_.precision == Precision::kAmpFp16;
  // The logits' size from shape and dtype: the output may be a view (a
  // linear layer's bias added in place), whose own bytes are 0.
  int64_t elem = 0;
  DTypeBytes(lv.dtype, 1, &elem);
  const int64_t logits_bytes = SatMulNonNeg(numel, elem);
  Step(Phase::kBackward, "loss backward");
  Use(LossRule());
  int g;
  if (o_.loss == Loss::kCrossEntropy) {
    // nll_loss backward writes d(log p) in its input's dtype and its node
    // lets go of what it saved (the fp32 copy of log p under autocast, the
    // labels, the total weight) before the next node runs (families traces
    // deeplab_mnv3_train_16_amp_bf16: the [N, H, W] labels are freed right
    // after d(log p) is allocated; qwen_bigvocab_train_16_amp_bf16: the fp32
    // copy too). Under autocast the cast's backward brings d(log p) to the
    // logits' dtype; log_softmax backward reads it and the saved log p and
    // writes d(logits).
    const int logp_fp32 = loss_saved_[3];
    const int glogp = AllocNew(SatMulNonNeg(numel, logp_fp32 >= 0 ? 4 : elem),
                               Category::kTransients);
    if (logp_fp32 >= 0) Unref(logp_fp32);
    Unref(loss_saved_[0]);
    Unref(loss_saved_[2]);
    int glogp_cast = -1;
    if (logp_fp32 >= 0) {
      glogp_cast = AllocNew(logits_bytes, Category::kTransients);
      Free(glogp);
    }
    g = AllocNew(logits_bytes, Category::kTransients);
    if (glogp_cast >= 0) {
      Free(glogp_cast);
    } else {
      Free(glogp);
    }
    Unref(loss_saved_[1]);
  } else if (o_.loss == Loss::kMse) {
    g = AllocNew(logits_bytes, Category::kTransients);
    for (int st : loss_saved_) Unref(st);
  } else {
    g = AllocNew(0, Category::kTransients);
  }
  Ref(g);
  grad_of_[L] = g;
  for (size_t k = s_.ops.size(); k-- > 0;) {
    const ExecOp& op = s_.ops[k];
    bool has_grad = false;
    for (int v : op.out) has_grad = has_grad || (v >= 0 && grad_of_.count(v));
    if (!has_grad) {
      if (op.segment >= 0 && seg_first_[op.segment] == static_cast<int>(k)) {
        ReleaseSegment(op.segment);
      }
      continue;
    }
    if (op.segment >= 0 && !recomputed_[op.segment]) Recompute(op.segment);
    cur_op_ = static_cast<int>(k);
    Step(Phase::kBackward, op.label);
    backward_flops = SatAdd(backward_flops, SatMulNonNeg(2, op.flops));
    if (op.uses_cublas && !bwd_workspace_) {
      bwd_workspace_ = true;
      Use(Mech(Mechanism::kCublasWorkspace));
      Ref(AllocNew(kCublasWorkspaceBytes, Category::kWorkspaces));
      Ref(AllocNew(kBackwardExtraBytes, Category::kWorkspaces));
    }
    const int op_rule = OpRule(k);
    const int grad_rule = Mech(Mechanism::kParameterGradients);
    Use(op_rule);
    std::vector<std::pair<int, int>> produced;  // (input val, grad storage)
    const int out_grad =
        op.out.empty() || op.out[0] < 0 || !grad_of_.count(op.out[0]) ? -1 : grad_of_[op.out[0]];
    switch (op.grad_kind) {
      case GradKind::kAlias:
        for (size_t i = 0; i < op.in.size(); ++i) {
          if (!op.grad_in[i] || out_grad < 0) continue;
          Ref(out_grad);
          produced.emplace_back(op.in[i], out_grad);
        }
        break;
      case GradKind::kBiasAdd:
        if (op.grad_in[0] && out_grad >= 0) {
          Ref(out_grad);
          produced.emplace_back(op.in[0], out_grad);
        }
        if (op.grad_in.size() > 1 && op.grad_in[1]) {
          const int v = op.in[1];
          const Category cat =
              s_.vals[Root(v)].is_param ? Category::kGradients : Category::kTransients;
          Use(cat == Category::kGradients ? grad_rule : op_rule);
          const int st = AllocNew(s_.vals[v].bytes, cat);
          Ref(st);
          produced.emplace_back(v, st);
        }
        break;
      case GradKind::kGather:
        if (!op.grad_in.empty() && op.grad_in[0]) {
          const int st = AllocNew(s_.vals[op.in[0]].bytes > 0 ? s_.vals[op.in[0]].bytes
                                                              : s_.vals[root_[op.in[0]]].bytes,
                                  Category::kTransients);
          Ref(st);
          produced.emplace_back(op.in[0], st);
        }
        break;
      case GradKind::kNew:
        for (size_t i = 0; i < op.in.size(); ++i) {
          if (!op.grad_in[i]) continue;
          const int v = op.in[i];
          if (i < op.grad_in_weight_pass.size() && op.grad_in_weight_pass[i]) continue;
          int64_t bytes = s_.vals[v].bytes;
          if (s_.vals[v].base >= 0) {
            // Gradient of a view input: a dense tensor of the view's size.
            int64_t n = 0;
            CheckedNumel(s_.vals[v].shape, &n);
            DTypeBytes(s_.vals[v].dtype, n, &bytes);
          }
          const Category cat = s_.vals[v].is_param ? Category::kGradients : Category::kTransients;
          Use(cat == Category::kGradients ? grad_rule : op_rule);
          const int st = AllocNew(bytes, cat);
          Ref(st);
          produced.emplace_back(v, st);
        }
        break;
    }
    Use(WorkspaceRule(k));
    if (op.bwd_workspace > 0) Free(AllocNew(op.bwd_workspace, Category::kWorkspaces));
    if (!op.grad_in_weight_pass.empty() && op.grad_kind == GradKind::kNew) {
      WeightPassGrads(op, &produced);
    }
    if (op.bwd_weight_workspace > 0) {
      Free(AllocNew(op.bwd_weight_workspace, Category::kWorkspaces));
    }
    for (int v : op.out) {
      if (v < 0) continue;
      auto it = grad_of_.find(v);
      if (it == grad_of_.end()) continue;
      Unref(it->second);
      grad_of_.erase(it);
    }
    for (int st : saved_storages_[k]) Unref(st);
    saved_storages_[k].clear();
    for (const auto& p : produced) AddGrad(p.first, p.second);
    if (op.segment >= 0 && seg_first_[op.segment] == static_cast<int>(k)) {
      ReleaseSegment(op.segment);
    }
  }
  cur_op_ = -1;
  for (size_t seg = 0; seg < seg_held_.size(); ++seg) ReleaseSegment(static_cast<int>(seg));
  // Whatever backward did not reach is released with the graph.
  for (auto& list : saved_storages_) {
    for (int st : list) Unref(st);
    list.clear();
  }
  for (auto it = grad_of_.begin(); it != grad_of_.end();) {
    if (s_.vals[it->first].is_param) {
      ++it;
    } else {
      Unref(it->second);
      it = grad_of_.erase(it);
    }
  }
}

void Simulator::ReleaseSegment(int seg) {
  for (int st : seg_held_[seg]) Unref(st);
  seg_held_[seg].clear();
}

// Runs a checkpointed segment's forward again (inside backward) so that its
// ops' saved tensors exist; values nobody saved die as they would.
void Simulator::Recompute(int seg) {
  recomputed_[seg] = true;
  Step(Phase::kBackward, "recompute " + o_.checkpoint_segments[seg]);
  recomputing_ = true;
  const int first = seg_first_[seg];
  const int last = seg_last_[seg];
  std::vector<int> last_in_seg(s_.vals.size(), -1);
  for (int j = first; j <= last; ++j) {
    if (s_.ops[j].segment != seg) continue;
    for (int v : s_.ops[j].in) {
      if (v >= 0) last_in_seg[v] = j;
    }
  }
  for (int j = first; j <= last; ++j) {
    const ExecOp& op = s_.ops[j];
    if (op.segment != seg) continue;
    cur_op_ = j;
    recompute_flops = SatAdd(recompute_flops, op.flops);
    RunKernel(j, true,
              !op.in.empty() && op.in[0] >= 0 && last_in_seg[op.in[0]] == j &&
                  producer_[op.in[0]] >= first,
              j);
    for (int v : op.in) {
      if (v < 0 || last_in_seg[v] != j) continue;
      const int p = producer_[v];
      if (p >= 0 && s_.ops[p].segment == seg) Unref(ValStorage(v));
    }
    for (int v : op.out) {
      if (v < 0 || s_.vals[v].phantom) continue;
      if (last_in_seg[v] < 0) Unref(ValStorage(v));
    }
  }
  recomputing_ = false;
}

void Simulator::OptimizerStep(bool first) {
  Step(Phase::kOptimizer, std::string("optimizer.step (") + OptimizerName(o_.optimizer) + ")");
  const bool adam = o_.optimizer == Optimizer::kAdam || o_.optimizer == Optimizer::kAdamW;
  // Lazily created state, one tensor at a time in parameter order.
  if (adam) Use(Mech(Mechanism::kAdamState));
  if (o_.optimizer == Optimizer::kMomentum) Use(Mech(Mechanism::kMomentumState));
  if (first) {
    for (int p : s_.params) {
      const int64_t b = s_.vals[p].bytes;
      if (!grad_of_.count(p)) continue;  // torch.optim skips p.grad is None.
      if (adam) {
        state_.push_back(AllocNew(b, Category::kOptimizerState));
        state_.push_back(AllocNew(b, Category::kOptimizerState));
      } else if (o_.optimizer == Optimizer::kMomentum) {
        state_.push_back(AllocNew(b, Category::kOptimizerState));
      }
    }
  }
  if (adam) {
    // foreach Adam: exp_avg_sq.sqrt() for the whole group, then addcdiv.
    Use(Mech(Mechanism::kForeachTemporaries));
    std::vector<int> tmp;
    for (int p : s_.params) {
      if (grad_of_.count(p)) tmp.push_back(AllocNew(s_.vals[p].bytes, Category::kTransients));
    }
    for (int st : tmp) Free(st);
  }
  Step(Phase::kOptimizer, "zero_grad");
  for (int p : s_.params) {
    auto it = grad_of_.find(p);
    if (it != grad_of_.end()) {
      Unref(it->second);
      grad_of_.erase(it);
    }
  }
}

void Simulator::ReleaseForward() {
  // `del out, loss`.
  if (logits_storage_ >= 0) Unref(logits_storage_);
  logits_storage_ = -1;
  for (int st : loss_storages_) Free(st);
  loss_storages_.clear();
}

void Simulator::Iteration(bool first) {
  iteration_start.push_back(static_cast<int>(steps_phase.size()));
  const size_t e0 = events.size();
  if (o_.mode == Mode::kInference) {
    Forward(false);
    if (s_.logits >= 0) Unref(ValStorage(s_.logits));
  } else {
    Forward(true);
    Loss();
    Backward();
    OptimizerStep(first);
    ReleaseForward();
  }
  iteration_events.emplace_back(e0, events.size());
}

void Simulator::Run() {
  LoadModel();
  if (o_.mode == Mode::kInference) {
    Iteration(true);
    Iteration(false);
    return;
  }
  // First step, then two steady ones (options.step picks which to report).
  Iteration(true);
  Iteration(false);
  Iteration(false);
}

RuleShare ShareOf(const RuleRef& r, const PlanOptions& o) {
  RuleShare sh;
  sh.rule = r.name;
  sh.backed = r.evidence.Covers(o.mode, o.precision);
  sh.evidence = r.evidence.source ? r.evidence.source : "";
  return sh;
}

Peak PeakOf(const Simulator& sim, const SimResult& r, size_t e0, size_t e1, const PlanOptions& o) {
  Peak p;
  size_t at = e0;
  for (size_t e = e0; e < e1 && e < r.allocated_after.size(); ++e) {
    if (r.allocated_after[e] > p.allocated_bytes) {
      p.allocated_bytes = r.allocated_after[e];
      at = e;
    }
  }
  // reset_peak_memory_stats() before the step: the peak reserved starts at
  // what is reserved then (cached segments stay) and grows from there.
  for (size_t e = e0 > 0 ? e0 - 1 : 0; e < e1 && e < r.reserved_after.size(); ++e) {
    p.reserved_bytes = std::max(p.reserved_bytes, r.reserved_after[e]);
  }
  // Per phase: each event's level after it and before it (so a phase's peak
  // includes where it started).
  for (size_t e = e0; e < e1 && e < r.allocated_after.size(); ++e) {
    const int ph = static_cast<int>(sim.steps_phase[sim.event_step[e]]);
    int64_t a = r.allocated_after[e];
    int64_t res = r.reserved_after[e];
    if (e > 0) {
      a = std::max(a, r.allocated_after[e - 1]);
      res = std::max(res, r.reserved_after[e - 1]);
    }
    p.phase_allocated[ph] = std::max(p.phase_allocated[ph], a);
    p.phase_reserved[ph] = std::max(p.phase_reserved[ph], res);
  }
  // Categories and the exact live sum at the peak.
  std::unordered_map<int64_t, std::pair<int64_t, int>> live;  // id -> (block, storage)
  // Replay categories: each storage starts with its category at allocation;
  // retags apply in event order.
  std::vector<Category> cat(sim.storages.size());
  for (size_t i = 0; i < sim.storages.size(); ++i) cat[i] = sim.storages[i].first_cat;
  const auto& retags = sim.retags;
  size_t rt = 0;
  int64_t lower = 0;
  for (size_t e = 0; e <= at && e < sim.events.size(); ++e) {
    while (rt < retags.size() && std::get<0>(retags[rt]) <= e) {
      cat[std::get<1>(retags[rt])] = std::get<2>(retags[rt]);
      ++rt;
    }
    const MemEvent& ev = sim.events[e];
    const int st = sim.event_storage[e];
    if (st < 0) continue;  // empty_cache
    if (ev.is_alloc) {
      live[ev.id] = {r.placements[e].block, st};
      lower += ev.bytes;
    } else {
      auto it = live.find(ev.id);
      if (it != live.end()) {
        lower -= sim.storages[it->second.second].bytes;
        live.erase(it);
      }
    }
  }
  std::vector<int64_t> by_rule(sim.rules.size(), 0);
  int64_t no_rule = 0;
  for (const auto& kv : live) {
    p.breakdown.bytes[static_cast<int>(cat[kv.second.second])] += kv.second.first;
    const int rule = sim.storages[kv.second.second].rule;
    (rule >= 0 ? by_rule[rule] : no_rule) += kv.second.first;
  }
  for (size_t i = 0; i < by_rule.size(); ++i) {
    if (by_rule[i] == 0) continue;
    RuleShare sh = ShareOf(sim.rules[i], o);
    sh.peak_bytes = by_rule[i];
    p.rules.push_back(sh);
  }
  if (no_rule > 0) {
    RuleShare sh;
    sh.rule = "unattributed";
    sh.peak_bytes = no_rule;
    p.rules.push_back(sh);
  }
  p.lower_bound_bytes = lower;
  if (at < sim.event_step.size()) {
    const int step = sim.event_step[at];
    p.node = sim.steps_label[step];
    p.phase = sim.steps_phase[step];
  }
  p.fragmentation = at >= r.reserved_after.size() || r.reserved_after[at] == 0
                        ? 0.0
                        : 1.0 - static_cast<double>(r.allocated_after[at]) / r.reserved_after[at];
  return p;
}

// The allocated peak of each module over events [e0, e1): an event counts for
// the modules of the op it is attributed to (synthetic ops run inside the op
// after them, as in MarkModuleArguments), in forward or in backward. A call is
// a run of consecutive events of the module in one phase; its start level is
// the level before its first event, its end the level after its last.
std::vector<ModulePeak> ModulePeaksOf(const Graph& g, const Schedule& s, const Simulator& sim,
                                      const SimResult& r, size_t e0, size_t e1) {
  const int n = static_cast<int>(s.ops.size());
  std::vector<int> node_of(n, -1);
  int next = -1;
  for (int i = n - 1; i >= 0; --i) {
    const int node = s.ops[i].node;
    if (node >= 0 && g.nodes[node].modules_known) next = node;
    node_of[i] = next;
  }
  std::vector<ModulePeak> out;
  std::unordered_map<std::string, size_t> index;
  struct Run {
    size_t module;
    bool forward;
    int64_t entry;
    int64_t peak;
  };
  std::vector<Run> open;
  auto close = [&](const Run& run, int64_t exit) {
    ModulePeak& m = out[run.module];
    if (run.forward) {
      m.forward_rise = std::max(m.forward_rise, run.peak - run.entry);
      m.forward_kept += exit - run.entry;
    } else {
      m.backward_rise = std::max(m.backward_rise, run.peak - run.entry);
    }
  };
  static const std::vector<std::string> kNone;
  for (size_t e = e0; e < e1 && e < r.allocated_after.size(); ++e) {
    const int op = sim.event_op[e];
    const Phase ph = sim.steps_phase[sim.event_step[e]];
    const bool has = op >= 0 && op < n && node_of[op] >= 0 && ph != Phase::kOptimizer;
    const std::vector<std::string>& mods = has ? g.nodes[node_of[op]].modules : kNone;
    const bool fwd = ph == Phase::kForward;
    const int64_t before = e > 0 ? r.allocated_after[e - 1] : 0;
    std::vector<size_t> here;
    for (const std::string& m : mods) {
      auto it = index.find(m);
      if (it == index.end()) {
        it = index.emplace(m, out.size()).first;
        out.push_back(ModulePeak{m, 0, 0, 0, 0, 0});
      }
      here.push_back(it->second);
    }
    // Runs of modules this event is not in (or of the other phase) end here.
    std::vector<Run> still;
    for (const Run& run : open) {
      const bool in =
          run.forward == fwd && std::find(here.begin(), here.end(), run.module) != here.end();
      if (in) {
        still.push_back(run);
      } else {
        close(run, before);
      }
    }
    open.swap(still);
    const int64_t level = std::max(r.allocated_after[e], before);
    for (size_t m : here) {
      auto it = std::find_if(open.begin(), open.end(), [&](const Run& x) { return x.module == m; });
      if (it == open.end()) {
        open.push_back(Run{m, fwd, before, before});
        it = open.end() - 1;
      }
      it->peak = std::max(it->peak, level);
      int64_t& slot = fwd ? out[m].forward_allocated : out[m].backward_allocated;
      slot = std::max(slot, level);
    }
  }
  const int64_t last = e1 > 0 && e1 - 1 < r.allocated_after.size() ? r.allocated_after[e1 - 1] : 0;
  for (const Run& run : open) close(run, last);
  return out;
}

/// A convolution's stride and padding along its first spatial dim, from the
/// node's attributes (auto_pad SAME_*: the padding that keeps
/// ceil(input / stride); VALID: none).
void ConvStridePad(const Node& n, int64_t in, int64_t kernel, int64_t* stride, int64_t* pad) {
  const std::vector<int64_t> strides = n.GetInts("strides");
  const std::vector<int64_t> pads = n.GetInts("pads");
  const std::vector<int64_t> dilations = n.GetInts("dilations");
  *stride = strides.empty() ? 1 : std::max<int64_t>(1, strides[0]);
  const int64_t dilation = dilations.empty() ? 1 : std::max<int64_t>(1, dilations[0]);
  const std::string auto_pad = n.GetString("auto_pad", "NOTSET");
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    const int64_t out = (in + *stride - 1) / *stride;
    const int64_t total =
        std::max<int64_t>(0, (out - 1) * *stride + (kernel - 1) * dilation + 1 - in);
    *pad = total / 2;
  } else if (auto_pad == "VALID") {
    *pad = 0;
  } else {
    *pad = pads.empty() ? 0 : std::max<int64_t>(0, pads[0]);
  }
}

void KernelsOf(const Graph& g, const Schedule& s, std::vector<KernelShape>* out) {
  KernelShape best_gemm;
  KernelShape best_conv;
  int64_t gemm_flops = -1;
  int64_t conv_flops = -1;
  int64_t big_elem = 0;
  KernelShape elem;
  for (const ExecOp& op : s.ops) {
    const ValidationKernel kind = op.def ? op.def->kernel : ValidationKernel::kNone;
    if (kind == ValidationKernel::kGemm && op.in.size() >= 2 && op.in[0] >= 0 && op.in[1] >= 0 &&
        !op.out.empty() && op.out[0] >= 0 && op.flops > gemm_flops) {
      const Val& a = s.vals[op.in[0]];
      const Val& o = s.vals[op.out[0]];
      if (a.shape.empty() || o.shape.empty()) continue;
      const int64_t k = a.shape.back();
      const int64_t n = o.shape.back();
      int64_t m = 1;
      for (size_t i = 0; i + 1 < o.shape.size(); ++i) m *= o.shape[i];
      gemm_flops = op.flops;
      best_gemm.kind = KernelShape::kGemm;
      best_gemm.dims = {m, n, k, 1};
      best_gemm.dtype = o.dtype;
      best_gemm.node = op.label;
    }
    if (kind == ValidationKernel::kConv && op.in.size() >= 2 && op.in[0] >= 0 && op.in[1] >= 0 &&
        op.flops > conv_flops && !op.out.empty() && op.out[0] >= 0) {
      const Val& x = s.vals[op.in[0]];
      const Val& w = s.vals[op.in[1]];
      const Val& o = s.vals[op.out[0]];
      if (x.shape.size() != 4 || w.shape.size() != 4 || o.shape.size() != 4) continue;
      int64_t stride = 1, pad = 0;
      if (op.node >= 0) ConvStridePad(g.nodes[op.node], x.shape[2], w.shape[2], &stride, &pad);
      conv_flops = op.flops;
      best_conv.kind = KernelShape::kConv;
      best_conv.dims = {x.shape[0], x.shape[1], x.shape[2], x.shape[3], w.shape[0],
                        w.shape[2], w.shape[3], stride,     pad};
      best_conv.dtype = o.dtype;
      best_conv.node = op.label;
    }
    for (int v : op.out) {
      if (v >= 0 && s.vals[v].bytes > big_elem && IsFloat(s.vals[v].dtype)) {
        big_elem = s.vals[v].bytes;
        int64_t n = 1;
        for (int64_t d : s.vals[v].shape) n *= d;
        elem.kind = KernelShape::kElementwise;
        elem.dims = {n};
        elem.dtype = s.vals[v].dtype;
        elem.node = op.label;
      }
    }
  }
  if (gemm_flops >= 0) out->push_back(best_gemm);
  if (conv_flops >= 0) out->push_back(best_conv);
  if (big_elem > 0) out->push_back(elem);
}

}  // namespace

namespace {

// The largest tensor of the step, and the largest one over the 32-bit limit
// that an op with a 32-bit-indexing kernel reads or writes (backward's
// gradients have the same shapes).
void KernelLimitsOf(const Schedule& s, Plan* plan) {
  for (const ExecOp& op : s.ops) {
    const OpDef* def = op.node >= 0 ? FindOp("", op.op_type) : nullptr;
    const bool int32 = def != nullptr && def->int32_indexing;
    for (const std::vector<int>* vs : {&op.in, &op.out}) {
      for (int v : *vs) {
        if (v < 0 || !IsFloat(s.vals[v].dtype)) continue;
        int64_t n = 0;
        if (!CheckedNumel(s.vals[v].shape, &n)) n = INT64_MAX;
        KernelLimit k{n, op.label, op.op_type, int32};
        if (n > plan->largest_tensor.elements) plan->largest_tensor = k;
        if (int32 && n >= kInt32IndexElements && n > plan->int32_overflow.elements) {
          plan->int32_overflow = k;
        }
      }
    }
  }
  if (plan->int32_overflow.elements > 0) {
    const KernelLimit& k = plan->int32_overflow;
    plan->warnings.push_back("node '" + k.node + "' (" + k.op_type + "): a tensor of " +
                             std::to_string(k.elements) +
                             " elements, over PyTorch's 32-bit indexing limit of 2^31 - 1 in "
                             "this op's CUDA kernel: PyTorch fails (an error or an illegal "
                             "memory access); use a smaller batch");
  } else if (plan->largest_tensor.elements >= kInt32IndexElements) {
    const KernelLimit& k = plan->largest_tensor;
    plan->warnings.push_back("node '" + k.node + "' (" + k.op_type + "): a tensor of " +
                             std::to_string(k.elements) +
                             " elements (2^31 or more): PyTorch CUDA kernels that index in 32 "
                             "bits fail there; this op's kernel is not known to");
  }
}

// Fills the bytes of plan->coverage from the peak's rules.
void FillCoverage(Plan* plan) {
  Coverage& c = plan->coverage;
  c.peak_bytes = 0;
  c.unbacked_bytes = 0;
  for (RuleShare& r : c.rules) r.peak_bytes = 0;
  for (const RuleShare& at : plan->peak.rules) {
    c.peak_bytes += at.peak_bytes;
    if (!at.backed) c.unbacked_bytes += at.peak_bytes;
    bool found = false;
    for (RuleShare& r : c.rules) {
      if (r.rule == at.rule) {
        r.peak_bytes += at.peak_bytes;
        found = true;
      }
    }
    if (!found) c.rules.push_back(at);
  }
  std::stable_sort(c.rules.begin(), c.rules.end(), [](const RuleShare& a, const RuleShare& b) {
    return a.peak_bytes > b.peak_bytes;
  });
}

Result<Plan> PlanSchedule(const Graph& g, int64_t batch, const PlanOptions& options,
                          const Schedule& s) {
  if (options.mode == Mode::kTrain && s.logits < 0) {
    return Status::Error(g.source + ": the graph has no output to put a loss on");
  }
  Plan plan;
  plan.options = options;
  plan.batch = batch;
  plan.dims = g.bound_symbols;
  plan.batch_symbol = g.batch_symbol;
  if (!g.batch_symbol.empty()) {
    auto b = g.bound_symbols.find(g.batch_symbol);
    if (b != g.bound_symbols.end()) plan.batch = b->second;
  }
  plan.warnings = s.warnings;
  plan.parameter_count = s.parameter_count;
  for (int p : s.params) plan.parameter_bytes += s.vals[p].bytes;
  for (int b : s.buffers) plan.buffer_bytes += s.vals[b].bytes;
  plan.context_bytes = options.context_bytes >= 0 ? options.context_bytes : kDefaultContextBytes;
  if (options.mode == Mode::kTrain && g.eval_mode_hint) {
    plan.warnings.push_back(g.source +
                            ": the model was exported in eval mode (batch norm without training "
                            "statistics, no dropout); a training plan needs a train-mode export "
                            "(see the README)");
  }
  Simulator sim(s, options);
  sim.Run();
  auto r = SimulateCachingAllocator(sim.events, options.allocator);
  if (!r.ok()) return Status::Error(g.source + ": cannot replay the allocations: " + r.message());
  const SimResult& res = r.value();
  const auto& it = sim.iteration_events;
  // Peaks are those of the step (the calibration protocol resets the peak
  // statistics after loading the model).
  if (options.mode == Mode::kInference) {
    plan.peak = PeakOf(sim, res, it.front().first, it.back().second, options);
    plan.steady = plan.peak;
    plan.first_step = plan.peak;
  } else {
    plan.first_step = PeakOf(sim, res, it[0].first, it[0].second, options);
    plan.steady = PeakOf(sim, res, it[2].first, it[2].second, options);
    plan.peak = options.step == StepKind::kFirst ? plan.first_step : plan.steady;
  }
  for (Peak* p : {&plan.peak, &plan.first_step, &plan.steady}) {
    p->device_bytes = p->reserved_bytes + plan.context_bytes;
  }
  int iter = options.mode == Mode::kTrain && options.step == StepKind::kSteady ? 2 : 0;
  if (options.mode == Mode::kInference) {
    // The reported peak spans both passes: draw the pass that holds it.
    for (size_t k = 1; k < it.size(); ++k) {
      if (PeakOf(sim, res, it[k].first, it[k].second, options).allocated_bytes >
          PeakOf(sim, res, it[iter].first, it[iter].second, options).allocated_bytes) {
        iter = static_cast<int>(k);
      }
    }
  }
  // Per step (the simulation ran several); a saturated sum stays saturated.
  const int64_t steps = static_cast<int64_t>(sim.iteration_events.size());
  auto per_step = [steps](int64_t total) { return total == INT64_MAX ? total : total / steps; };
  plan.forward_flops = per_step(sim.forward_flops);
  plan.backward_flops = per_step(sim.backward_flops);
  plan.recompute_flops = per_step(sim.recompute_flops);
  // The timeline of the planned iteration: one point per step, at the
  // step's highest moment (workspaces and temporaries come and go inside an
  // op), so the curve reaches the peak the numbers report.
  const size_t e0 = sim.iteration_events[iter].first;
  const size_t e1 = sim.iteration_events[iter].second;
  Breakdown live;
  std::vector<int64_t> live_block(sim.storages.size(), 0);  // per storage, 0 when free
  std::vector<Category> cat(sim.storages.size());
  for (size_t i = 0; i < sim.storages.size(); ++i) cat[i] = sim.storages[i].first_cat;
  size_t rt = 0;
  TimelinePoint pt;
  for (size_t e = 0; e < e1; ++e) {
    while (rt < sim.retags.size() && std::get<0>(sim.retags[rt]) <= e) {
      const int st = std::get<1>(sim.retags[rt]);
      const Category to = std::get<2>(sim.retags[rt]);
      live.bytes[static_cast<int>(cat[st])] -= live_block[st];
      live.bytes[static_cast<int>(to)] += live_block[st];
      cat[st] = to;
      ++rt;
    }
    const MemEvent& ev = sim.events[e];
    const int st = sim.event_storage[e];
    if (st >= 0) {  // not empty_cache
      const int c = static_cast<int>(cat[st]);
      if (ev.is_alloc) {
        live_block[st] = res.placements[e].block;
        live.bytes[c] += live_block[st];
      } else {
        live.bytes[c] -= live_block[st];
        live_block[st] = 0;
      }
    }
    if (e < e0) continue;
    const bool first_of_step = e == e0 || sim.event_step[e - 1] != sim.event_step[e];
    if (first_of_step || res.allocated_after[e] > pt.allocated) {
      if (first_of_step) pt.reserved = 0;
      pt.step = sim.event_step[e];
      pt.phase = sim.steps_phase[pt.step];
      pt.node = sim.steps_label[pt.step];
      pt.live = live;
      pt.allocated = res.allocated_after[e];
    }
    pt.reserved = std::max(pt.reserved, res.reserved_after[e]);
    const bool last_of_step = e + 1 == e1 || sim.event_step[e + 1] != sim.event_step[e];
    if (last_of_step) {
      pt.allocated_end = res.allocated_after[e];
      plan.timeline.push_back(pt);
    }
  }
  plan.modules = ModulePeaksOf(g, s, sim, res, e0, e1);
  // Inference: the activations packed into one arena (lower bound vs packed).
  if (options.mode == Mode::kInference) {
    std::vector<ArenaBuffer> bufs;
    std::unordered_map<int64_t, size_t> open;
    for (size_t e = it[0].first; e < it[0].second; ++e) {
      const MemEvent& ev = sim.events[e];
      if (ev.is_alloc) {
        open[ev.id] = bufs.size();
        bufs.push_back(ArenaBuffer{ev.bytes, sim.event_step[e], sim.event_step[e]});
      } else if (open.count(ev.id)) {
        bufs[open[ev.id]].last = sim.event_step[e];
      }
    }
    ArenaResult ar = PackGreedyBySize(bufs, 512);
    plan.arena_lower_bound = ar.lower_bound;
  }
  if (options.keep_events) {
    plan.events = sim.events;
    for (size_t e = 0; e < sim.events.size(); ++e) {
      const int st = sim.event_step[e];
      const int stor = sim.event_storage[e];
      plan.event_nodes.push_back(sim.steps_label[st]);
      plan.event_phases.push_back(sim.steps_phase[st]);
      plan.event_categories.push_back(stor >= 0 ? sim.storages[stor].first_cat
                                                : Category::kWorkspaces);
    }
  }
  KernelsOf(g, s, &plan.kernels);
  for (size_t i = 0; i < sim.rules.size(); ++i) {
    if (sim.rule_used[i]) plan.coverage.rules.push_back(ShareOf(sim.rules[i], options));
  }
  KernelLimitsOf(s, &plan);
  return plan;
}

}  // namespace

Result<Plan> MakePlan(const Graph& g, int64_t batch, const PlanOptions& requested) {
  // Checkpoint patterns become module paths (one set, whatever their order).
  PlanOptions options = requested;
  auto checkpointed = ResolveCheckpointModules(g, requested.checkpoint_segments);
  if (!checkpointed.ok()) return checkpointed.status();
  options.checkpoint_segments = checkpointed.value();
  // What the export cannot tell (which cuDNN engines run fp32 convolutions,
  // whether activations run in place) is planned every way; the plan that
  // needs the most device memory is kept.
  std::vector<Fp32ConvCopies> convs = {options.fp32_conv};
  if (options.fp32_conv == Fp32ConvCopies::kBoth) {
    convs = {Fp32ConvCopies::kAll, Fp32ConvCopies::kInputOnly};
  }
  std::vector<InPlace> inplace = {options.inplace};
  if (options.inplace == InPlace::kBoth) inplace = {InPlace::kOff, InPlace::kOn};
  Result<Plan> keep = Status::Error("no plan");
  bool have = false;
  Peak most[3];                     // the largest allocated peak per step kind, over the variants
  std::vector<ModulePeak> modules;  // per module, the largest over the variants
  std::unordered_map<std::string, size_t> module_index;
  std::vector<TimelinePoint> timeline;  // of the variant with the largest allocated peak
  for (Fp32ConvCopies c : convs) {
    PlanOptions o = options;
    o.fp32_conv = c;
    auto sched = BuildSchedule(g, o);
    if (!sched.ok()) return sched.status();
    for (InPlace ip : inplace) {
      o.inplace = ip;
      auto plan = PlanSchedule(g, batch, o, sched.value());
      if (!plan.ok()) return plan;
      const Peak* peaks[3] = {&plan->peak, &plan->first_step, &plan->steady};
      if (!have || plan->peak.allocated_bytes > most[0].allocated_bytes) {
        timeline = plan->timeline;
      }
      for (int k = 0; k < 3; ++k) {
        if (!have || peaks[k]->allocated_bytes > most[k].allocated_bytes) most[k] = *peaks[k];
      }
      for (const ModulePeak& m : plan->modules) {
        auto it = module_index.find(m.module);
        if (it == module_index.end()) {
          module_index.emplace(m.module, modules.size());
          modules.push_back(m);
          continue;
        }
        ModulePeak& have_m = modules[it->second];
        have_m.forward_allocated = std::max(have_m.forward_allocated, m.forward_allocated);
        have_m.backward_allocated = std::max(have_m.backward_allocated, m.backward_allocated);
        have_m.forward_rise = std::max(have_m.forward_rise, m.forward_rise);
        have_m.forward_kept = std::max(have_m.forward_kept, m.forward_kept);
        have_m.backward_rise = std::max(have_m.backward_rise, m.backward_rise);
      }
      if (!have || plan->peak.device_bytes > keep->peak.device_bytes) keep = std::move(plan);
      have = true;
      if (!sched->inplace_activations) break;  // nothing runs in place: one plan covers both
    }
    if (!sched->fp32_convs) break;  // no fp32 convolution: both kinds agree
  }
  // Each figure is the largest of its own: the allocated peak (and where it
  // is, what it is made of) of one variant, reserved and device of another.
  Peak* peaks[3] = {&keep->peak, &keep->first_step, &keep->steady};
  for (int k = 0; k < 3; ++k) {
    Peak p = most[k];
    p.reserved_bytes = peaks[k]->reserved_bytes;
    p.device_bytes = peaks[k]->device_bytes;
    for (int ph = 0; ph < 3; ++ph) p.phase_reserved[ph] = peaks[k]->phase_reserved[ph];
    *peaks[k] = p;
  }
  keep->modules = std::move(modules);
  // The timeline draws the allocated peak's variant, with the reserved line
  // of the variant whose reserved figure is reported. The two may differ in
  // steps (an in-place op is one step less): each reserved point goes to the
  // next point of the same op, or else to the last one matched, keeping the
  // highest, so the line reaches the reported reserved peak.
  if (!timeline.empty()) {
    std::vector<int64_t> reserved(timeline.size(), -1);
    size_t i = 0;
    for (const TimelinePoint& q : keep->timeline) {
      for (size_t k = i; k < timeline.size() && k < i + 64; ++k) {
        if (timeline[k].node == q.node) {
          i = k;
          break;
        }
      }
      reserved[i] = std::max(reserved[i], q.reserved);
    }
    int64_t last = 0;
    for (size_t k = 0; k < timeline.size(); ++k) {
      if (reserved[k] >= 0) last = reserved[k];
      // Never below its own variant's reserved (>= allocated); that is at most
      // the kept variant's peak, which has the most reserved of all.
      timeline[k].reserved = std::max(last, timeline[k].reserved);
    }
  }
  keep->timeline = std::move(timeline);
  keep->options.fp32_conv = options.fp32_conv;
  keep->options.inplace = options.inplace;
  FillCoverage(&keep.value());
  return keep;
}

}  // namespace memplan
