// What the schedule makes of exported attention, per SDPA kernel: hand-built
// exports in the shapes Hugging Face models give (a causal mask computed from
// positions, k and v repeated to the query heads, a permuted position bias).
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "planner/attention.h"
#include "planner/ops/test_graph.h"
#include "planner/plan.h"
#include "planner/schedule.h"
#include "planner/shape_inference.h"

namespace memplan {
namespace {

using testing_util::D;
using testing_util::GraphBuilder;
using testing_util::IntAttr;
using testing_util::IntsAttr;
using testing_util::TensorAttr;

// B=2, H=4 query heads, Hkv=2 key/value heads, S=16, D=8.
constexpr int64_t kB = 2, kH = 4, kKv = 2, kS = 16, kD = 8;

void Constant(GraphBuilder* b, const std::string& name, double v) {
  b->Op("Constant", {}, {name}, name + "_const").attrs["value"] =
      TensorAttr(DType::kFloat, {}, {}, {v});
}

// x * w for a weight w: an activation that requires grad.
void Projected(GraphBuilder* b, const std::string& name, std::vector<int64_t> dims) {
  std::vector<Dim> d;
  for (int64_t x : dims) d.push_back(D(x));
  b->Input(name + "_in", d);
  b->Init(name + "_w", {dims.back()});
  b->Op("Mul", {name + "_in", name + "_w"}, {name}, name + "_proj");
}

// k or v [B, Hkv, S, D] -> unsqueeze(2) -> expand [B, Hkv, 2, S, D] ->
// reshape [B, H, S, D] (transformers' repeat_kv).
void Repeat(GraphBuilder* b, const std::string& x) {
  b->Op("Unsqueeze", {x, "axis2"}, {x + "_u"}, x + "_unsqueeze");
  b->Op("Expand", {x + "_u", "rep_shape"}, {x + "_e"}, x + "_expand");
  b->Op("Reshape", {x + "_e", "heads_shape"}, {x + "_rep"}, x + "_repeat");
}

struct Opts {
  bool gqa = true;             // k, v repeated from kKv heads
  bool causal = true;          // mask from position comparisons
  bool position_bias = false;  // T5: a learned, permuted bias as the mask
  bool padding = false;        // an all-true padding mask (positions >= 0)
};

GraphBuilder Llama(const Opts& o) {
  GraphBuilder b;
  Projected(&b, "q", {kB, kH, kS, kD});
  const int64_t kvh = o.gqa ? kKv : kH;
  Projected(&b, "k", {kB, kvh, kS, kD});
  Projected(&b, "v", {kB, kvh, kS, kD});
  std::string k = "k", v = "v";
  if (o.gqa) {
    b.Ints("axis2", {2});
    b.Ints("rep_shape", {kB, kKv, kH / kKv, kS, kD});
    b.Ints("heads_shape", {kB, kH, kS, kD});
    Repeat(&b, "k");
    Repeat(&b, "v");
    k = "k_rep";
    v = "v_rep";
  }
  Constant(&b, "zero", 0.0);
  Constant(&b, "neg_inf", -1e30);
  Constant(&b, "scale", 0.35355339);
  if (o.causal) {
    b.Scalar("start", 0);
    b.Scalar("limit", kS);
    b.Scalar("delta", 1);
    b.Ints("axis0", {0});
    b.Ints("axis1", {1});
    b.Op("Range", {"start", "limit", "delta"}, {"pos"}, "arange");
    b.Op("Unsqueeze", {"pos", "axis1"}, {"rows"}, "rows");
    b.Op("Unsqueeze", {"pos", "axis0"}, {"cols"}, "cols");
    b.Op("LessOrEqual", {"cols", "rows"}, {"allowed"}, "causal_le");
    b.Op("Where", {"allowed", "zero", "neg_inf"}, {"mask"}, "mask_where");
  }
  if (o.padding) {
    // What an HF encoder exports without an attention mask: every key
    // position compared with a scalar, all true.
    b.Scalar("start", 0);
    b.Scalar("limit", kS);
    b.Scalar("delta", 1);
    b.Scalar("first", 0);
    b.Op("Range", {"start", "limit", "delta"}, {"pos"}, "arange");
    b.Op("GreaterOrEqual", {"pos", "first"}, {"allowed"}, "padding_ge");
    b.Op("Where", {"allowed", "zero", "neg_inf"}, {"mask"}, "mask_where");
  }
  if (o.position_bias) {
    b.Input("buckets", {D(kS), D(kS)}, DType::kInt64);
    b.Init("bias_table", {32, kH});
    b.Ints("axis0", {0});
    b.Op("Gather", {"bias_table", "buckets"}, {"values"}, "bias_gather");
    b.Op("Transpose", {"values"}, {"values_t"}, "bias_permute").attrs["perm"] = IntsAttr({2, 0, 1});
    b.Op("Unsqueeze", {"values_t", "axis0"}, {"mask"}, "bias_unsqueeze");
  }
  b.Op("Transpose", {k}, {"kt"}, "k_transpose").attrs["perm"] = IntsAttr({0, 1, 3, 2});
  b.Op("MatMul", {"q", "kt"}, {"scores"}, "scores");
  b.Op("Mul", {"scores", "scale"}, {"scaled"}, "scale_mul");
  b.Op("Add", {"scaled", "mask"}, {"masked"}, "mask_add");
  b.Op("Softmax", {"masked"}, {"probs"}, "softmax").attrs["axis"] = IntAttr(-1);
  b.Op("MatMul", {"probs", v}, {"out"}, "context");
  b.Output("out");
  Status s = InferShapes(&b.g, ShapeBindings(), nullptr);
  EXPECT_TRUE(s.ok()) << s.message();
  return b;
}

Schedule Build(const GraphBuilder& b, Precision p) {
  PlanOptions o;
  o.mode = Mode::kTrain;
  o.precision = p;
  o.attention = Attention::kFused;
  auto s = BuildSchedule(b.g, o);
  EXPECT_TRUE(s.ok()) << s.message();
  return s.ok() ? s.value() : Schedule();
}

// The plan of `b`'s graph at batch kB with its events kept (fused attention).
Result<Plan> PlanWithEvents(const GraphBuilder& b, Precision p) {
  PlanOptions o;
  o.precision = p;
  o.attention = Attention::kFused;
  o.keep_events = true;
  return MakePlan(b.g, kB, o);
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

int Count(const Schedule& s, const std::string& op_type) {
  int n = 0;
  for (const ExecOp& op : s.ops) n += op.op_type == op_type;
  return n;
}

const ExecOp* Find(const Schedule& s, const std::string& op_type) {
  for (const ExecOp& op : s.ops) {
    if (op.op_type == op_type) return &op;
  }
  return nullptr;
}

TEST(SdpaSchedule, FindsTheCausalMaskAndTheHeadRepeat) {
  GraphBuilder b = Llama(Opts());
  auto regions = FindAttentionRegions(b.g);
  ASSERT_EQ(regions.size(), 1u);
  EXPECT_TRUE(regions[0].causal_mask);
  EXPECT_EQ(regions[0].k_kv, b.g.Find("k"));
  EXPECT_EQ(regions[0].v_kv, b.g.Find("v"));
  GraphBuilder t5 = Llama(Opts{false, false, true});
  regions = FindAttentionRegions(t5.g);
  ASSERT_EQ(regions.size(), 1u);
  EXPECT_FALSE(regions[0].causal_mask);  // reads a parameter
  EXPECT_EQ(regions[0].k_kv, -1);
  // values [S, S, H] permuted to [H, S, S]: the heads are innermost.
  const std::vector<int64_t> st = RuntimeStrides(t5.g, t5.g.Find("mask"));
  ASSERT_EQ(st.size(), 4u);
  EXPECT_EQ(st[1], 1);
  EXPECT_EQ(st[2], kS * kH);
  EXPECT_EQ(st[3], kH);
}

// fp32 with GQA: only the math kernel; it repeats k and v itself, builds the
// causal mask, and keeps the S x S probabilities.
TEST(SdpaSchedule, Fp32GqaRunsTheMathKernel) {
  const Schedule s = Build(Llama(Opts()), Precision::kFp32);
  EXPECT_EQ(Count(s, "ScaledDotProductAttention"), 0);
  EXPECT_EQ(Count(s, "RepeatInterleave"), 2);
  EXPECT_EQ(Count(s, "CausalMask"), 1);
  // The export's repeat and mask ops do not run.
  for (const ExecOp& op : s.ops) {
    EXPECT_NE(op.label, "k_repeat");
    EXPECT_NE(op.label, "mask_where");
  }
  const ExecOp* soft = Find(s, "Softmax");
  ASSERT_NE(soft, nullptr);
  ASSERT_EQ(soft->saved.size(), 1u);
  // probs [B, H, S, S] fp32 = 2*4*16*16*4 bytes; _safe_softmax's -inf test
  // is a bool of the same shape.
  EXPECT_EQ(s.vals[soft->saved[0].val].bytes, kB * kH * kS * kS * 4);
  EXPECT_EQ(soft->fwd_workspace, kB * kH * kS * kS);
  const ExecOp* rep = Find(s, "RepeatInterleave");
  EXPECT_EQ(s.vals[rep->out[0]].bytes, kB * kH * kS * kD * 4);
}

// The math kernel's causal mask: ones(S, S, bool), its tril, the ones go,
// the float mask, the tril goes (the H200 trace of qwen_bigvocab_e b1 fp32).
TEST(SdpaSchedule, TheMathKernelsCausalMaskIsMadeFromATrilOfOnes) {
  const GraphBuilder b = Llama(Opts());
  const Schedule s = Build(b, Precision::kFp32);
  const ExecOp* mask = Find(s, "CausalMask");
  ASSERT_NE(mask, nullptr);
  EXPECT_EQ(mask->fwd_temp_source_bytes, kS * kS);
  EXPECT_EQ(mask->fwd_temp_bytes, kS * kS);
  EXPECT_EQ(mask->fwd_workspace, 0);
  auto plan = PlanWithEvents(b, Precision::kFp32);
  ASSERT_TRUE(plan.ok()) << plan.message();
  std::vector<int64_t> signed_bytes;  // the first step's, + alloc, - free
  std::map<int64_t, int64_t> bytes_of;
  const size_t end = plan->iteration_starts.size() > 1 ? plan->iteration_starts[1] : 0;
  for (size_t e = 0; e < end; ++e) {
    const MemEvent& ev = plan->events[e];
    if (ev.is_alloc) bytes_of[ev.id] = ev.bytes;
    const std::string& node = plan->event_nodes[e];
    if (EndsWith(node, "/causal_mask")) {
      signed_bytes.push_back(ev.is_alloc ? ev.bytes : -bytes_of[ev.id]);
    }
  }
  ASSERT_GE(signed_bytes.size(), 5u);
  signed_bytes.resize(5);
  EXPECT_EQ(signed_bytes,
            (std::vector<int64_t>{kS * kS, kS * kS, -kS * kS, kS * kS * 4, -kS * kS}));
}

// The math kernel under autocast (T5's permuted position bias): autocast
// casts the float mask, an argument like q, k and v, first and keeps it for
// the call; the kernel makes the (discarded) probabilities in the input dtype
// before the context's product (make_tuple's arguments, right to left) and
// keeps them to its return; the scaled k lives until the scores' product
// returns (bench/results/copy_probe_h200.txt, t5_encdec_c's H200 trace).
TEST(SdpaSchedule, TheMathKernelUnderAutocastRunsInPyTorchsOrder) {
  const GraphBuilder b = Llama(Opts{false, false, true});
  const Schedule s = Build(b, Precision::kAmpBf16);
  EXPECT_EQ(Count(s, "ScaledDotProductAttention"), 0);
  int mask_cast = -1, first_q_cast = -1, probs_half = -1, context = -1, scores = -1;
  int scale_k = -1;
  for (size_t i = 0; i < s.ops.size(); ++i) {
    const ExecOp& op = s.ops[i];
    const std::string& l = op.label;
    if (op.op_type == "Cast" && l.rfind("autocast(", 0) == 0 && !op.out.empty()) {
      const Val& out = s.vals[op.out[0]];
      if (out.shape == std::vector<int64_t>{1, kH, kS, kS} && mask_cast < 0) {
        mask_cast = static_cast<int>(i);
        EXPECT_EQ(out.dtype, DType::kBFloat16);
      } else if (first_q_cast < 0) {
        first_q_cast = static_cast<int>(i);
      }
    }
    if (EndsWith(l, "/probs_to_input_dtype")) {
      probs_half = static_cast<int>(i);
      EXPECT_EQ(s.vals[op.out[0]].dtype, DType::kBFloat16);
      EXPECT_EQ(s.vals[op.out[0]].bytes, kB * kH * kS * kS * 2);
    }
    if (EndsWith(l, "/context") && op.op_type == "MatMul") context = static_cast<int>(i);
    if (EndsWith(l, "/scores") && op.op_type == "MatMul") scores = static_cast<int>(i);
    if (EndsWith(l, "/scale_k")) scale_k = static_cast<int>(i);
  }
  ASSERT_GE(mask_cast, 0);
  ASSERT_GE(first_q_cast, 0);
  EXPECT_LT(mask_cast, first_q_cast);
  ASSERT_GE(probs_half, 0);
  ASSERT_GE(context, 0);
  EXPECT_LT(probs_half, context);
  // The probabilities' half copy is held to the call's end, the mask's
  // copy too; the scaled k to the scores' product.
  EXPECT_GE(s.vals[s.ops[probs_half].out[0]].held_until, context);
  EXPECT_GE(s.vals[s.ops[mask_cast].out[0]].held_until, context);
  ASSERT_GE(scores, 0);
  ASSERT_GE(scale_k, 0);
  EXPECT_EQ(s.vals[s.ops[scale_k].out[0]].held_until, scores);
  // Planned: the probabilities' half copy is freed after the output's cast.
  auto plan = PlanWithEvents(b, Precision::kAmpBf16);
  ASSERT_TRUE(plan.ok()) << plan.message();
  int64_t probs_id = -1;
  std::string freed_at;
  for (size_t e = 0; e < plan->events.size(); ++e) {
    const MemEvent& ev = plan->events[e];
    const std::string& node = plan->event_nodes[e];
    if (ev.is_alloc && probs_id < 0 && EndsWith(node, "/probs_to_input_dtype")) {
      probs_id = ev.id;
    } else if (!ev.is_alloc && ev.id == probs_id) {
      freed_at = node;
      break;
    }
  }
  ASSERT_GE(probs_id, 0);
  EXPECT_TRUE(EndsWith(freed_at, "/to_input_dtype")) << freed_at;
}

// bf16 (autocast) with GQA and is_causal: flash, on the un-repeated k and v.
TEST(SdpaSchedule, AmpGqaRunsFlashOnTheKeyValueHeads) {
  const Schedule s = Build(Llama(Opts()), Precision::kAmpBf16);
  const ExecOp* op = Find(s, "ScaledDotProductAttention");
  ASSERT_NE(op, nullptr);
  EXPECT_EQ(op->label.substr(op->label.size() - 6), "/flash");
  EXPECT_EQ(s.vals[op->in[1]].shape[1], kKv);
  EXPECT_EQ(op->in[3], -1);  // no mask: is_causal
  EXPECT_EQ(Count(s, "Softmax"), 0);
  // The head repeat does not run, but what feeds the un-repeated k and v
  // does (their projections): only the repeat's nodes are dropped.
  int projections = 0;
  for (const ExecOp& o : s.ops) projections += o.label == "k_proj" || o.label == "v_proj";
  EXPECT_EQ(projections, 2);
  EXPECT_EQ(Count(s, "Expand"), 0);
  // fp32 dq (B*H*S*D*4) + fp32 row sums (B*H*S*4) + dk, dv per query head
  // in bf16 (2 * B*H*S*D*2).
  EXPECT_EQ(op->bwd_workspace,
            kB * kH * kS * kD * 4 + kB * kH * kS * 4 + 2 * kB * kH * kS * kD * 2);
  // Saved: q, k, v, out and the fp32 logsumexp [B*H, S].
  int64_t lse = 0;
  for (const SavedRef& r : op->saved) lse += r.val < 0 ? r.bytes : 0;
  EXPECT_EQ(lse, kB * kH * kS * 4);
}

// Without GQA in fp32 the memory-efficient kernel runs, is_causal.
TEST(SdpaSchedule, Fp32WithoutGqaRunsMemoryEfficient) {
  const Schedule s = Build(Llama(Opts{false, true, false}), Precision::kFp32);
  const ExecOp* op = Find(s, "ScaledDotProductAttention");
  ASSERT_NE(op, nullptr);
  EXPECT_EQ(op->label.substr(op->label.size() - 14), "/mem_efficient");
  // Its logsumexp rows are padded to 32: [B*H, 32] fp32.
  int64_t lse = 0;
  for (const SavedRef& r : op->saved) lse += r.val < 0 ? r.bytes : 0;
  EXPECT_EQ(lse, kB * kH * 32 * 4);
}

// An all-true padding mask made of shapes and constants: HF passes no mask
// at all when it runs (masking_utils' _ignore_bidirectional_mask_sdpa), so
// bf16 gets the flash kernel (the H200 trace of wav2vec2_cls b512 amp_bf16:
// no mask allocated, an unpadded [B, H, S] logsumexp) and fp32 the
// memory-efficient one without a mask to keep; eager attention adds it.
TEST(SdpaSchedule, AllTruePaddingMaskIsNotPassed) {
  const Opts padding{false, false, false, true};
  auto regions = FindAttentionRegions(Llama(padding).g);
  ASSERT_EQ(regions.size(), 1u);
  EXPECT_TRUE(regions[0].full_mask);
  EXPECT_FALSE(regions[0].causal_mask);
  EXPECT_FALSE(FindAttentionRegions(Llama(Opts()).g)[0].full_mask);
  EXPECT_FALSE(FindAttentionRegions(Llama(Opts{false, false, true}).g)[0].full_mask);
  for (Precision p : {Precision::kAmpBf16, Precision::kFp32}) {
    const Schedule s = Build(Llama(padding), p);
    const ExecOp* op = Find(s, "ScaledDotProductAttention");
    ASSERT_NE(op, nullptr);
    const std::string kernel = p == Precision::kFp32 ? "/mem_efficient" : "/flash";
    EXPECT_EQ(op->label.substr(op->label.size() - kernel.size()), kernel);
    EXPECT_EQ(op->in[3], -1);
    for (const ExecOp& o : s.ops) EXPECT_NE(o.label, "mask_where");
    int64_t lse = 0;
    for (const SavedRef& r : op->saved) lse += r.val < 0 ? r.bytes : 0;
    EXPECT_EQ(lse, kB * kH * (p == Precision::kFp32 ? 32 : kS) * 4);
  }
  GraphBuilder eager = Llama(padding);
  PlanOptions o;
  o.mode = Mode::kTrain;
  o.precision = Precision::kAmpBf16;
  o.attention = Attention::kEager;
  auto s = BuildSchedule(eager.g, o);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(Count(s.value(), "ScaledDotProductAttention"), 0);
  bool where = false;
  for (const ExecOp& op : s->ops) where = where || op.label == "mask_where";
  EXPECT_TRUE(where);
}

// Under autocast SDPA's fp32 operands are copied to bf16 last argument first
// (autocast's wrapper, as for every op): v, k, then q.
TEST(SdpaSchedule, AutocastCopiesValueKeyThenQuery) {
  GraphBuilder b = Llama(Opts{false, true, false});
  const Schedule s = Build(b, Precision::kAmpBf16);
  std::vector<int> cast_of;
  for (const ExecOp& op : s.ops) {
    if (op.op_type == "Cast" && op.in.size() == 1) cast_of.push_back(op.in[0]);
  }
  EXPECT_EQ(cast_of, (std::vector<int>{b.g.Find("v"), b.g.Find("k"), b.g.Find("q")}));
}

// T5: a learned bias whose last dim has stride H as the mask leaves only the
// math kernel, even in bf16; the bias gets the scores' gradient.
TEST(SdpaSchedule, PermutedPositionBiasRunsTheMathKernel) {
  const Schedule s = Build(Llama(Opts{false, false, true}), Precision::kAmpBf16);
  EXPECT_EQ(Count(s, "ScaledDotProductAttention"), 0);
  const ExecOp* add = Find(s, "BiasAdd");
  ASSERT_NE(add, nullptr);
  ASSERT_EQ(add->grad_in.size(), 2u);
  EXPECT_TRUE(add->grad_in[1]);
  EXPECT_TRUE(add->view);  // attn.add_(mask): in place
  // Half inputs are computed in fp32: probs [B, H, S, S] fp32.
  const ExecOp* soft = Find(s, "Softmax");
  ASSERT_NE(soft, nullptr);
  EXPECT_EQ(s.vals[soft->out[0]].dtype, DType::kFloat);
}

// RMSNorm written as ops: x^2 -> mean -> + eps -> sqrt -> 1/ -> x * . -> w * .;
// the Pow's line (its stack trace's innermost frame) upcasts inline or not.
GraphBuilder RmsNorm(bool pow_upcasts_inline) {
  GraphBuilder b;
  Projected(&b, "x", {kB, kS, kD});
  b.Init("norm_w", {kD});
  Constant(&b, "two", 2.0);
  Constant(&b, "eps", 1e-6);
  b.Ints("last", {-1});
  Node& pow = b.Op("Pow", {"x", "two"}, {"sq"}, "pow");
  {
    SourceFrame f;
    f.file = "modeling.py";
    f.line = 65;
    f.function = "forward";
    f.statement.kind = PyStatement::Kind::kAssign;
    f.statement.targets = {{"variance"}};
    f.statement.upcasts_inline = pow_upcasts_inline;
    b.g.frames.push_back(f);
    b.g.stacks.push_back({static_cast<int>(b.g.frames.size()) - 1});
    pow.stack = static_cast<int>(b.g.stacks.size()) - 1;
  }
  b.Op("ReduceMean", {"sq", "last"}, {"ms"}, "mean").attrs["keepdims"] = IntAttr(1);
  b.Op("Add", {"ms", "eps"}, {"mse"}, "add_eps");
  b.Op("Sqrt", {"mse"}, {"rms"}, "sqrt");
  b.Op("Reciprocal", {"rms"}, {"inv"}, "rsqrt");
  b.Op("Mul", {"x", "inv"}, {"normed"}, "normalise");
  b.Op("Mul", {"norm_w", "normed"}, {"y"}, "weight");
  b.Output("y");
  return b;
}

const ExecOp* Labelled(const Schedule& s, const std::string& label) {
  for (const ExecOp& op : s.ops) {
    if (op.label == label) return &op;
  }
  return nullptr;
}

// RMSNorm in a bf16 model computes its mean square from an fp32 copy (HF:
// hidden_states.to(torch.float32)) and casts back before the weight.
TEST(SdpaSchedule, RmsNormInBf16UpcastsToFp32) {
  GraphBuilder b = RmsNorm(false);  // variance = hidden_states.pow(2).mean(...)
  Status st = InferShapes(&b.g, ShapeBindings(), nullptr);
  ASSERT_TRUE(st.ok()) << st.message();
  const Schedule s = Build(b, Precision::kBf16);
  const ExecOp* pow = Labelled(s, "pow");
  const ExecOp* weight = Labelled(s, "weight");
  ASSERT_NE(pow, nullptr);
  ASSERT_NE(weight, nullptr);
  // Pow reads (and keeps) an fp32 copy of x: B*S*D*4 bytes.
  EXPECT_EQ(s.vals[pow->in[0]].dtype, DType::kFloat);
  EXPECT_EQ(s.vals[pow->in[0]].bytes, kB * kS * kD * 4);
  // x * rsqrt reads that same copy (LlamaRMSNorm's hidden_states), so the
  // bf16 x is not kept beside it; one cast in all before the weight's.
  const ExecOp* normalise = Labelled(s, "normalise");
  ASSERT_NE(normalise, nullptr);
  EXPECT_EQ(normalise->in[0], pow->in[0]);
  EXPECT_EQ(Count(s, "Cast"), 2);
  // The weight multiplies a bf16 tensor again.
  for (int x : weight->in) EXPECT_EQ(s.vals[x].dtype, DType::kBFloat16);
  // In fp32 nothing is copied.
  const Schedule f = Build(b, Precision::kFp32);
  EXPECT_EQ(Count(f, "Cast"), 0);
}

// T5LayerNorm upcasts inline for the square alone
// (`hidden_states.to(torch.float32).pow(2)`): x * rsqrt reads the bf16 x,
// which it keeps for backward, and its product is fp32 by type promotion,
// cast to bf16 before the weight.
TEST(SdpaSchedule, RmsNormUpcastInlineKeepsTheHalfInput) {
  GraphBuilder b = RmsNorm(true);
  Status st = InferShapes(&b.g, ShapeBindings(), nullptr);
  ASSERT_TRUE(st.ok()) << st.message();
  const Schedule s = Build(b, Precision::kBf16);
  const ExecOp* pow = Labelled(s, "pow");
  const ExecOp* normalise = Labelled(s, "normalise");
  const ExecOp* weight = Labelled(s, "weight");
  ASSERT_NE(pow, nullptr);
  ASSERT_NE(normalise, nullptr);
  ASSERT_NE(weight, nullptr);
  EXPECT_EQ(s.vals[pow->in[0]].dtype, DType::kFloat);
  EXPECT_EQ(normalise->in[0], b.g.Find("x"));
  EXPECT_EQ(s.vals[normalise->in[0]].dtype, DType::kBFloat16);
  EXPECT_EQ(s.vals[normalise->out[0]].dtype, DType::kFloat);
  for (int x : weight->in) EXPECT_EQ(s.vals[x].dtype, DType::kBFloat16);
  EXPECT_EQ(Count(s, "Cast"), 2);
}

}  // namespace
}  // namespace memplan
