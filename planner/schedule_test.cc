// Tests of the forward schedule: strides and views, autocast casts and the
// weight cache, linear-with-bias as one addmm, and reshape copies.
#include "planner/schedule.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "planner/ops/test_graph.h"
#include "planner/reduce_kernel.h"
#include "planner/shape_inference.h"

namespace memplan {
namespace {

using testing_util::D;
using testing_util::GraphBuilder;
using testing_util::IntsAttr;
using testing_util::S;
using testing_util::TensorAttr;
using Shape = std::vector<int64_t>;

// ---------------------------------------------------------------- strides

TEST(ScheduleStrides, ContiguousStridesAreRowMajor) {
  EXPECT_EQ(ContiguousStrides({2, 3, 4}), (Shape{12, 4, 1}));
  EXPECT_EQ(ContiguousStrides({5}), (Shape{1}));
  EXPECT_EQ(ContiguousStrides({}), (Shape{}));
}

TEST(ScheduleStrides, IsContiguous) {
  EXPECT_TRUE(IsContiguous({2, 3}, {3, 1}));
  // The transpose of a [3, 2] tensor.
  EXPECT_FALSE(IsContiguous({2, 3}, {1, 2}));
  // Size-1 dims may carry any stride.
  EXPECT_TRUE(IsContiguous({1, 3}, {100, 1}));
  EXPECT_TRUE(IsContiguous({2, 1, 3}, {3, 999, 1}));
  // A broadcast (stride 0) is not.
  EXPECT_FALSE(IsContiguous({4, 3}, {0, 1}));
  // A slice of every other row is not.
  EXPECT_FALSE(IsContiguous({2, 3}, {6, 1}));
}

// c10's _compute_contiguous returns true for numel == 0 before looking at
// strides; IsContiguous only notices the 0 once the dims after it matched.
TEST(ScheduleStrides, EmptyTensorIsContiguousWhateverItsStrides) {
  EXPECT_TRUE(IsContiguous({3, 0}, {7, 7}));
  EXPECT_TRUE(IsContiguous({0, 3}, {7, 7}));
  EXPECT_TRUE(IsContiguous({2, 0, 3}, {1, 1, 5}));
}

TEST(ScheduleStrides, MergeAndSplitOfContiguousDimsAreViews) {
  std::vector<int64_t> out;
  ASSERT_TRUE(ViewStrides({2, 3, 4}, {12, 4, 1}, {6, 4}, &out));
  EXPECT_EQ(out, (Shape{4, 1}));
  ASSERT_TRUE(ViewStrides({2, 3, 4}, {12, 4, 1}, {2, 12}, &out));
  EXPECT_EQ(out, (Shape{12, 1}));
  ASSERT_TRUE(ViewStrides({2, 3, 4}, {12, 4, 1}, {24}, &out));
  EXPECT_EQ(out, (Shape{1}));
  ASSERT_TRUE(ViewStrides({2, 3, 4}, {12, 4, 1}, {2, 3, 2, 2}, &out));
  EXPECT_EQ(out, (Shape{12, 4, 2, 1}));
  ASSERT_TRUE(ViewStrides({6, 4}, {4, 1}, {2, 3, 4}, &out));
  EXPECT_EQ(out, (Shape{12, 4, 1}));
}

TEST(ScheduleStrides, TransposeThenMergeNeedsACopy) {
  std::vector<int64_t> out;
  // [2, 3, 4] transposed to [2, 4, 3]: strides {12, 1, 4}.
  EXPECT_FALSE(ViewStrides({2, 4, 3}, {12, 1, 4}, {2, 12}, &out));
  EXPECT_FALSE(ViewStrides({2, 4, 3}, {12, 1, 4}, {8, 3}, &out));
  EXPECT_FALSE(ViewStrides({2, 4, 3}, {12, 1, 4}, {24}, &out));
  // A 2-D transpose flattened.
  EXPECT_FALSE(ViewStrides({3, 2}, {1, 3}, {6}, &out));
}

TEST(ScheduleStrides, SplitOfATransposedDimIsAView) {
  std::vector<int64_t> out;
  // [3, 4] transposed to [4, 3] (strides {1, 4}); splitting dim 0 keeps the
  // layout: [2, 2, 3] with strides {2, 1, 4}.
  ASSERT_TRUE(ViewStrides({4, 3}, {1, 4}, {2, 2, 3}, &out));
  EXPECT_EQ(out, (Shape{2, 1, 4}));
  // Merging the leading batch dim of a head transpose is still fine when the
  // merged dims stay contiguous among themselves: [2, 4, 3] strides
  // {12, 1, 4} -> [2, 4, 3, 1].
  ASSERT_TRUE(ViewStrides({2, 4, 3}, {12, 1, 4}, {2, 4, 3, 1}, &out));
  EXPECT_EQ(out[0], 12);
  EXPECT_EQ(out[1], 1);
  EXPECT_EQ(out[2], 4);
}

TEST(ScheduleStrides, SizeOneDimsAreIgnored) {
  std::vector<int64_t> out;
  // The stride of a size-1 dim does not matter.
  ASSERT_TRUE(ViewStrides({1, 5}, {999, 1}, {5}, &out));
  EXPECT_EQ(out, (Shape{1}));
  ASSERT_TRUE(ViewStrides({5}, {1}, {1, 5, 1}, &out));
  EXPECT_EQ(out[1], 1);
  // Unsqueeze of a transposed tensor is a view.
  ASSERT_TRUE(ViewStrides({3, 2}, {1, 3}, {1, 3, 2}, &out));
  EXPECT_EQ(out[1], 1);
  EXPECT_EQ(out[2], 3);
  // Squeeze too.
  ASSERT_TRUE(ViewStrides({3, 1, 2}, {1, 42, 3}, {3, 2}, &out));
  EXPECT_EQ(out, (Shape{1, 3}));
}

TEST(ScheduleStrides, EmptyTensorsAlwaysView) {
  std::vector<int64_t> out;
  ASSERT_TRUE(ViewStrides({0, 3}, {1, 0}, {3, 0}, &out));
  EXPECT_EQ(out.size(), 2u);
  ASSERT_TRUE(ViewStrides({2, 0, 4}, {1, 8, 2}, {0}, &out));
  EXPECT_EQ(out.size(), 1u);
}

TEST(ScheduleStrides, NumelMismatchIsNotAView) {
  std::vector<int64_t> out;
  EXPECT_FALSE(ViewStrides({2, 3}, {3, 1}, {7}, &out));
  EXPECT_FALSE(ViewStrides({2, 3}, {3, 1}, {2, 3, 2}, &out));
}

// ---------------------------------------------------------------- schedules

Result<Schedule> Build(GraphBuilder* b, int64_t batch, Precision p, Mode m = Mode::kTrain) {
  ShapeBindings bind;
  bind.batch = batch;
  Status s = InferShapes(&b->g, bind, nullptr);
  if (!s.ok()) return s;
  PlanOptions o;
  o.mode = m;
  o.precision = p;
  return BuildSchedule(b->g, o);
}

std::vector<const ExecOp*> OpsOfType(const Schedule& s, const std::string& type) {
  std::vector<const ExecOp*> out;
  for (const ExecOp& op : s.ops) {
    if (op.op_type == type) out.push_back(&op);
  }
  return out;
}

const ExecOp* OpOfNode(const Schedule& s, const Graph& g, const std::string& node_name) {
  for (const ExecOp& op : s.ops) {
    if (op.node >= 0 && g.nodes[op.node].name == node_name) return &op;
  }
  return nullptr;
}

// x [N, 8]; a = x @ W; b = x @ W; y = a + b.
GraphBuilder SharedWeightGraph() {
  GraphBuilder b;
  b.Input("x", {S("N"), D(8)});
  b.Init("W", {8, 8});
  b.Op("MatMul", {"x", "W"}, {"a"}, "mm_a");
  b.Op("MatMul", {"x", "W"}, {"b"}, "mm_b");
  b.Op("Add", {"a", "b"}, {"y"}, "add");
  b.Output("y");
  return b;
}

TEST(Schedule, AmpCastsAWeightOnceAndActivationsPerUse) {
  GraphBuilder b = SharedWeightGraph();
  auto s = Build(&b, 4, Precision::kAmpBf16);
  ASSERT_TRUE(s.ok()) << s.message();
  const int x = b.g.Find("x");
  const int w = b.g.Find("W");
  int weight_casts = 0;
  int x_casts = 0;
  for (const ExecOp* op : OpsOfType(s.value(), "Cast")) {
    ASSERT_EQ(op->in.size(), 1u);
    ASSERT_EQ(op->out.size(), 1u);
    const Val& out = s->vals[op->out[0]];
    EXPECT_EQ(out.dtype, DType::kBFloat16) << op->label;
    if (op->in[0] == w) {
      ++weight_casts;
      EXPECT_TRUE(op->hold_to_forward_end) << "the weight cache lives to the end of forward";
      EXPECT_EQ(out.bytes, 8 * 8 * 2);
      EXPECT_FALSE(out.is_param);
    } else if (op->in[0] == x) {
      ++x_casts;
      EXPECT_FALSE(op->hold_to_forward_end) << "activations are not cached";
      EXPECT_EQ(out.bytes, 4 * 8 * 2);
    }
  }
  EXPECT_EQ(weight_casts, 1);
  EXPECT_EQ(x_casts, 2);
  // Both products read the one cached copy and run in bf16.
  const ExecOp* mm_a = OpOfNode(s.value(), b.g, "mm_a");
  const ExecOp* mm_b = OpOfNode(s.value(), b.g, "mm_b");
  ASSERT_TRUE(mm_a && mm_b);
  EXPECT_EQ(mm_a->in[1], mm_b->in[1]);
  EXPECT_NE(mm_a->in[0], mm_b->in[0]);
  EXPECT_EQ(s->vals[b.g.Find("a")].dtype, DType::kBFloat16);
  EXPECT_EQ(s->vals[b.g.Find("y")].dtype, DType::kBFloat16);
  EXPECT_TRUE(mm_a->uses_cublas);
}

TEST(Schedule, Fp32HasNoCasts) {
  GraphBuilder b = SharedWeightGraph();
  auto s = Build(&b, 4, Precision::kFp32);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(OpsOfType(s.value(), "Cast").empty());
  EXPECT_EQ(s->vals[b.g.Find("a")].dtype, DType::kFloat);
  EXPECT_EQ(s->vals[b.g.Find("a")].bytes, 4 * 8 * 4);
}

TEST(Schedule, WholeModelCastHalvesEveryFloat) {
  GraphBuilder b = SharedWeightGraph();
  auto s = Build(&b, 4, Precision::kBf16);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(OpsOfType(s.value(), "Cast").empty());
  EXPECT_EQ(s->vals[b.g.Find("W")].dtype, DType::kBFloat16);
  EXPECT_EQ(s->vals[b.g.Find("W")].bytes, 8 * 8 * 2);
  EXPECT_EQ(s->vals[b.g.Find("y")].bytes, 4 * 8 * 2);
}

// x [N, 8]; m = x @ W [8, 4]; y = m + bias [4] (or bias + m).
GraphBuilder LinearBiasGraph(bool bias_first) {
  GraphBuilder b;
  b.Input("x", {S("N"), D(8)});
  b.Init("W", {8, 4});
  b.Init("bias", {4});
  b.Op("MatMul", {"x", "W"}, {"m"}, "mm");
  if (bias_first) {
    b.Op("Add", {"bias", "m"}, {"y"}, "add");
  } else {
    b.Op("Add", {"m", "bias"}, {"y"}, "add");
  }
  b.Op("Relu", {"y"}, {"z"}, "relu");
  b.Output("z");
  return b;
}

TEST(Schedule, MatMulPlusBiasIsOneAddmmInTheProductsDtype) {
  for (bool bias_first : {false, true}) {
    SCOPED_TRACE(bias_first ? "bias + m" : "m + bias");
    GraphBuilder b = LinearBiasGraph(bias_first);
    auto s = Build(&b, 4, Precision::kAmpBf16);
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_TRUE(OpsOfType(s.value(), "Add").empty());
    auto adds = OpsOfType(s.value(), "BiasAdd");
    ASSERT_EQ(adds.size(), 1u);
    const ExecOp& op = *adds[0];
    const int m = b.g.Find("m");
    const int y = b.g.Find("y");
    EXPECT_TRUE(op.view) << "the bias joins the product in place";
    EXPECT_EQ(op.grad_kind, GradKind::kBiasAdd);
    ASSERT_EQ(op.in.size(), 2u);
    EXPECT_EQ(op.in[0], m) << "input 0 is the product whichever side it was on";
    EXPECT_EQ(op.in[1], b.g.Find("bias"));
    ASSERT_EQ(op.out, (std::vector<int>{y}));
    EXPECT_EQ(s->vals[y].base, m);
    EXPECT_EQ(s->vals[y].bytes, 0);
    // bf16 like the product, not promoted to fp32 by the fp32 bias.
    EXPECT_EQ(s->vals[m].dtype, DType::kBFloat16);
    EXPECT_EQ(s->vals[y].dtype, DType::kBFloat16);
    EXPECT_EQ(s->vals[b.g.Find("z")].dtype, DType::kBFloat16);
    // In training both get gradients: the product a view, the bias a new one.
    EXPECT_EQ(op.grad_in, (std::vector<bool>{true, true}));
  }
}

// Reshapes and transposes hand back a view of the gradient (PyTorch's
// ViewBackward, TBackward); Identity is an export artifact with no view.
TEST(Schedule, ReshapeAndTransposeHandBackAViewOfTheGradient) {
  GraphBuilder b;
  b.Input("x", {S("N"), D(4), D(6)});
  b.Ints("shape", {-1, 24});
  b.Op("Transpose", {"x"}, {"t"}, "t").attrs["perm"] = IntsAttr({0, 2, 1});
  b.Op("Identity", {"x"}, {"i"}, "i");
  b.Op("Reshape", {"i", "shape"}, {"r"}, "r");
  b.Output("t");
  b.Output("r");
  auto s = Build(&b, 2, Precision::kFp32);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(OpsOfType(s.value(), "Transpose").at(0)->grad_is_view);
  EXPECT_TRUE(OpsOfType(s.value(), "Reshape").at(0)->grad_is_view);
  EXPECT_FALSE(OpsOfType(s.value(), "Identity").at(0)->grad_is_view);
}

// transformers' Conv1D exports as Gemm(x, W, bias): its bias gradient is a
// column sum over the rows, through the reduction's staging buffer when the
// rows are many (the op log of gpt2 at batch 11: 33, 99 and 132 MiB).
TEST(Schedule, GemmBiasGradientIsAColumnSumWithItsStagingBuffer) {
  GraphBuilder b;
  b.Input("x", {S("N"), D(768)});
  b.Init("W", {768, 3072});
  b.Init("bias", {3072});
  b.Init("bias2d", {1, 3072});
  b.Op("Gemm", {"x", "W", "bias"}, {"y"}, "fc");
  b.Op("Gemm", {"x", "W", "bias2d"}, {"y2"}, "fc2");
  b.Op("Gemm", {"x", "W"}, {"y3"}, "nobias");
  b.Op("Add", {"y", "y2"}, {"s"}, "add");
  b.Op("Add", {"s", "y3"}, {"z"}, "add2");
  b.Output("z");
  auto s = Build(&b, 5632, Precision::kAmpBf16);
  ASSERT_TRUE(s.ok()) << s.message();
  const int64_t staging = ColumnSumStagingBytes(5632, 3072, 2, 4);
  EXPECT_EQ(staging, 132LL << 20);
  auto gemms = OpsOfType(s.value(), "Gemm");
  ASSERT_EQ(gemms.size(), 3u);
  EXPECT_EQ(gemms[0]->bias_sum_staging_bytes, staging) << "a [N] bias";
  EXPECT_EQ(gemms[1]->bias_sum_staging_bytes, staging) << "a [1, N] bias";
  EXPECT_EQ(gemms[2]->bias_sum_staging_bytes, 0) << "no bias";
  // Few rows: one block reduces each column, no staging.
  auto few = Build(&b, 64, Precision::kAmpBf16);
  ASSERT_TRUE(few.ok()) << few.message();
  EXPECT_EQ(OpsOfType(few.value(), "Gemm")[0]->bias_sum_staging_bytes, 0);
  // Inference: no gradient, no sum.
  auto infer = Build(&b, 5632, Precision::kAmpBf16, Mode::kInference);
  ASSERT_TRUE(infer.ok()) << infer.message();
  EXPECT_EQ(OpsOfType(infer.value(), "Gemm")[0]->bias_sum_staging_bytes, 0);
}

TEST(Schedule, BiasAddNeedsASoleConsumerAndAVectorParameter) {
  // The product is also read elsewhere: a plain Add.
  {
    GraphBuilder b = LinearBiasGraph(false);
    b.Op("Relu", {"m"}, {"m2"}, "other_use");
    b.Output("m2");
    auto s = Build(&b, 4, Precision::kFp32);
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_TRUE(OpsOfType(s.value(), "BiasAdd").empty());
    EXPECT_EQ(OpsOfType(s.value(), "Add").size(), 1u);
  }
  // A [1, 4] addend broadcasts like a bias but is no 1-D bias: a plain Add.
  {
    GraphBuilder b;
    b.Input("x", {S("N"), D(8)});
    b.Init("W", {8, 4});
    b.Init("bias2d", {1, 4});
    b.Op("MatMul", {"x", "W"}, {"m"}, "mm");
    b.Op("Add", {"m", "bias2d"}, {"y"}, "add");
    b.Output("y");
    auto s = Build(&b, 4, Precision::kFp32);
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_TRUE(OpsOfType(s.value(), "BiasAdd").empty());
    EXPECT_EQ(OpsOfType(s.value(), "Add").size(), 1u);
  }
}

// x [N, 3, 4]; t = transpose(x, 0 2 1); r = reshape(t, [N, 12]);
// c = reshape(x, [N, 12]).
TEST(Schedule, ReshapeOfATransposeCopiesReshapeOfContiguousViews) {
  GraphBuilder b;
  b.Input("x", {S("N"), D(3), D(4)});
  b.Ints("shape", {-1, 12});
  b.Op("Transpose", {"x"}, {"t"}, "tr").attrs["perm"] = IntsAttr({0, 2, 1});
  b.Op("Reshape", {"t", "shape"}, {"r"}, "reshape_t");
  b.Op("Reshape", {"x", "shape"}, {"c"}, "reshape_x");
  b.Op("Add", {"r", "c"}, {"y"}, "add");
  b.Output("y");
  auto s = Build(&b, 2, Precision::kFp32, Mode::kInference);
  ASSERT_TRUE(s.ok()) << s.message();
  const ExecOp* tr = OpOfNode(s.value(), b.g, "tr");
  const ExecOp* rt = OpOfNode(s.value(), b.g, "reshape_t");
  const ExecOp* rx = OpOfNode(s.value(), b.g, "reshape_x");
  ASSERT_TRUE(tr && rt && rx);
  const int x = b.g.Find("x");
  const int t = b.g.Find("t");
  const int r = b.g.Find("r");
  const int c = b.g.Find("c");
  // The transpose is a view with permuted strides.
  EXPECT_TRUE(tr->view);
  EXPECT_EQ(s->vals[t].base, x);
  EXPECT_EQ(s->vals[t].strides, (Shape{12, 1, 4}));
  // Its reshape copies into a new contiguous tensor.
  EXPECT_EQ(rt->op_type, "Reshape(copy)");
  EXPECT_FALSE(rt->view);
  EXPECT_EQ(s->vals[r].base, -1);
  EXPECT_EQ(s->vals[r].bytes, 2 * 12 * 4);
  EXPECT_EQ(s->vals[r].strides, (Shape{12, 1}));
  // The contiguous one is a view of x.
  EXPECT_EQ(rx->op_type, "Reshape");
  EXPECT_TRUE(rx->view);
  EXPECT_EQ(s->vals[c].base, x);
  EXPECT_EQ(s->vals[c].strides, (Shape{12, 1}));
}

// A [out, in] weight used through Transpose (how exporters write
// nn.Linear) by two products: one cached bf16 copy of the stored weight, and
// the transpose re-applied to it as a view.
TEST(Schedule, AmpCachesATransposedWeightOnce) {
  GraphBuilder b;
  b.Input("x", {S("N"), D(8)});
  b.Init("W", {4, 8});
  b.Op("Transpose", {"W"}, {"Wt1"}, "t1").attrs["perm"] = IntsAttr({1, 0});
  b.Op("Transpose", {"W"}, {"Wt2"}, "t2").attrs["perm"] = IntsAttr({1, 0});
  b.Op("MatMul", {"x", "Wt1"}, {"a"}, "mm_a");
  b.Op("MatMul", {"x", "Wt2"}, {"b"}, "mm_b");
  b.Op("Add", {"a", "b"}, {"y"}, "add");
  b.Output("y");
  auto s = Build(&b, 4, Precision::kAmpBf16);
  ASSERT_TRUE(s.ok()) << s.message();
  const int w = b.g.Find("W");
  int weight_casts = 0;
  int cache = -1;
  for (const ExecOp* op : OpsOfType(s.value(), "Cast")) {
    if (op->in[0] == w) {
      ++weight_casts;
      cache = op->out[0];
      EXPECT_TRUE(op->hold_to_forward_end);
    }
  }
  ASSERT_EQ(weight_casts, 1);
  EXPECT_EQ(s->vals[cache].bytes, 4 * 8 * 2);
  for (const char* mm : {"mm_a", "mm_b"}) {
    const ExecOp* op = OpOfNode(s.value(), b.g, mm);
    ASSERT_TRUE(op);
    const Val& wv = s->vals[op->in[1]];
    EXPECT_EQ(wv.dtype, DType::kBFloat16) << mm;
    EXPECT_EQ(wv.base, cache) << mm << ": a view of the cached copy";
    EXPECT_EQ(wv.shape, (Shape{8, 4}));
    EXPECT_EQ(wv.strides, (Shape{1, 8}));
  }
}

// at::matmul folds an N-d operand against a 2-D weight with reshape, which
// copies a non-viewable (transposed) input; a 2-D transposed operand goes to
// cuBLAS as is.
TEST(Schedule, MatMulCopiesOnlyUnfoldableOperands) {
  GraphBuilder b;
  b.Input("x", {S("N"), D(3), D(4)});
  b.Init("W", {3, 5});
  b.Op("Transpose", {"x"}, {"xt"}, "xt").attrs["perm"] = IntsAttr({0, 2, 1});
  b.Op("MatMul", {"xt", "W"}, {"y"}, "mm3d");
  b.Input("z", {S("M"), D(6)});
  b.Init("V", {2, 7});
  b.Op("Transpose", {"z"}, {"zt"}, "zt").attrs["perm"] = IntsAttr({1, 0});
  b.Op("MatMul", {"zt", "V"}, {"u"}, "mm2d");
  b.Output("y");
  b.Output("u");
  ShapeBindings bind;
  bind.batch = 2;
  bind.dims["M"] = 2;
  ASSERT_TRUE(InferShapes(&b.g, bind, nullptr).ok());
  PlanOptions o;
  o.mode = Mode::kTrain;
  auto s = BuildSchedule(b.g, o);
  ASSERT_TRUE(s.ok()) << s.message();
  auto copies = OpsOfType(s.value(), "Contiguous");
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0]->in, (std::vector<int>{b.g.Find("xt")}));
  EXPECT_EQ(s->vals[copies[0]->out[0]].bytes, 2 * 4 * 3 * 4);
  EXPECT_EQ(OpOfNode(s.value(), b.g, "mm3d")->in[0], copies[0]->out[0]);
  EXPECT_EQ(OpOfNode(s.value(), b.g, "mm2d")->in[0], b.g.Find("zt"));
}

TEST(Schedule, SoftmaxOfATransposeReadsAContiguousCopy) {
  GraphBuilder b;
  b.Input("x", {S("N"), D(3), D(4)});
  b.Op("Transpose", {"x"}, {"xt"}, "xt").attrs["perm"] = IntsAttr({0, 2, 1});
  b.Op("Softmax", {"xt"}, {"p"}, "softmax").attrs["axis"] = testing_util::IntAttr(-1);
  b.Op("Softmax", {"x"}, {"q"}, "softmax_x").attrs["axis"] = testing_util::IntAttr(-1);
  b.Output("p");
  b.Output("q");
  auto s = Build(&b, 2, Precision::kFp32, Mode::kInference);
  ASSERT_TRUE(s.ok()) << s.message();
  auto copies = OpsOfType(s.value(), "Contiguous");
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0]->in, (std::vector<int>{b.g.Find("xt")}));
  EXPECT_EQ(OpOfNode(s.value(), b.g, "softmax")->in[0], copies[0]->out[0]);
  EXPECT_EQ(OpOfNode(s.value(), b.g, "softmax_x")->in[0], b.g.Find("x"));
}

// x[::2] keeps x's row stride doubled: the slice is a view, but not a
// contiguous one, so flattening it copies (PyTorch: x[::2].reshape(-1)
// copies; x[:2].reshape(-1) does not).
TEST(Schedule, StridedSliceIsANonContiguousView) {
  GraphBuilder b;
  b.Input("x", {S("N"), D(4)});
  b.Ints("starts", {0});
  b.Ints("ends", {1000});
  b.Ints("axes", {0});
  b.Ints("steps", {2});
  b.Ints("one", {1});
  b.Ints("flat", {-1});
  b.Op("Slice", {"x", "starts", "ends", "axes", "steps"}, {"even"}, "even_rows");
  b.Op("Reshape", {"even", "flat"}, {"even_flat"}, "flatten_even");
  b.Op("Slice", {"x", "starts", "ends", "axes", "one"}, {"all"}, "all_rows");
  b.Op("Reshape", {"all", "flat"}, {"all_flat"}, "flatten_all");
  b.Output("even_flat");
  b.Output("all_flat");
  auto s = Build(&b, 4, Precision::kFp32, Mode::kInference);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_EQ(b.T("even").shape, (Shape{2, 4}));
  const ExecOp* even = OpOfNode(s.value(), b.g, "even_rows");
  ASSERT_TRUE(even);
  EXPECT_TRUE(even->view);
  EXPECT_EQ(s->vals[b.g.Find("all")].strides, (Shape{4, 1}));
  EXPECT_EQ(OpOfNode(s.value(), b.g, "flatten_all")->op_type, "Reshape");
  EXPECT_EQ(s->vals[b.g.Find("even")].strides, (Shape{8, 1}));
  const ExecOp* flat = OpOfNode(s.value(), b.g, "flatten_even");
  EXPECT_EQ(flat->op_type, "Reshape(copy)");
  EXPECT_EQ(s->vals[b.g.Find("even_flat")].bytes, 8 * 4);
}

// native_layer_norm and convolution make a transposed input contiguous
// inside the op autograd records: the copy is a temporary of the call (and
// of its backward, which copies again); autograd saves the transpose itself.
// group_norm copies before native_group_norm, which saves that copy.
TEST(Schedule, KernelsThatCopyTheirInputInsideSaveItAsGiven) {
  GraphBuilder b;
  b.Input("x", {S("N"), D(6), D(8)});
  b.Init("gamma", {6});
  b.Init("beta", {6});
  b.Init("w", {4, 8, 3});
  b.Init("gs", {8});
  b.Init("gb", {8});
  b.Op("Relu", {"x"}, {"r"}, "relu");
  b.Op("Transpose", {"r"}, {"rt"}, "rt").attrs["perm"] = IntsAttr({0, 2, 1});  // [N, 8, 6]
  b.Op("LayerNormalization", {"rt", "gamma", "beta"}, {"ln"}, "ln").attrs["axis"] =
      testing_util::IntAttr(-1);
  b.Op("Conv", {"rt", "w"}, {"c"}, "conv");  // [N, 8, 4]
  b.Op("Transpose", {"r"}, {"rt2"}, "rt2").attrs["perm"] = IntsAttr({0, 2, 1});
  b.Op("GroupNormalization", {"rt2", "gs", "gb"}, {"gn"}, "gn").attrs["num_groups"] =
      testing_util::IntAttr(2);
  b.Output("ln");
  b.Output("c");
  b.Output("gn");
  auto s = Build(&b, 2, Precision::kFp32);
  ASSERT_TRUE(s.ok()) << s.message();
  const int rt = b.g.Find("rt");
  const int64_t copy = 2 * 8 * 6 * 4;
  for (const char* name : {"ln", "conv"}) {
    const ExecOp* op = OpOfNode(s.value(), b.g, name);
    ASSERT_TRUE(op) << name;
    EXPECT_EQ(op->in[0], rt) << name;
    EXPECT_EQ(op->fwd_temp_bytes, copy) << name;
    EXPECT_EQ(op->bwd_input_copy_bytes, copy) << name;
    bool saves_rt = false;
    for (const SavedRef& r : op->saved) saves_rt = saves_rt || r.val == rt;
    EXPECT_TRUE(saves_rt) << name;
  }
  auto copies = OpsOfType(s.value(), "Contiguous");
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0]->in, (std::vector<int>{b.g.Find("rt2")}));
  const ExecOp* gn = OpOfNode(s.value(), b.g, "gn");
  EXPECT_EQ(gn->in[0], copies[0]->out[0]);
  EXPECT_EQ(gn->fwd_temp_bytes, 0);
}

// DeepLab's ASPP branch in fp32 (dilation 12 or more, 1024 input channels
// or more, 32x32 outputs or more): the weight gradient takes one float32
// partial weight gradient per 128 output positions on top of the x, w and y
// copies (bench/results/cudnn_dilated_ws_h200.jsonl: 36 of 36). A dilation of
// 4, or 16 bits, keeps the general rule.
TEST(Schedule, AtrousFp32WeightGradientTakesPartialsPer128Positions) {
  for (int64_t dilation : {4, 12}) {
    for (Precision p : {Precision::kFp32, Precision::kBf16}) {
      GraphBuilder b;
      b.Input("x", {S("N"), D(1024), D(32), D(32)});
      b.Init("w", {256, 1024, 3, 3});
      Node& c = b.Op("Conv", {"x", "w"}, {"y"}, "aspp");
      c.attrs["dilations"] = IntsAttr({dilation, dilation});
      c.attrs["pads"] = IntsAttr({dilation, dilation, dilation, dilation});
      b.Output("y");
      auto s = Build(&b, 2, p);
      ASSERT_TRUE(s.ok()) << s.message();
      const ExecOp* op = OpOfNode(s.value(), b.g, "aspp");
      ASSERT_TRUE(op);
      const int64_t elem = p == Precision::kFp32 ? 4 : 2;
      const int64_t x = 2 * 1024 * 32 * 32 * elem;
      const int64_t y = 2 * 256 * 32 * 32 * elem;
      const int64_t w = 256 * 1024 * 9 * elem;
      const int64_t want =
          p == Precision::kFp32 && dilation == 12 ? x + y + w + 8 * w : x + y + w + (4 << 20);
      EXPECT_EQ(op->bwd_weight_workspace, want) << dilation << " " << elem;
    }
  }
}

// TensorIterator ops keep the layout of their full-size operands (broadcast
// operands vote on nothing): a GELU decomposed into Div, Erf, Add and Mul
// over a transposed view stays transposed, so the 1-D convolution after it
// copies its input inside the call.
TEST(Schedule, ElementwiseOpsKeepASharedTransposedLayout) {
  GraphBuilder b;
  b.Input("x", {S("N"), D(6), D(8)});
  b.Init("w", {4, 8, 3});
  b.Init("two", {});
  b.Init("bias", {6});
  b.Op("Relu", {"x"}, {"r"}, "relu");
  b.Op("Transpose", {"r"}, {"rt"}, "rt").attrs["perm"] = IntsAttr({0, 2, 1});  // [N, 8, 6]
  b.Op("Div", {"rt", "two"}, {"half"}, "div");
  b.Op("Erf", {"half"}, {"erf"}, "erf");
  b.Op("Add", {"erf", "bias"}, {"shifted"}, "add_bias");  // bias broadcast over [N, 8, 6]
  b.Op("Mul", {"rt", "shifted"}, {"gelu"}, "mul");
  b.Op("Conv", {"gelu", "w"}, {"c"}, "conv");  // [N, 4, 4]
  b.Op("Transpose", {"x"}, {"xt"}, "xt").attrs["perm"] = IntsAttr({0, 2, 1});
  b.Op("Relu", {"xt"}, {"relu_t"}, "relu_t");  // a transposed single operand
  b.Op("Add", {"r", "r"}, {"rr"}, "rr");       // contiguous
  b.Op("Transpose", {"rr"}, {"rrt"}, "rrt").attrs["perm"] = IntsAttr({0, 2, 1});
  b.Op("Add", {"gelu", "rrt"}, {"mixed_same"}, "mixed_same");  // both transposed
  b.Output("c");
  b.Output("relu_t");
  b.Output("mixed_same");
  auto s = Build(&b, 2, Precision::kFp32);
  ASSERT_TRUE(s.ok()) << s.message();
  const Shape transposed = {48, 1, 8};  // [2, 8, 6] laid out as [2, 6, 8]
  for (const char* name : {"rt", "half", "erf", "shifted", "gelu", "relu_t", "mixed_same"}) {
    EXPECT_EQ(s->vals[b.g.Find(name)].strides, transposed) << name;
  }
  const ExecOp* conv = OpOfNode(s.value(), b.g, "conv");
  ASSERT_TRUE(conv);
  EXPECT_EQ(conv->fwd_temp_bytes, 2 * 8 * 6 * 4);
  EXPECT_EQ(conv->bwd_input_copy_bytes, 2 * 8 * 6 * 4);
}

// A contiguous tensor and a transposed one of the same shape: TensorIterator
// orders the dims by the first operand, so a residual add of a transposed
// stream and a contiguous branch (MLP-Mixer's channel MLP) stays transposed,
// and the LayerNorm after it copies its input inside the call.
TEST(Schedule, ElementwiseOpsOfMixedLayoutsFollowTheFirstOperand) {
  GraphBuilder b;
  b.Input("x", {S("N"), D(6), D(8)});
  b.Input("y", {S("N"), D(8), D(6)});
  b.Init("gamma", {6});
  b.Op("Relu", {"x"}, {"r"}, "relu");
  b.Op("Transpose", {"r"}, {"rt"}, "rt").attrs["perm"] = IntsAttr({0, 2, 1});  // [N, 8, 6]
  b.Op("Relu", {"y"}, {"branch"}, "branch");                                   // contiguous
  b.Op("Add", {"rt", "branch"}, {"transposed_first"}, "add_t");
  b.Op("Add", {"branch", "rt"}, {"contiguous_first"}, "add_c");
  b.Op("LayerNormalization", {"transposed_first", "gamma"}, {"ln"}, "ln").attrs["axis"] =
      testing_util::IntAttr(-1);
  b.Output("ln");
  b.Output("contiguous_first");
  auto s = Build(&b, 2, Precision::kFp32);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(s->vals[b.g.Find("transposed_first")].strides, (Shape{48, 1, 8}));
  EXPECT_EQ(s->vals[b.g.Find("contiguous_first")].strides, (Shape{48, 6, 1}));
  const ExecOp* ln = OpOfNode(s.value(), b.g, "ln");
  ASSERT_TRUE(ln);
  EXPECT_EQ(ln->fwd_temp_bytes, 2 * 8 * 6 * 4);
  EXPECT_TRUE(OpsOfType(s.value(), "Contiguous").empty());
}

// autocast's wrapper holds the casts it made until the op returns: where the
// op then copies the cast to make it contiguous, the cast lives to the end of
// the op, not to the copy (the H100 trace of lstm_lm_g amp_bf16: the head's
// bfloat16 copy of the LSTM's float16 output dies after the product).
TEST(Schedule, AnAutocastCastLivesUntilItsOpReturns) {
  GraphBuilder b;
  b.Input("x", {S("N"), D(6), D(8)});
  b.Init("w", {6, 4});
  b.Op("Relu", {"x"}, {"r"}, "relu");
  b.Op("Transpose", {"r"}, {"rt"}, "rt").attrs["perm"] = IntsAttr({0, 2, 1});  // [N, 8, 6]
  b.Op("MatMul", {"rt", "w"}, {"y"}, "mm");
  b.Output("y");
  auto s = Build(&b, 2, Precision::kAmpBf16);
  ASSERT_TRUE(s.ok()) << s.message();
  int mm = -1;
  for (size_t i = 0; i < s->ops.size(); ++i) {
    if (s->ops[i].node >= 0 && b.g.nodes[s->ops[i].node].name == "mm") mm = static_cast<int>(i);
  }
  ASSERT_GE(mm, 0);
  const ExecOp& op = s->ops[mm];
  ASSERT_FALSE(op.in.empty());
  // in[0] is the contiguous copy of the bfloat16 cast of rt.
  int cast = -1;
  for (const ExecOp& c : s->ops) {
    if (!c.out.empty() && c.out[0] == op.in[0] && !c.in.empty()) cast = c.in[0];
  }
  ASSERT_GE(cast, 0);
  EXPECT_EQ(s->vals[cast].dtype, DType::kBFloat16);
  EXPECT_EQ(s->vals[cast].held_until, mm);
}

// A permuted [N, H, W, C] tensor viewed as [N, C, H, W] is channels-last:
// convolutions run it as it is (no copy, outputs channels-last, no NHWC copy
// workspaces), and so does a Concat of channels-last tensors.
TEST(Schedule, ChannelsLastInputsRunAsTheyAre) {
  for (Precision p : {Precision::kFp32, Precision::kBf16}) {
    GraphBuilder b;
    b.Input("x", {S("N"), D(16), D(16), D(32)});
    b.Init("wd", {32, 1, 3, 3});
    b.Init("w1", {16, 32, 1, 1});
    b.Op("Relu", {"x"}, {"r"}, "relu");
    b.Op("Transpose", {"r"}, {"xt"}, "xt").attrs["perm"] = IntsAttr({0, 3, 1, 2});
    Node& dw = b.Op("Conv", {"xt", "wd"}, {"d"}, "dw");
    dw.attrs["group"] = testing_util::IntAttr(32);
    dw.attrs["pads"] = IntsAttr({1, 1, 1, 1});
    b.Op("Conv", {"d", "w1"}, {"c"}, "pw");  // [N, 16, 16, 16]
    b.Op("Concat", {"c", "d"}, {"cat"}, "cat").attrs["axis"] = testing_util::IntAttr(1);
    b.Output("cat");
    auto s = Build(&b, 2, p);
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_TRUE(OpsOfType(s.value(), "Contiguous").empty());
    for (const char* name : {"xt", "d", "c", "cat"}) {
      const Val& v = s->vals[b.g.Find(name)];
      EXPECT_TRUE(IsChannelsLast(v.shape, v.strides)) << name;
    }
    const ExecOp* dwop = OpOfNode(s.value(), b.g, "dw");
    const ExecOp* pwop = OpOfNode(s.value(), b.g, "pw");
    ASSERT_TRUE(dwop && pwop);
    for (const ExecOp* op : {dwop, pwop}) {
      EXPECT_EQ(op->fwd_temp_bytes, 0);
      EXPECT_EQ(op->bwd_input_copy_bytes, 0);
      EXPECT_EQ(op->fwd_workspace, 0);  // depthwise, and a 1x1 weight
      EXPECT_EQ(op->bwd_workspace, 0);
    }
    // 16-bit depthwise weight gradient: 8 fp32 partials per image (512
    // output positions); fp32 3x3: none. The dense one: split-K partials.
    EXPECT_EQ(dwop->bwd_weight_workspace, p == Precision::kBf16 ? 8 * 2 * 32 * 9 * 4 : 0);
    EXPECT_EQ(pwop->bwd_weight_workspace, 4 << 20);
  }
}

// Below the measured range (fewer than 32 channels: an image permuted from
// [N, H, W, 3]) the NCHW workspaces stay, but the input is still not copied
// and the output is channels-last.
TEST(Schedule, AChannelsLastImageKeepsTheNchwWorkspaceBound) {
  GraphBuilder b;
  b.Input("x", {S("N"), D(16), D(16), D(3)});
  b.Init("w", {8, 3, 3, 3});
  b.Op("Transpose", {"x"}, {"xt"}, "xt").attrs["perm"] = IntsAttr({0, 3, 1, 2});
  b.Op("Conv", {"xt", "w"}, {"c"}, "conv").attrs["pads"] = IntsAttr({1, 1, 1, 1});
  b.Output("c");
  auto s = Build(&b, 2, Precision::kFp32);
  ASSERT_TRUE(s.ok()) << s.message();
  const ExecOp* conv = OpOfNode(s.value(), b.g, "conv");
  ASSERT_TRUE(conv);
  EXPECT_EQ(conv->fwd_temp_bytes, 0);
  EXPECT_GT(conv->fwd_workspace, 2 * 3 * 16 * 16 * 4);  // copies the input at least
  const Val& c = s->vals[b.g.Find("c")];
  EXPECT_TRUE(IsChannelsLast(c.shape, c.strides));
}

TEST(Schedule, ChannelsLastStridesAndTheirTest) {
  EXPECT_EQ(ChannelsLastStrides({2, 3, 4, 5}), (std::vector<int64_t>{60, 1, 15, 3}));
  EXPECT_EQ(ChannelsLastStrides({2, 3, 4, 5, 6}), (std::vector<int64_t>{360, 1, 90, 18, 3}));
  EXPECT_TRUE(IsChannelsLast({2, 3, 4, 5}, {60, 1, 15, 3}));
  EXPECT_FALSE(IsChannelsLast({2, 3, 4, 5}, {60, 20, 5, 1}));  // row-major
  EXPECT_FALSE(IsChannelsLast({2, 1, 4, 5}, {20, 1, 5, 1}));   // one channel: both
  EXPECT_FALSE(IsChannelsLast({2, 3, 4}, {12, 1, 3}));         // 3-D
  EXPECT_FALSE(IsChannelsLast({2, 3, 4, 5}, {60, 1, 3, 12}));  // H and W swapped
}

// A node of a module that turns autocast off (transformers' rotary
// embeddings) runs in its inputs' dtype: its MatMul stays fp32 with no bf16
// copies, and a product of it with a bf16 activation is fp32 by promotion
// (llama_gqa_d's amp_bf16 trace: q * cos is float32).
TEST(Schedule, AutocastOffModuleRunsInItsInputsDtype) {
  GraphBuilder b;
  b.Input("x", {S("N"), D(8)});
  b.Init("W", {8, 8});
  b.Init("F", {8, 8});
  b.Op("MatMul", {"x", "W"}, {"q"}, "q_proj");
  b.Op("MatMul", {"x", "F"}, {"cos"}, "rotary");
  b.Op("Mul", {"q", "cos"}, {"qc"}, "mul");
  b.Output("qc");
  b.g.nodes[1].autocast_disabled = true;
  auto s = Build(&b, 4, Precision::kAmpBf16);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(s->vals[b.g.Find("q")].dtype, DType::kBFloat16);
  EXPECT_EQ(s->vals[b.g.Find("cos")].dtype, DType::kFloat);
  EXPECT_EQ(s->vals[b.g.Find("qc")].dtype, DType::kFloat);
  const ExecOp* rotary = OpOfNode(s.value(), b.g, "rotary");
  ASSERT_TRUE(rotary);
  EXPECT_EQ(rotary->in, (std::vector<int>{b.g.Find("x"), b.g.Find("F")}));
  // Without the mark it is autocast's bf16 matmul of bf16 copies.
  b.g.nodes[1].autocast_disabled = false;
  auto on = Build(&b, 4, Precision::kAmpBf16);
  ASSERT_TRUE(on.ok()) << on.message();
  EXPECT_EQ(on->vals[b.g.Find("cos")].dtype, DType::kBFloat16);
  EXPECT_EQ(on->vals[b.g.Find("qc")].dtype, DType::kBFloat16);
}

// CastLike(a, x) reads x for its dtype alone (the dynamo exporter's zero
// conv bias, CastLike(0, x); its group norm's weight, CastLike(w, x)): no
// gradient reaches x through it, and a constant `a` gives an output that
// requires none.
TEST(Schedule, CastLikeGivesNoGradientToItsTypeInput) {
  GraphBuilder b;
  b.Input("x", {S("N"), D(8)});
  b.Init("W", {8, 8});
  b.Init("g", {8});
  b.Op("MatMul", {"x", "W"}, {"h"}, "mm");
  b.Op("Constant", {}, {"zero"}, "zero_const").attrs["value"] =
      testing_util::TensorAttr(DType::kFloat, {}, {}, {0.0});
  b.Op("CastLike", {"zero", "h"}, {"bias"}, "zero_like");
  b.Op("CastLike", {"g", "h"}, {"scale"}, "scale_like");
  b.Op("Add", {"h", "bias"}, {"hb"}, "add");
  b.Op("Mul", {"hb", "scale"}, {"y"}, "mul");
  b.Output("y");
  auto s = Build(&b, 4, Precision::kFp32);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(s->vals[b.g.Find("h")].requires_grad);
  EXPECT_FALSE(s->vals[b.g.Find("bias")].requires_grad);
  EXPECT_TRUE(s->vals[b.g.Find("scale")].requires_grad);
  const ExecOp* zero_like = OpOfNode(s.value(), b.g, "zero_like");
  const ExecOp* scale_like = OpOfNode(s.value(), b.g, "scale_like");
  ASSERT_TRUE(zero_like && scale_like);
  EXPECT_EQ(zero_like->grad_in, (std::vector<bool>{false, false}));
  EXPECT_EQ(scale_like->grad_in, (std::vector<bool>{true, false}));
}

// a + b of one shape and dtype hands both inputs the incoming gradient
// itself (AddBackward0: grad, maybe_multiply(grad, 1) = grad), so its
// backward allocates nothing; a broadcast add (a bias) sums a new one.
TEST(Schedule, SameShapeAddPassesItsGradientOn) {
  GraphBuilder b;
  b.Input("x", {S("N"), D(8)});
  b.Init("W", {8, 8});
  b.Init("bias", {8});
  b.Op("MatMul", {"x", "W"}, {"h"}, "mm");
  b.Op("Relu", {"h"}, {"r"}, "relu");
  b.Op("Add", {"h", "r"}, {"res"}, "residual");
  b.Op("Add", {"res", "bias"}, {"y"}, "bias_add");
  b.Output("y");
  auto s = Build(&b, 4, Precision::kFp32);
  ASSERT_TRUE(s.ok()) << s.message();
  const ExecOp* residual = OpOfNode(s.value(), b.g, "residual");
  ASSERT_TRUE(residual);
  EXPECT_EQ(residual->grad_kind, GradKind::kAlias);
  EXPECT_EQ(residual->grad_in, (std::vector<bool>{true, true}));
  const ExecOp* bias_add = OpOfNode(s.value(), b.g, "bias_add");
  ASSERT_TRUE(bias_add);
  EXPECT_NE(bias_add->grad_kind, GradKind::kAlias);
}

// CUDA softmax backward multiplies the incoming gradient by the output into
// a temporary of its size (softmax_backward_cuda_out) whatever the rows (the
// H200 traces over 512, 1024 and 2048 keys); a log-softmax takes none.
TEST(Schedule, SoftmaxBackwardTakesAGradTimesOutputTemporary) {
  GraphBuilder b;
  b.Input("x", {S("N"), D(64)});
  b.Init("W_long", {64, 2048});
  b.Init("W_short", {64, 512});
  b.Op("MatMul", {"x", "W_long"}, {"l"}, "mm_long");
  b.Op("MatMul", {"x", "W_short"}, {"t"}, "mm_short");
  b.Op("Softmax", {"l"}, {"pl"}, "softmax_long").attrs["axis"] = testing_util::IntAttr(-1);
  b.Op("Softmax", {"t"}, {"pt"}, "softmax_short").attrs["axis"] = testing_util::IntAttr(-1);
  b.Op("LogSoftmax", {"l"}, {"ll"}, "log_softmax_long").attrs["axis"] = testing_util::IntAttr(-1);
  b.Op("Softmax", {"t"}, {"pc"}, "softmax_axis0").attrs["axis"] = testing_util::IntAttr(0);
  for (const char* y : {"pl", "pt", "ll", "pc"}) b.Output(y);
  auto s = Build(&b, 4, Precision::kFp32);
  ASSERT_TRUE(s.ok()) << s.message();
  const ExecOp* long_rows = OpOfNode(s.value(), b.g, "softmax_long");
  const ExecOp* short_rows = OpOfNode(s.value(), b.g, "softmax_short");
  const ExecOp* log_rows = OpOfNode(s.value(), b.g, "log_softmax_long");
  const ExecOp* first_axis = OpOfNode(s.value(), b.g, "softmax_axis0");
  ASSERT_TRUE(long_rows && short_rows && log_rows && first_axis);
  EXPECT_EQ(long_rows->bwd_workspace, 4 * 2048 * 4);
  EXPECT_EQ(short_rows->bwd_workspace, 4 * 512 * 4);
  EXPECT_EQ(log_rows->bwd_workspace, 0);
  EXPECT_EQ(first_axis->bwd_workspace, 4 * 512 * 4);
  auto half = Build(&b, 4, Precision::kBf16);
  ASSERT_TRUE(half.ok()) << half.message();
  EXPECT_EQ(OpOfNode(half.value(), b.g, "softmax_long")->bwd_workspace, 4 * 2048 * 2);
  EXPECT_EQ(OpOfNode(half.value(), b.g, "softmax_short")->bwd_workspace, 4 * 512 * 2);
  // Inference: no backward.
  auto infer = Build(&b, 4, Precision::kFp32, Mode::kInference);
  ASSERT_TRUE(infer.ok()) << infer.message();
  EXPECT_EQ(OpOfNode(infer.value(), b.g, "softmax_long")->bwd_workspace, 0);
}

// softmax(x, -1, dtype=torch.float32) (a Softmax and a Cast of one call,
// Node::softmax_dtype_call) is one kernel writing float32: in fp32 the Cast
// is the softmax's output itself; in pure bf16 the softmax still writes
// float32 (half_to_float) and the Cast is the model's cast back to bf16.
TEST(Schedule, ASoftmaxWithADtypeWritesThatDtype) {
  GraphBuilder b;
  b.Input("x", {S("N"), D(8)});
  b.Init("W", {8, 2048});
  b.Init("V", {2048, 8});
  b.Op("MatMul", {"x", "W"}, {"h"}, "mm");
  {
    Node& soft = b.Op("Softmax", {"h"}, {"s"}, "softmax");
    soft.attrs["axis"] = testing_util::IntAttr(-1);
    soft.softmax_dtype_call = 3;
  }
  {
    Node& cast = b.Op("Cast", {"s"}, {"p"}, "softmax_cast");
    cast.attrs["to"] = testing_util::IntAttr(static_cast<int64_t>(DType::kFloat));
    cast.softmax_dtype_call = 3;
  }
  b.Op("MatMul", {"p", "V"}, {"y"}, "mm2");
  b.Output("y");
  auto fp32 = Build(&b, 4, Precision::kFp32);
  ASSERT_TRUE(fp32.ok()) << fp32.message();
  const ExecOp* c32 = OpOfNode(fp32.value(), b.g, "softmax_cast");
  ASSERT_TRUE(c32);
  EXPECT_TRUE(c32->view);
  EXPECT_EQ(fp32->vals[b.g.Find("p")].base, b.g.Find("s"));
  auto bf16 = Build(&b, 4, Precision::kBf16);
  ASSERT_TRUE(bf16.ok()) << bf16.message();
  EXPECT_EQ(bf16->vals[b.g.Find("h")].dtype, DType::kBFloat16);
  EXPECT_EQ(bf16->vals[b.g.Find("s")].dtype, DType::kFloat);
  EXPECT_EQ(bf16->vals[b.g.Find("p")].dtype, DType::kBFloat16);
  const ExecOp* c16 = OpOfNode(bf16.value(), b.g, "softmax_cast");
  ASSERT_TRUE(c16);
  EXPECT_FALSE(c16->view);
  // Without the call number both are what they were: a bf16 softmax and a
  // bf16 copy.
  for (Node& n : b.g.nodes) n.softmax_dtype_call = -1;
  auto plain = Build(&b, 4, Precision::kBf16);
  ASSERT_TRUE(plain.ok()) << plain.message();
  EXPECT_EQ(plain->vals[b.g.Find("s")].dtype, DType::kBFloat16);
}

TEST(Schedule, LayerNormRunsInFp32UnderAutocast) {
  GraphBuilder b;
  b.Input("x", {S("N"), D(8)});
  b.Init("W", {8, 8});
  b.Init("gamma", {8});
  b.Init("beta", {8});
  b.Op("MatMul", {"x", "W"}, {"m"}, "mm");
  b.Op("LayerNormalization", {"m", "gamma", "beta"}, {"ln"}, "ln").attrs["axis"] =
      testing_util::IntAttr(-1);
  b.Output("ln");
  auto s = Build(&b, 4, Precision::kAmpBf16);
  ASSERT_TRUE(s.ok()) << s.message();
  const int m = b.g.Find("m");
  EXPECT_EQ(s->vals[m].dtype, DType::kBFloat16);
  const ExecOp* ln = OpOfNode(s.value(), b.g, "ln");
  ASSERT_TRUE(ln);
  ASSERT_GE(ln->in.size(), 3u);
  // Its input is an fp32 copy of the bf16 product, made by a Cast.
  const int in0 = ln->in[0];
  ASSERT_NE(in0, m);
  EXPECT_EQ(s->vals[in0].dtype, DType::kFloat);
  EXPECT_EQ(s->vals[in0].bytes, 4 * 8 * 4);
  bool cast_found = false;
  for (const ExecOp* op : OpsOfType(s.value(), "Cast")) {
    if (op->out == std::vector<int>{in0}) {
      cast_found = true;
      EXPECT_EQ(op->in, (std::vector<int>{m}));
      EXPECT_FALSE(op->hold_to_forward_end);
    }
  }
  EXPECT_TRUE(cast_found);
  // fp32 params go in as they are (no bf16 cache copy for gamma).
  EXPECT_EQ(ln->in[1], b.g.Find("gamma"));
  EXPECT_EQ(s->vals[b.g.Find("ln")].dtype, DType::kFloat);
  // Backward keeps the fp32 input and fp32 mean and rstd ([N, 1] each).
  bool saves_fp32_input = false;
  int64_t extra = 0;
  for (const SavedRef& r : ln->saved) {
    if (r.val == in0) saves_fp32_input = true;
    if (r.val < 0) extra += r.bytes;
  }
  EXPECT_TRUE(saves_fp32_input);
  EXPECT_EQ(extra, 2 * 4 * 4);
}

// x [N, 4, 8, 8] -> 1x1 conv -> c -> nearest 2x upsampling -> y. Autocast
// runs upsample_nearest2d in fp32: the bf16 conv output is copied to fp32
// and the output is fp32 (unet_ldm_train_32_amp_bf16 trace: a [32, 384, 8, 8]
// fp32 copy, then a [32, 384, 16, 16] fp32 output).
TEST(Schedule, UpsamplingRunsInFp32UnderAutocast) {
  auto graph = [] {
    GraphBuilder b;
    b.Input("x", {S("N"), D(4), D(8), D(8)});
    b.Init("W", {4, 4, 1, 1});
    b.Op("Conv", {"x", "W"}, {"c"}, "conv");
    b.Op("Constant", {}, {"scales"}, "scales").attrs["value"] =
        testing_util::TensorAttr(DType::kFloat, {4}, {}, {1.0, 1.0, 2.0, 2.0});
    b.Op("Resize", {"c", "", "scales"}, {"y"}, "up").attrs["mode"] =
        testing_util::StringAttr("nearest");
    b.Output("y");
    return b;
  };
  GraphBuilder b = graph();
  auto s = Build(&b, 2, Precision::kAmpBf16);
  ASSERT_TRUE(s.ok()) << s.message();
  const int c = b.g.Find("c");
  EXPECT_EQ(s->vals[c].dtype, DType::kBFloat16);
  const ExecOp* up = OpOfNode(s.value(), b.g, "up");
  ASSERT_TRUE(up);
  ASSERT_FALSE(up->in.empty());
  EXPECT_NE(up->in[0], c);
  EXPECT_EQ(s->vals[up->in[0]].dtype, DType::kFloat);
  EXPECT_EQ(s->vals[up->in[0]].bytes, 2 * 4 * 8 * 8 * 4);
  EXPECT_EQ(s->vals[b.g.Find("y")].dtype, DType::kFloat);
  EXPECT_EQ(s->vals[b.g.Find("y")].bytes, 2 * 4 * 16 * 16 * 4);
  EXPECT_TRUE(up->saved.empty());  // its backward needs only the sizes
  // The model cast to bf16 upsamples in bf16.
  GraphBuilder h = graph();
  auto sh = Build(&h, 2, Precision::kBf16);
  ASSERT_TRUE(sh.ok()) << sh.message();
  EXPECT_EQ(OpOfNode(sh.value(), h.g, "up")->in[0], h.g.Find("c"));
  EXPECT_EQ(sh->vals[h.g.Find("y")].bytes, 2 * 4 * 16 * 16 * 2);
}

// An ONNX GroupNormalization node (opset 18+), x [2, 8, 4, 4], 4 groups:
// native_group_norm's [N, C] fp32 scale and shift (64 B each) in forward
// (mean and rstd are saved); ds, db [N, C], then c2, c3 [N, G] and c1 [N, C]
// in backward. Over one position the kernels take neither scale and shift
// nor ds, db and c1; an input that needs no gradient takes no c1, c2, c3.
TEST(Schedule, GroupNormalizationTakesItsKernelTemporaries) {
  auto graph = [](int64_t side, bool conv) {
    GraphBuilder b;
    b.Input("x", {S("N"), D(8), D(side), D(side)});
    b.Init("W", {8, 8, 1, 1});
    b.Init("s", {8});
    b.Init("bias", {8});
    if (conv) b.Op("Conv", {"x", "W"}, {"c"}, "conv");
    b.Op("GroupNormalization", {conv ? "c" : "x", "s", "bias"}, {"y"}, "gn").attrs["num_groups"] =
        testing_util::IntAttr(4);
    b.Output("y");
    return b;
  };
  GraphBuilder b = graph(4, true);
  auto s = Build(&b, 2, Precision::kFp32);
  ASSERT_TRUE(s.ok()) << s.message();
  const ExecOp* gn = OpOfNode(s.value(), b.g, "gn");
  ASSERT_TRUE(gn);
  EXPECT_EQ(gn->fwd_workspace + gn->bwd_workspace, 0);
  EXPECT_EQ(gn->fwd_kernel_temp_bytes, (std::vector<int64_t>{64, 64}));
  EXPECT_EQ(gn->bwd_kernel_temp_bytes, (std::vector<int64_t>{64, 64, 32, 32, 64}));

  GraphBuilder one = graph(1, true);
  auto s1 = Build(&one, 2, Precision::kFp32);
  ASSERT_TRUE(s1.ok()) << s1.message();
  const ExecOp* gn1 = OpOfNode(s1.value(), one.g, "gn");
  ASSERT_TRUE(gn1);
  EXPECT_TRUE(gn1->fwd_kernel_temp_bytes.empty());
  EXPECT_EQ(gn1->bwd_kernel_temp_bytes, (std::vector<int64_t>{32, 32})) << "c2, c3 only";

  GraphBuilder first = graph(4, false);
  auto sf = Build(&first, 2, Precision::kFp32);
  ASSERT_TRUE(sf.ok()) << sf.message();
  const ExecOp* gnf = OpOfNode(sf.value(), first.g, "gn");
  ASSERT_TRUE(gnf);
  EXPECT_EQ(gnf->bwd_kernel_temp_bytes, (std::vector<int64_t>{64, 64}))
      << "ds, db for dgamma and dbeta; no dX, so no c1-c3";
}

TEST(Schedule, ParamsAndBuffersFollowClassifyInitializers) {
  // Conv + BatchNorm (training outputs), flatten, Gemm.
  GraphBuilder b;
  b.Input("x", {S("N"), D(3), D(4), D(4)});
  b.Init("cw", {8, 3, 3, 3});
  b.Init("cb", {8});
  b.Init("scale", {8});
  b.Init("shift", {8});
  b.Init("mean", {8});
  b.Init("var", {8});
  b.Init("fw", {10, 8 * 4 * 4});
  b.Ints("flat", {-1, 8 * 4 * 4});
  Node& conv = b.Op("Conv", {"x", "cw", "cb"}, {"c"}, "conv");
  conv.attrs["pads"] = IntsAttr({1, 1, 1, 1});
  conv.attrs["kernel_shape"] = IntsAttr({3, 3});
  b.Op("BatchNormalization", {"c", "scale", "shift", "mean", "var"}, {"bn", "rm", "rv"}, "bn")
      .attrs["training_mode"] = testing_util::IntAttr(1);
  b.Op("Reshape", {"bn", "flat"}, {"f"}, "flatten");
  b.Op("Gemm", {"f", "fw"}, {"y"}, "fc").attrs["transB"] = testing_util::IntAttr(1);
  b.Output("y");
  auto s = Build(&b, 2, Precision::kFp32);
  ASSERT_TRUE(s.ok()) << s.message();
  auto ids = [&](std::vector<std::string> names) {
    std::vector<int> out;
    for (const auto& n : names) out.push_back(b.g.Find(n));
    return out;
  };
  EXPECT_EQ(s->params, ids({"cw", "cb", "scale", "shift", "fw"}));
  EXPECT_EQ(s->buffers, ids({"mean", "var"}));
  EXPECT_EQ(s->parameter_count, 8 * 27 + 8 + 8 + 8 + 10 * 128);
  EXPECT_EQ(s->inputs, ids({"x"}));
  EXPECT_EQ(s->logits, b.g.Find("y"));
  for (int p : s->params) {
    EXPECT_TRUE(s->vals[p].is_param);
    EXPECT_TRUE(s->vals[p].requires_grad);
  }
  for (int p : s->buffers) {
    EXPECT_TRUE(s->vals[p].is_buffer);
    EXPECT_FALSE(s->vals[p].requires_grad);
  }
  // The shape tensor never reaches the GPU.
  EXPECT_FALSE(s->vals[b.g.Find("flat")].is_param);
  // Running statistics are updated in place: no allocation.
  EXPECT_TRUE(s->vals[b.g.Find("rm")].phantom);
  EXPECT_TRUE(s->vals[b.g.Find("rv")].phantom);
}

TEST(Schedule, InferenceParamsNeedNoGrad) {
  GraphBuilder b = LinearBiasGraph(false);
  auto s = Build(&b, 4, Precision::kFp32, Mode::kInference);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(s->params.size(), 2u);
  for (const ExecOp& op : s->ops) {
    EXPECT_TRUE(op.saved.empty()) << op.label;
    for (int v : op.out) {
      if (v >= 0) {
        EXPECT_FALSE(s->vals[v].requires_grad) << op.label;
      }
    }
  }
}

}  // namespace
}  // namespace memplan

namespace memplan {
namespace {

void Ints(Node& n, const std::string& name, std::vector<int64_t> v) {
  n.attrs[name].type = AttrType::kInts;
  n.attrs[name].ints = std::move(v);
}

// x [N, 3, 32, 32] -> conv1 3x3 (16 out) -> a -> 1x1 conv (16) -> b ->
// depthwise 3x3 -> c -> 3x3 stride 2 (32) -> y.
GraphBuilder ConvChain() {
  GraphBuilder b;
  b.Input("x", {S("N"), D(3), D(32), D(32)});
  b.Init("W1", {16, 3, 3, 3});
  b.Init("W2", {16, 16, 1, 1});
  b.Init("W3", {16, 1, 3, 3});
  b.Init("W4", {32, 16, 3, 3});
  Ints(b.Op("Conv", {"x", "W1"}, {"a"}, "conv1"), "pads", {1, 1, 1, 1});
  b.Op("Conv", {"a", "W2"}, {"b"}, "pointwise");
  Node& dw = b.Op("Conv", {"b", "W3"}, {"c"}, "depthwise");
  Ints(dw, "pads", {1, 1, 1, 1});
  dw.attrs["group"].type = AttrType::kInt;
  dw.attrs["group"].i = 16;
  Node& s2 = b.Op("Conv", {"c", "W4"}, {"y"}, "strided");
  Ints(s2, "pads", {1, 1, 1, 1});
  Ints(s2, "strides", {2, 2});
  b.Output("y");
  return b;
}

TEST(ScheduleConv, CudnnWorkspacesCopyInputWeightAndOutput) {
  GraphBuilder b = ConvChain();
  auto s = Build(&b, 8, Precision::kFp32);
  ASSERT_TRUE(s.ok()) << s.message();
  const ExecOp* conv1 = OpOfNode(s.value(), b.g, "conv1");
  const ExecOp* pw = OpOfNode(s.value(), b.g, "pointwise");
  const ExecOp* dw = OpOfNode(s.value(), b.g, "depthwise");
  const ExecOp* st = OpOfNode(s.value(), b.g, "strided");
  ASSERT_TRUE(conv1 && pw && dw && st);
  const int64_t x = 8 * 3 * 32 * 32 * 4, a = 8 * 16 * 32 * 32 * 4, w1 = 16 * 3 * 9 * 4;
  EXPECT_EQ(conv1->fwd_workspace, x + a + w1);
  // The graph input needs no gradient: only the weight-gradient pass.
  EXPECT_EQ(conv1->bwd_workspace, 0);
  EXPECT_EQ(conv1->bwd_weight_workspace, x + a + w1 + (4 << 20));
  // Unstrided 1x1: no copies; its weight gradient sums one float32 partial
  // per image (UnitConvWeightGradBytes). Depthwise: none.
  EXPECT_EQ(pw->fwd_workspace + pw->bwd_workspace, 0);
  EXPECT_EQ(pw->bwd_weight_workspace, 8 * 16 * 16 * 4);
  EXPECT_EQ(dw->fwd_workspace + dw->bwd_workspace + dw->bwd_weight_workspace, 0);
  const int64_t c = a, y = 8 * 32 * 16 * 16 * 4, w4 = 32 * 16 * 9 * 4;
  EXPECT_EQ(st->fwd_workspace, c + y + w4);
  EXPECT_EQ(st->bwd_workspace, c + y + w4);
  // bf16: the 3-channel input and the weight are padded to 8 channels.
  GraphBuilder h = ConvChain();
  auto sh = Build(&h, 8, Precision::kBf16);
  ASSERT_TRUE(sh.ok()) << sh.message();
  EXPECT_EQ(OpOfNode(sh.value(), h.g, "conv1")->fwd_workspace,
            8 * 8 * 32 * 32 * 2 + a / 2 + 16 * 8 * 9 * 2);
}

// wav2vec2's feature encoder: Conv1d 512 -> 512, kernel 3, stride 2, on
// [N, 512, 99]. In bf16 its weight gradient takes exactly the input
// gradient's workspace (cudnn_ws_models_h200.jsonl); fp32, and 2-D bf16
// convolutions, add the 4 MiB split-K median.
TEST(ScheduleConv, HalfPrecisionConv1dWeightGradientTakesTheInputGradientWorkspace) {
  auto graph = [] {
    GraphBuilder b;
    b.Input("x", {S("N"), D(512), D(99)});
    b.Init("W0", {512, 512, 1});
    b.Init("W", {512, 512, 3});
    b.Op("Conv", {"x", "W0"}, {"h"}, "pointwise");  // so that the input of "conv" needs a gradient
    Ints(b.Op("Conv", {"h", "W"}, {"y"}, "conv"), "strides", {2});
    b.Output("y");
    return b;
  };
  GraphBuilder b = graph();
  auto s = Build(&b, 4, Precision::kBf16);
  ASSERT_TRUE(s.ok()) << s.message();
  const ExecOp* conv = OpOfNode(s.value(), b.g, "conv");
  ASSERT_TRUE(conv);
  // x 4*512*99*2, w 512*512*3*2, y 4*512*49*2 bytes.
  const int64_t ws = 4 * 512 * 99 * 2 + 512 * 512 * 3 * 2 + 4 * 512 * 49 * 2;
  EXPECT_EQ(conv->fwd_workspace, ws);
  EXPECT_EQ(conv->bwd_workspace, ws);
  EXPECT_EQ(conv->bwd_weight_workspace, ws);
  GraphBuilder f = graph();
  auto sf = Build(&f, 4, Precision::kFp32);
  ASSERT_TRUE(sf.ok()) << sf.message();
  EXPECT_EQ(OpOfNode(sf.value(), f.g, "conv")->bwd_weight_workspace, 2 * ws + (4 << 20));
}

// Where the plan asks for cuDNN's fp32 engines that copy the input and the
// weight only (Fp32ConvCopies::kInputOnly), a strided, ungrouped Conv1d past
// the stem still copies x, w and y (14 of 18 such shapes of
// cudnn_ws_models_h200.jsonl, and wav2vec2_ln_c's trace); a 2-D convolution
// copies x and w.
TEST(ScheduleConv, Fp32Conv1dCopiesAllThreeUnderEitherEngineKind) {
  GraphBuilder b;
  b.Input("x", {S("N"), D(512), D(99)});
  b.Input("img", {S("N"), D(64), D(16), D(16)});
  b.Init("W", {512, 512, 3});
  b.Init("K", {64, 64, 3, 3});
  Ints(b.Op("Conv", {"x", "W"}, {"y"}, "conv1d"), "strides", {2});       // [N, 512, 49]
  Ints(b.Op("Conv", {"img", "K"}, {"z"}, "conv2d"), "strides", {2, 2});  // [N, 64, 7, 7]
  b.Output("y");
  b.Output("z");
  ShapeBindings bind;
  bind.batch = 4;
  ASSERT_TRUE(InferShapes(&b.g, bind, nullptr).ok());
  for (Fp32ConvCopies kind : {Fp32ConvCopies::kAll, Fp32ConvCopies::kInputOnly}) {
    PlanOptions o;
    o.precision = Precision::kFp32;
    o.fp32_conv = kind;
    auto s = BuildSchedule(b.g, o);
    ASSERT_TRUE(s.ok()) << s.message();
    const int64_t x = 4 * 512 * 99 * 4, w = 512 * 512 * 3 * 4, y = 4 * 512 * 49 * 4;
    EXPECT_EQ(OpOfNode(s.value(), b.g, "conv1d")->fwd_workspace, x + w + y);
    const int64_t img = 4 * 64 * 16 * 16 * 4, k = 64 * 64 * 9 * 4, z = 4 * 64 * 7 * 7 * 4;
    EXPECT_EQ(OpOfNode(s.value(), b.g, "conv2d")->fwd_workspace,
              kind == Fp32ConvCopies::kAll ? img + k + z : img + k);
  }
}

// The weight gradient of an unstrided 16-bit 1x1 convolution: cuDNN splits
// it over the images (N float32 [K, C] partial sums) or copies the input and
// the output gradient (UnitConvWeightGradBytes); over one pixel it takes
// none; in fp32 the expansion's partials are within 48 MiB.
TEST(ScheduleConv, HalfPrecisionUnitConvWeightGradientSplitsOverImagesOrCopies) {
  auto graph = [] {
    GraphBuilder b;
    b.Input("x", {S("N"), D(320), D(7), D(7)});
    b.Input("p", {S("N"), D(320), D(1), D(1)});
    b.Init("W1", {1280, 320, 1, 1});
    b.Init("W2", {320, 1280, 1, 1});
    b.Init("W3", {320, 320, 1, 1});
    b.Op("Conv", {"x", "W1"}, {"h"}, "expand");
    b.Op("Conv", {"h", "W2"}, {"y"}, "reduce");
    b.Op("Conv", {"p", "W3"}, {"q"}, "pixel");
    b.Output("y");
    b.Output("q");
    return b;
  };
  GraphBuilder b = graph();
  auto s = Build(&b, 8, Precision::kBf16);
  ASSERT_TRUE(s.ok()) << s.message();
  const ExecOp* expand = OpOfNode(s.value(), b.g, "expand");
  const ExecOp* reduce = OpOfNode(s.value(), b.g, "reduce");
  const ExecOp* pixel = OpOfNode(s.value(), b.g, "pixel");
  ASSERT_TRUE(expand && reduce && pixel);
  EXPECT_EQ(expand->bwd_weight_workspace, 8LL * 1280 * 320 * 4);
  EXPECT_EQ(reduce->bwd_weight_workspace, 8LL * 49 * (1280 + 320) * 2);
  EXPECT_EQ(pixel->bwd_weight_workspace, 0);
  // At 7x7 with 1280 output channels the forward copies its input and
  // output (UnitConvCopiesInForward); the input gradient takes none.
  EXPECT_EQ(expand->fwd_workspace, 8LL * 49 * (320 + 1280) * 2);
  EXPECT_EQ(expand->bwd_workspace, 0);
  GraphBuilder f = graph();
  auto sf = Build(&f, 8, Precision::kFp32);
  ASSERT_TRUE(sf.ok()) << sf.message();
  EXPECT_EQ(OpOfNode(sf.value(), f.g, "expand")->bwd_weight_workspace, 8LL * 1280 * 320 * 4);
}

// 16-bit unstrided 1x1 weight gradients (941 bf16 shapes of the 1x1 grids):
// split-K while the partials take at most 1.5 times the copies of x and dy,
// and for inputs of at most 576 channels with K * C <= 2^19 also up to 100
// MiB or 4 times the copies; else the copies.
TEST(ScheduleConv, HalfPrecisionUnitConvWeightGradientBoundary) {
  auto workspace = [](int64_t n, int64_t c, int64_t k, int64_t side) -> int64_t {
    GraphBuilder b;
    b.Input("x", {S("N"), D(c), D(side), D(side)});
    b.Init("W", {k, c, 1, 1});
    b.Op("Conv", {"x", "W"}, {"y"}, "pw");
    b.Output("y");
    auto s = Build(&b, n, Precision::kBf16);
    if (!s.ok()) return -1;
    return OpOfNode(s.value(), b.g, "pw")->bwd_weight_workspace;
  };
  // mobilenet_v2's last convolution: 100 MiB of partials at batch 64
  // (traced), the copies at 128 (grid).
  EXPECT_EQ(workspace(64, 320, 1280, 7), 64LL * 1280 * 320 * 4);
  EXPECT_EQ(workspace(128, 320, 1280, 7), 128LL * 49 * (320 + 1280) * 2);
  // resnext_h's 512 -> 1024 at 11x11, batch 96: copies (traced), where the
  // partials would take 192 MiB.
  EXPECT_EQ(workspace(96, 512, 1024, 11), 96LL * 121 * (512 + 1024) * 2);
  // DeepLabV3's ASPP projection, 2048 -> 256 at 32x32, batch 12: 24 MiB of
  // partials (traced), though 2048 input channels.
  EXPECT_EQ(workspace(12, 2048, 256, 32), 12LL * 256 * 2048 * 4);
  // A wide input over few pixels copies: 1024 -> 256 at 14x14, batch 8.
  EXPECT_EQ(workspace(8, 1024, 256, 14), 8LL * 196 * (1024 + 256) * 2);
}

// fp32 unstrided 1x1 weight gradients (bench/results/cudnn_1x1_ws_h200.jsonl,
// 574 shapes): one float32 partial per image up to 48 MiB of them or while
// they are no larger than copies of x and y; past that the copying engine;
// 32 input channels or fewer over 25088 positions or more copy below batch 64
// (mobilenet_v2's expansions, traced at batch 32; split at 64 and 128).
TEST(ScheduleConv, Fp32UnitConvWeightGradientSplitsOverImagesOrCopies) {
  auto graph = [](int64_t c, int64_t k, int64_t side) {
    GraphBuilder b;
    b.Input("x", {S("N"), D(c), D(side), D(side)});
    b.Init("W", {k, c, 1, 1});
    b.Op("Conv", {"x", "W"}, {"y"}, "pw");
    b.Output("y");
    return b;
  };
  auto workspace = [&](int64_t n, int64_t c, int64_t k, int64_t side) -> int64_t {
    GraphBuilder b = graph(c, k, side);
    auto s = Build(&b, n, Precision::kFp32);
    if (!s.ok()) return -1;
    return OpOfNode(s.value(), b.g, "pw")->bwd_weight_workspace;
  };
  // resnext_h's 512 -> 1024 at 11x11, batch 24: 48 MiB of partials (traced).
  EXPECT_EQ(workspace(24, 512, 1024, 11), 24LL * 1024 * 512 * 4);
  // 1024 -> 512 at 7x7, batch 128: 256 MiB of partials against 36.75 MiB of copies.
  EXPECT_EQ(workspace(128, 1024, 512, 7), 128LL * 49 * (1024 + 512) * 4);
  // Past 48 MiB but smaller than the copies: still split.
  EXPECT_EQ(workspace(64, 1024, 256, 28), 64LL * 256 * 1024 * 4);
  // Narrow inputs over many positions: copies below batch 64, split from it.
  EXPECT_EQ(workspace(32, 16, 96, 112), 32LL * 112 * 112 * (16 + 96) * 4);
  EXPECT_EQ(workspace(64, 16, 96, 112), 64LL * 96 * 16 * 4);
  EXPECT_EQ(workspace(8, 16, 96, 40), 8LL * 96 * 16 * 4);
}

// The forward of an unstrided 16-bit 1x1 convolution copies its input and
// output over images of at most 7x7 with 256 channels or more on either
// side (bench/results/cudnn_1x1_ws_h200.jsonl); larger images, narrower
// convolutions, one pixel and fp32 take none.
TEST(ScheduleConv, HalfPrecisionUnitConvForwardCopiesOverSmallImages) {
  auto graph = [] {
    GraphBuilder b;
    b.Input("a", {S("N"), D(256), D(5), D(5)});
    b.Input("b", {S("N"), D(128), D(7), D(7)});
    b.Input("c", {S("N"), D(512), D(14), D(14)});
    b.Input("d", {S("N"), D(512), D(1), D(1)});
    b.Init("Wa", {64, 256, 1, 1});
    b.Init("Wb", {128, 128, 1, 1});
    b.Init("Wc", {512, 512, 1, 1});
    b.Init("Wd", {512, 512, 1, 1});
    for (const char* n : {"a", "b", "c", "d"}) {
      b.Op("Conv", {n, std::string("W") + n}, {std::string("y") + n}, std::string("conv_") + n);
      b.Output(std::string("y") + n);
    }
    return b;
  };
  GraphBuilder b = graph();
  auto s = Build(&b, 4, Precision::kBf16);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(OpOfNode(s.value(), b.g, "conv_a")->fwd_workspace, 4LL * 25 * (256 + 64) * 2);
  for (const char* n : {"conv_b", "conv_c", "conv_d"}) {
    EXPECT_EQ(OpOfNode(s.value(), b.g, n)->fwd_workspace, 0) << n;
  }
  GraphBuilder f = graph();
  auto sf = Build(&f, 4, Precision::kFp32);
  ASSERT_TRUE(sf.ok()) << sf.message();
  EXPECT_EQ(OpOfNode(sf.value(), f.g, "conv_a")->fwd_workspace, 0);
}

// A 16-bit 3-D stem over an RGB clip: no forward copies when the kernel is
// more than one frame deep (bench/results/cudnn_3d_ws_h200.jsonl); a 1x7x7
// one copies x and w (both padded to 8 channels) and y; fp32 keeps its rule.
TEST(ScheduleConv, HalfPrecision3dStemWithADeepKernelCopiesNothingInForward) {
  auto graph = [] {
    GraphBuilder b;
    b.Input("x", {S("N"), D(3), D(8), D(56), D(56)});
    b.Init("Wdeep", {64, 3, 3, 7, 7});
    b.Init("Wflat", {64, 3, 1, 7, 7});
    for (const char* k : {"deep", "flat"}) {
      Node& c = b.Op("Conv", {"x", std::string("W") + k}, {std::string("y") + k},
                     std::string("conv_") + k);
      Ints(c, "strides", {1, 2, 2});
      Ints(c, "pads", {k[0] == 'd' ? 1 : 0, 3, 3, k[0] == 'd' ? 1 : 0, 3, 3});
      b.Output(std::string("y") + k);
    }
    return b;
  };
  GraphBuilder b = graph();
  auto s = Build(&b, 8, Precision::kBf16);
  ASSERT_TRUE(s.ok()) << s.message();
  const ExecOp* deep = OpOfNode(s.value(), b.g, "conv_deep");
  const ExecOp* flat = OpOfNode(s.value(), b.g, "conv_flat");
  EXPECT_EQ(deep->fwd_workspace, 0);
  const int64_t x_padded = 8LL * 8 * 8 * 56 * 56 * 2;
  const int64_t y = 8LL * 64 * 8 * 28 * 28 * 2;
  EXPECT_EQ(flat->fwd_workspace, x_padded + 64 * 8 * 7 * 7 * 2 + y);
  EXPECT_GT(deep->bwd_weight_workspace, x_padded + y) << "its weight gradient still copies";
  GraphBuilder f = graph();
  auto sf = Build(&f, 8, Precision::kFp32);
  ASSERT_TRUE(sf.ok()) << sf.message();
  EXPECT_GT(OpOfNode(sf.value(), f.g, "conv_deep")->fwd_workspace, 0);
}

// A 16-bit 3x3x3 convolution of a clip, stride 1, as many filters as
// channels: its weight gradient adds S float32 partial weight gradients to
// x, dy and w, S slices of 8192 positions or more with S * K <= 256
// (bench/results/cudnn_3d_ws_h200.jsonl); with fewer than two slices, other
// channel pairs, strides or fp32, the global extra stays.
TEST(ScheduleConv, HalfPrecision3dWeightGradientSumsSlicesOfPositions) {
  auto workspace = [](int64_t n, int64_t c, int64_t k, int64_t t, int64_t side, int64_t stride,
                      Precision p) -> int64_t {
    GraphBuilder b;
    b.Input("x", {S("N"), D(c), D(t), D(side), D(side)});
    b.Init("W", {k, c, 3, 3, 3});
    Node& conv = b.Op("Conv", {"x", "W"}, {"y"}, "conv");
    Ints(conv, "strides", {stride, stride, stride});
    Ints(conv, "pads", {1, 1, 1, 1, 1, 1});
    b.Output("y");
    auto s = Build(&b, n, p);
    if (!s.ok()) return -1;
    return OpOfNode(s.value(), b.g, "conv")->bwd_weight_workspace;
  };
  auto copies = [](int64_t n, int64_t c, int64_t k, int64_t t, int64_t side, int64_t elem) {
    return (n * c * t * side * side + k * c * 27 + n * k * t * side * side) * elem;
  };
  const int64_t extra = 4LL << 20;  // kConvWeightGradExtraBytes
  // r3d_n's layer1 at batch 24 (16 frames, 56x56): four slices (1.69 MiB).
  EXPECT_EQ(workspace(24, 64, 64, 16, 56, 1, Precision::kBf16),
            copies(24, 64, 64, 16, 56, 2) + 4 * 64 * 64 * 27 * 4);
  // 128 filters: two slices at most, from 16384 positions.
  EXPECT_EQ(workspace(8, 128, 128, 4, 28, 1, Precision::kBf16),
            copies(8, 128, 128, 4, 28, 2) + 2 * 128 * 128 * 27 * 4);
  EXPECT_EQ(workspace(2, 128, 128, 4, 28, 1, Precision::kBf16),
            copies(2, 128, 128, 4, 28, 2) + extra);
  // 256 filters, another channel pair, a stride of 2, fp32: the global extra.
  EXPECT_EQ(workspace(24, 256, 256, 4, 14, 1, Precision::kBf16),
            copies(24, 256, 256, 4, 14, 2) + extra);
  EXPECT_EQ(workspace(24, 64, 128, 16, 56, 1, Precision::kBf16),
            copies(24, 64, 128, 16, 56, 2) + extra);
  EXPECT_EQ(workspace(24, 64, 64, 16, 56, 2, Precision::kBf16),
            24LL * 64 * 16 * 56 * 56 * 2 + 64 * 64 * 27 * 2 + 24LL * 64 * 8 * 28 * 28 * 2 + extra);
  EXPECT_EQ(workspace(24, 64, 64, 16, 56, 1, Precision::kFp32),
            copies(24, 64, 64, 16, 56, 4) + extra);
}

// A patch embedding (kernel = stride, unpadded, over an RGB image) has its
// own measured engines (bench/results/cudnn_patch_ws_h200.jsonl): in fp32 no
// forward copies below batch 64, from there x and w padded to 4 channels and
// y, the weight gradient the same copies at every batch (and split-K partials
// from batch 96 for 384 or 512 filters); in 16 bits the
// padded copies only from 512 filters (or 32-pixel patches). An overlapping
// stem (stride below the kernel) keeps the general rule.
TEST(ScheduleConv, PatchEmbeddingCopiesFollowTheMeasuredEngines) {
  auto graph = [] {
    GraphBuilder b;
    b.Input("x", {S("N"), D(3), D(224), D(224)});
    b.Init("Wn", {384, 3, 16, 16});
    b.Init("Ww", {512, 3, 16, 16});
    b.Init("Wo", {384, 3, 16, 16});
    for (const char* k : {"n", "w", "o"}) {
      Node& c = b.Op("Conv", {"x", std::string("W") + k}, {std::string("y") + k},
                     std::string("conv_") + k);
      Ints(c, "strides", k[0] == 'o' ? std::vector<int64_t>{8, 8} : std::vector<int64_t>{16, 16});
      b.Output(std::string("y") + k);
    }
    return b;
  };
  for (int64_t n : {32, 64}) {
    GraphBuilder b = graph();
    auto s = Build(&b, n, Precision::kFp32);
    ASSERT_TRUE(s.ok()) << s.message();
    const ExecOp* narrow = OpOfNode(s.value(), b.g, "conv_n");
    const int64_t copies = n * 4 * 224 * 224 * 4 + 384LL * 4 * 16 * 16 * 4 + n * 384 * 14 * 14 * 4;
    EXPECT_EQ(narrow->fwd_workspace, n >= 64 ? copies : 0) << n;
    EXPECT_EQ(narrow->bwd_weight_workspace, copies) << n;
    EXPECT_GT(OpOfNode(s.value(), b.g, "conv_o")->fwd_workspace, 0) << "overlapping, " << n;
  }
  // From batch 96 and 24576 rows (images x patches) the fp32 weight gradient
  // of 14- to 16-pixel patches of 384 or 512 filters adds split-K partials:
  // 120 and 7 channel-padded weights. At batch 96, 196 patches are 18816 rows.
  {
    GraphBuilder b = graph();
    auto s = Build(&b, 96, Precision::kFp32);
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_EQ(OpOfNode(s.value(), b.g, "conv_n")->bwd_weight_workspace,
              96LL * 4 * 224 * 224 * 4 + 384LL * 4 * 16 * 16 * 4 + 96LL * 384 * 14 * 14 * 4);
  }
  for (int64_t n : {128, 192}) {
    GraphBuilder b = graph();
    auto s = Build(&b, n, Precision::kFp32);
    ASSERT_TRUE(s.ok()) << s.message();
    const int64_t x = n * 4 * 224 * 224 * 4;
    for (int64_t filters : {384, 512}) {
      const int64_t padded_w = filters * 4 * 16 * 16 * 4;
      const int64_t copies = x + padded_w + n * filters * 14 * 14 * 4;
      const int64_t partials = (filters == 384 ? 120 : 7) * padded_w;
      EXPECT_EQ(
          OpOfNode(s.value(), b.g, filters == 384 ? "conv_n" : "conv_w")->bwd_weight_workspace,
          copies + partials)
          << n << " " << filters;
    }
  }
  GraphBuilder h = graph();
  auto sh = Build(&h, 32, Precision::kBf16);
  ASSERT_TRUE(sh.ok()) << sh.message();
  EXPECT_EQ(OpOfNode(sh.value(), h.g, "conv_n")->fwd_workspace, 0);
  EXPECT_EQ(OpOfNode(sh.value(), h.g, "conv_w")->fwd_workspace,
            32LL * 8 * 224 * 224 * 2 + 512LL * 8 * 16 * 16 * 2 + 32LL * 512 * 14 * 14 * 2);
}

TEST(ScheduleConv, MaxPoolMakesItsIndicesEvenWithoutAutograd) {
  GraphBuilder b;
  b.Input("x", {S("N"), D(4), D(8), D(8)});
  Node& mp = b.Op("MaxPool", {"x"}, {"y"}, "pool");
  Ints(mp, "kernel_shape", {2, 2});
  Ints(mp, "strides", {2, 2});
  b.Output("y");
  auto s = Build(&b, 2, Precision::kFp32, Mode::kInference);
  ASSERT_TRUE(s.ok()) << s.message();
  // y is [2, 4, 4, 4]: 128 int64 indices, dropped after the kernel.
  EXPECT_EQ(OpOfNode(s.value(), b.g, "pool")->fwd_workspace, 128 * 8);
}

TEST(ScheduleConv, DropoutIsItsInputInInference) {
  GraphBuilder b;
  b.Input("x", {S("N"), D(64)});
  b.Init("W", {64, 64});
  b.Op("MatMul", {"x", "W"}, {"h"}, "mm");
  b.Op("Dropout", {"h"}, {"d", "mask"}, "drop");
  b.Op("Relu", {"d"}, {"y"}, "relu");
  b.Output("y");
  auto inf = Build(&b, 8, Precision::kFp32, Mode::kInference);
  ASSERT_TRUE(inf.ok()) << inf.message();
  const ExecOp* drop = OpOfNode(inf.value(), b.g, "drop");
  ASSERT_NE(drop, nullptr);
  EXPECT_TRUE(drop->view);
  EXPECT_EQ(inf->vals[b.g.Find("d")].base, b.g.Find("h"));
  // Training draws a mask and writes a new tensor.
  GraphBuilder t = b;
  auto train = Build(&t, 8, Precision::kFp32, Mode::kTrain);
  ASSERT_TRUE(train.ok()) << train.message();
  EXPECT_FALSE(OpOfNode(train.value(), t.g, "drop")->view);
}

// F.dropout(x, 0.0, training=True) returns x itself (_dropout_impl, p == 0):
// the TorchScript export's Dropout(ratio 0, training_mode true) makes no
// tensor in training either; a ratio above 0 does.
TEST(ScheduleConv, DropoutOfProbabilityZeroIsItsInputInTraining) {
  auto build = [](float ratio) {
    GraphBuilder b;
    b.Input("x", {S("N"), D(64)});
    b.Init("W", {64, 64});
    b.Op("MatMul", {"x", "W"}, {"h"}, "mm");
    b.Op("Constant", {}, {"ratio"}, "ratio_const").attrs["value"] =
        TensorAttr(DType::kFloat, {}, {}, {ratio});
    b.Op("Constant", {}, {"on"}, "on_const").attrs["value"] = TensorAttr(DType::kBool, {}, {1});
    b.Op("Dropout", {"h", "ratio", "on"}, {"d", "mask"}, "drop");
    b.Op("Relu", {"d"}, {"y"}, "relu");
    b.Output("y");
    return b;
  };
  GraphBuilder zero = build(0.0F);
  auto s = Build(&zero, 8, Precision::kFp32, Mode::kTrain);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(OpOfNode(s.value(), zero.g, "drop")->view);
  EXPECT_EQ(s->vals[zero.g.Find("d")].base, zero.g.Find("h"));
  GraphBuilder tenth = build(0.1F);
  auto t = Build(&tenth, 8, Precision::kFp32, Mode::kTrain);
  ASSERT_TRUE(t.ok()) << t.message();
  EXPECT_FALSE(OpOfNode(t.value(), tenth.g, "drop")->view);
}

}  // namespace
}  // namespace memplan
