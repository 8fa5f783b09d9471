// Tests of MakePlan: the replayed calibration protocol (load, input, three
// iterations of forward / loss / backward / optimizer) through the caching
// allocator, with peaks derived by hand from the documented mechanisms
// (shared/design/memory-model.md).
//
// Every size in the hand-built graphs below is a multiple of 512 B, so the
// allocator's rounding adds nothing and peaks are exact sums.
#include "planner/plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "planner/allocator_sim.h"
#include "planner/ops/test_graph.h"
#include "planner/plan_step.h"
#include "planner/reduce_kernel.h"
#include "planner/schedule.h"
#include "planner/shape_inference.h"
#include "planner/simulator.h"

namespace memplan {
namespace {

using testing_util::D;
using testing_util::GraphBuilder;
using testing_util::IntAttr;
using testing_util::IntsAttr;
using testing_util::S;
using testing_util::TensorAttr;

constexpr int64_t kKiB = 1024;
constexpr int64_t kMiB = 1024 * 1024;
// cuBLAS workspace per handle (forward thread, autograd thread); the MLP
// below has no biased linear, so no cuBLASLt workspace.
constexpr int64_t kCublasWs = 32 * kMiB;
constexpr int64_t kTrainWorkspaces = 2 * kCublasWs;  // 64 MiB

// The 2-layer MLP: x [N, 1024] -> fc1 (W1 [1024, 4096]) -> relu -> fc2 (W2
// [4096, 10]) -> logits [N, 10].
//   W1 = 1024 * 4096 * 4 B = 16 MiB = 16777216 B
//   W2 = 4096 * 10 * 4 B  = 160 KiB = 163840 B
//   P  = 16941056 B (4235264 parameters)
constexpr int64_t kW1 = 1024 * 4096 * 4;
constexpr int64_t kW2 = 4096 * 10 * 4;
constexpr int64_t kP = kW1 + kW2;

GraphBuilder Mlp() {
  GraphBuilder b;
  b.Input("x", {S("N"), D(1024)});
  b.Init("W1", {1024, 4096});
  b.Init("W2", {4096, 10});
  b.Op("MatMul", {"x", "W1"}, {"h"}, "fc1");
  b.Op("Relu", {"h"}, {"r"}, "relu");
  b.Op("MatMul", {"r", "W2"}, {"logits"}, "fc2");
  b.Output("logits");
  return b;
}

PlanOptions Train(Optimizer opt, Precision p = Precision::kFp32) {
  PlanOptions o;
  o.mode = Mode::kTrain;
  o.optimizer = opt;
  o.precision = p;
  return o;
}

PlanOptions Inference(Precision p = Precision::kFp32) {
  PlanOptions o;
  o.mode = Mode::kInference;
  o.precision = p;
  return o;
}

Plan PlanOf(GraphBuilder b, int64_t batch, const PlanOptions& o) {
  ShapeBindings bind;
  bind.batch = batch;
  Status s = InferShapes(&b.g, bind, nullptr);
  EXPECT_TRUE(s.ok()) << s.message();
  auto plan = MakePlan(b.g, batch, o);
  EXPECT_TRUE(plan.ok()) << plan.message();
  return plan.ok() ? plan.value() : Plan();
}

int64_t Cat(const Peak& p, Category c) { return p.breakdown.bytes[static_cast<int>(c)]; }

const TimelinePoint* PointAt(const Plan& plan, const std::string& node) {
  for (const TimelinePoint& pt : plan.timeline) {
    if (pt.node == node) return &pt;
  }
  return nullptr;
}

// Cross entropy on segmentation logits [N, C, H, W] takes its classes from
// dim 1 and int64 labels of [N, H, W] (nll_loss2d). x [2, 4, 16, 16] * s
// (a one-element parameter) -> logits (8 KiB); labels 2*16*16*8 = 4 KiB (a
// [N, C, H] reading would give 2*4*16*8 = 1 KiB). In loss backward the
// labels and the total weight go once d(log p) exists, before log_softmax
// backward writes d(logits).
TEST(Plan, PerPixelCrossEntropyLabelsAndTheirRelease) {
  GraphBuilder b;
  b.Input("x", {S("N"), D(4), D(16), D(16)});
  b.Init("s", {1});
  b.Op("Mul", {"x", "s"}, {"logits"}, "scale");
  b.Output("logits");
  PlanOptions o = Train(Optimizer::kSgd);
  o.keep_events = true;
  const Plan p = PlanOf(b, 2, o);
  ASSERT_EQ(p.events.size(), p.event_nodes.size());
  std::vector<int64_t> loss_allocs;
  std::vector<std::string> bwd;  // "+bytes" / "-bytes" of the first loss backward
  std::map<int64_t, int64_t> bytes_of;
  bool first_bwd_done = false;
  for (size_t e = 0; e < p.events.size(); ++e) {
    const MemEvent& ev = p.events[e];
    if (ev.is_alloc) bytes_of[ev.id] = ev.bytes;
    if (p.event_nodes[e] == "loss" && ev.is_alloc && loss_allocs.size() < 4) {
      loss_allocs.push_back(ev.bytes);
    }
    if (p.event_nodes[e] == "loss backward" && !first_bwd_done) {
      bwd.push_back((ev.is_alloc ? "+" : "-") + std::to_string(bytes_of[ev.id]));
    } else if (!bwd.empty()) {
      first_bwd_done = true;
    }
  }
  // labels, log p (fp32, the logits' size), the loss, the total weight.
  EXPECT_EQ(loss_allocs, (std::vector<int64_t>{2 * 16 * 16 * 8, 8192, 4, 4}));
  // d(log p); labels and total weight freed; d(logits); d(log p) and log p freed.
  EXPECT_EQ(bwd, (std::vector<std::string>{"+8192", "-4096", "-4", "+8192", "-8192", "-8192"}));
}

// The allocations of `bytes` that the first backward of an SGD training
// plan of `b` at `batch` makes.
int FirstBackwardAllocsOf(const GraphBuilder& b, int64_t batch, int64_t bytes) {
  PlanOptions o = Train(Optimizer::kSgd);
  o.keep_events = true;
  const Plan p = PlanOf(b, batch, o);
  int n = 0;
  for (size_t e = 0; e < p.events.size() && e < p.iteration_starts.at(1); ++e) {
    if (p.event_phases[e] == Phase::kBackward && p.events[e].is_alloc &&
        p.events[e].bytes == bytes) {
      ++n;
    }
  }
  return n;
}

// A language model's tied head in fp32: W [V, H] read by the embedding
// (Gather) and, transposed, by the head's MatMul. The head's gradient of W
// comes first and is a view (TBackward's transpose), so autograd adds the
// embedding's gradient out of place: a third W-sized tensor while both live
// (bench/results/grad_accum_probe_h200.jsonl). Two embeddings add in place.
TEST(Plan, ATiedHeadsViewGradientIsSummedOutOfPlace) {
  auto w_sized_allocs = [](bool tied) {
    GraphBuilder b;
    b.Input("ids", {S("N"), D(64)}, DType::kInt64);
    b.Init("w", {1000, 32});
    b.Op("Gather", {"w", "ids"}, {"e"});
    if (tied) {
      b.Op("Transpose", {"w"}, {"wt"}).attrs["perm"] = IntsAttr({1, 0});
      b.Op("MatMul", {"e", "wt"}, {"logits"});
    } else {
      b.Op("Gather", {"w", "ids"}, {"e2"});
      b.Op("Add", {"e", "e2"}, {"s"});
      b.Init("head", {32, 500});
      b.Op("MatMul", {"s", "head"}, {"logits"});
    }
    b.Output("logits");
    return FirstBackwardAllocsOf(b, 2, 1000 * 32 * 4);
  };
  EXPECT_EQ(w_sized_allocs(true), 3) << "the head's, the embedding's and their sum";
  EXPECT_EQ(w_sized_allocs(false), 2) << "the second embedding gradient is added in place";
}

// qkv.unflatten(-1, (3, H, dh)).permute(2, 0, 3, 1, 4).unbind(0), as
// torch.onnx writes it: Reshape, Transpose, then a Slice and a Squeeze per
// output. PyTorch's backward is one UnbindBackward, a stack of the three
// gradients (a qkv-sized tensor laid out for the permuted view), and the
// unflatten's backward then copies it back to [N, S, 3 * H * dh] (clip_n's
// H200 trace): two qkv-sized gradients. As three plain Slices, each makes
// its own qkv-sized zeros (the copy follows them too).
TEST(Plan, AnUnbindsSlicesStackTheirGradientsOnce) {
  auto qkv_sized_allocs = [](bool unbind) {
    GraphBuilder b;
    b.Input("x", {S("N"), D(16), D(32)});
    b.Init("W", {32, 96});
    b.Ints("shape", {0, 16, 3, 4, 8});
    b.Op("MatMul", {"x", "W"}, {"h"});
    b.Op("Reshape", {"h", "shape"}, {"h5"});
    b.Op("Transpose", {"h5"}, {"p"}).attrs["perm"] = IntsAttr({2, 0, 3, 1, 4});
    b.Ints("axis0", {0});
    const char* names[] = {"q", "k", "v"};
    for (int i = 0; i < 3; ++i) {
      const std::string n = names[i];
      b.Ints(n + "_s", {i});
      b.Ints(n + "_e", {i + 1});
      b.Op("Slice", {"p", n + "_s", n + "_e", "axis0"}, {n + "5"}).unbind_call = unbind ? 7 : -1;
      b.Op("Squeeze", {n + "5", "axis0"}, {n}).unbind_call = unbind ? 7 : -1;
    }
    b.Op("Add", {"q", "k"}, {"qk"});
    b.Op("Add", {"qk", "v"}, {"y"});
    b.Output("y");
    return FirstBackwardAllocsOf(b, 4, 4 * 16 * 96 * 4);
  };
  EXPECT_EQ(qkv_sized_allocs(true), 2) << "the stack and the unflatten's copy";
  EXPECT_EQ(qkv_sized_allocs(false), 4) << "three slices' zeros and the copy";
}

// Gemm(x, W, bias) in backward, as gpt2's Conv1D runs it (addmm): the
// gradients of x and W, then the bias's, summed over the 5632 rows by
// validate_outputs, with the reduction's staging buffer taken right after
// it and freed at once (bench/op_memlog.py on gpt2: 132 MiB for [5632, 3072]
// in bf16).
TEST(Plan, GemmBiasGradientTakesTheColumnSumsStagingBuffer) {
  GraphBuilder b;
  b.Input("x", {S("N"), D(768)});
  b.Init("W", {768, 3072});
  b.Init("bias", {3072});
  b.Op("Gemm", {"x", "W", "bias"}, {"y"}, "fc");
  b.Output("y");
  PlanOptions o = Train(Optimizer::kSgd);
  o.keep_events = true;
  const Plan p = PlanOf(b, 5632, o);
  ASSERT_EQ(p.events.size(), p.event_nodes.size());
  std::vector<int64_t> bwd;  // allocations of fc's first backward
  for (size_t e = 0; e < p.events.size() && e < p.iteration_starts.at(1); ++e) {
    if (p.event_phases[e] == Phase::kBackward && p.event_nodes[e].find("fc") != std::string::npos &&
        p.events[e].is_alloc) {
      bwd.push_back(p.events[e].bytes);
    }
  }
  const int64_t staging = ColumnSumStagingBytes(5632, 3072, 4, 4);
  ASSERT_GT(staging, 0);
  ASSERT_GE(bwd.size(), 2u);
  EXPECT_EQ(bwd[bwd.size() - 2], 3072 * 4) << "the bias gradient";
  EXPECT_EQ(bwd.back(), staging) << "then its staging buffer";
}

// Cross entropy on half logits under autocast: cross_entropy_loss runs
// log_softmax in the logits' dtype (it passes self's dtype explicitly) and
// nll_loss, on autocast's fp32 list, gets an fp32 copy of log p; both are
// saved. x [2, 64] @ w [64, 256] -> bf16 logits of 1 KiB: forward allocates
// labels 16 B, log p 1 KiB (bf16), its fp32 copy 2 KiB, the loss and the
// total weight. Backward: d(log p) in fp32, then nll_loss's node lets go of
// the fp32 copy, the labels and the total weight; the cast's backward writes
// d(log p) in bf16, the fp32 one goes; log_softmax backward writes d(logits);
// the bf16 d(log p) and log p go (families trace
// qwen_bigvocab_train_16_amp_bf16 shows the same sequence).
TEST(Plan, CrossEntropyOnHalfLogitsUnderAutocast) {
  GraphBuilder b;
  b.Input("x", {S("N"), D(64)});
  b.Init("w", {64, 256});
  b.Op("MatMul", {"x", "w"}, {"logits"}, "head");
  b.Output("logits");
  PlanOptions o = Train(Optimizer::kSgd, Precision::kAmpBf16);
  o.keep_events = true;
  const Plan p = PlanOf(b, 2, o);
  ASSERT_EQ(p.events.size(), p.event_nodes.size());
  std::vector<int64_t> loss_allocs;
  std::vector<std::string> bwd;
  std::map<int64_t, int64_t> bytes_of;
  bool first_bwd_done = false;
  for (size_t e = 0; e < p.events.size(); ++e) {
    const MemEvent& ev = p.events[e];
    if (ev.is_alloc) bytes_of[ev.id] = ev.bytes;
    if (p.event_nodes[e] == "loss" && ev.is_alloc && loss_allocs.size() < 5) {
      loss_allocs.push_back(ev.bytes);
    }
    if (p.event_nodes[e] == "loss backward" && !first_bwd_done) {
      bwd.push_back((ev.is_alloc ? "+" : "-") + std::to_string(bytes_of[ev.id]));
    } else if (!bwd.empty()) {
      first_bwd_done = true;
    }
  }
  EXPECT_EQ(loss_allocs, (std::vector<int64_t>{16, 1024, 2048, 4, 4}));
  EXPECT_EQ(bwd, (std::vector<std::string>{"+2048", "-2048", "-16", "-4", "+1024", "-2048", "+1024",
                                           "-1024", "-1024"}));
}

// Autocast casts an op's arguments last first: its wrapper passes
// cached_cast(args)... straight into the call (WrapFunction_,
// aten/src/ATen/autocast_mode.h), whose arguments GCC evaluates right to
// left; the H200 trace of wav2vec2_cls b512 amp_bf16
// (bench/results/traces/whatif/) shows each linear's bias copy, then the
// weight's, then the input's. The input's copy, made last, has the highest
// sequence number, so autograd runs its backward before the weight's and
// the bias's. x [N, 64] -> MatMul W1 -> LayerNorm (fp32 out) -> Gemm(n, W2
// [16, 64], b2 [16], transB).
TEST(Plan, AutocastCastsAnOpsArgumentsLastFirst) {
  GraphBuilder b;
  b.Input("x", {S("N"), D(64)});
  b.Init("W1", {64, 64});
  b.Init("g", {64});
  b.Init("beta", {64});
  b.Init("W2", {16, 64});
  b.Init("b2", {16});
  b.Op("MatMul", {"x", "W1"}, {"h"}, "fc1");
  b.Op("LayerNormalization", {"h", "g", "beta"}, {"n"}, "ln").attrs["axis"] = IntAttr(-1);
  b.Op("Gemm", {"n", "W2", "b2"}, {"logits"}, "head").attrs["transB"] = IntAttr(1);
  b.Output("logits");
  PlanOptions o = Train(Optimizer::kSgd, Precision::kAmpBf16);
  o.keep_events = true;
  const Plan p = PlanOf(b, 4, o);
  ASSERT_EQ(p.events.size(), p.event_nodes.size());
  const size_t first_step_end = p.iteration_starts.size() > 1 ? p.iteration_starts[1] : 0;
  ASSERT_GT(first_step_end, 0u);
  std::vector<std::string> forward, backward;  // the head's casts, first allocation of each
  for (size_t e = 0; e < first_step_end; ++e) {
    const std::string& node = p.event_nodes[e];
    if (!p.events[e].is_alloc) continue;
    if (node != "autocast(b2)" && node != "autocast(W2)" && node != "autocast(head)") continue;
    std::vector<std::string>& list = p.event_phases[e] == Phase::kBackward ? backward : forward;
    if (std::find(list.begin(), list.end(), node) == list.end()) list.push_back(node);
  }
  EXPECT_EQ(forward, (std::vector<std::string>{"autocast(b2)", "autocast(W2)", "autocast(head)"}));
  EXPECT_EQ(backward, (std::vector<std::string>{"autocast(head)", "autocast(W2)", "autocast(b2)"}));
}

// One training step's allocations (+bytes) and frees (-bytes), first step
// only, with the op that made each: for checking the order of events.
struct StepEvent {
  int64_t bytes;  // negative for a free
  std::string node;
  Phase phase;
};
std::vector<StepEvent> FirstStepEvents(const Plan& p) {
  std::vector<StepEvent> out;
  std::map<int64_t, int64_t> bytes_of;
  const size_t end = p.iteration_starts.size() > 1 ? p.iteration_starts[1] : p.events.size();
  for (size_t e = 0; e < end; ++e) {
    const MemEvent& ev = p.events[e];
    if (ev.empty_cache) continue;
    if (ev.is_alloc) bytes_of[ev.id] = ev.bytes;
    out.push_back({ev.is_alloc ? ev.bytes : -bytes_of[ev.id], p.event_nodes[e], p.event_phases[e]});
  }
  return out;
}

// The backward allocations (+bytes) and frees (-bytes) one node's op made.
std::vector<int64_t> BackwardEventsOf(const std::vector<StepEvent>& ev, const std::string& node) {
  std::vector<int64_t> bytes;
  for (const StepEvent& e : ev) {
    if (e.node == node && e.phase == Phase::kBackward) bytes.push_back(e.bytes);
  }
  return bytes;
}

// A cat of a bfloat16 and a float32 tensor under autocast writes float32;
// its backward hands each input a slice of the float32 gradient, which the
// autograd engine casts to the input's dtype before the next function runs
// (validate_outputs): the bfloat16 input gets a gradient of its own at once
// (DeepLab's ASPP: four bfloat16 branches and an upsampled float32 one).
// x [N, 64] -> fc1 (bf16 h) -> LayerNorm (fp32 n); cat(h, n) [N, 128] fp32
// -> head.
TEST(Plan, AMixedDtypeCatGivesItsHalfInputAGradientOfItsOwn) {
  GraphBuilder b;
  b.Input("x", {S("N"), D(64)});
  b.Init("W1", {64, 64});
  b.Init("g", {64});
  b.Init("beta", {64});
  b.Init("W2", {128, 16});
  b.Op("MatMul", {"x", "W1"}, {"h"}, "fc1");
  b.Op("LayerNormalization", {"h", "g", "beta"}, {"n"}, "ln").attrs["axis"] = IntAttr(-1);
  b.Op("Concat", {"h", "n"}, {"c"}, "cat").attrs["axis"] = IntAttr(1);
  b.Op("MatMul", {"c", "W2"}, {"logits"}, "head");
  b.Output("logits");
  const int64_t batch = 8;
  auto cat_backward_allocs = [&](Precision precision) {
    PlanOptions o = Train(Optimizer::kSgd, precision);
    o.keep_events = true;
    const Plan p = PlanOf(b, batch, o);
    std::vector<int64_t> allocs;
    for (const StepEvent& ev : FirstStepEvents(p)) {
      if (ev.phase == Phase::kBackward && ev.node == "cat" && ev.bytes > 0) {
        allocs.push_back(ev.bytes);
      }
    }
    return allocs;
  };
  EXPECT_EQ(cat_backward_allocs(Precision::kAmpBf16), (std::vector<int64_t>{batch * 64 * 2}))
      << "h's bfloat16 gradient";
  EXPECT_TRUE(cat_backward_allocs(Precision::kFp32).empty()) << "one dtype: slices only";
}

// cudnn_convolution_backward runs the data pass (the input's gradient, then
// its workspace) before the weight pass (the weight's gradient, then its
// workspace): H200 traces of resnet18 b32 fp32 (3.06 MiB dx, 15.13 MiB
// workspace freed, 9 MiB dw, 20.38 MiB workspace freed) and fcn_r50_e b4.
TEST(Plan, ConvolutionBackwardRunsTheDataPassBeforeTheWeightPass) {
  GraphBuilder b;
  b.Input("x", {S("N"), D(64), D(16), D(16)});
  b.Init("W1", {64, 64, 3, 3});
  b.Init("W2", {64, 64, 3, 3});
  auto pad = [](Node& n) { n.attrs["pads"] = IntsAttr({1, 1, 1, 1}); };
  pad(b.Op("Conv", {"x", "W1"}, {"h"}, "c1"));
  b.Op("Relu", {"h"}, {"r"}, "relu");
  pad(b.Op("Conv", {"r", "W2"}, {"logits"}, "c2"));
  b.Output("logits");
  const int64_t batch = 8;
  PlanOptions o = Train(Optimizer::kSgd, Precision::kBf16);
  o.keep_events = true;
  const Plan p = PlanOf(b, batch, o);
  std::vector<int64_t> c2;
  for (const StepEvent& ev : FirstStepEvents(p)) {
    if (ev.phase == Phase::kBackward && ev.node == "c2") c2.push_back(ev.bytes);
  }
  const int64_t act = batch * 64 * 16 * 16 * 2, w = 64 * 64 * 9 * 2;
  const int64_t copies = act + w + act;  // x, w and y
  ASSERT_GE(c2.size(), 6u);
  EXPECT_EQ(c2[0], act) << "dx";
  EXPECT_EQ(c2[1], copies) << "the data pass's workspace";
  EXPECT_EQ(c2[2], -copies);
  EXPECT_EQ(c2[3], w) << "dw, after the data pass";
  EXPECT_GT(c2[4], 0) << "the weight pass's workspace";
  EXPECT_EQ(c2[5], -c2[4]);
}

// native_group_norm allocates Y, then mean and rstd (saved), then the scale
// and shift a, b, freed b first; its backward dX, dgamma, dbeta, then ds, db,
// then c2, c3, c1, which go before ds and db (group_norm_kernel.cu; each its
// own block, as wav2vec2_cls's b512 amp_bf16 trace shows). x [2, 8, 4, 4]
// fp32, 4 groups.
TEST(Plan, GroupNormKernelTensorsComeInTheKernelsOrder) {
  GraphBuilder b;
  b.Input("x", {S("N"), D(8), D(4), D(4)});
  b.Init("W", {8, 8, 1, 1});
  b.Init("s", {8});
  b.Init("bias", {8});
  b.Op("Conv", {"x", "W"}, {"c"}, "conv");
  b.Op("GroupNormalization", {"c", "s", "bias"}, {"logits"}, "gn").attrs["num_groups"] = IntAttr(4);
  b.Output("logits");
  PlanOptions o = Train(Optimizer::kSgd);
  o.keep_events = true;
  const Plan p = PlanOf(b, 2, o);
  std::vector<int64_t> forward;
  for (const StepEvent& ev : FirstStepEvents(p)) {
    if (ev.phase == Phase::kForward && ev.node == "gn") forward.push_back(ev.bytes);
  }
  const int64_t y = 2 * 8 * 16 * 4, stat = 2 * 4 * 4, nc = 2 * 8 * 4;
  EXPECT_EQ(forward, (std::vector<int64_t>{y, stat, stat, nc, nc, -nc, -nc}));
  const std::vector<int64_t> backward = BackwardEventsOf(FirstStepEvents(p), "gn");
  const int64_t w = 8 * 4;
  ASSERT_GE(backward.size(), 14u);
  EXPECT_EQ(
      std::vector<int64_t>(backward.begin(), backward.begin() + 14),
      (std::vector<int64_t>{y, w, w, nc, nc, stat, stat, nc, -nc, -stat, -stat, -nc, -nc, -y}));
}

// The forward thread's cuBLAS workspace is made inside the first GEMM, after
// that GEMM's output (getCurrentCUDABlasHandle; H200 trace gru_lm b19
// amp_bf16: the head's 23.2 MiB logits, then the 32 MiB).
TEST(Plan, ForwardCublasWorkspaceComesAfterTheFirstGemmsOutput) {
  PlanOptions o = Train(Optimizer::kSgd);
  o.keep_events = true;
  const Plan p = PlanOf(Mlp(), 8, o);
  const std::vector<StepEvent> ev = FirstStepEvents(p);
  const int64_t h = 8 * 4096 * 4;
  auto at = [&](int64_t bytes) {
    for (size_t i = 0; i < ev.size(); ++i) {
      if (ev[i].bytes == bytes && ev[i].phase == Phase::kForward) return static_cast<int>(i);
    }
    return -1;
  };
  ASSERT_GE(at(h), 0);
  ASSERT_GE(at(kCublasWs), 0);
  EXPECT_EQ(at(kCublasWs), at(h) + 1);
  EXPECT_EQ(ev[at(h)].node, "fc1");
}

// Autograd's thread makes its cuBLAS workspace inside its first GEMM, after
// that GEMM's output, and a node computes its gradients in the sorted order
// of the argument names: mm (self, mat2) makes the weight's (mat2) first,
// addmm (self, mat1, mat2) the input's (mat1) first, then the engine sums
// self's to the bias. H200 traces: lstm_lm_b fp32 b28 (a head without a
// fused bias: weight gradient, 32 MiB, input gradient), resnet18 fp32 b32
// (fc: input gradient, 32 MiB, weight gradient, bias gradient).
TEST(Plan, BackwardCublasWorkspaceComesAfterTheFirstGradientOfTheFirstGemm) {
  for (bool bias : {false, true}) {
    GraphBuilder b = Mlp();
    if (bias) {
      b = GraphBuilder();
      b.Input("x", {S("N"), D(1024)});
      b.Init("W1", {1024, 4096});
      b.Init("W2", {4096, 10});
      b.Init("b2", {10});
      b.Op("MatMul", {"x", "W1"}, {"h"}, "fc1");
      b.Op("Relu", {"h"}, {"r"}, "relu");
      b.Op("MatMul", {"r", "W2"}, {"y"}, "fc2");
      b.Op("Add", {"y", "b2"}, {"logits"}, "fc2_bias");
      b.Output("logits");
    }
    PlanOptions o = Train(Optimizer::kSgd);
    o.keep_events = true;
    const Plan p = PlanOf(b, 8, o);
    const int64_t dr = 8 * 4096 * 4, db = 10 * 4;
    std::vector<int64_t> order;  // fc2's gradients and the workspace, as made
    for (const StepEvent& e : FirstStepEvents(p)) {
      if (e.phase != Phase::kBackward || e.bytes <= 0) continue;
      if (e.bytes == dr || e.bytes == kW2 || e.bytes == kCublasWs || e.bytes == db) {
        order.push_back(e.bytes);
      }
    }
    const std::vector<int64_t> want = bias ? std::vector<int64_t>{dr, kCublasWs, kW2, db}
                                           : std::vector<int64_t>{kW2, kCublasWs, dr};
    ASSERT_GE(order.size(), want.size()) << bias;
    EXPECT_EQ(std::vector<int64_t>(order.begin(), order.begin() + want.size()), want) << bias;
  }
}

// x [N, 64, 256] -> MatMul (fc0) -> Transpose -> Dropout (drop) -> MatMul
// (head): the first step's events of an SGD training plan at batch 8.
std::vector<StepEvent> TransposedDropoutEvents() {
  GraphBuilder b;
  b.Input("x", {S("N"), D(64), D(256)});
  b.Init("W0", {256, 256});
  b.Init("W", {256, 16});
  b.Op("MatMul", {"x", "W0"}, {"x0"}, "fc0");
  b.Op("Constant", {}, {"ratio"}).attrs["value"] = TensorAttr(DType::kFloat, {}, {}, {0.25});
  b.Op("Constant", {}, {"train"}).attrs["value"] = TensorAttr(DType::kBool, {}, {1});
  b.Op("Transpose", {"x0"}, {"xt"}, "t").attrs["perm"] = IntsAttr({1, 0, 2});
  b.Op("Dropout", {"xt", "ratio", "train"}, {"d", "mask"}, "drop");
  b.Op("MatMul", {"d", "W"}, {"logits"}, "head");
  b.Output("logits");
  PlanOptions o = Train(Optimizer::kSgd);
  o.keep_events = true;
  const Plan p = PlanOf(b, 8, o);
  return FirstStepEvents(p);
}

// CUDA native_dropout's output keeps its input's layout (empty_like,
// Dropout.cu): dropout of a transposed tensor is transposed, so a MatMul on
// it copies it (H200 trace lstm_lm_b b16 bf16).
TEST(Plan, DropoutKeepsItsInputsLayout) {
  const std::vector<StepEvent> ev = TransposedDropoutEvents();
  const int64_t n = 64 * 8 * 256;
  bool copied = false;
  for (const StepEvent& e : ev) {
    if (e.phase == Phase::kForward && e.node == "contiguous(head)" && e.bytes == n * 4)
      copied = true;
  }
  EXPECT_TRUE(copied);
}

// layer_norm_cuda copies a transposed input inside the call (forward: before
// its output, freed at its end) and layer_norm_backward_cuda copies it again,
// before dX (H200 trace wav2vec2_cls b512 amp_bf16: the feature projection's
// LayerNorm); no copy outlives either call.
TEST(Plan, LayerNormCopiesATransposedInputInsideEachCall) {
  GraphBuilder b;
  b.Input("x", {S("N"), D(64), D(32)});
  b.Init("W0", {32, 32});
  b.Init("gamma", {64});
  b.Init("beta", {64});
  b.Init("W", {64, 16});
  b.Op("MatMul", {"x", "W0"}, {"x0"}, "fc0");
  b.Op("Transpose", {"x0"}, {"xt"}, "t").attrs["perm"] = IntsAttr({0, 2, 1});  // [N, 32, 64]
  b.Op("LayerNormalization", {"xt", "gamma", "beta"}, {"ln"}, "ln").attrs["axis"] =
      testing_util::IntAttr(-1);
  b.Op("MatMul", {"ln", "W"}, {"logits"}, "head");
  b.Output("logits");
  PlanOptions o = Train(Optimizer::kSgd);
  o.keep_events = true;
  const std::vector<StepEvent> ev = FirstStepEvents(PlanOf(b, 8, o));
  const int64_t n = 8 * 64 * 32 * 4;
  std::vector<int64_t> fwd, bwd;
  for (const StepEvent& e : ev) {
    if (e.node != "ln") continue;
    if (e.phase == Phase::kForward) fwd.push_back(e.bytes);
    if (e.phase == Phase::kBackward) bwd.push_back(e.bytes);
  }
  // Forward: copy, output, mean and rstd; the copy freed.
  ASSERT_GE(fwd.size(), 3u);
  EXPECT_EQ(fwd[0], n);
  EXPECT_EQ(fwd[1], n);
  EXPECT_NE(std::find(fwd.begin(), fwd.end(), -n), fwd.end());
  // Backward: the copy first, then dX; the copy freed within the call.
  ASSERT_GE(bwd.size(), 3u);
  EXPECT_EQ(bwd[0], n);
  EXPECT_EQ(bwd[1], n);
  EXPECT_NE(std::find(bwd.begin(), bwd.end(), -n), bwd.end());
  for (const StepEvent& e : ev) EXPECT_NE(e.node, "contiguous(ln)");
}

// wav2vec2's LayerNorm feature encoder: conv, transpose, LayerNorm over the
// channels, transpose back. The gradient reaching the convolution's output
// and the LayerNorm's comes through a transpose's backward, in another order:
// cudnn_convolution_backward copies it (grad_output.contiguous()) before its
// gradients, layer_norm_backward_cuda (dY.contiguous()) after dX (H200 trace
// of wav2vec2_ln_c b32 fp32, events 2301-2314); each copy lives for its call.
TEST(Plan, ATransposedGradientIsCopiedByConvolutionAndLayerNorm) {
  GraphBuilder b;
  b.Input("x", {S("N"), D(16), D(40)});
  b.Init("w0", {32, 16, 3});
  b.Init("gamma", {32});
  b.Init("beta", {32});
  b.Init("w1", {8, 32, 3});
  b.Op("Conv", {"x", "w0"}, {"c0"}, "conv0");  // [N, 32, 38]
  b.Op("Transpose", {"c0"}, {"t0"}, "t0").attrs["perm"] = IntsAttr({0, 2, 1});
  b.Op("LayerNormalization", {"t0", "gamma", "beta"}, {"ln"}, "ln").attrs["axis"] =
      testing_util::IntAttr(-1);  // [N, 38, 32]
  b.Op("Transpose", {"ln"}, {"t1"}, "t1").attrs["perm"] = IntsAttr({0, 2, 1});
  b.Op("Relu", {"t1"}, {"r"}, "relu");  // keeps the transposed layout
  b.Op("Conv", {"r", "w1"}, {"c1"}, "conv1");
  b.Output("c1");
  PlanOptions o = Train(Optimizer::kSgd);
  o.keep_events = true;
  const std::vector<StepEvent> ev = FirstStepEvents(PlanOf(b, 4, o));
  const int64_t n = 4 * 32 * 38 * 4;  // c0, ln and r
  auto backward_of = [&](const std::string& node) { return BackwardEventsOf(ev, node); };
  // conv0 (no input gradient): the output gradient's copy, the weight
  // gradient, the workspace; then the copy and the incoming gradient go.
  const int64_t dw0 = 32 * 16 * 3 * 4;
  const std::vector<int64_t> conv0 = backward_of("conv0");
  ASSERT_GE(conv0.size(), 2u);
  EXPECT_EQ(conv0[0], n);
  EXPECT_EQ(conv0[1], dw0);
  EXPECT_EQ(std::count(conv0.begin(), conv0.end(), -n), 2);
  // ln: the saved input's copy, dX, dgamma, dbeta, then dY's copy; the two
  // copies, the incoming gradient and the saved input go.
  const std::vector<int64_t> ln = backward_of("ln");
  ASSERT_GE(ln.size(), 5u);
  EXPECT_EQ(ln[0], n);
  EXPECT_EQ(ln[1], n);
  EXPECT_EQ(ln[4], n);
  EXPECT_EQ(std::count(ln.begin(), ln.end(), n), 3);
  EXPECT_EQ(std::count(ln.begin(), ln.end(), -n), 4);
  // conv1's output gradient comes as it was made: not copied (only freed);
  // its transposed input is copied for the call, then dX.
  const std::vector<int64_t> conv1 = backward_of("conv1");
  ASSERT_GE(conv1.size(), 2u);
  EXPECT_EQ(conv1[0], n);
  EXPECT_EQ(conv1[1], n);
  EXPECT_EQ(std::count(conv1.begin(), conv1.end(), 4 * 8 * 36 * 4), 0);
}

// An embedding (a Gather of a weight) copies an incoming gradient laid out
// for another dim order before its weight's gradient
// (embedding_dense_backward_cuda's grad_.contiguous(); the batch-first RNN
// language models' traces); a Gather of activations does not.
TEST(Plan, AnEmbeddingCopiesATransposedGradient) {
  GraphBuilder b;
  b.Input("ids", {S("N"), D(12)}, DType::kInt64);
  b.Input("x", {S("N"), D(12), D(16)});
  b.Input("pick", {D(3)}, DType::kInt64);
  b.Init("table", {50, 16});
  b.Init("scale", {16});
  b.Op("Gather", {"table", "ids"}, {"e"}, "emb");  // [N, 12, 16]
  b.Op("Mul", {"x", "scale"}, {"a"}, "act");
  b.Op("Gather", {"a", "pick"}, {"g"}, "rows").attrs["axis"] = testing_util::IntAttr(1);
  b.Op("Transpose", {"g"}, {"t"}, "t").attrs["perm"] = IntsAttr({1, 0, 2});  // [3, N, 16]
  b.Op("Relu", {"t"}, {"r"}, "relu");
  b.Op("Transpose", {"e"}, {"et"}, "et").attrs["perm"] = IntsAttr({1, 0, 2});  // [12, N, 16]
  b.Op("Relu", {"et"}, {"re"}, "relu_e");
  b.Op("Concat", {"re", "r"}, {"both"}, "cat").attrs["axis"] = testing_util::IntAttr(0);
  b.Output("both");
  PlanOptions o = Train(Optimizer::kSgd);
  o.keep_events = true;
  const std::vector<StepEvent> ev = FirstStepEvents(PlanOf(b, 4, o));
  auto backward_of = [&](const std::string& node) { return BackwardEventsOf(ev, node); };
  const int64_t grad = 4 * 12 * 16 * 4;
  const std::vector<int64_t> emb = backward_of("emb");
  ASSERT_GE(emb.size(), 2u);
  EXPECT_EQ(emb[0], grad);         // the copy
  EXPECT_EQ(emb[1], 50 * 16 * 4);  // the table's gradient
  EXPECT_EQ(std::count(emb.begin(), emb.end(), -grad), 2);
  // The Gather of activations gets a transposed gradient too, and copies
  // nothing: its input's gradient is its first allocation.
  const std::vector<int64_t> rows = backward_of("rows");
  ASSERT_GE(rows.size(), 1u);
  EXPECT_EQ(std::count(rows.begin(), rows.end(), 4 * 3 * 16 * 4), 0);
}

// autograd adds a second gradient into the first in place when it holds the
// first's last reference (input_buffer.cpp, can_accumulate_inplace): a
// gradient a transposed view shared is added to in place once that view has
// been consumed (MLP-Mixer's residual stream: mixer_h bf16 b26, H100 trace);
// a gradient that is itself a view keeps its base alive, and the sum is new.
TEST(Plan, AGradientIsAddedInPlaceOnceItsViewIsGone) {
  GraphBuilder b;
  b.Input("x", {S("N"), D(6), D(8)});
  b.Init("w0", {8, 8});
  b.Init("w1", {6, 6});
  b.Op("MatMul", {"x", "w0"}, {"h"}, "mm0");                                 // [N, 6, 8]
  b.Op("Transpose", {"h"}, {"t"}, "t").attrs["perm"] = IntsAttr({0, 2, 1});  // [N, 8, 6]
  b.Op("MatMul", {"t", "w1"}, {"u"}, "mm1");
  b.Op("Transpose", {"u"}, {"ut"}, "ut").attrs["perm"] = IntsAttr({0, 2, 1});
  b.Op("Add", {"h", "ut"}, {"s"}, "residual");
  b.Output("s");
  PlanOptions o = Train(Optimizer::kSgd);
  o.keep_events = true;
  const std::vector<StepEvent> ev = FirstStepEvents(PlanOf(b, 4, o));
  const int64_t h = 4 * 6 * 8 * 4;
  int sums = 0;
  for (const StepEvent& e : ev) {
    if (e.phase == Phase::kBackward && e.node == "t" && e.bytes == h) ++sums;
  }
  EXPECT_EQ(sums, 0);
}

// torch.optim's foreach AdamW makes one temporary per parameter and drops
// the list, which CPython frees from its end (the H100 trace of lstm_lm_g
// amp_bf16: the head's temporary goes first, the embedding's last).
TEST(Plan, ForeachTemporariesAreFreedLastFirst) {
  GraphBuilder b;
  b.Input("x", {S("N"), D(32)});
  b.Init("w0", {32, 64});
  b.Init("w1", {64, 16});
  b.Op("MatMul", {"x", "w0"}, {"h"}, "mm0");
  b.Op("Relu", {"h"}, {"r"}, "relu");
  b.Op("MatMul", {"r", "w1"}, {"y"}, "mm1");
  b.Output("y");
  PlanOptions o = Train(Optimizer::kAdamW);
  o.keep_events = true;
  const std::vector<StepEvent> ev = FirstStepEvents(PlanOf(b, 4, o));
  std::vector<int64_t> frees;
  for (const StepEvent& e : ev) {
    if (e.phase == Phase::kOptimizer && e.bytes < 0) frees.push_back(-e.bytes);
  }
  const int64_t w0 = 32 * 64 * 4;
  const int64_t w1 = 64 * 16 * 4;
  const auto first_w0 = std::find(frees.begin(), frees.end(), w0);
  const auto first_w1 = std::find(frees.begin(), frees.end(), w1);
  ASSERT_TRUE(first_w0 != frees.end() && first_w1 != frees.end());
  EXPECT_LT(first_w1 - frees.begin(), first_w0 - frees.begin());
}

// A linear layer with bias on 2-D or contiguous input runs as one addmm:
// AddmmBackward0 makes mat1's gradient, then mat2's (derivatives in sorted
// name order), and the engine sums `self`'s to the bias afterwards
// (validate_outputs): the bias gradient comes last, with the staging buffer of
// its column sum. On a non-contiguous 3-D input at::linear runs matmul, then
// add_: AddBackward0 runs first, so the bias gradient comes first, then
// MmBackward0's mat2 (weight) and self (input) gradients (H200 traces
// wav2vec2_cls b512 amp_bf16, gru_lm b19 amp_bf16, lstm_tagger b19 bf16).
GraphBuilder LinearWithBias(bool transposed_input) {
  GraphBuilder b;
  b.Input("x", {S("N"), D(64), D(256)});
  b.Init("W0", {256, 256});
  b.Init("W", {256, 384});
  b.Init("bias", {384});
  b.Init("W2", {384, 16});
  b.Op("MatMul", {"x", "W0"}, {"x0"}, "fc0");
  std::string in = "x0";
  if (transposed_input) {
    b.Op("Transpose", {"x0"}, {"xt"}, "t").attrs["perm"] = IntsAttr({1, 0, 2});
    in = "xt";
  } else {
    b.Op("Relu", {"x0"}, {"xr"}, "r");
    in = "xr";
  }
  b.Op("MatMul", {in, "W"}, {"y"}, "fc");
  b.Op("Add", {"y", "bias"}, {"h"}, "fc_bias");
  b.Op("Relu", {"h"}, {"a"}, "act");
  b.Op("MatMul", {"a", "W2"}, {"logits"}, "head");
  b.Output("logits");
  return b;
}

TEST(Plan, AddmmMakesTheBiasGradientAfterTheProductsGradients) {
  for (bool transposed : {false, true}) {
    PlanOptions o = Train(Optimizer::kSgd);
    o.keep_events = true;
    o.inplace = InPlace::kOff;
    const Plan p = PlanOf(LinearWithBias(transposed), 8, o);
    const std::vector<StepEvent> ev = FirstStepEvents(p);
    const int64_t dx = 64 * 8 * 256 * 4, dw = 256 * 384 * 4, db = 384 * 4;
    std::vector<int64_t> order;  // the three gradients, as made in backward
    for (const StepEvent& e : ev) {
      if (e.phase != Phase::kBackward) continue;
      if (e.bytes == dx || e.bytes == dw || e.bytes == db) order.push_back(e.bytes);
    }
    const std::vector<int64_t> want =
        transposed ? std::vector<int64_t>{db, dw, dx} : std::vector<int64_t>{dx, dw, db};
    ASSERT_GE(order.size(), 3u) << transposed;
    EXPECT_EQ(std::vector<int64_t>(order.begin(), order.begin() + 3), want) << transposed;
  }
}

// CUDA native_dropout makes its mask before its output (Dropout.cu,
// dropout_cuda; every H200 trace with dropout).
TEST(Plan, DropoutMakesItsMaskFirst) {
  const std::vector<StepEvent> ev = TransposedDropoutEvents();
  const int64_t n = 64 * 8 * 256;
  std::vector<int64_t> drop;
  for (const StepEvent& e : ev) {
    if (e.phase == Phase::kForward && e.node == "drop" && e.bytes > 0) drop.push_back(e.bytes);
  }
  EXPECT_EQ(drop, (std::vector<int64_t>{n, n * 4}));
}

TEST(Plan, MlpParameters) {
  const Plan p = PlanOf(Mlp(), 8, Train(Optimizer::kAdamW));
  EXPECT_EQ(p.parameter_count, 1024 * 4096 + 4096 * 10);
  EXPECT_EQ(p.parameter_bytes, kP);
  EXPECT_EQ(p.buffer_bytes, 0);
  EXPECT_EQ(p.batch, 8);
  EXPECT_EQ(p.context_bytes, kDefaultContextBytes);
}

// Batch 8: x = 8*1024*4 = 32 KiB, h = r = 8*4096*4 = 128 KiB, logits = 320 B
// (a 512 B block), so the optimizer step dominates.
//
// Steady AdamW, at the foreach step's exp_avg_sq.sqrt() temporaries:
//   params P + grads P + exp_avg P + exp_avg_sq P + sqrt temporaries P = 5P
//   + x 32 KiB (loaded once, kept)
//   + workspaces 32 + 32 MiB (no biased linear: no cuBLASLt workspace)
//   + logits (512 B block) and the scalar loss (512 B), freed after the step
//   = 5 * 16941056 + 32768 + 67108864 + 1024 = 151847936.
TEST(Plan, AdamWSteadyPeakIsFivePlusWorkspacesAtTheOptimizer) {
  const Plan p = PlanOf(Mlp(), 8, Train(Optimizer::kAdamW));
  const int64_t x = 8 * 1024 * 4;
  EXPECT_GE(p.peak.allocated_bytes, 5 * kP + kTrainWorkspaces);
  EXPECT_EQ(p.peak.allocated_bytes, 5 * kP + x + kTrainWorkspaces + 1024);
  EXPECT_EQ(p.peak.allocated_bytes, 151847936);
  EXPECT_EQ(p.peak.phase, Phase::kOptimizer);
  EXPECT_EQ(p.peak.node, "optimizer.step (adamw)");
  // What it is made of (the graph input is loaded with the model).
  EXPECT_EQ(Cat(p.peak, Category::kParameters), kP + x);
  EXPECT_EQ(Cat(p.peak, Category::kGradients), kP);
  EXPECT_EQ(Cat(p.peak, Category::kOptimizerState), 2 * kP);
  EXPECT_EQ(Cat(p.peak, Category::kTransients), kP + 1024);
  EXPECT_EQ(Cat(p.peak, Category::kWorkspaces), kTrainWorkspaces);
  EXPECT_EQ(Cat(p.peak, Category::kSavedActivations), 0);
  EXPECT_EQ(p.peak.breakdown.Total(), p.peak.allocated_bytes);
  // The steady step is the planned one.
  EXPECT_EQ(p.steady.allocated_bytes, p.peak.allocated_bytes);
  // Adam without weight decay builds the same temporaries.
  const Plan adam = PlanOf(Mlp(), 8, Train(Optimizer::kAdam));
  EXPECT_EQ(adam.peak.allocated_bytes, p.peak.allocated_bytes);
}

// Steady SGD with momentum: the momentum buffers (P) exist through backward,
// so the peak is in fc1's backward, when W1's gradient is allocated while
// d(h) is still alive:
//   params P + momentum P + grad W2 + grad W1 (= P together)
//   + d(h) 128 KiB + x 32 KiB + workspaces 64 MiB + logits and loss 1024 B
//   = 3 * 16941056 + 131072 + 32768 + 67108864 + 1024 = 118096896.
TEST(Plan, MomentumSteadyPeakIsThreePInFc1Backward) {
  const Plan p = PlanOf(Mlp(), 8, Train(Optimizer::kMomentum));
  EXPECT_GE(p.peak.allocated_bytes, 3 * kP + kTrainWorkspaces);
  EXPECT_EQ(p.peak.allocated_bytes, 3 * kP + 131072 + 32768 + kTrainWorkspaces + 1024);
  EXPECT_EQ(p.peak.phase, Phase::kBackward);
  EXPECT_EQ(p.peak.node, "fc1");
  EXPECT_EQ(Cat(p.peak, Category::kOptimizerState), kP);
  EXPECT_EQ(Cat(p.peak, Category::kGradients), kP);
  EXPECT_EQ(p.peak.breakdown.Total(), p.peak.allocated_bytes);
}

// The first step creates the momentum lazily inside step(): no momentum in
// backward, so the peak moves to the optimizer and loses d(h):
//   3P + x + workspaces + 1024 = 119014400, 128 KiB below the steady peak.
TEST(Plan, MomentumFirstStepDiffersFromSteady) {
  PlanOptions o = Train(Optimizer::kMomentum);
  o.step = StepKind::kFirst;
  const Plan first = PlanOf(Mlp(), 8, o);
  EXPECT_EQ(first.peak.allocated_bytes, 3 * kP + 32768 + kTrainWorkspaces + 1024);
  EXPECT_EQ(first.peak.phase, Phase::kOptimizer);
  EXPECT_EQ(first.peak.node, "optimizer.step (momentum)");
  EXPECT_EQ(first.peak.allocated_bytes, first.first_step.allocated_bytes);
  EXPECT_EQ(first.steady.allocated_bytes, first.peak.allocated_bytes + 131072);
  // --step steady reports the steady one; both are computed either way.
  const Plan steady = PlanOf(Mlp(), 8, Train(Optimizer::kMomentum));
  EXPECT_EQ(steady.peak.allocated_bytes, steady.steady.allocated_bytes);
  EXPECT_EQ(steady.first_step.allocated_bytes, first.first_step.allocated_bytes);
  EXPECT_EQ(steady.steady.allocated_bytes, first.steady.allocated_bytes);
}

// Plain SGD keeps no state: the peak is fc1's backward, 2P + d(h) + ...
TEST(Plan, PlainSgdHasNoState) {
  const Plan p = PlanOf(Mlp(), 8, Train(Optimizer::kSgd));
  EXPECT_EQ(p.peak.allocated_bytes, 2 * kP + 131072 + 32768 + kTrainWorkspaces + 1024);
  EXPECT_EQ(Cat(p.peak, Category::kOptimizerState), 0);
  // MSE keeps the target (a 512 B block) instead of log p; the loss and
  // d(logits) blocks are the same size, so the peak does not move. Without
  // a loss the backward starts from a ones-like gradient: the same again.
  for (Loss loss : {Loss::kMse, Loss::kNone}) {
    PlanOptions o = Train(Optimizer::kSgd);
    o.loss = loss;
    const Plan q = PlanOf(Mlp(), 8, o);
    EXPECT_EQ(q.peak.allocated_bytes, p.peak.allocated_bytes) << LossName(loss);
    EXPECT_EQ(q.peak.node, "fc1") << LossName(loss);
  }
}

// A parameter that does not reach the loss (a second head on another graph
// output) gets no gradient, and torch.optim skips parameters whose .grad is
// None: no state for it, in Adam as in SGD with momentum.
//   W3 [1024, 1024] = 4 MiB; the loss is on the first output only.
TEST(Plan, ParametersWithoutGradientsGetNoOptimizerState) {
  GraphBuilder b = Mlp();
  b.Init("W3", {1024, 1024});
  b.Op("MatMul", {"x", "W3"}, {"aux"}, "aux_head");
  b.Output("aux");
  for (Optimizer opt : {Optimizer::kMomentum, Optimizer::kAdamW}) {
    SCOPED_TRACE(OptimizerName(opt));
    const Plan p = PlanOf(b, 8, Train(opt));
    EXPECT_EQ(p.parameter_bytes, kP + 4 * kMiB);
    const int64_t states = opt == Optimizer::kAdamW ? 2 : 1;
    const int64_t state_bytes = Cat(p.steady, Category::kOptimizerState);
    EXPECT_EQ(state_bytes, states * kP);
  }
}

// Inference: params + input + the largest set of live activations (h and r
// at the relu: 2 * 128 KiB) + one cuBLAS workspace (no autograd thread):
//   16941056 + 32768 + 262144 + 33554432 = 50790400.
TEST(Plan, InferencePeakIsParamsInputActivationsAndOneWorkspace) {
  const Plan p = PlanOf(Mlp(), 8, Inference());
  EXPECT_EQ(p.peak.allocated_bytes, kP + 32768 + 2 * 131072 + kCublasWs);
  EXPECT_EQ(p.peak.phase, Phase::kForward);
  EXPECT_EQ(p.peak.node, "relu");
  EXPECT_EQ(Cat(p.peak, Category::kGradients), 0);
  EXPECT_EQ(Cat(p.peak, Category::kOptimizerState), 0);
  EXPECT_EQ(Cat(p.peak, Category::kSavedActivations), 0);
  EXPECT_EQ(Cat(p.peak, Category::kWorkspaces), kCublasWs);
  EXPECT_EQ(p.peak.breakdown.Total(), p.peak.allocated_bytes);
  EXPECT_EQ(p.backward_flops, 0);
  // fc1 2*8*4096*1024 + relu 8*4096 + fc2 2*8*10*4096.
  EXPECT_EQ(p.forward_flops, 2LL * 8 * 4096 * 1024 + 8 * 4096 + 2LL * 8 * 10 * 4096);
}

// At the end of the forward (the "loss" step), what backward keeps:
//   fp32:     r (256*4096*4 = 4 MiB) + log p (256*10*4 = 10240) + the
//             loss weight scalar (512) = 4205056.
//   amp_bf16: r in bf16 (2 MiB) + x cast to bf16 (256*1024*2 = 512 KiB,
//             fc1 keeps it for W1's gradient) + W2's bf16 copy (81920 B,
//             fc2 keeps it for d(r)) + log p in bf16 (256*10*2 = 5120,
//             saved by log_softmax) and its fp32 copy (10240, saved by
//             nll_loss) + 512 = 2719232.
TEST(Plan, AmpBf16ActivationsAreHalfTheSize) {
  const Plan fp32 = PlanOf(Mlp(), 256, Train(Optimizer::kSgd));
  const Plan amp = PlanOf(Mlp(), 256, Train(Optimizer::kSgd, Precision::kAmpBf16));
  const TimelinePoint* f = PointAt(fp32, "loss");
  const TimelinePoint* a = PointAt(amp, "loss");
  ASSERT_TRUE(f && a);
  const int64_t r32 = 256 * 4096 * 4;
  EXPECT_EQ(f->live.bytes[static_cast<int>(Category::kSavedActivations)], r32 + 10240 + 512);
  EXPECT_EQ(a->live.bytes[static_cast<int>(Category::kSavedActivations)],
            r32 / 2 + 256 * 1024 * 2 + 81920 + 5120 + 10240 + 512);
  // Parameters stay fp32 under autocast.
  EXPECT_EQ(amp.parameter_bytes, fp32.parameter_bytes);
  // Leaving autocast drops W1's bf16 copy (8 MiB): nothing saved it, since
  // x needs no gradient. W2's copy stays (saved above). The loss step
  // meanwhile adds the int64 labels (256 * 8 = 2048), log p (5120) and its
  // fp32 copy (10240), the loss and its weight (512 each).
  const TimelinePoint* fwd_end = nullptr;
  for (const TimelinePoint& pt : amp.timeline) {
    if (pt.node == "fc2" && pt.phase == Phase::kForward) fwd_end = &pt;
  }
  ASSERT_TRUE(fwd_end);
  EXPECT_EQ(fwd_end->allocated_end - a->allocated_end,
            8 * kMiB - (2048 + 5120 + 10240 + 512 + 512));
}

TEST(Plan, WholeModelBf16HalvesParameters) {
  const Plan p = PlanOf(Mlp(), 8, Train(Optimizer::kSgd, Precision::kBf16));
  EXPECT_EQ(p.parameter_bytes, kP / 2);
}

// model.cuda().half(): the fp32 weights are loaded first, then cast. Segments:
//   W1 fp32 16 MiB: a 16 MiB segment (freed after the cast, kept cached);
//   W1 bf16 8 MiB (< 10 MiB): a 20 MiB segment;
//   W2, x and every small tensor: one 2 MiB small-pool segment;
//   the forward cuBLAS workspace 32 MiB: neither the cached 16 MiB segment
//   nor the 12 MiB left in the 20 MiB one fits: a new 32 MiB segment.
// Inference (the cache is not emptied): reserved 16 + 20 + 2 + 32 = 70 MiB;
// allocated at the relu W1 8 MiB + W2 80 KiB + x 16 KiB + 32 MiB + h and r
// 2 * 64 KiB = 42172416.
// Training (the protocol empties the cache after the cast) drops the 16 MiB
// segment; backward adds a 32 MiB segment for the autograd thread's
// workspace, its extra 1 MiB fits the small segment, and W1's 8 MiB bf16
// gradient the 12 MiB left in the 20 MiB one: 20 + 2 + 32 + 32 = 86 MiB.
TEST(Plan, WholeModelBf16IsLoadedInFp32ThenCast) {
  const Plan inf = PlanOf(Mlp(), 8, Inference(Precision::kBf16));
  EXPECT_EQ(inf.peak.allocated_bytes, 8 * kMiB + 81920 + 16384 + kCublasWs + 2 * 65536);
  EXPECT_EQ(inf.peak.reserved_bytes, 70 * kMiB);
  const Plan train = PlanOf(Mlp(), 8, Train(Optimizer::kSgd, Precision::kBf16));
  EXPECT_EQ(train.steady.reserved_bytes, 86 * kMiB);
  EXPECT_EQ(train.first_step.reserved_bytes, 86 * kMiB);
}

// --model-load: W1 in fp32 (16 MiB, its own segment) is freed by the cast;
// without empty_cache() that segment stays reserved (nothing later fits in
// it exactly: the bf16 W1 of 8 MiB went to a 20 MiB segment made before the
// free); moved in bf16, no fp32 copy is ever allocated.
TEST(Plan, ModelLoadDecidesWhetherTheFp32CopiesStayReserved) {
  PlanOptions o = Train(Optimizer::kSgd, Precision::kBf16);
  o.keep_events = true;
  const Plan by_default = PlanOf(Mlp(), 8, o);
  o.model_load = ModelLoad::kCastEmptyCache;
  const Plan emptied = PlanOf(Mlp(), 8, o);
  o.model_load = ModelLoad::kCast;
  const Plan kept = PlanOf(Mlp(), 8, o);
  o.model_load = ModelLoad::kDirect;
  const Plan direct = PlanOf(Mlp(), 8, o);
  EXPECT_EQ(by_default.steady.reserved_bytes, emptied.steady.reserved_bytes);
  EXPECT_EQ(emptied.steady.reserved_bytes, 86 * kMiB);
  EXPECT_EQ(kept.steady.reserved_bytes, emptied.steady.reserved_bytes + 16 * kMiB);
  EXPECT_EQ(direct.steady.reserved_bytes, emptied.steady.reserved_bytes);
  EXPECT_EQ(kept.steady.allocated_bytes, emptied.steady.allocated_bytes);
  // model.cuda() moves W1 first: in fp32, or already in bf16.
  ASSERT_FALSE(kept.events.empty());
  ASSERT_FALSE(direct.events.empty());
  EXPECT_EQ(kept.events.front().bytes, 16 * kMiB);
  EXPECT_EQ(direct.events.front().bytes, 8 * kMiB);
  int64_t allocs_cast = 0, allocs_direct = 0;
  for (const MemEvent& e : kept.events) allocs_cast += e.is_alloc && e.bytes == 16 * kMiB;
  for (const MemEvent& e : direct.events) allocs_direct += e.is_alloc && e.bytes == 16 * kMiB;
  EXPECT_GE(allocs_cast, 1);
  EXPECT_EQ(allocs_direct, 0);  // no fp32 W1 ever
  // Inference defaults to the cast without empty_cache().
  PlanOptions inf = Inference(Precision::kBf16);
  const Plan inf_default = PlanOf(Mlp(), 8, inf);
  inf.model_load = ModelLoad::kCast;
  EXPECT_EQ(PlanOf(Mlp(), 8, inf).peak.reserved_bytes, inf_default.peak.reserved_bytes);
}

// The batch of a half-precision training run is made on the GPU in fp32 after
// the model (x fp32 [8, 1024]: 32 KiB) and cast after the model's cast (16
// KiB), the fp32 tensor then freed to the cache, as both measurement
// protocols do: the calibration's (`auto`) casts it before emptying the
// cache, `cast-empty-cache` after (bench/families.py); moved in bf16, the
// model gets no cast and the batch is cast after it.
std::string LoadSequence(const Plan& p) {
  std::string out;
  std::map<int64_t, int64_t> bytes_of;
  bool half = false;
  for (size_t e = 0; e < p.events.size(); ++e) {
    const MemEvent& ev = p.events[e];
    const std::string& node = p.event_nodes[e];
    if (ev.empty_cache) {
      out += " empty_cache";
      continue;
    }
    if (node != "model.cuda()" && node != "model.half()" && node != "input") break;
    if (ev.is_alloc) bytes_of[ev.id] = ev.bytes;
    if (node == "model.half()" && !half) out += " half";
    half = half || node == "model.half()";
    if (node == "input") {
      out += std::string(" ") + (ev.is_alloc ? "+" : "-") + std::to_string(bytes_of[ev.id]);
    }
  }
  return out;
}

TEST(Plan, HalfTrainingBatchIsMadeInFp32AndCastAfterTheModel) {
  PlanOptions o = Train(Optimizer::kSgd, Precision::kBf16);
  o.keep_events = true;
  EXPECT_EQ(LoadSequence(PlanOf(Mlp(), 8, o)), " +32768 half +16384 -32768 empty_cache");
  o.model_load = ModelLoad::kCastEmptyCache;
  EXPECT_EQ(LoadSequence(PlanOf(Mlp(), 8, o)), " +32768 half empty_cache +16384 -32768");
  o.model_load = ModelLoad::kCast;
  EXPECT_EQ(LoadSequence(PlanOf(Mlp(), 8, o)), " +32768 half +16384 -32768");
  o.model_load = ModelLoad::kDirect;
  EXPECT_EQ(LoadSequence(PlanOf(Mlp(), 8, o)), " +32768 +16384 -32768");
  // In fp32 and under autocast the batch is made once, in fp32.
  PlanOptions amp = Train(Optimizer::kSgd, Precision::kAmpBf16);
  amp.keep_events = true;
  EXPECT_EQ(LoadSequence(PlanOf(Mlp(), 8, amp)), " +32768");
}

// Attention: x [N, H=4, S=512, D=16] -> q, k, v projections -> SDPA as
// exporters write it -> output projection. The eager path materialises
// [1, 4, 512, 512] fp32 matrices (4 MiB each) and keeps the softmax output
// for backward; the fused path keeps only q, k, v, out and the logsumexp.
GraphBuilder AttentionModel() {
  GraphBuilder b;
  b.Input("x", {S("N"), D(4), D(512), D(16)});
  for (const char* w : {"Wq", "Wk", "Wv"}) b.Init(w, {16, 16});
  b.Init("Wo", {16, 10});
  b.Init("scale", {}, DType::kFloat, {}, false);
  b.Op("MatMul", {"x", "Wq"}, {"q"}, "q_proj");
  b.Op("MatMul", {"x", "Wk"}, {"k"}, "k_proj");
  b.Op("MatMul", {"x", "Wv"}, {"v"}, "v_proj");
  b.Op("Transpose", {"k"}, {"kt"}, "k_t").attrs["perm"] = IntsAttr({0, 1, 3, 2});
  b.Op("MatMul", {"q", "kt"}, {"scores"}, "scores");
  b.Op("Mul", {"scores", "scale"}, {"scaled"}, "scale");
  b.Op("Softmax", {"scaled"}, {"probs"}, "softmax").attrs["axis"] = IntAttr(-1);
  b.Op("MatMul", {"probs", "v"}, {"ctx"}, "context");
  b.Op("MatMul", {"ctx", "Wo"}, {"logits"}, "out_proj");
  b.Output("logits");
  return b;
}

// Sizes (batch 1): x, q, k, v, the context = 1*4*512*16*4 = 131072 B each;
// an S x S score matrix 1*4*512*512*4 = 4 MiB; the logsumexp 4*512*4 = 8192;
// log p of the [1, 4, 512, 10] logits 81920; the loss weight 512.
TEST(Plan, EagerAttentionUsesMoreMemoryThanFused) {
  PlanOptions o = Train(Optimizer::kSgd);
  o.attention = Attention::kFused;
  const Plan fused = PlanOf(AttentionModel(), 1, o);
  o.attention = Attention::kEager;
  const Plan eager = PlanOf(AttentionModel(), 1, o);
  const int64_t act = 131072;
  const int64_t sxs = 1 * 4 * 512 * 512 * 4;  // 4 MiB
  EXPECT_GE(eager.peak.allocated_bytes, fused.peak.allocated_bytes + sxs);
  // What backward keeps at the end of the forward (x is an input):
  //   fused: q, k, v, the output, the fp32 logsumexp, and the output made
  //          contiguous for out_proj (the kernel writes [B, S, H, D] and
  //          returns it transposed, which a [B*H*S, D] GEMM cannot fold)
  //          = 5 * 131072 + 8192 + 81920 + 512 = 745984;
  //   eager: q, k (under k^T), v, the softmax output (4 MiB), the context
  //          = 4 * 131072 + 4194304 + 81920 + 512 = 4801024.
  const TimelinePoint* f = PointAt(fused, "loss");
  const TimelinePoint* e = PointAt(eager, "loss");
  ASSERT_TRUE(f && e);
  const int64_t fused_saved = f->live.bytes[static_cast<int>(Category::kSavedActivations)];
  const int64_t eager_saved = e->live.bytes[static_cast<int>(Category::kSavedActivations)];
  EXPECT_EQ(fused_saved, 5 * act + 8192 + 81920 + 512);
  EXPECT_EQ(eager_saved, 4 * act + sxs + 81920 + 512);
  EXPECT_LT(fused_saved, sxs) << "no S x S matrix is kept by the fused path";
  // Inference: the fused peak holds q, k, v and the output; the eager one
  // holds v and two S x S matrices, first at the scaling (scores and scaled
  // scores; the softmax then holds the scaled scores and the probabilities):
  //   eager - fused = (131072 + 2 * 4 MiB) - 4 * 131072 = 7995392.
  PlanOptions inf = Inference();
  inf.attention = Attention::kFused;
  const Plan fi = PlanOf(AttentionModel(), 1, inf);
  inf.attention = Attention::kEager;
  const Plan ei = PlanOf(AttentionModel(), 1, inf);
  EXPECT_EQ(ei.peak.allocated_bytes - fi.peak.allocated_bytes, 2 * sxs - 3 * act);
  EXPECT_EQ(ei.peak.node, "context/scale") << "eager ops are labelled after the block";
}

// Linear layers with a 1-D bias, as nn.Linear exports them (MatMul, then Add
// of the bias): x [N, 256] -> fc1 (+ b1) -> relu -> fc2 (+ b2) -> [N, 10],
// both in block "blk" (checkpointable).
GraphBuilder BiasedMlp() {
  GraphBuilder b;
  b.Input("x", {S("N"), D(256)});
  b.Init("W1", {256, 256});
  b.Init("b1", {256});
  b.Init("W2", {256, 10});
  b.Init("b2", {10});
  b.Op("MatMul", {"x", "W1"}, {"h"}, "fc1").scope = "blk";
  b.Op("Add", {"h", "b1"}, {"hb"}, "fc1_bias").scope = "blk";
  b.Op("Relu", {"hb"}, {"r"}, "relu").scope = "blk";
  b.Op("MatMul", {"r", "W2"}, {"y"}, "fc2").scope = "blk";
  b.Op("Add", {"y", "b2"}, {"logits"}, "fc2_bias").scope = "blk";
  b.Output("logits");
  return b;
}

// The 1 MiB workspaces of a plan's first iteration, as (phase, node).
std::vector<std::pair<Phase, std::string>> LtWorkspaces(const Plan& p) {
  std::vector<std::pair<Phase, std::string>> out;
  for (size_t e = 0; e < p.events.size() && e < p.iteration_starts.at(1); ++e) {
    if (p.events[e].is_alloc && p.events[e].bytes == kMiB &&
        p.event_categories[e] == Category::kWorkspaces) {
      out.emplace_back(p.event_phases[e], p.event_nodes[e]);
    }
  }
  return out;
}

// cuBLASLt's 1 MiB workspace (CublasHandlePool.cpp, getCUDABlasLtWorkspace):
// made by a thread's first addmm that runs through cuBLASLt (a 1-D bias and
// every matrix dim above 1), right after the forward thread's 32 MiB, and
// kept. None without a biased linear (the MLP of the tests above) or with a
// single row (batch 1 here: addmm takes plain cuBLAS); a second one where a
// checkpoint recomputes a biased linear on autograd's thread.
TEST(Plan, ABiasedLinearMakesTheCublasLtWorkspace) {
  PlanOptions o = Train(Optimizer::kSgd);
  o.keep_events = true;
  const Plan p = PlanOf(BiasedMlp(), 8, o);
  const auto lt = LtWorkspaces(p);
  ASSERT_EQ(lt.size(), 1u);
  EXPECT_EQ(lt[0].first, Phase::kForward);
  EXPECT_NE(lt[0].second.find("fc1"), std::string::npos) << lt[0].second;
  EXPECT_TRUE(LtWorkspaces(PlanOf(Mlp(), 8, o)).empty()) << "no bias, no cuBLASLt";
  EXPECT_TRUE(LtWorkspaces(PlanOf(BiasedMlp(), 1, o)).empty()) << "one row, no cuBLASLt";
  PlanOptions infer;
  infer.mode = Mode::kInference;
  infer.keep_events = true;
  const Plan i = PlanOf(BiasedMlp(), 8, infer);
  int lt_events = 0;
  for (size_t e = 0; e < i.events.size(); ++e) {
    lt_events += i.events[e].is_alloc && i.events[e].bytes == kMiB &&
                 i.event_categories[e] == Category::kWorkspaces;
  }
  EXPECT_EQ(lt_events, 1);
  o.checkpoint_segments = {"blk"};
  const auto recomputed = LtWorkspaces(PlanOf(BiasedMlp(), 8, o));
  ASSERT_EQ(recomputed.size(), 2u);
  EXPECT_EQ(recomputed[0].first, Phase::kForward);
  EXPECT_EQ(recomputed[1].first, Phase::kBackward);
}

// Eight Linear-ReLU layers of width 256 in four checkpointable blocks of
// two, then a head. Batch 4096: every activation is 4096*256*4 = 4 MiB.
GraphBuilder DeepMlp() {
  GraphBuilder b;
  b.Input("x", {S("N"), D(256)});
  std::string cur = "x";
  for (int i = 1; i <= 8; ++i) {
    const std::string w = "W" + std::to_string(i);
    const std::string h = "h" + std::to_string(i);
    const std::string r = "r" + std::to_string(i);
    b.Init(w, {256, 256});
    b.Op("MatMul", {cur, w}, {h}, "fc" + std::to_string(i)).scope =
        "blk." + std::to_string((i - 1) / 2);
    b.Op("Relu", {h}, {r}, "relu" + std::to_string(i)).scope = "blk." + std::to_string((i - 1) / 2);
    cur = r;
  }
  b.Init("Wh", {256, 10});
  b.Op("MatMul", {cur, "Wh"}, {"logits"}, "head").scope = "head";
  b.Output("logits");
  return b;
}

// Checkpointing blk.0..blk.3 drops r1, r3, r5, r7 from the forward (each is
// only used inside its block) and recomputes every block once in backward:
//   per block 2 GEMMs of 2*4096*256*256 FLOPs + 2 ReLUs of 4096*256
//   = 1075838976, four blocks = 4303355904 recomputed FLOPs per step.
TEST(Plan, CheckpointingReducesThePeakAndRecomputes) {
  PlanOptions o = Train(Optimizer::kSgd);
  const Plan none = PlanOf(DeepMlp(), 4096, o);
  o.checkpoint_segments = {"blk.0", "blk.1", "blk.2", "blk.3"};
  const Plan ckpt = PlanOf(DeepMlp(), 4096, o);
  EXPECT_EQ(none.recompute_flops, 0);
  EXPECT_EQ(ckpt.recompute_flops, 4 * (2 * (2LL * 4096 * 256 * 256) + 2 * 4096 * 256));
  EXPECT_EQ(ckpt.forward_flops, none.forward_flops);
  EXPECT_LT(ckpt.peak.allocated_bytes, none.peak.allocated_bytes);
  // Four activations of 4 MiB fewer are alive at the end of the forward.
  const TimelinePoint* n = PointAt(none, "loss");
  const TimelinePoint* c = PointAt(ckpt, "loss");
  ASSERT_TRUE(n && c);
  EXPECT_EQ(n->allocated - c->allocated, 4 * 4 * kMiB);
  // The recomputation shows in the timeline, inside backward.
  int recompute_points = 0;
  for (const TimelinePoint& pt : ckpt.timeline) {
    if (pt.node.rfind("recompute ", 0) == 0) {
      ++recompute_points;
      EXPECT_EQ(pt.phase, Phase::kBackward);
    }
  }
  EXPECT_EQ(recompute_points, 4);
  // A name that matches no module is an error (it used to change nothing).
  o.checkpoint_segments = {"nosuch"};
  GraphBuilder b = DeepMlp();
  ShapeBindings bind;
  bind.batch = 4096;
  ASSERT_TRUE(InferShapes(&b.g, bind, nullptr).ok());
  auto other = MakePlan(b.g, 4096, o);
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.message().find("--checkpoint nosuch: matches no module"), std::string::npos)
      << other.message();
}

TEST(Plan, CheckpointIsIgnoredInInference) {
  PlanOptions o = Inference();
  const Plan none = PlanOf(DeepMlp(), 64, o);
  o.checkpoint_segments = {"blk.0", "blk.1"};
  const Plan ckpt = PlanOf(DeepMlp(), 64, o);
  EXPECT_EQ(ckpt.peak.allocated_bytes, none.peak.allocated_bytes);
  EXPECT_EQ(ckpt.recompute_flops, 0);
}

// Six 1280-wide Linear-ReLU layers. At batch 1100 every activation is
// 1100 * 1280 * 4 = 5632000 B (5.4 MiB, under 10 MiB: each new one gets a
// 20 MiB segment by default) and every weight, gradient and Adam state
// 1280 * 1280 * 4 = 6.25 MiB: the mix leaves unusable remainders in the
// default allocator's segments (44.8 MiB reserved above the allocated peak
// when this test was written); expandable segments map pages as needed.
GraphBuilder Fragmenting() {
  GraphBuilder b;
  b.Input("x", {S("N"), D(1280)});
  std::string cur = "x";
  for (int i = 1; i <= 6; ++i) {
    const std::string w = "W" + std::to_string(i);
    const std::string h = "h" + std::to_string(i);
    const std::string r = "r" + std::to_string(i);
    b.Init(w, {1280, 1280});
    b.Op("MatMul", {cur, w}, {h}, "fc" + std::to_string(i));
    b.Op("Relu", {h}, {r}, "relu" + std::to_string(i));
    cur = r;
  }
  b.Output(cur);
  return b;
}

TEST(Plan, ExpandableSegmentsReserveNoMoreThanDefault) {
  for (int64_t batch : {1000, 1100, 1500}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    PlanOptions o = Train(Optimizer::kAdamW);
    o.loss = Loss::kMse;
    const Plan def = PlanOf(Fragmenting(), batch, o);
    o.allocator.expandable_segments = true;
    const Plan exp = PlanOf(Fragmenting(), batch, o);
    // The same requests, so the same allocated peak (give or take the
    // block splitting of the small pool).
    EXPECT_NEAR(static_cast<double>(exp.peak.allocated_bytes),
                static_cast<double>(def.peak.allocated_bytes), 2.0 * kMiB);
    EXPECT_LE(exp.peak.reserved_bytes, def.peak.reserved_bytes);
    EXPECT_GE(def.peak.reserved_bytes, def.peak.allocated_bytes);
  }
}

TEST(Plan, ExpandableSegmentsHelpAFragmentingCase) {
  PlanOptions o = Train(Optimizer::kAdamW);
  o.loss = Loss::kMse;
  const Plan def = PlanOf(Fragmenting(), 1100, o);
  o.allocator.expandable_segments = true;
  const Plan exp = PlanOf(Fragmenting(), 1100, o);
  // Default fragments: a clear gap between reserved and allocated.
  EXPECT_GT(def.peak.reserved_bytes - def.peak.allocated_bytes, 8 * kMiB);
  EXPECT_LT(exp.peak.reserved_bytes, def.peak.reserved_bytes);
}

void ExpectConsistent(const Plan& p, const std::string& what) {
  SCOPED_TRACE(what);
  for (const Peak* k : {&p.peak, &p.first_step, &p.steady}) {
    EXPECT_GT(k->allocated_bytes, 0);
    EXPECT_LE(k->allocated_bytes, k->reserved_bytes);
    EXPECT_LE(k->reserved_bytes, k->device_bytes);
    EXPECT_EQ(k->device_bytes, k->reserved_bytes + p.context_bytes);
    EXPECT_EQ(k->breakdown.Total(), k->allocated_bytes);
    EXPECT_LE(k->lower_bound_bytes, k->allocated_bytes);
    EXPECT_GT(k->lower_bound_bytes, 0);
    EXPECT_GE(k->fragmentation, 0.0);
    EXPECT_LT(k->fragmentation, 1.0);
    EXPECT_FALSE(k->node.empty());
  }
  ASSERT_FALSE(p.timeline.empty());
  int64_t max_alloc = 0;
  for (size_t i = 0; i < p.timeline.size(); ++i) {
    const TimelinePoint& pt = p.timeline[i];
    EXPECT_LE(pt.allocated, pt.reserved);
    EXPECT_EQ(pt.live.Total(), pt.allocated) << pt.node;
    max_alloc = std::max(max_alloc, pt.allocated);
    if (i > 0) {
      EXPECT_LE(static_cast<int>(p.timeline[i - 1].phase), static_cast<int>(pt.phase))
          << "phase goes back at " << pt.node;
      EXPECT_LE(p.timeline[i - 1].step, pt.step);
    }
  }
  EXPECT_LE(max_alloc, p.peak.allocated_bytes);
  // The step named as the peak's is one of the timeline's.
  bool named = false;
  for (const TimelinePoint& pt : p.timeline) {
    named = named || (pt.node == p.peak.node && pt.phase == p.peak.phase);
  }
  EXPECT_TRUE(named) << p.peak.node;
  if (p.options.mode == Mode::kTrain) {
    EXPECT_EQ(p.timeline.front().phase, Phase::kForward);
    EXPECT_EQ(p.timeline.back().phase, Phase::kOptimizer);
    bool backward = false;
    for (const TimelinePoint& pt : p.timeline) backward = backward || pt.phase == Phase::kBackward;
    EXPECT_TRUE(backward);
    EXPECT_GT(p.backward_flops, 0);
  } else {
    for (const TimelinePoint& pt : p.timeline) EXPECT_EQ(pt.phase, Phase::kForward);
  }
}

TEST(Plan, PeaksBreakdownAndTimelineAreConsistent) {
  for (Precision pr : {Precision::kFp32, Precision::kAmpBf16, Precision::kBf16}) {
    const std::string pn = PrecisionName(pr);
    ExpectConsistent(PlanOf(Mlp(), 8, Inference(pr)), "mlp inference " + pn);
    for (Optimizer opt :
         {Optimizer::kSgd, Optimizer::kMomentum, Optimizer::kAdam, Optimizer::kAdamW}) {
      ExpectConsistent(PlanOf(Mlp(), 8, Train(opt, pr)),
                       std::string("mlp train ") + OptimizerName(opt) + " " + pn);
      ExpectConsistent(PlanOf(Mlp(), 300, Train(opt, pr)),
                       std::string("mlp b300 train ") + OptimizerName(opt) + " " + pn);
    }
    PlanOptions o = Train(Optimizer::kAdamW, pr);
    o.attention = Attention::kEager;
    ExpectConsistent(PlanOf(AttentionModel(), 2, o), "attention eager " + pn);
    o.checkpoint_segments = {"blk.1", "blk.2"};
    ExpectConsistent(PlanOf(DeepMlp(), 128, o), "deep mlp checkpointed " + pn);
  }
}

TEST(Plan, ContextBytesOption) {
  PlanOptions o = Inference();
  o.context_bytes = 1LL << 30;
  const Plan p = PlanOf(Mlp(), 8, o);
  EXPECT_EQ(p.context_bytes, 1LL << 30);
  EXPECT_EQ(p.peak.device_bytes, p.peak.reserved_bytes + (1LL << 30));
}

TEST(Plan, TrainWithoutAnOutputFails) {
  GraphBuilder b;
  b.Input("x", {S("N"), D(4)});
  b.Init("W", {4, 4});
  b.Op("MatMul", {"x", "W"}, {"y"});
  ShapeBindings bind;
  bind.batch = 2;
  ASSERT_TRUE(InferShapes(&b.g, bind, nullptr).ok());
  auto p = MakePlan(b.g, 2, Train(Optimizer::kAdamW));
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.message(), "m.onnx: the graph has no output to put a loss on");
}

// x [N, 16, 64, 64] -> 3x3 conv to 64 channels -> global pool -> logits.
GraphBuilder WideConv() {
  GraphBuilder b;
  b.Input("x", {S("N"), D(16), D(64), D(64)});
  b.Init("W", {64, 16, 3, 3});
  Node& c = b.Op("Conv", {"x", "W"}, {"y"}, "conv");
  c.attrs["pads"].type = AttrType::kInts;
  c.attrs["pads"].ints = {1, 1, 1, 1};
  b.Op("GlobalAveragePool", {"y"}, {"p"}, "pool");
  b.Op("Flatten", {"p"}, {"logits"}, "flatten");
  b.Output("logits");
  return b;
}

TEST(Plan, Fp32ConvolutionsArePlannedForBothKindsOfCudnnEngine) {
  for (Mode m : {Mode::kInference, Mode::kTrain}) {
    PlanOptions o = m == Mode::kTrain ? Train(Optimizer::kSgd) : Inference();
    o.fp32_conv = Fp32ConvCopies::kAll;
    const Plan all = PlanOf(WideConv(), 32, o);
    o.fp32_conv = Fp32ConvCopies::kInputOnly;
    const Plan input_only = PlanOf(WideConv(), 32, o);
    o.fp32_conv = Fp32ConvCopies::kBoth;
    const Plan both = PlanOf(WideConv(), 32, o);
    // Inference peaks at the convolution: the copy of its 32 MiB output is
    // the difference. (Training peaks in the weight gradient, the same in both.)
    if (m == Mode::kInference) {
      EXPECT_EQ(all.peak.allocated_bytes - input_only.peak.allocated_bytes, 32 * kMiB);
    }
    EXPECT_EQ(both.peak.device_bytes,
              std::max(all.peak.device_bytes, input_only.peak.device_bytes));
    EXPECT_EQ(both.options.fp32_conv, Fp32ConvCopies::kBoth);
  }
  // bf16 has one kind: the options make no difference.
  PlanOptions o = Inference(Precision::kBf16);
  o.fp32_conv = Fp32ConvCopies::kInputOnly;
  const Plan a = PlanOf(WideConv(), 32, o);
  o.fp32_conv = Fp32ConvCopies::kAll;
  EXPECT_EQ(PlanOf(WideConv(), 32, o).peak.allocated_bytes, a.peak.allocated_bytes);
}

// x [N, 256] -> MatMul -> h -> Relu -> r -> MatMul -> y [N, 16]; with
// `reuse`, the second MatMul reads h (so the Relu cannot overwrite it).
GraphBuilder ReluChain(bool reuse) {
  GraphBuilder b;
  b.Input("x", {S("N"), D(256)});
  b.Init("W1", {256, 256});
  b.Init("W2", {256, 16});
  b.Op("MatMul", {"x", "W1"}, {"h"}, "mm1");
  b.Op("Relu", {"h"}, {"r"}, "relu");
  b.Op("MatMul", {reuse ? "h" : "r", "W2"}, {"y"}, "mm2");
  b.Output("y");
  if (reuse) b.Output("r");
  return b;
}

TEST(Plan, ActivationsArePlannedInPlaceAndNot) {
  PlanOptions o = Inference();
  o.inplace = InPlace::kOff;
  const Plan off = PlanOf(ReluChain(false), 4096, o);
  o.inplace = InPlace::kOn;
  const Plan on = PlanOf(ReluChain(false), 4096, o);
  // x, h, r are 4 MiB each, y 256 KiB. Out of place the peak is x + h + r
  // at the Relu; in place the Relu writes into h and the peak is x + r + y.
  EXPECT_EQ(off.peak.allocated_bytes - on.peak.allocated_bytes, 4 * kMiB - 256 * 1024);
  o.inplace = InPlace::kBoth;
  const Plan both = PlanOf(ReluChain(false), 4096, o);
  EXPECT_EQ(both.peak.allocated_bytes, off.peak.allocated_bytes);
  EXPECT_EQ(both.peak.reserved_bytes, std::max(off.peak.reserved_bytes, on.peak.reserved_bytes));
  // An input read later is never overwritten.
  o.inplace = InPlace::kOff;
  const Plan reuse_off = PlanOf(ReluChain(true), 4096, o);
  o.inplace = InPlace::kOn;
  EXPECT_EQ(PlanOf(ReluChain(true), 4096, o).peak.allocated_bytes, reuse_off.peak.allocated_bytes);
}

// x [N, 128] -> MatMul -> h [N, 256] -> `act` -> r -> MatMul -> y.
GraphBuilder ActivationChain(const char* act) {
  GraphBuilder b;
  b.Input("x", {S("N"), D(128)});
  b.Init("W1", {128, 256});
  b.Init("W2", {256, 16});
  b.Op("MatMul", {"x", "W1"}, {"h"}, "mm1");
  b.Op(act, {"h"}, {"r"}, "act");
  b.Op("MatMul", {"r", "W2"}, {"y"}, "mm2");
  b.Output("y");
  return b;
}

// Blocks of `bytes` allocated before the first backward event.
int ForwardAllocs(const Plan& p, int64_t bytes) {
  int n = 0;
  for (size_t e = 0; e < p.events.size() && p.event_phases[e] != Phase::kBackward; ++e) {
    n += p.events[e].is_alloc && p.events[e].bytes == bytes;
  }
  return n;
}

// Run in place, relu_ differentiates through its result; hardswish_ (and
// hardsigmoid_, hardtanh_) through its input, which autograd copies before
// the kernel overwrites it (lraspp_mnv3's trace: the batch norm's block
// becomes the output and is freed at the next convolution's backward, the
// new block at the activation's). Without autograd nothing is copied.
TEST(Plan, InPlaceActivationReadingItsInputKeepsACopy) {
  PlanOptions o = Train(Optimizer::kSgd);
  o.keep_events = true;
  const int64_t h = 4 * kMiB;  // [4096, 256] fp32
  for (const char* act : {"Relu", "HardSwish", "Clip", "LeakyRelu"}) {
    o.inplace = InPlace::kOff;
    EXPECT_EQ(ForwardAllocs(PlanOf(ActivationChain(act), 4096, o), h), 2) << act;
    o.inplace = InPlace::kOn;
    const bool copies = std::string(act) == "HardSwish" || std::string(act) == "Clip";
    EXPECT_EQ(ForwardAllocs(PlanOf(ActivationChain(act), 4096, o), h), copies ? 2 : 1) << act;
  }
  // Inference: two passes, h alone in each.
  PlanOptions inf = Inference();
  inf.keep_events = true;
  inf.inplace = InPlace::kOn;
  EXPECT_EQ(ForwardAllocs(PlanOf(ActivationChain("HardSwish"), 4096, inf), h), 2);
}

// PlanSchedule says whether the in-place setting matters (MakePlan skips the
// in-place variant when it does not): the Relu overwrites h only when nothing
// reads h later, in inference and in training alike.
TEST(Plan, InPlaceMattersOnlyWhereAnOpCanOverwriteItsInput) {
  for (Mode m : {Mode::kInference, Mode::kTrain}) {
    for (bool reuse : {false, true}) {
      GraphBuilder b = ReluChain(reuse);
      ShapeBindings bind;
      bind.batch = 4096;
      ASSERT_TRUE(InferShapes(&b.g, bind, nullptr).ok());
      PlanOptions o = m == Mode::kTrain ? Train(Optimizer::kSgd) : Inference();
      auto sched = BuildSchedule(b.g, o);
      ASSERT_TRUE(sched.ok()) << sched.message();
      bool matters[2] = {};
      Plan plans[2];
      const InPlace settings[2] = {InPlace::kOff, InPlace::kOn};
      for (int k = 0; k < 2; ++k) {
        o.inplace = settings[k];
        auto p = PlanSchedule(b.g, 4096, o, sched.value(), PlanDetail::kFull, &matters[k]);
        ASSERT_TRUE(p.ok()) << p.message();
        plans[k] = p.value();
      }
      EXPECT_EQ(matters[0], !reuse) << "mode " << static_cast<int>(m);
      EXPECT_EQ(matters[1], !reuse) << "mode " << static_cast<int>(m);
      if (reuse) {
        // Not in place either way: the same step, figure for figure.
        const Peak* a[3] = {&plans[0].peak, &plans[0].first_step, &plans[0].steady};
        const Peak* c[3] = {&plans[1].peak, &plans[1].first_step, &plans[1].steady};
        for (int k = 0; k < 3; ++k) {
          EXPECT_EQ(a[k]->allocated_bytes, c[k]->allocated_bytes);
          EXPECT_EQ(a[k]->reserved_bytes, c[k]->reserved_bytes);
          EXPECT_EQ(a[k]->node, c[k]->node);
          for (int cat = 0; cat < kNumCategories; ++cat) {
            EXPECT_EQ(a[k]->breakdown.bytes[cat], c[k]->breakdown.bytes[cat]);
          }
        }
        ASSERT_EQ(plans[0].timeline.size(), plans[1].timeline.size());
        for (size_t i = 0; i < plans[0].timeline.size(); ++i) {
          EXPECT_EQ(plans[0].timeline[i].allocated, plans[1].timeline[i].allocated);
          EXPECT_EQ(plans[0].timeline[i].reserved, plans[1].timeline[i].reserved);
        }
      } else {
        // The forward pass peaks at the Relu: lower when it overwrites h.
        const int fwd = static_cast<int>(Phase::kForward);
        EXPECT_LT(plans[1].peak.phase_allocated[fwd], plans[0].peak.phase_allocated[fwd])
            << "mode " << static_cast<int>(m);
      }
    }
  }
}

// The MLP with its nodes inside modules "fc1", "act", "fc2" (as an exporter
// names them), for per-module and per-phase peaks.
GraphBuilder MlpInModules() {
  GraphBuilder b = Mlp();
  const char* mods[] = {"fc1", "act", "fc2"};
  for (int i = 0; i < 3; ++i) {
    b.g.nodes[i].modules = {mods[i]};
    b.g.nodes[i].modules_known = true;
    b.g.nodes[i].scope = mods[i];
  }
  return b;
}

// Whether planning `b` skips its third iteration: the simulation stops after
// the second one and the allocator ends it where it began it (PlanSchedule).
bool ThirdIterationRepeats(GraphBuilder b, int64_t batch, const PlanOptions& o) {
  ShapeBindings bind;
  bind.batch = batch;
  EXPECT_TRUE(InferShapes(&b.g, bind, nullptr).ok());
  auto sched = BuildSchedule(b.g, o);
  EXPECT_TRUE(sched.ok()) << sched.message();
  Simulator sim(sched.value(), o);
  sim.stop_when_steady = true;
  sim.Run();
  if (!sim.steady_repeats) return false;
  EXPECT_EQ(sim.iteration_events.size(), 2u);
  CachingAllocatorReplay replay(o.allocator);
  EXPECT_TRUE(replay.Replay(sim.events, sim.iteration_events[1].first).ok());
  const std::vector<int64_t> before = replay.State();
  EXPECT_TRUE(replay.Replay(sim.events, sim.events.size()).ok());
  return replay.State() == before;
}

void ExpectSamePeak(const Peak& a, const Peak& b, const std::string& what) {
  EXPECT_EQ(a.allocated_bytes, b.allocated_bytes) << what;
  EXPECT_EQ(a.reserved_bytes, b.reserved_bytes) << what;
  EXPECT_EQ(a.lower_bound_bytes, b.lower_bound_bytes) << what;
  EXPECT_EQ(a.node, b.node) << what;
  EXPECT_EQ(a.phase, b.phase) << what;
  for (int c = 0; c < kNumCategories; ++c) {
    EXPECT_EQ(a.breakdown.bytes[c], b.breakdown.bytes[c]) << what << " category " << c;
  }
  for (int ph = 0; ph < 3; ++ph) {
    EXPECT_EQ(a.phase_allocated[ph], b.phase_allocated[ph]) << what << " phase " << ph;
    EXPECT_EQ(a.phase_reserved[ph], b.phase_reserved[ph]) << what << " phase " << ph;
  }
  ASSERT_EQ(a.rules.size(), b.rules.size()) << what;
  for (size_t i = 0; i < a.rules.size(); ++i) {
    EXPECT_EQ(a.rules[i].rule, b.rules[i].rule) << what;
    EXPECT_EQ(a.rules[i].peak_bytes, b.rules[i].peak_bytes) << what;
  }
}

// Simulator::EventStorage reads an event's storage off its id (no vector per
// event): each storage's one allocation asks for its bytes, a free follows
// it, and the model load's torch.cuda.empty_cache() names none. Whether the
// simulation stops after the second iteration or makes the third, the events
// they share are the same (the vectors are reserved differently).
TEST(Plan, EventStorageIsTheEventsIdAndRunsAgreeWhateverTheReservation) {
  GraphBuilder b = DeepMlp();
  ShapeBindings bind;
  bind.batch = 4;
  ASSERT_TRUE(InferShapes(&b.g, bind, nullptr).ok());
  PlanOptions o;
  o.mode = Mode::kTrain;
  o.optimizer = Optimizer::kSgd;
  o.precision = Precision::kBf16;  // loaded in fp32, cast, then the cache emptied
  auto sched = BuildSchedule(b.g, o);
  ASSERT_TRUE(sched.ok()) << sched.message();
  Simulator stopped(sched.value(), o);
  stopped.stop_when_steady = true;
  stopped.Run();
  Simulator full(sched.value(), o);
  full.Run();
  ASSERT_TRUE(stopped.steady_repeats);
  ASSERT_EQ(full.iteration_events.size(), 3u);
  ASSERT_EQ(stopped.events.size(), full.iteration_events[1].second);
  int empty_caches = 0;
  std::vector<int> allocs(full.storages.size(), 0);
  for (size_t e = 0; e < full.events.size(); ++e) {
    const MemEvent& ev = full.events[e];
    const int st = full.EventStorage(e);
    if (ev.empty_cache) {
      EXPECT_EQ(st, -1) << e;
      ++empty_caches;
      continue;
    }
    ASSERT_GE(st, 0) << e;
    ASSERT_LT(st, static_cast<int>(full.storages.size())) << e;
    if (ev.is_alloc) {
      EXPECT_EQ(ev.bytes, full.storages[st].bytes) << e;
      ++allocs[st];
    } else {
      EXPECT_EQ(allocs[st], 1) << "free before the allocation at event " << e;
    }
    if (e < stopped.events.size()) {
      EXPECT_EQ(stopped.EventStorage(e), st) << e;
      EXPECT_EQ(stopped.events[e].bytes, ev.bytes) << e;
      EXPECT_EQ(stopped.events[e].is_alloc, ev.is_alloc) << e;
      EXPECT_EQ(stopped.event_step[e], full.event_step[e]) << e;
      EXPECT_EQ(stopped.event_op[e], full.event_op[e]) << e;
    }
  }
  EXPECT_EQ(empty_caches, 1);  // training: the cache is emptied after the cast
  for (size_t st = 0; st < allocs.size(); ++st) EXPECT_LE(allocs[st], 1) << st;
  // The third iteration made after a stop is the full run's third.
  stopped.RunRepeatedIteration();
  ASSERT_EQ(stopped.events.size(), full.events.size());
  for (size_t e = 0; e < full.events.size(); ++e) {
    EXPECT_EQ(stopped.EventStorage(e), full.EventStorage(e)) << e;
    EXPECT_EQ(stopped.event_step[e], full.event_step[e]) << e;
  }
}

// A plan whose third iteration repeats the second is the plan of all three:
// keep_events simulates them all (the events are handed on), so the two
// must agree figure for figure, timeline and per-module peaks included; and
// the skip does happen (SGD: the first step leaves nothing new behind), where
// it does not (AdamW's first step makes state, the second may still grow the
// cache) the plans agree too.
TEST(Plan, ARepeatedThirdIterationIsReadOffTheSecond) {
  int repeats = 0;
  for (Optimizer opt : {Optimizer::kSgd, Optimizer::kAdamW, Optimizer::kMomentum}) {
    for (int graph = 0; graph < 3; ++graph) {
      for (StepKind step : {StepKind::kSteady, StepKind::kFirst}) {
        GraphBuilder b = graph == 0 ? MlpInModules() : graph == 1 ? DeepMlp() : ReluChain(false);
        const int64_t batch = graph == 0 ? 8 : 4096;
        PlanOptions o = Train(opt);
        o.step = step;
        if (graph == 1) o.checkpoint_segments = {"blk.1"};
        const std::string what = "optimizer " + std::to_string(static_cast<int>(opt)) + " graph " +
                                 std::to_string(graph) + " step " +
                                 std::to_string(static_cast<int>(step));
        PlanOptions sched_o = o;
        sched_o.inplace = InPlace::kOff;
        if (graph != 1) repeats += ThirdIterationRepeats(b, batch, sched_o);
        const Plan skipped = PlanOf(b, batch, o);
        o.keep_events = true;
        const Plan full = PlanOf(b, batch, o);
        ExpectSamePeak(skipped.peak, full.peak, what + " peak");
        ExpectSamePeak(skipped.first_step, full.first_step, what + " first");
        ExpectSamePeak(skipped.steady, full.steady, what + " steady");
        EXPECT_EQ(skipped.forward_flops, full.forward_flops) << what;
        EXPECT_EQ(skipped.backward_flops, full.backward_flops) << what;
        EXPECT_EQ(skipped.recompute_flops, full.recompute_flops) << what;
        ASSERT_EQ(skipped.timeline.size(), full.timeline.size()) << what;
        for (size_t i = 0; i < full.timeline.size(); ++i) {
          const TimelinePoint& x = skipped.timeline[i];
          const TimelinePoint& y = full.timeline[i];
          EXPECT_EQ(x.step, y.step) << what << " point " << i;
          EXPECT_EQ(x.node, y.node) << what << " point " << i;
          EXPECT_EQ(x.allocated, y.allocated) << what << " point " << i;
          EXPECT_EQ(x.reserved, y.reserved) << what << " point " << i;
          EXPECT_EQ(x.allocated_end, y.allocated_end) << what << " point " << i;
          for (int c = 0; c < kNumCategories; ++c) {
            EXPECT_EQ(x.live.bytes[c], y.live.bytes[c]) << what << " point " << i;
          }
        }
        ASSERT_EQ(skipped.modules.size(), full.modules.size()) << what;
        for (size_t i = 0; i < full.modules.size(); ++i) {
          EXPECT_EQ(skipped.modules[i].module, full.modules[i].module) << what;
          EXPECT_EQ(skipped.modules[i].forward_allocated, full.modules[i].forward_allocated);
          EXPECT_EQ(skipped.modules[i].backward_allocated, full.modules[i].backward_allocated);
          EXPECT_EQ(skipped.modules[i].forward_rise, full.modules[i].forward_rise);
          EXPECT_EQ(skipped.modules[i].forward_kept, full.modules[i].forward_kept);
          EXPECT_EQ(skipped.modules[i].backward_rise, full.modules[i].backward_rise);
        }
      }
    }
  }
  EXPECT_GT(repeats, 0) << "no plan here skips its third iteration: the test tests nothing";
}

// The peak names the module of its op: fc1's backward holds the steady
// peak (ModuleAndPhasePeaks); without module scopes the module is empty.
TEST(Plan, PeakNamesItsModule) {
  const Plan p = PlanOf(MlpInModules(), 8, Train(Optimizer::kMomentum));
  EXPECT_EQ(p.steady.phase, Phase::kBackward);
  EXPECT_EQ(p.steady.node, MlpInModules().g.nodes[0].name);
  EXPECT_EQ(p.steady.module, "fc1");
  EXPECT_EQ(PlanOf(Mlp(), 8, Train(Optimizer::kMomentum)).steady.module, "");
}

// Steady momentum SGD peaks in fc1's backward (118096896 B, derived above):
// the backward phase's peak and fc1's backward peak are that figure. fc1's
// forward peaks with its output h (128 KiB) on top of what a steady step
// starts with: params P, momentum P, x 32 KiB and the workspaces 64 MiB.
TEST(Plan, ModuleAndPhasePeaks) {
  const Plan p = PlanOf(MlpInModules(), 8, Train(Optimizer::kMomentum));
  const int64_t bwd = static_cast<int>(Phase::kBackward);
  EXPECT_EQ(p.steady.phase_allocated[bwd], 118096896);
  int64_t most = 0;
  for (int ph = 0; ph < 3; ++ph) most = std::max(most, p.steady.phase_allocated[ph]);
  EXPECT_EQ(most, p.steady.allocated_bytes);
  for (int ph = 0; ph < 3; ++ph) {
    EXPECT_LE(p.steady.phase_reserved[ph], p.steady.reserved_bytes);
    EXPECT_GE(p.steady.phase_reserved[ph], p.steady.phase_allocated[ph]);
  }
  ASSERT_EQ(p.modules.size(), 3u);
  EXPECT_EQ(p.modules[0].module, "fc1");
  EXPECT_EQ(p.modules[1].module, "act");
  EXPECT_EQ(p.modules[2].module, "fc2");
  EXPECT_EQ(p.modules[0].backward_allocated, 118096896);
  EXPECT_EQ(p.modules[0].forward_allocated, 2 * kP + 32768 + kTrainWorkspaces + 131072);
  for (const ModulePeak& m : p.modules) {
    EXPECT_LE(m.forward_allocated, p.steady.phase_allocated[0]) << m.module;
    EXPECT_LE(m.backward_allocated, p.steady.phase_allocated[bwd]) << m.module;
    EXPECT_GT(m.forward_allocated, 0) << m.module;
    EXPECT_GT(m.backward_allocated, 0) << m.module;
  }
  // Relative figures: fc1's forward rises by h (128 KiB) above its start and
  // keeps it; act (ReLU, planned both in place and not) keeps at most its
  // output; a run never rises below its start.
  EXPECT_EQ(p.modules[0].forward_rise, 131072);
  EXPECT_EQ(p.modules[0].forward_kept, 131072);
  EXPECT_LE(p.modules[1].forward_kept, 131072);
  for (const ModulePeak& m : p.modules) {
    EXPECT_GE(m.forward_rise, 0) << m.module;
    EXPECT_GE(m.backward_rise, 0) << m.module;
    EXPECT_LE(m.forward_rise, m.forward_allocated) << m.module;
  }
  // A graph without module information has no module peaks.
  EXPECT_TRUE(PlanOf(Mlp(), 8, Train(Optimizer::kMomentum)).modules.empty());
}

}  // namespace
}  // namespace memplan

namespace memplan {
namespace {

// x -> l0.q_proj (LoRA) -> * 2 -> l1.k_proj (frozen, quantized) -> head.
// The scaling keeps nothing for backward, so only the int8 matmul keeps s0.
GraphBuilder LoraThenQuantized() {
  GraphBuilder b;
  b.g.source = "m.onnx";
  b.Input("x", {S("batch"), D(256)});
  b.Init("m.l0.q_proj.weight", {256, 256});
  b.Init("m.l1.k_proj.weight", {512, 256});
  b.Init("m.head.weight", {8, 512});
  b.Init("two", {});
  b.Op("Transpose", {"m.l0.q_proj.weight"}, {"w0"}).attrs["perm"] = IntsAttr({1, 0});
  b.Op("MatMul", {"x", "w0"}, {"h0"});
  b.Op("Mul", {"h0", "two"}, {"s0"});
  b.Op("Transpose", {"m.l1.k_proj.weight"}, {"w1"}).attrs["perm"] = IntsAttr({1, 0});
  b.Op("MatMul", {"s0", "w1"}, {"h1"});
  b.Op("Transpose", {"m.head.weight"}, {"wh"}).attrs["perm"] = IntsAttr({1, 0});
  b.Op("MatMul", {"h1", "wh"}, {"logits"});
  b.Output("logits");
  b.g.Link();
  return b;
}

int64_t MostSaved(const Plan& p) {
  int64_t most = 0;
  for (const TimelinePoint& t : p.timeline) {
    most = std::max(most, t.live.bytes[static_cast<int>(Category::kSavedActivations)]);
  }
  return most;
}

TEST(Plan, Int8MatmulKeepsItsInputWhereMatMul4BitKeepsThePackedWeight) {
  PlanOptions o;
  o.mode = Mode::kTrain;
  o.precision = Precision::kBf16;
  o.lora.r = 4;
  o.lora.targets = {"q_proj"};
  o.lora.dropout = 0;
  o.weights = WeightFormat::kNf4;
  const Plan nf4 = PlanOf(LoraThenQuantized(), 64, o);
  o.weights = WeightFormat::kInt8;
  const Plan int8 = PlanOf(LoraThenQuantized(), 64, o);
  // s0 is [64, 256] bf16.
  EXPECT_EQ(MostSaved(int8) - MostSaved(nf4), 64 * 256 * 2);
}

}  // namespace
}  // namespace memplan
