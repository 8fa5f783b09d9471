#include "planner/simulator.h"

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "planner/checked.h"
#include "planner/ops/op_names.h"

namespace memplan {

namespace {

// cuBLAS workspace per handle on sm90 (CublasHandlePool.cpp): the forward
// thread's handle gets one at the first GEMM, autograd's thread another at
// the first backward GEMM.
constexpr int64_t kCublasWorkspaceBytes = 32LL << 20;
// cuBLASLt workspace per handle and stream (CublasHandlePool.cpp,
// getCUDABlasLtWorkspace; CUBLASLT_WORKSPACE_SIZE's default, 1024 KiB): made
// by the thread's first addmm that runs through cuBLASLt. H200 traces: 1 MiB
// right after the first biased linear's output (and the 32 MiB when that is
// the thread's first GEMM), kept to the end; none in models without such a
// linear (LSTM and LLaMA language models, T5, U-Net); a second on autograd's
// thread where a checkpoint recomputes one (gpt2 checkpointed).
constexpr int64_t kCublasLtWorkspaceBytes = 1LL << 20;

}  // namespace

void BackwardInputOrder(const Schedule& s, const ExecOp& op, bool addmm,
                        std::vector<size_t>* order_out) {
  std::vector<size_t>& order = *order_out;
  order.resize(op.in.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  if (!op.def || !op.def->matmul_operands || op.in.size() < 2 || op.in[0] < 0 || op.in[1] < 0) {
    return;
  }
  const size_t r0 = s.vals[op.in[0]].shape.size();
  const size_t r1 = s.vals[op.in[1]].shape.size();
  bool mat2_first;
  if (op.op_type == op_names::kGemm) {
    mat2_first = op.in.size() < 3 || op.in[2] < 0;
  } else {
    mat2_first = !addmm && r1 >= 2 && !(r0 <= 2 && r1 >= 3);
  }
  if (mat2_first) std::swap(order[0], order[1]);
}

void Simulator::LoadModel() {
  Step(Phase::kForward, "model.cuda()");
  // model.cuda() moves parameters and buffers in module order.
  std::vector<int> order = s_.params;
  order.insert(order.end(), s_.buffers.begin(), s_.buffers.end());
  std::sort(order.begin(), order.end());
  const bool half = o_.precision == Precision::kBf16 || o_.precision == Precision::kFp16;
  const bool cast = half && o_.model_load != ModelLoad::kDirect;
  // Moved in bf16, the recurrent weights are not flattened: cuDNN does not
  // accept bf16 (cudnn.is_acceptable), and flatten_parameters returns early.
  const bool flatten_at_load =
      !(o_.model_load == ModelLoad::kDirect && o_.precision == Precision::kBf16);
  // flatten_parameters runs when a recurrent module has been moved (and
  // again after model.half()): after its last parameter.
  std::map<int, int> flatten_after;  // last parameter's Val -> group
  for (size_t gi = 0; gi < s_.flattened_rnn_weights.size(); ++gi) {
    const std::vector<int>& group = s_.flattened_rnn_weights[gi];
    if (!group.empty()) flatten_after[*std::max_element(group.begin(), group.end())] = gi;
  }
  auto flatten = [&](int v, int64_t elem_scale) {
    auto it = flatten_after.find(v);
    if (it == flatten_after.end()) return;
    const std::vector<int>& group = s_.flattened_rnn_weights[it->second];
    int64_t total = 0;
    for (int w : group) total = SatAdd(total, SatMulNonNeg(elem_scale, s_.vals[w].bytes));
    const int flat = AllocNew(total, Category::kParameters);
    storages[flat].param = param_index_[group.front()];
    for (int w : group) {
      const int old = storage_of_val_[w];
      Ref(flat);
      storage_of_val_[w] = flat;
      Unref(old);
    }
  };
  Use(Mech(Mechanism::kParameters));
  for (int v : order) {
    auto q = s_.quantized.find(v);
    if (q != s_.quantized.end()) {
      // Quantized on the way to the GPU (Params4bit.cuda()): the packed data
      // and its QuantState's tensors.
      const int st = AllocNew(s_.vals[v].bytes, Category::kParameters);
      Ref(st);
      storage_of_val_[v] = st;
      for (int64_t b : q->second.state_bytes) Ref(AllocNew(b, Category::kParameters));
      continue;
    }
    // A model cast to half is loaded in fp32 first (model.cuda().half()).
    const int64_t bytes = cast ? 2 * s_.vals[v].bytes : s_.vals[v].bytes;
    const int st = AllocNew(bytes, Category::kParameters);
    Ref(st);
    storage_of_val_[v] = st;
    storages[st].param = param_index_[v];
    if (flatten_at_load) flatten(v, cast ? 2 : 1);  // in fp32, before any cast
  }
  // The batch. In training, both measurement protocols make a floating-point
  // batch of a half-precision model on the GPU in fp32 after the model is
  // there and cast it after the model (`x.to(torch.bfloat16)`), freeing the
  // fp32 tensor to the cache: its block, or a whole cached segment, stays
  // reserved and changes where later blocks land (wav2vec2_cls_b bf16 b32:
  // 1578 MiB reserved with it, 1372 planned without).
  std::vector<int> fp32_inputs;
  if (half && o_.mode == Mode::kTrain) {
    Step(Phase::kForward, "input");
    Use(Mech(Mechanism::kInputBatch));
    for (int v : s_.inputs) {
      if (!IsFloat(s_.vals[v].dtype)) continue;
      fp32_inputs.push_back(AllocNew(SatMulNonNeg(2, s_.vals[v].bytes), Category::kParameters));
      Ref(fp32_inputs.back());
    }
  }
  auto place_inputs = [&] {
    Step(Phase::kForward, "input");
    Use(Mech(Mechanism::kInputBatch));
    for (int v : s_.inputs) {
      const int st = AllocNew(s_.vals[v].bytes, Category::kParameters);
      Ref(st);
      storage_of_val_[v] = st;
    }
    for (int st : fp32_inputs) Unref(st);
  };
  bool inputs_placed = false;
  if (cast) {
    Step(Phase::kForward, "model.half()");
    Use(Mech(Mechanism::kModelCast));
    for (int v : order) {
      if (s_.quantized.count(v)) continue;
      const int old = storage_of_val_[v];
      const int st = AllocNew(s_.vals[v].bytes, Category::kParameters);
      Ref(st);
      storage_of_val_[v] = st;
      storages[st].param = param_index_[v];
      Unref(old);
      if (o_.precision == Precision::kFp16) flatten(v, 1);
    }
    // The calibration protocol (`auto` in training) casts the batch and then
    // empties the cache; with `cast-empty-cache` the cache is emptied after
    // the model's cast and the batch cast after it (bench/families.py, and a
    // training loop that casts each batch), so its fp32 block survives.
    const bool calibration = o_.model_load == ModelLoad::kAuto && o_.mode == Mode::kTrain;
    if (calibration) {
      place_inputs();
      inputs_placed = true;
    }
    // Without an emptying the fp32 copies stay cached.
    if (calibration || o_.model_load == ModelLoad::kCastEmptyCache) {
      MemEvent e;
      e.empty_cache = true;
      e.is_alloc = false;
      events.push_back(e);
      event_step.push_back(CurStep());
      event_op.push_back(-1);
    }
  }
  if (!inputs_placed) place_inputs();
}

void Simulator::RunKernel(size_t i, bool grad_mode, bool input_dies_here, int keep_at) {
  const ExecOp& op = s_.ops[i];
  Use(OpRule(i));
  if (op.process_state_bytes > 0 && !process_state_) {
    process_state_ = true;
    Ref(AllocNew(op.process_state_bytes, Category::kWorkspaces));
  }
  const int temp_source =
      op.fwd_temp_source_bytes > 0 ? AllocNew(op.fwd_temp_source_bytes, Category::kTransients) : -1;
  const int temp = op.fwd_temp_bytes > 0 ? AllocNew(op.fwd_temp_bytes, Category::kTransients) : -1;
  if (temp_source >= 0) Free(temp_source);
  int inplace = InPlaceStorage(op, input_dies_here);
  if (inplace >= 0) in_place_matters = true;
  if (o_.inplace != InPlace::kOn) inplace = -1;
  // An in-place activation whose gradient reads its input: autograd saves a
  // copy of it before the kernel writes.
  int input_copy = -1;
  if (inplace >= 0 && keep_at >= 0 && op.def && op.def->inplace_copies_input) {
    for (const SavedRef& sr : op.saved) {
      if (sr.val == op.in[0]) {
        input_copy = AllocNew(storages[inplace].bytes, Category::kSavedActivations);
        break;
      }
    }
  }
  const bool saved_first = keep_at >= 0 && op.def && op.def->saved_extra_first;
  if (saved_first) KeepSaved(op, keep_at, input_copy);
  for (int v : op.out) {
    if (v < 0 || s_.vals[v].phantom) continue;
    if (op.outputs_made_by_next) {
      deferred_outputs_.push_back(v);
      continue;
    }
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
  const std::vector<int> late = AllocEach(op.fwd_late_temp_bytes, Category::kTransients);
  if (!op.outputs_made_by_next) {
    for (int v : deferred_outputs_) {
      const int r = root_[v];
      const Category cat =
          (grad_mode && saved_root_[r]) ? Category::kSavedActivations : Category::kTransients;
      const int st = AllocNew(s_.vals[v].bytes, cat);
      storage_of_val_[r] = st;
      Ref(st);
    }
    deferred_outputs_.clear();
  }
  // A kernel's own tensors come after the saved extras the op returns.
  bool saved_done = saved_first;
  if (!op.fwd_kernel_temp_bytes.empty()) {
    if (keep_at >= 0 && !saved_done) {
      KeepSaved(op, keep_at, input_copy);
      saved_done = true;
    }
    Use(WorkspaceRule(i));
    FreeLastFirst(AllocEach(op.fwd_kernel_temp_bytes, Category::kWorkspaces));
    Use(OpRule(i));
  }
  // The forward thread's cuBLAS workspace: made by the first GEMM's
  // getCurrentCUDABlasHandle() (CublasHandlePool.cpp, setWorkspaceForHandle),
  // which the BLAS wrapper calls after the op allocated its output (H200
  // traces: a linear's output, then the 32 MiB).
  if (op.uses_cublas && !fwd_workspace_) {
    fwd_workspace_ = true;
    Use(Mech(Mechanism::kCublasWorkspace));
    Ref(AllocNew(kCublasWorkspaceBytes, Category::kWorkspaces));
    Use(OpRule(i));
  }
  // The thread's cuBLASLt workspace (a recompute runs on autograd's thread).
  bool& lt_made = recomputing_ ? bwd_lt_workspace_ : fwd_lt_workspace_;
  if (op.lt_bias && !lt_made) {
    lt_made = true;
    Use(Mech(Mechanism::kCublasWorkspace));
    Ref(AllocNew(kCublasLtWorkspaceBytes, Category::kWorkspaces));
    Use(OpRule(i));
  }
  // Kernels take their workspace after the outputs exist.
  int ws = -1;
  if (op.fwd_workspace > 0) {
    Use(WorkspaceRule(i));
    ws = AllocNew(op.fwd_workspace, Category::kWorkspaces);
  }
  if (keep_at >= 0 && op.saved_in_kernel && !saved_done) KeepSaved(op, keep_at, input_copy);
  if (ws >= 0) Free(ws);
  if (temp >= 0) Free(temp);
  for (int st : late) Free(st);
  if (keep_at >= 0 && !op.saved_in_kernel && !saved_done) KeepSaved(op, keep_at, input_copy);
}

void Simulator::KeepSaved(const ExecOp& op, size_t i, int input_copy) {
  Use(OpRule(i));
  for (const SavedRef& sr : op.saved) {
    int st;
    if (sr.val >= 0 && input_copy >= 0 && sr.val == op.in[0]) {
      st = input_copy;
    } else if (sr.val >= 0) {
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
    OpStep(Phase::kForward, i);
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
    RunKernel(i, grad_mode,
              !op.in.empty() && op.in[0] >= 0 && last_use_[op.in[0]] == static_cast<int>(i),
              grad_mode && !checkpointed ? static_cast<int>(i) : -1);
    // Autocast keeps its weight cache while gradients are recorded, and under
    // torch.no_grad() too (parameters still require grad); inference_mode
    // does not cache (aten/src/ATen/autocast_mode.cpp, cached_cast).
    if (grad_mode || o_.no_grad_weight_cache) {
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
    for (int k = release_start_[i]; k < release_start_[i + 1]; ++k) {
      const int v = release_vals_[k];
      if (v == s_.logits) continue;
      if (s_.vals[v].is_param || s_.vals[v].is_buffer || IsGraphInput(v)) continue;
      Unref(ValStorage(v));
    }
    for (int v : op.out) {
      if (v < 0 || s_.vals[v].phantom || v == s_.logits) continue;
      if (last_use_[v] < 0 && s_.vals[v].held_until <= static_cast<int>(i)) Unref(ValStorage(v));
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

void Simulator::AddGrad(int val, int g, bool is_view) {
  if (g < 0) return;
  const Val& v = s_.vals[val];
  if (!v.requires_grad) {
    Unref(g);
    return;
  }
  auto it = grad_of_.find(val);
  if (it != grad_of_.end()) {
    // A second gradient: autograd's InputBuffer adds it in place into the
    // first (input_buffer.cpp accumulate, can_accumulate_inplace) when it
    // holds the first's last reference: not when the first is a view (whose
    // base it keeps alive), nor while another holder (a view made of it, not
    // yet consumed) shares its storage; then the sum is a new tensor, made
    // while both live. A gradient a transposed view shared is added to in
    // place once the view is gone (mixer_h bf16 b26, H100 trace: MLP-Mixer's
    // residual stream). bench/grad_accum_probe.py
    // (bench/results/grad_accum_probe_h200.jsonl): two embeddings, or a tied
    // head whose embedding gradient comes first, add in place; two linears,
    // a tied head in fp32 and a reshaped weight make the sum.
    const int old = it->second;
    if (view_grad_vals_.count(val) > 0 || storages[old].refs > 1) {
      const int sum = AllocNew(storages[old].bytes, storages[old].cat);
      Ref(sum);
      storages[sum].param = storages[old].param;
      it->second = sum;
      Unref(old);
      view_grad_vals_.erase(val);
    }
    Unref(g);
    return;
  }
  if (v.is_param) {
    Retag(g, Category::kGradients);
    if (storages[g].param < 0) storages[g].param = param_index_[val];
  }
  if (is_view) view_grad_vals_.insert(val);
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
  for (int v : weights) params = params && (s_.vals[v].is_param || s_.vals[v].param_copy);
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
  addmm_bias_.clear();
  const int L = s_.logits;
  const Val& lv = s_.vals[L];
  int64_t numel = 1;
  for (int64_t d : lv.shape) numel *= d;
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
    const int glogp =
        AllocNew(SatMulNonNeg(numel, logp_fp32 >= 0 ? 4 : elem), Category::kTransients);
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
  permuted_grads_.clear();
  transposed_grads_.clear();
  view_grad_vals_.clear();
  stack_members_.clear();
  for (size_t k = 0; k < s_.ops.size(); ++k) {
    if (s_.ops[k].stack_leader >= 0) {
      stack_members_[s_.ops[k].stack_leader].push_back(static_cast<int>(k));
    }
  }
  for (size_t k = s_.ops.size(); k-- > 0;) {
    const ExecOp& op = s_.ops[k];
    bool has_grad = false;
    for (int v : op.out) has_grad = has_grad || (v >= 0 && grad_of_.count(v));
    // An unbind's Slices: the others' gradients wait for the first one's
    // backward, which stacks them all (Builder::MarkUnbindStacks).
    const bool stacks = op.stack_leader == static_cast<int>(k);
    if (op.stack_leader >= 0 && !stacks) has_grad = false;
    if (stacks) {
      for (int m : stack_members_[static_cast<int>(k)]) {
        for (int v : s_.ops[m].out) has_grad = has_grad || (v >= 0 && grad_of_.count(v));
      }
    }
    if (!has_grad) {
      if (op.segment >= 0 && seg_first_[op.segment] == static_cast<int>(k)) {
        ReleaseSegment(op.segment);
      }
      continue;
    }
    if (op.segment >= 0 && !recomputed_[op.segment]) Recompute(op.segment);
    cur_op_ = static_cast<int>(k);
    OpStep(Phase::kBackward, k);
    backward_flops = SatAdd(backward_flops, SatMulNonNeg(2, op.flops));
    // The autograd thread's cuBLAS workspace, made by its first GEMM's
    // getCurrentCUDABlasHandle() after that GEMM allocated its output: a
    // matrix product makes it after the first gradient it computes (H200
    // traces, every training family: one gradient, then the 32 MiB); other
    // cuBLAS users (recurrent layers, attention) before their gradients.
    const bool product = op.def && op.def->matmul_operands && op.grad_kind == GradKind::kNew;
    auto backward_workspace = [&] {
      if (!op.uses_cublas || bwd_workspace_) return;
      bwd_workspace_ = true;
      Use(Mech(Mechanism::kCublasWorkspace));
      Ref(AllocNew(kCublasWorkspaceBytes, Category::kWorkspaces));
    };
    if (!product) backward_workspace();
    const int op_rule = OpRule(k);
    const int grad_rule = Mech(Mechanism::kParameterGradients);
    Use(op_rule);
    // cuDNN RNN: zeros for absent output gradients, then the data pass's
    // contiguous copies, all before the inputs' gradients.
    Use(TempRule(k));
    const std::vector<int> zeros = AllocEach(op.bwd_zero_bytes, Category::kTransients);
    const std::vector<int> copies = AllocEach(op.bwd_copy_bytes, Category::kTransients);
    // A kernel that reads its saved input contiguous copies it again.
    const int input_copy =
        op.bwd_input_copy_bytes > 0 ? AllocNew(op.bwd_input_copy_bytes, Category::kTransients) : -1;
    Use(op_rule);
    std::vector<std::pair<int, int>>& produced = produced_;  // (input val, grad storage)
    produced.clear();
    bool deferred_bias = false;  // addmm: the product's backward makes it
    const int out_grad =
        op.out.empty() || op.out[0] < 0 || !grad_of_.count(op.out[0]) ? -1 : grad_of_[op.out[0]];
    // A kernel that reads its incoming gradient contiguous copies one that
    // reaches it through a transpose (wav2vec2's feature encoder transposes
    // each convolution's output for a LayerNorm over channels and back), for
    // the length of its call: a convolution before the inputs' gradients, a
    // LayerNorm after them (GradOutputCopy).
    // An embedding copies it before its weight's gradient (the batch-first
    // RNN language models' traces: lstm_lm fp32 b8, lstm_lm_e and lstm_lm_g
    // amp_bf16).
    GradOutputCopy grad_copy_at =
        op.def != nullptr && out_grad >= 0 && transposed_grads_.count(out_grad) > 0
            ? op.def->grad_output_copy
            : GradOutputCopy::kNone;
    if (grad_copy_at == GradOutputCopy::kBeforeGradsOfAWeight) {
      const bool of_a_weight = !op.in.empty() && op.in[0] >= 0 && s_.vals[op.in[0]].is_param;
      grad_copy_at = of_a_weight ? GradOutputCopy::kBeforeGrads : GradOutputCopy::kNone;
    }
    const int copy_rule = Mech(Mechanism::kContiguousCopy);
    int grad_output_copy = -1;
    if (grad_copy_at == GradOutputCopy::kBeforeGrads) {
      Use(copy_rule);
      grad_output_copy = AllocNew(s_.vals[op.out[0]].bytes, Category::kTransients);
      Use(op_rule);
    }
    // A gradient laid out for a permuted view, reshaped back to the
    // contiguous tensor the view came from: reshape cannot view it, so it
    // copies (an unbind of a permuted qkv, then the unflatten's backward).
    const bool copy_back = op.grad_kind == GradKind::kAlias && out_grad >= 0 && op.def &&
                           op.def->view == ViewRule::kReshape && !op.out.empty() &&
                           op.out[0] >= 0 && permuted_grads_.count(out_grad) > 0 &&
                           s_.vals[op.out[0]].strides.size() == s_.vals[op.out[0]].shape.size() &&
                           IsContiguous(s_.vals[op.out[0]].shape, s_.vals[op.out[0]].strides);
    switch (op.grad_kind) {
      case GradKind::kAlias:
        for (size_t i = 0; i < op.in.size(); ++i) {
          if (!op.grad_in[i] || out_grad < 0) continue;
          if (copy_back && i == 0) {
            int64_t n = 0;
            int64_t bytes = 0;
            CheckedNumel(s_.vals[op.in[0]].shape, &n);
            DTypeBytes(s_.vals[op.in[0]].dtype, n, &bytes);
            const int st = AllocNew(bytes, Category::kTransients);
            Ref(st);
            produced.emplace_back(op.in[0], st);
            continue;
          }
          if (op.out[0] >= 0 && s_.vals[op.in[i]].dtype != s_.vals[op.out[0]].dtype) {
            // The autograd engine casts each gradient a function returns to
            // its input's dtype (validate_outputs, torch/csrc/autograd/
            // engine.cpp) before the next function runs: a cat of bfloat16
            // branches and a float32 one under autocast (DeepLab's ASPP,
            // whose pooling branch upsamples in float32) hands each bfloat16
            // branch a copy of its slice at once, and the float32 gradient
            // lives only as long as its float32 inputs need it.
            int64_t n = 0;
            int64_t bytes = 0;
            CheckedNumel(s_.vals[op.in[i]].shape, &n);
            DTypeBytes(s_.vals[op.in[i]].dtype, n, &bytes);
            const int st = AllocNew(bytes, Category::kTransients);
            Ref(st);
            produced.emplace_back(op.in[i], st);
            continue;
          }
          Ref(out_grad);
          produced.emplace_back(op.in[i], out_grad);
          // A transpose's backward hands its input the gradient transposed:
          // for a contiguous input, a gradient laid out for another order;
          // transposed again, back in order.
          if (i == 0 && op.def != nullptr && op.def->view == ViewRule::kTranspose) {
            const Val& x = s_.vals[op.in[0]];
            if (transposed_grads_.erase(out_grad) == 0 && x.strides.size() == x.shape.size() &&
                IsContiguous(x.shape, x.strides)) {
              transposed_grads_.insert(out_grad);
            }
          }
        }
        break;
      case GradKind::kBiasAdd:
        if (op.grad_in[0] && out_grad >= 0) {
          Ref(out_grad);
          produced.emplace_back(op.in[0], out_grad);
        }
        if (op.grad_in.size() > 1 && op.grad_in[1] && op.bias_grad_by_op >= 0 && op.grad_in[0] &&
            out_grad >= 0) {
          addmm_bias_[op.bias_grad_by_op] = static_cast<int>(k);
          deferred_bias = true;
        } else if (op.grad_in.size() > 1 && op.grad_in[1]) {
          const int v = op.in[1];
          const Category cat =
              s_.vals[Root(v)].is_param ? Category::kGradients : Category::kTransients;
          Use(cat == Category::kGradients ? grad_rule : op_rule);
          const int st = AllocNew(s_.vals[v].bytes, cat);
          Ref(st);
          produced.emplace_back(v, st);
        }
        break;
      case GradKind::kGather: {
        const Val& x = s_.vals[op.in[0]];
        if (!op.grad_in.empty() && op.grad_in[0]) {
          const int st = AllocNew(x.bytes > 0 ? x.bytes : s_.vals[root_[op.in[0]]].bytes,
                                  Category::kTransients);
          Ref(st);
          produced.emplace_back(op.in[0], st);
          if (x.strides.size() == x.shape.size() && !IsContiguous(x.shape, x.strides)) {
            permuted_grads_.insert(st);
          }
        }
        if (stacks) {  // the stacked gradients go
          for (int m : stack_members_[static_cast<int>(k)]) {
            if (m == static_cast<int>(k)) continue;
            for (int v : s_.ops[m].out) {
              auto it = v >= 0 ? grad_of_.find(v) : grad_of_.end();
              if (it == grad_of_.end()) continue;
              Unref(it->second);
              grad_of_.erase(it);
            }
          }
        }
        break;
      }
      case GradKind::kNew:
        BackwardInputOrder(s_, op, addmm_bias_.count(static_cast<int>(k)) > 0, &input_order_);
        for (size_t i : input_order_) {
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
          // Gradients laid out for another dim order: a batch-first RNN's
          // dx, and a cast of one (to() keeps the strides it is given).
          if (i == 0 && (op.grad_in0_transposed || (op.op_type == op_names::kCast &&
                                                    transposed_grads_.count(out_grad) > 0))) {
            transposed_grads_.insert(st);
          }
          if (product) {
            backward_workspace();
            Use(op_rule);
          }
          if (i == 2 && op.bias_sum_staging_bytes > 0) {
            Use(WorkspaceRule(k));
            Free(AllocNew(op.bias_sum_staging_bytes, Category::kWorkspaces));
            Use(op_rule);
          }
        }
        break;
    }
    if (grad_copy_at == GradOutputCopy::kAfterGrads) {
      Use(copy_rule);
      grad_output_copy = AllocNew(s_.vals[op.out[0]].bytes, Category::kTransients);
    }
    Use(TempRule(k));
    const std::vector<int> temps = AllocEach(op.bwd_temp_bytes, Category::kTransients);
    if (!op.bwd_kernel_temp_bytes.empty()) {
      Use(WorkspaceRule(k));
      FreeLastFirst(AllocEach(op.bwd_kernel_temp_bytes, Category::kWorkspaces));
      Use(TempRule(k));
    }
    if (op.bwd_workspace > 0 && !deferred_bias) {
      Use(WorkspaceRule(k));
      Free(AllocNew(op.bwd_workspace, Category::kWorkspaces));
      Use(TempRule(k));
    }
    FreeLastFirst(copies);
    const int weight_copy = op.bwd_weight_copy_bytes > 0
                                ? AllocNew(op.bwd_weight_copy_bytes, Category::kTransients)
                                : -1;
    if (!op.grad_in_weight_pass.empty() && op.grad_kind == GradKind::kNew) {
      WeightPassGrads(op, &produced);
    }
    if (op.bwd_weight_workspace > 0) {
      Use(WorkspaceRule(k));
      Free(AllocNew(op.bwd_weight_workspace, Category::kWorkspaces));
      Use(TempRule(k));
    }
    if (weight_copy >= 0) Free(weight_copy);
    if (grad_output_copy >= 0) Free(grad_output_copy);
    if (input_copy >= 0) Free(input_copy);
    FreeLastFirst(zeros);
    for (int st : temps) Free(st);
    // addmm's bias gradient: its `self` gradient summed to the bias's shape
    // after the node ran (engine.cpp validate_outputs), before the incoming
    // gradient is released.
    if (auto ab = addmm_bias_.find(static_cast<int>(k)); ab != addmm_bias_.end()) {
      const size_t b = static_cast<size_t>(ab->second);
      addmm_bias_.erase(ab);
      const int v = s_.ops[b].in[1];
      const Category cat = s_.vals[Root(v)].is_param ? Category::kGradients : Category::kTransients;
      Use(cat == Category::kGradients ? grad_rule : OpRule(b));
      const int st = AllocNew(s_.vals[v].bytes, cat);
      Ref(st);
      produced.emplace_back(v, st);
      if (s_.ops[b].bwd_workspace > 0) {
        Use(WorkspaceRule(b));
        Free(AllocNew(s_.ops[b].bwd_workspace, Category::kWorkspaces));
      }
      Use(op_rule);
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
    // A view op's backward hands its input a view of the incoming gradient.
    for (const auto& p : produced)
      AddGrad(p.first, p.second, op.grad_is_view && p.second == out_grad);
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
      const size_t before = state_.size();
      if (adam) {
        state_.push_back(AllocNew(b, Category::kOptimizerState));
        state_.push_back(AllocNew(b, Category::kOptimizerState));
      } else if (o_.optimizer == Optimizer::kMomentum) {
        state_.push_back(AllocNew(b, Category::kOptimizerState));
      }
      for (size_t k = before; k < state_.size(); ++k) storages[state_[k]].param = param_index_[p];
    }
  }
  if (adam) {
    // foreach Adam: exp_avg_sq.sqrt() for the whole group, then addcdiv.
    Use(Mech(Mechanism::kForeachTemporaries));
    std::vector<int> tmp;
    for (int p : s_.params) {
      if (!grad_of_.count(p)) continue;
      tmp.push_back(AllocNew(s_.vals[p].bytes, Category::kTransients));
      storages[tmp.back()].param = param_index_[p];
    }
    // The list dies last element first (CPython's list_dealloc decrefs from
    // the end): the H100 trace of lstm_lm_g amp_bf16 b12 frees the head's
    // 22 MiB temporary first and the embedding's last.
    for (auto it = tmp.rbegin(); it != tmp.rend(); ++it) Free(*it);
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
    for (int st : held_) Unref(st);  // leaving autocast
    held_.clear();
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
  const size_t events0 = events.size(), storages0 = storages.size(), steps0 = steps_phase.size();
  {
    // Room for the iterations before the first is made, from the schedule's
    // size (a hint: the vectors grow past it where needed). Grown by
    // doubling instead, a large graph's vectors leave freed copies of half
    // their size behind, which later arrays do not fit into (the 1 M-node
    // chain, bench/speed.sh: ~5.3 events, 2.7 storages and 2 steps an op
    // per steady iteration, the first one more).
    const size_t iterations = o_.mode == Mode::kInference || stop_when_steady ? 2 : 3;
    const size_t ops = s_.ops.size(), params = s_.params.size();
    events.reserve(events.size() + iterations * (6 * ops + 4 * params) + 1024);
    event_step.reserve(events.capacity());
    event_op.reserve(events.capacity());
    storages.reserve(storages.size() + iterations * (3 * ops + 2 * params) + 1024);
    steps_phase.reserve(steps_phase.size() + iterations * (2 * ops + 16) + 1024);
    steps_label_.reserve(steps_phase.capacity());
  }
  Iteration(true);
  // The other iterations record about as much as the first: reserved up
  // front, a large graph's vectors do not grow to twice what they hold.
  // Where the third training iteration is likely not made (stop_when_steady),
  // room for one: a reservation never written still costs resident memory
  // when it lands on heap pages an earlier plan variant wrote.
  const size_t more = o_.mode == Mode::kInference || stop_when_steady ? 1 : 2;
  iteration_sizes_[0] = events.size() - events0;
  iteration_sizes_[1] = storages.size() - storages0;
  iteration_sizes_[2] = steps_phase.size() - steps0;
  ReserveIterations(more);
  if (o_.mode == Mode::kInference) {
    Iteration(false);
    return;
  }
  // First step, then two steady ones (options.step picks which to report).
  std::vector<int64_t> after_first;
  if (stop_when_steady) after_first = IterationState();
  const int64_t before[3] = {forward_flops, backward_flops, recompute_flops};
  Iteration(false);
  if (stop_when_steady && IterationStateEquals(after_first)) {
    repeat_flops_[0] = forward_flops - before[0];
    repeat_flops_[1] = backward_flops - before[1];
    repeat_flops_[2] = recompute_flops - before[2];
    steady_repeats = true;
    return;
  }
  ReserveIterations(1);
  Iteration(false);
}

void Simulator::ReserveIterations(size_t n) {
  const size_t slack = 1024;
  events.reserve(events.size() + n * iteration_sizes_[0] + slack);
  event_step.reserve(events.capacity());
  event_op.reserve(events.capacity());
  storages.reserve(storages.size() + n * iteration_sizes_[1] + slack);
  steps_phase.reserve(steps_phase.size() + n * iteration_sizes_[2] + slack);
  steps_label_.reserve(steps_phase.capacity());
}

void Simulator::RunRepeatedIteration() {
  if (!steady_repeats) return;
  steady_repeats = false;
  ReserveIterations(1);
  Iteration(false);
}

void Simulator::CountRepeatedIteration() {
  // Saturated sums stay saturated (a difference of them is no count).
  int64_t* counters[3] = {&forward_flops, &backward_flops, &recompute_flops};
  for (int k = 0; k < 3; ++k) {
    if (*counters[k] != INT64_MAX) *counters[k] = SatAdd(*counters[k], repeat_flops_[k]);
  }
}

template <typename Emit>
bool Simulator::EmitIterationState(Emit&& emit) const {
  // A storage that is neither live nor referenced is gone for good (each is
  // allocated once; its count may have gone below 0, e.g. an unreferenced
  // allocation unreferenced once): references to it count as "dead",
  // whichever it is.
  auto kept = [&](int st) { return st >= 0 && (storages[st].live || storages[st].refs > 0); };
  constexpr int64_t kDead = -7;
  auto norm = [&](int st) -> int64_t { return st < 0 ? st : kept(st) ? st : kDead; };
  for (size_t st = 0; st < storages.size(); ++st) {
    if (!kept(static_cast<int>(st))) continue;
    const Storage& x = storages[st];
    for (int64_t v :
         {static_cast<int64_t>(st), x.bytes, EventId(static_cast<int>(st)), int64_t{x.refs},
          int64_t{x.rule}, int64_t{x.param}, static_cast<int64_t>(x.cat),
          static_cast<int64_t>(x.first_cat), int64_t{x.live ? 1 : 0}}) {
      if (!emit(v)) return false;
    }
  }
  if (!emit(-1)) return false;
  for (int st : storage_of_val_) {
    if (!emit(norm(st))) return false;
  }
  std::vector<std::pair<int, int64_t>> grads;
  grads.reserve(grad_of_.size());
  for (const auto& [v, st] : grad_of_) grads.emplace_back(v, norm(st));
  std::sort(grads.begin(), grads.end());
  if (!emit(static_cast<int64_t>(grads.size()))) return false;
  for (const auto& [v, st] : grads) {
    if (!emit(v) || !emit(st)) return false;
  }
  std::vector<int> view_grads(view_grad_vals_.begin(), view_grad_vals_.end());
  std::sort(view_grads.begin(), view_grads.end());
  if (!emit(static_cast<int64_t>(view_grads.size()))) return false;
  for (int v : view_grads) {
    if (!emit(v)) return false;
  }
  auto list = [&](const std::vector<int>& l) {
    if (!emit(static_cast<int64_t>(l.size()))) return false;
    for (int st : l) {
      if (!emit(norm(st))) return false;
    }
    return true;
  };
  if (!list(state_) || !list(held_) || !list(loss_storages_) || !list(loss_saved_) ||
      !list(param_grad_)) {
    return false;
  }
  if (!emit(static_cast<int64_t>(saved_storages_.size()))) return false;
  for (const auto& l : saved_storages_) {
    if (!list(l)) return false;
  }
  if (!emit(static_cast<int64_t>(seg_held_.size()))) return false;
  for (const auto& l : seg_held_) {
    if (!list(l)) return false;
  }
  if (!emit(static_cast<int64_t>(recomputed_.size()))) return false;
  for (bool r : recomputed_) {
    if (!emit(r ? 1 : 0)) return false;
  }
  for (int64_t v :
       {norm(logits_storage_), int64_t{fwd_workspace_ ? 1 : 0}, int64_t{bwd_workspace_ ? 1 : 0},
        int64_t{fwd_lt_workspace_ ? 1 : 0}, int64_t{bwd_lt_workspace_ ? 1 : 0},
        int64_t{process_state_ ? 1 : 0}, int64_t{recomputing_ ? 1 : 0}, int64_t{cur_rule_},
        int64_t{cur_op_}, static_cast<int64_t>(rules.size()),
        static_cast<int64_t>(other_labels_.size())}) {
    if (!emit(v)) return false;
  }
  for (int id : mech_rule_) {
    if (!emit(id)) return false;
  }
  for (bool used : rule_used) {
    if (!emit(used ? 1 : 0)) return false;
  }
  return true;
}

std::vector<int64_t> Simulator::IterationState() const {
  std::vector<int64_t> out;
  out.reserve(storage_of_val_.size() + 64);
  (void)EmitIterationState([&out](int64_t v) {
    out.push_back(v);
    return true;
  });
  return out;
}

bool Simulator::IterationStateEquals(const std::vector<int64_t>& state) const {
  size_t at = 0;
  return EmitIterationState(
             [&state, &at](int64_t v) { return at < state.size() && state[at++] == v; }) &&
         at == state.size();
}

}  // namespace memplan
