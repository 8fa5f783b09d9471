// Tests of FindFusedRegions: erf-form GELU, SiLU and group norm written out
// by exporters.
#include "planner/fusion.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

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

void FloatConstant(GraphBuilder* b, const std::string& name, double v) {
  b->Op("Constant", {}, {name}, name + "_const").attrs["value"] =
      TensorAttr(DType::kFloat, {}, {}, {v});
}

enum class Assoc {
  kProductThenHalf,  // (x * (1 + erf)) * 0.5
  kHalfThenProduct,  // (x * 0.5) * (1 + erf)
};

struct GeluOptions {
  Assoc assoc = Assoc::kProductThenHalf;
  bool multiply_by_inverse = false;  // x * (1/sqrt 2) instead of x / sqrt 2
  double divisor = std::sqrt(2.0);
  bool erf_is_output = false;
};

// x [2, 8] -> erf-GELU -> y.
GraphBuilder GeluGraph(const GeluOptions& o) {
  GraphBuilder b;
  b.Input("x", {D(2), D(8)});
  if (o.multiply_by_inverse) {
    FloatConstant(&b, "c", 1.0 / o.divisor);
    b.Op("Mul", {"x", "c"}, {"a"}, "scale");
  } else {
    FloatConstant(&b, "c", o.divisor);
    b.Op("Div", {"x", "c"}, {"a"}, "scale");
  }
  b.Op("Erf", {"a"}, {"e"}, "erf");
  FloatConstant(&b, "one", 1.0);
  b.Op("Add", {"e", "one"}, {"f"}, "add");
  FloatConstant(&b, "half", 0.5);
  if (o.assoc == Assoc::kProductThenHalf) {
    b.Op("Mul", {"x", "f"}, {"g"}, "mul_x");
    b.Op("Mul", {"g", "half"}, {"y"}, "mul_half");
  } else {
    b.Op("Mul", {"x", "half"}, {"h"}, "mul_half");
    b.Op("Mul", {"f", "h"}, {"y"}, "mul_x");
  }
  b.Op("Relu", {"y"}, {"z"}, "after");
  b.Output("z");
  if (o.erf_is_output) b.Output("e");
  return b;
}

std::vector<FusedRegion> Find(GraphBuilder* b) {
  Status s = InferShapes(&b->g, ShapeBindings(), nullptr);
  EXPECT_TRUE(s.ok()) << s.message();
  return FindFusedRegions(b->g);
}

int NodeIndex(const Graph& g, const std::string& name) {
  for (int i = 0; i < static_cast<int>(g.nodes.size()); ++i) {
    if (g.nodes[i].name == name) return i;
  }
  return -1;
}

void ExpectGelu(const GraphBuilder& b, const std::vector<FusedRegion>& regions) {
  ASSERT_EQ(regions.size(), 1u);
  const FusedRegion& r = regions[0];
  EXPECT_EQ(r.op_type, "Gelu");
  EXPECT_EQ(r.input, b.g.Find("x"));
  EXPECT_EQ(r.output, b.g.Find("y"));
  EXPECT_EQ(r.last_node, b.g.tensors[b.g.Find("y")].producer);
  std::vector<int> nodes = r.nodes;
  std::sort(nodes.begin(), nodes.end());
  std::vector<int> want;
  for (const char* n : {"scale", "erf", "add", "mul_x", "mul_half"}) {
    want.push_back(NodeIndex(b.g, n));
  }
  std::sort(want.begin(), want.end());
  EXPECT_EQ(nodes, want) << "the five arithmetic nodes, not the constants or the consumer";
}

TEST(Fusion, ErfGeluProductThenHalf) {
  GraphBuilder b = GeluGraph(GeluOptions());
  ExpectGelu(b, Find(&b));
}

TEST(Fusion, ErfGeluHalfThenProduct) {
  GeluOptions o;
  o.assoc = Assoc::kHalfThenProduct;
  GraphBuilder b = GeluGraph(o);
  ExpectGelu(b, Find(&b));
}

TEST(Fusion, ErfGeluMultipliedByInverseSqrt2) {
  GeluOptions o;
  o.multiply_by_inverse = true;
  GraphBuilder b = GeluGraph(o);
  ExpectGelu(b, Find(&b));
}

TEST(Fusion, NearMissConstantIsNotGelu) {
  for (Assoc a : {Assoc::kProductThenHalf, Assoc::kHalfThenProduct}) {
    GeluOptions o;
    o.assoc = a;
    o.divisor = 1.5;
    GraphBuilder b = GeluGraph(o);
    EXPECT_TRUE(Find(&b).empty());
  }
  GeluOptions o;
  o.divisor = 1.5;
  o.multiply_by_inverse = true;
  GraphBuilder b = GeluGraph(o);
  EXPECT_TRUE(Find(&b).empty());
}

TEST(Fusion, InnerTensorUsedOutsideIsNotFused) {
  GeluOptions o;
  o.erf_is_output = true;
  GraphBuilder b = GeluGraph(o);
  EXPECT_TRUE(Find(&b).empty());
}

TEST(Fusion, WrongHalfIsNotGelu) {
  GraphBuilder b;
  b.Input("x", {D(2), D(8)});
  FloatConstant(&b, "c", std::sqrt(2.0));
  b.Op("Div", {"x", "c"}, {"a"});
  b.Op("Erf", {"a"}, {"e"});
  FloatConstant(&b, "one", 1.0);
  b.Op("Add", {"e", "one"}, {"f"});
  b.Op("Mul", {"x", "f"}, {"g"});
  FloatConstant(&b, "third", 0.33);
  b.Op("Mul", {"g", "third"}, {"y"});
  b.Output("y");
  EXPECT_TRUE(Find(&b).empty());
}

TEST(Fusion, ScheduleRunsOneGeluThatKeepsItsInput) {
  // x @ W -> GELU -> y: training keeps only the GELU input, not erf's.
  GraphBuilder b;
  b.Input("x0", {D(2), D(8)});
  b.Init("W", {8, 8});
  b.Op("MatMul", {"x0", "W"}, {"x"}, "mm");
  FloatConstant(&b, "c", std::sqrt(2.0));
  b.Op("Div", {"x", "c"}, {"a"}, "scale");
  b.Op("Erf", {"a"}, {"e"}, "erf");
  FloatConstant(&b, "one", 1.0);
  b.Op("Add", {"e", "one"}, {"f"}, "add");
  b.Op("Mul", {"x", "f"}, {"g"}, "mul_x");
  FloatConstant(&b, "half", 0.5);
  b.Op("Mul", {"g", "half"}, {"y"}, "mul_half");
  b.Output("y");
  Status st = InferShapes(&b.g, ShapeBindings(), nullptr);
  ASSERT_TRUE(st.ok()) << st.message();
  PlanOptions o;
  o.mode = Mode::kTrain;
  auto s = BuildSchedule(b.g, o);
  ASSERT_TRUE(s.ok()) << s.message();
  int gelu = 0;
  for (const ExecOp& op : s->ops) {
    EXPECT_NE(op.op_type, "Erf");
    EXPECT_NE(op.op_type, "Div");
    if (op.op_type != "Gelu") continue;
    ++gelu;
    EXPECT_EQ(op.in, (std::vector<int>{b.g.Find("x")}));
    EXPECT_EQ(op.out, (std::vector<int>{b.g.Find("y")}));
    ASSERT_EQ(op.saved.size(), 1u);
    EXPECT_EQ(op.saved[0].val, b.g.Find("x"));
  }
  EXPECT_EQ(gelu, 1);
}

TEST(Fusion, SigmoidTimesItsInputIsOneSiluThatKeepsItsInput) {
  // x @ W -> x * sigmoid(x) -> y; and an SE-style gate z * sigmoid(x), which
  // is no SiLU.
  GraphBuilder b;
  b.Input("x0", {D(2), D(8)});
  b.Input("z", {D(2), D(8)});
  b.Init("W", {8, 8});
  b.Op("MatMul", {"x0", "W"}, {"x"}, "mm");
  b.Op("Sigmoid", {"x"}, {"s"}, "sig");
  b.Op("Mul", {"s", "x"}, {"y"}, "mul");
  b.Op("Sigmoid", {"x"}, {"s2"}, "gate_sig");
  b.Op("Mul", {"z", "s2"}, {"gated"}, "gate");
  b.Op("Add", {"y", "gated"}, {"out"}, "add");
  b.Output("out");
  ASSERT_TRUE(InferShapes(&b.g, ShapeBindings(), nullptr).ok());
  auto regions = FindFusedRegions(b.g);
  ASSERT_EQ(regions.size(), 1u);
  EXPECT_EQ(regions[0].op_type, "Swish");
  EXPECT_EQ(regions[0].input, b.g.Find("x"));
  EXPECT_EQ(regions[0].output, b.g.Find("y"));
  PlanOptions o;
  o.mode = Mode::kTrain;
  auto s = BuildSchedule(b.g, o);
  ASSERT_TRUE(s.ok()) << s.message();
  int swish = 0, sigmoid = 0;
  for (const ExecOp& op : s->ops) {
    if (op.op_type == "Sigmoid") ++sigmoid;
    if (op.op_type != "Swish") continue;
    ++swish;
    ASSERT_EQ(op.saved.size(), 1u);
    EXPECT_EQ(op.saved[0].val, b.g.Find("x"));
  }
  EXPECT_EQ(swish, 1);
  EXPECT_EQ(sigmoid, 1);  // the gate's
}

// x [2, 8] -> Split(axis 1) -> a * sigmoid(b) -> y, as both exporters write
// F.glu; with `a_used_elsewhere`, a also feeds the output.
GraphBuilder GluGraph(bool a_used_elsewhere) {
  GraphBuilder b;
  b.Input("x0", {D(2), D(8)});
  b.Init("W", {8, 8});
  b.Op("MatMul", {"x0", "W"}, {"x"}, "mm");
  b.Op("Split", {"x"}, {"a", "b"}, "split").attrs["axis"] = testing_util::IntAttr(1);
  b.g.nodes.back().attrs["num_outputs"] = testing_util::IntAttr(2);
  b.Op("Sigmoid", {"b"}, {"s"}, "sig");
  b.Op("Mul", {"a", "s"}, {"y"}, "mul");
  if (a_used_elsewhere) {
    b.Op("Add", {"y", "a"}, {"out"}, "add");
    b.Output("out");
  } else {
    b.Output("y");
  }
  return b;
}

TEST(Fusion, SplitHalfTimesSigmoidOfTheOtherIsOneGluThatKeepsItsInput) {
  GraphBuilder b = GluGraph(false);
  ASSERT_TRUE(InferShapes(&b.g, ShapeBindings(), nullptr).ok());
  auto regions = FindFusedRegions(b.g);
  ASSERT_EQ(regions.size(), 1u);
  EXPECT_EQ(regions[0].op_type, "Glu");
  EXPECT_EQ(regions[0].input, b.g.Find("x"));
  EXPECT_EQ(regions[0].output, b.g.Find("y"));
  PlanOptions o;
  o.mode = Mode::kTrain;
  auto s = BuildSchedule(b.g, o);
  ASSERT_TRUE(s.ok()) << s.message();
  int glu = 0;
  for (const ExecOp& op : s->ops) {
    EXPECT_NE(op.op_type, "Sigmoid");
    EXPECT_NE(op.op_type, "Split");
    if (op.op_type != "Glu") continue;
    ++glu;
    EXPECT_EQ(op.out, (std::vector<int>{b.g.Find("y")}));
    ASSERT_EQ(op.saved.size(), 1u);
    EXPECT_EQ(op.saved[0].val, b.g.Find("x"));
  }
  EXPECT_EQ(glu, 1);

  GraphBuilder other = GluGraph(true);
  ASSERT_TRUE(InferShapes(&other.g, ShapeBindings(), nullptr).ok());
  EXPECT_TRUE(FindFusedRegions(other.g).empty()) << "a half read outside is no GLU";
}

// ---------------------------------------------------------------- group norm

struct GroupNormOptions {
  bool dtype_readers = false;  // torchlib: CastLike(weight, z) reads z for its dtype
  bool affine = true;
  bool inner_used_outside = false;  // z also feeds a Relu
  bool fold_mixes_batch = false;    // Reshape to [1, G, -1] instead of [N, G, -1]
  bool with_conv = true;            // x comes from a 1x1 conv (else x is the graph input)
};

// x0 [N, 8, 4, 4] -> 1x1 conv -> x -> F.group_norm(x, 2, gw, gb) -> y, as
// the exporters write it.
GraphBuilder GroupNormGraph(const GroupNormOptions& o, int64_t hw = 4) {
  GraphBuilder b;
  b.Input("x0", {testing_util::S("N"), D(8), D(hw), D(hw)});
  b.Init("gw", {8});
  b.Init("gb", {8});
  std::string x = "x0";
  if (o.with_conv) {
    b.Init("W", {8, 8, 1, 1});
    b.Op("Conv", {"x0", "W"}, {"x"}, "conv");
    x = "x";
  }
  b.Ints("fold_shape", {o.fold_mixes_batch ? 1 : 0, 2, -1});
  b.Op("Reshape", {x, "fold_shape"}, {"r"}, "fold");
  b.Op("Constant", {}, {"ones"}, "ones").attrs["value"] =
      TensorAttr(DType::kFloat, {2}, {}, {1.0, 1.0});
  b.Op("Constant", {}, {"zeros"}, "zeros").attrs["value"] =
      TensorAttr(DType::kFloat, {2}, {}, {0.0, 0.0});
  b.Op("InstanceNormalization", {"r", "ones", "zeros"}, {"n"}, "inorm");
  b.Op("Shape", {x}, {"xs"}, "shape");
  b.Op("Reshape", {"n", "xs"}, {"z"}, "unfold");
  if (!o.affine) {
    b.Output("z");
    return b;
  }
  b.Ints("axes", {1, 2});
  b.Op("Unsqueeze", {"gw", "axes"}, {"gw3"}, "unsq_w");
  b.Op("Unsqueeze", {"gb", "axes"}, {"gb3"}, "unsq_b");
  std::string w = "gw3", bias = "gb3";
  if (o.dtype_readers) {
    b.Op("CastLike", {"gw3", "z"}, {"gwc"}, "castlike_w");
    w = "gwc";
  }
  b.Op("Mul", {"z", w}, {"m"}, "mul");
  if (o.dtype_readers) {
    b.Op("CastLike", {"gb3", "m"}, {"gbc"}, "castlike_b");
    bias = "gbc";
  }
  b.Op("Add", {"m", bias}, {"y"}, "add");
  if (o.inner_used_outside) {
    b.Op("Relu", {"z"}, {"zr"}, "relu");
    b.Op("Add", {"y", "zr"}, {"out"}, "join");
    b.Output("out");
  } else {
    b.Output("y");
  }
  return b;
}

std::vector<FusedRegion> GroupNormRegions(GraphBuilder* b) {
  ShapeBindings bind;
  bind.batch = 2;
  Status st = InferShapes(&b->g, bind, nullptr);
  EXPECT_TRUE(st.ok()) << st.message();
  std::vector<FusedRegion> out;
  for (FusedRegion& r : FindFusedRegions(b->g)) {
    if (r.op_type == "GroupNormalization") out.push_back(r);
  }
  return out;
}

std::vector<int> Nodes(const GraphBuilder& b, const std::vector<std::string>& names) {
  std::vector<int> v;
  for (const std::string& n : names) v.push_back(NodeIndex(b.g, n));
  std::sort(v.begin(), v.end());
  return v;
}

TEST(FusionGroupNorm, TorchScriptFormIsOneGroupNormWithWeightAndBias) {
  GraphBuilder b = GroupNormGraph(GroupNormOptions());
  auto regions = GroupNormRegions(&b);
  ASSERT_EQ(regions.size(), 1u);
  const FusedRegion& r = regions[0];
  EXPECT_EQ(r.input, b.g.Find("x"));
  EXPECT_EQ(r.output, b.g.Find("y"));
  EXPECT_EQ(r.weight, b.g.Find("gw"));
  EXPECT_EQ(r.bias, b.g.Find("gb"));
  EXPECT_EQ(r.groups, 2);
  EXPECT_EQ(r.last_node, NodeIndex(b.g, "add"));
  std::vector<int> nodes = r.nodes;
  std::sort(nodes.begin(), nodes.end());
  EXPECT_EQ(nodes, Nodes(b, {"fold", "ones", "zeros", "inorm", "unfold", "unsq_w", "unsq_b", "mul",
                             "add"}));
}

TEST(FusionGroupNorm, DtypeReadersOfTheInnerTensorsAreReplacedToo) {
  GroupNormOptions o;
  o.dtype_readers = true;
  GraphBuilder b = GroupNormGraph(o);
  auto regions = GroupNormRegions(&b);
  ASSERT_EQ(regions.size(), 1u);
  EXPECT_EQ(regions[0].output, b.g.Find("y"));
  EXPECT_EQ(regions[0].weight, b.g.Find("gw"));
  std::vector<int> nodes = regions[0].nodes;
  std::sort(nodes.begin(), nodes.end());
  EXPECT_EQ(nodes, Nodes(b, {"fold", "ones", "zeros", "inorm", "unfold", "unsq_w", "unsq_b",
                             "castlike_w", "castlike_b", "mul", "add"}));
}

TEST(FusionGroupNorm, WithoutAffineOrWithTheNormalisedTensorUsedElsewhere) {
  GroupNormOptions o;
  o.affine = false;
  GraphBuilder b = GroupNormGraph(o);
  auto regions = GroupNormRegions(&b);
  ASSERT_EQ(regions.size(), 1u);
  EXPECT_EQ(regions[0].output, b.g.Find("z"));
  EXPECT_EQ(regions[0].weight, -1);
  EXPECT_EQ(regions[0].bias, -1);
  // The normalised tensor feeds a Relu too: the affine ops stay separate.
  GroupNormOptions u;
  u.inner_used_outside = true;
  GraphBuilder c = GroupNormGraph(u);
  regions = GroupNormRegions(&c);
  ASSERT_EQ(regions.size(), 1u);
  EXPECT_EQ(regions[0].output, c.g.Find("z"));
  EXPECT_EQ(regions[0].weight, -1);
}

TEST(FusionGroupNorm, AFoldThatMixesTheBatchIsNoGroupNorm) {
  GroupNormOptions o;
  o.fold_mixes_batch = true;
  GraphBuilder b = GroupNormGraph(o);
  EXPECT_TRUE(GroupNormRegions(&b).empty());
}

Result<Schedule> GroupNormSchedule(GraphBuilder* b, Precision p) {
  ShapeBindings bind;
  bind.batch = 2;
  Status st = InferShapes(&b->g, bind, nullptr);
  if (!st.ok()) return st;
  PlanOptions o;
  o.mode = Mode::kTrain;
  o.precision = p;
  return BuildSchedule(b->g, o);
}

// N = 2, C = 8, G = 2, 4x4: x is 2*8*16 = 256 values.
//   fp32: mean and rstd [2, 2] = 16 B each (saved); forward scale and shift
//   [N, C] fp32, 64 B each; backward ds, db [N, C], then c2, c3 [N, G]
//   (16 B each) and c1 [N, C], each its own block.
TEST(FusionGroupNorm, ScheduleRunsOneNativeGroupNorm) {
  GroupNormOptions o;
  o.dtype_readers = true;
  GraphBuilder b = GroupNormGraph(o);
  auto s = GroupNormSchedule(&b, Precision::kFp32);
  ASSERT_TRUE(s.ok()) << s.message();
  int gn = 0;
  for (const ExecOp& op : s->ops) {
    EXPECT_NE(op.op_type, "InstanceNormalization");
    EXPECT_NE(op.op_type, "Mul");
    EXPECT_NE(op.op_type, "CastLike");
    if (op.op_type != "GroupNormalization") continue;
    ++gn;
    EXPECT_EQ(op.in, (std::vector<int>{b.g.Find("x"), b.g.Find("gw"), b.g.Find("gb")}));
    EXPECT_EQ(op.out, (std::vector<int>{b.g.Find("y")}));
    EXPECT_EQ(op.grad_in, (std::vector<bool>{true, true, true}));
    ASSERT_EQ(op.saved.size(), 4u);
    EXPECT_EQ(op.saved[0].val, b.g.Find("x"));
    EXPECT_EQ(op.saved[1].val, b.g.Find("gw"));
    EXPECT_EQ(op.saved[2].bytes, 16);
    EXPECT_EQ(op.saved[3].bytes, 16);
    EXPECT_EQ(op.fwd_workspace, 0);
    EXPECT_EQ(op.bwd_workspace, 0);
    EXPECT_EQ(op.fwd_kernel_temp_bytes, (std::vector<int64_t>{64, 64}));
    EXPECT_EQ(op.bwd_kernel_temp_bytes, (std::vector<int64_t>{64, 64, 16, 16, 64}));
  }
  EXPECT_EQ(gn, 1);
  EXPECT_EQ(s->vals[b.g.Find("y")].bytes, 256 * 4);
}

// Autocast runs group_norm in fp32: the bf16 conv output is copied to fp32
// (1024 B), the output is fp32, mean and rstd are fp32. The whole model cast
// to bf16 keeps bf16 (mean and rstd 8 B each) and adds fp32 copies of mean
// and rstd (16 B each) to the forward's temporaries, before scale and shift.
TEST(FusionGroupNorm, Fp32UnderAutocastBf16WhenCast) {
  GraphBuilder b = GroupNormGraph(GroupNormOptions());
  auto s = GroupNormSchedule(&b, Precision::kAmpBf16);
  ASSERT_TRUE(s.ok()) << s.message();
  const int x = b.g.Find("x");
  EXPECT_EQ(s->vals[x].dtype, DType::kBFloat16);
  const ExecOp* gn = nullptr;
  for (const ExecOp& op : s->ops) {
    if (op.op_type == "GroupNormalization") gn = &op;
  }
  ASSERT_TRUE(gn);
  ASSERT_EQ(gn->in.size(), 3u);
  EXPECT_NE(gn->in[0], x);
  EXPECT_EQ(s->vals[gn->in[0]].dtype, DType::kFloat);
  EXPECT_EQ(s->vals[gn->in[0]].bytes, 1024);
  EXPECT_EQ(gn->in[1], b.g.Find("gw"));  // fp32 parameters as they are
  EXPECT_EQ(s->vals[b.g.Find("y")].dtype, DType::kFloat);
  EXPECT_EQ(s->vals[b.g.Find("y")].bytes, 1024);
  ASSERT_EQ(gn->saved.size(), 4u);
  EXPECT_EQ(gn->saved[0].val, gn->in[0]);
  EXPECT_EQ(gn->saved[2].bytes, 16);

  GraphBuilder h = GroupNormGraph(GroupNormOptions());
  auto sh = GroupNormSchedule(&h, Precision::kBf16);
  ASSERT_TRUE(sh.ok()) << sh.message();
  for (const ExecOp& op : sh->ops) {
    if (op.op_type != "GroupNormalization") continue;
    EXPECT_EQ(op.in[0], h.g.Find("x"));
    EXPECT_EQ(sh->vals[h.g.Find("y")].bytes, 512);
    EXPECT_EQ(op.saved[2].bytes, 8);
    EXPECT_EQ(op.fwd_kernel_temp_bytes, (std::vector<int64_t>{16, 16, 64, 64}));
    EXPECT_EQ(op.bwd_kernel_temp_bytes, (std::vector<int64_t>{64, 64, 16, 16, 64}));
  }
}

// Inference, fp32, x0 [2, 8, 16, 16] = 16384 B straight into group norm:
//   weight and bias (32 B each, one 512 B block each) + x0 + y (16384 B)
//   + mean and rstd, which the op returns and nobody keeps, and the scale
//   and shift (16, 16, 64 and 64 B: four 512 B blocks) = 35840 B.
// Planned as the pieces it would hold the normalised tensor and the product
// as well.
TEST(FusionGroupNorm, InferencePeakIsInputOutputAndTemporaries) {
  GroupNormOptions o;
  o.with_conv = false;
  GraphBuilder b = GroupNormGraph(o, 16);
  ShapeBindings bind;
  bind.batch = 2;
  ASSERT_TRUE(InferShapes(&b.g, bind, nullptr).ok());
  PlanOptions po;
  po.mode = Mode::kInference;
  auto plan = MakePlan(b.g, 2, po);
  ASSERT_TRUE(plan.ok()) << plan.message();
  EXPECT_EQ(plan->peak.allocated_bytes, 1024 + 16384 + 16384 + 4 * 512);
  EXPECT_EQ(plan->peak.node, "add");
}

// A Conv1d weight [K, C, kernel] under weight norm over its last dim (as
// wav2vec2's positional convolution): ReduceL2(v) -> Div(v, .) -> Mul(., g)
// into a convolution. `kept` is the dim the norm keeps.
GraphBuilder WeightNormGraph(int kept, bool unit_read_twice = false) {
  GraphBuilder b;
  b.Input("x", {D(2), D(16), D(40)});
  b.Init("v", {16, 4, 8});
  std::vector<int64_t> gs = {1, 1, 1};
  gs[kept] = std::vector<int64_t>{16, 4, 8}[kept];
  b.Init("g", gs);
  std::vector<int64_t> axes;
  for (int d = 0; d < 3; ++d) {
    if (d != kept) axes.push_back(d);
  }
  Node& l2 = b.Op("ReduceL2", {"v"}, {"norm"}, "l2");
  l2.attrs["axes"] = IntsAttr(axes);
  l2.attrs["keepdims"] = IntAttr(1);
  b.Op("Div", {"v", "norm"}, {"unit"}, "div");
  b.Op("Mul", {"unit", "g"}, {"w"}, "mul");
  Node& conv = b.Op("Conv", {"x", "w"}, {"y"}, "conv");
  conv.attrs["group"] = IntAttr(4);
  conv.attrs["pads"] = IntsAttr({4, 3});
  if (unit_read_twice) b.Output("unit");
  b.Output("y");
  return b;
}

std::vector<FusedRegion> WeightNormRegions(GraphBuilder* b) {
  Status st = InferShapes(&b->g, ShapeBindings(), nullptr);
  EXPECT_TRUE(st.ok()) << st.message();
  std::vector<FusedRegion> out;
  for (FusedRegion& r : FindFusedRegions(b->g)) {
    if (r.op_type == "WeightNorm") out.push_back(r);
  }
  return out;
}

TEST(FusionWeightNorm, NormOverTheLastDimIsOneWeightNorm) {
  GraphBuilder b = WeightNormGraph(2);
  auto regions = WeightNormRegions(&b);
  ASSERT_EQ(regions.size(), 1u);
  const FusedRegion& r = regions[0];
  EXPECT_EQ(r.input, b.g.Find("v"));
  EXPECT_EQ(r.weight, b.g.Find("g"));
  EXPECT_EQ(r.output, b.g.Find("w"));
  EXPECT_EQ(r.last_node, NodeIndex(b.g, "mul"));
  std::vector<int> nodes = r.nodes;
  std::sort(nodes.begin(), nodes.end());
  EXPECT_EQ(nodes, Nodes(b, {"l2", "div", "mul"}));
  // dim 0 (nn.utils.weight_norm's default) is the fused kernel's too.
  GraphBuilder first = WeightNormGraph(0);
  EXPECT_EQ(WeightNormRegions(&first).size(), 1u);
}

// A middle dim runs PyTorch's composite path, and an inner tensor read
// elsewhere cannot be fused away.
TEST(FusionWeightNorm, MiddleDimOrAnInnerTensorReadElsewhereIsNotFused) {
  GraphBuilder middle = WeightNormGraph(1);
  EXPECT_TRUE(WeightNormRegions(&middle).empty());
  GraphBuilder read = WeightNormGraph(2, true);
  EXPECT_TRUE(WeightNormRegions(&read).empty());
}

// Training runs one WeightNorm that makes w and keeps the float32 norms
// (g's size), not the pieces' v / ||v||.
TEST(FusionWeightNorm, ScheduleRunsOneWeightNormThatKeepsTheNorms) {
  GraphBuilder b = WeightNormGraph(2);
  Status st = InferShapes(&b.g, ShapeBindings(), nullptr);
  ASSERT_TRUE(st.ok()) << st.message();
  PlanOptions o;
  o.mode = Mode::kTrain;
  auto s = BuildSchedule(b.g, o);
  ASSERT_TRUE(s.ok()) << s.message();
  int fused = 0;
  for (const ExecOp& op : s->ops) {
    EXPECT_NE(op.op_type, "Div");
    EXPECT_NE(op.op_type, "ReduceL2");
    if (op.op_type != "WeightNorm") continue;
    ++fused;
    EXPECT_EQ(op.in, (std::vector<int>{b.g.Find("v"), b.g.Find("g")}));
    EXPECT_EQ(op.out, (std::vector<int>{b.g.Find("w")}));
    int64_t extra = 0;
    for (const SavedRef& sv : op.saved) {
      if (sv.val < 0) extra += sv.bytes;
    }
    EXPECT_EQ(extra, 8 * 4);  // the norms: 8 float32 values
  }
  EXPECT_EQ(fused, 1);
}

}  // namespace
}  // namespace memplan
