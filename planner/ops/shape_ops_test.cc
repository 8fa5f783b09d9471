#include <gtest/gtest.h>

#include <limits>

#include "planner/op_registry.h"
#include "planner/ops/test_graph.h"
#include "planner/shape_inference.h"

namespace memplan {
namespace {

using testing_util::D;
using testing_util::FloatAttr;
using testing_util::GraphBuilder;
using testing_util::IntAttr;
using testing_util::IntsAttr;
using testing_util::S;
using testing_util::TensorAttr;
using Shape = std::vector<int64_t>;

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

Status Infer(GraphBuilder* b) { return InferShapes(&b->g, ShapeBindings(), nullptr); }

TEST(ShapeOps, ReshapeZeroCopiesAndMinusOneInfers) {
  GraphBuilder b;
  b.Input("x", {D(2), D(3), D(4)});
  b.Ints("t1", {0, -1});
  b.Ints("t2", {-1, 0, 2});
  b.Op("Reshape", {"x", "t1"}, {"y1"});
  b.Op("Reshape", {"x", "t2"}, {"y2"});
  ASSERT_TRUE(Infer(&b).ok());
  EXPECT_EQ(b.T("y1").shape, (Shape{2, 12}));
  EXPECT_EQ(b.T("y2").shape, (Shape{4, 3, 2}));
}

TEST(ShapeOps, ReshapeAllowZeroAndErrors) {
  GraphBuilder b;
  b.Input("x", {D(0), D(3)});
  b.Ints("t", {3, 0});
  b.Op("Reshape", {"x", "t"}, {"y"}).attrs["allowzero"] = IntAttr(1);
  ASSERT_TRUE(Infer(&b).ok());
  EXPECT_EQ(b.T("y").shape, (Shape{3, 0}));

  GraphBuilder bad;
  bad.Input("x", {D(2), D(3)});
  bad.Ints("t", {4, -1});
  bad.Op("Reshape", {"x", "t"}, {"y"}, "r");
  Status s = Infer(&bad);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "m.onnx: node 'r' (Reshape): cannot reshape [2, 3] to [4, -1]");

  GraphBuilder two;
  two.Input("x", {D(2), D(3)});
  two.Ints("t", {-1, -1});
  two.Op("Reshape", {"x", "t"}, {"y"});
  EXPECT_FALSE(Infer(&two).ok());
}

TEST(ShapeOps, ReshapeTargetNotComputable) {
  GraphBuilder b;
  b.Input("x", {D(2), D(3)});
  b.Input("t", {D(2)}, DType::kInt64);  // runtime data, not a constant
  b.Op("Reshape", {"x", "t"}, {"y"}, "r");
  Status s = Infer(&b);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "m.onnx: node 'r' (Reshape): cannot infer: the target shape of Reshape is not a "
            "constant or computable from shapes");
}

TEST(ShapeOps, SliceClampsLikeTheSpec) {
  GraphBuilder b;
  b.Input("x", {D(10), D(5)});
  b.Ints("st", {2, -100});
  b.Ints("en", {kMax, 3});
  b.Op("Slice", {"x", "st", "en"}, {"y"});
  b.Ints("st2", {-3});
  b.Ints("en2", {kMin});
  b.Ints("ax2", {0});
  b.Ints("sp2", {-1});
  b.Op("Slice", {"x", "st2", "en2", "ax2", "sp2"}, {"rev"});  // x[-3::-1] -> 8 rows
  b.Ints("st3", {kMax});
  b.Ints("en3", {kMin});
  b.Ints("ax3", {-1});
  b.Ints("sp3", {-2});
  b.Op("Slice", {"x", "st3", "en3", "ax3", "sp3"}, {"rev2"});  // x[:, ::-2] -> 3 cols
  b.Ints("st4", {7});
  b.Ints("en4", {2});
  b.Op("Slice", {"x", "st4", "en4", "ax2"}, {"empty"});
  b.Ints("sp5", {3});
  b.Ints("st5", {1});
  b.Ints("en5", {10});
  b.Op("Slice", {"x", "st5", "en5", "ax2", "sp5"}, {"step3"});  // 1,4,7 -> 3
  ASSERT_TRUE(Infer(&b).ok());
  EXPECT_EQ(b.T("y").shape, (Shape{8, 3}));
  EXPECT_EQ(b.T("rev").shape, (Shape{8, 5}));
  EXPECT_EQ(b.T("rev2").shape, (Shape{10, 3}));
  EXPECT_EQ(b.T("empty").shape, (Shape{0, 5}));
  EXPECT_EQ(b.T("step3").shape, (Shape{3, 5}));
}

TEST(ShapeOps, SliceValuesWithNegativeStep) {
  GraphBuilder b;
  b.Ints("v", {10, 11, 12, 13, 14});
  b.Ints("st", {-1});
  b.Ints("en", {0});
  b.Ints("ax", {0});
  b.Ints("sp", {-2});
  b.Op("Slice", {"v", "st", "en", "ax", "sp"}, {"y"});
  ASSERT_TRUE(Infer(&b).ok());
  EXPECT_EQ(b.T("y").values, (Shape{14, 12}));
}

TEST(ShapeOps, SliceAttributeFormBeforeOpset10) {
  GraphBuilder b(9);
  b.Input("x", {D(6), D(4)});
  Node& n = b.Op("Slice", {"x"}, {"y"});
  n.attrs["starts"] = IntsAttr({1});
  n.attrs["ends"] = IntsAttr({-1});
  n.attrs["axes"] = IntsAttr({1});
  ASSERT_TRUE(Infer(&b).ok());
  EXPECT_EQ(b.T("y").shape, (Shape{6, 2}));
}

TEST(ShapeOps, SliceZeroStepAndBadAxisAreErrors) {
  GraphBuilder b;
  b.Input("x", {D(6)});
  b.Ints("st", {0});
  b.Ints("en", {3});
  b.Ints("ax", {0});
  b.Ints("sp", {0});
  b.Op("Slice", {"x", "st", "en", "ax", "sp"}, {"y"}, "s");
  Status s = Infer(&b);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "m.onnx: node 's' (Slice): slice step is 0");
  GraphBuilder c;
  c.Input("x", {D(6)});
  c.Ints("st", {0});
  c.Ints("en", {3});
  c.Ints("ax", {1});
  c.Op("Slice", {"x", "st", "en", "ax"}, {"y"});
  EXPECT_FALSE(Infer(&c).ok());
}

TEST(ShapeOps, GatherOnValues) {
  GraphBuilder b;
  b.Ints("v", {5, 6, 7, 8});
  b.Ints("idx", {3, -4});
  b.Scalar("one", 1);
  b.Op("Gather", {"v", "idx"}, {"g"});
  b.Op("Gather", {"v", "one"}, {"s"});
  ASSERT_TRUE(Infer(&b).ok());
  EXPECT_EQ(b.T("g").values, (Shape{8, 5}));
  EXPECT_EQ(b.T("s").shape, Shape{});
  EXPECT_EQ(b.T("s").values, (Shape{6}));
}

TEST(ShapeOps, GatherShapesAndRangeCheck) {
  GraphBuilder b;
  b.Input("w", {D(100), D(16)});
  b.Input("ids", {D(4), D(7)}, DType::kInt64);
  b.Op("Gather", {"w", "ids"}, {"e"});
  ASSERT_TRUE(Infer(&b).ok());
  EXPECT_EQ(b.T("e").shape, (Shape{4, 7, 16}));

  GraphBuilder bad;
  bad.Ints("v", {1, 2});
  bad.Scalar("i", 2);
  bad.Op("Gather", {"v", "i"}, {"y"}, "g");
  Status s = Infer(&bad);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "m.onnx: node 'g' (Gather): index 2 out of range for dim 0 of size 2");
}

TEST(ShapeOps, GatherElementsAndGatherND) {
  GraphBuilder b;
  b.Input("x", {D(3), D(5)});
  b.Input("i", {D(3), D(2)}, DType::kInt64);
  b.Op("GatherElements", {"x", "i"}, {"ge"}).attrs["axis"] = IntAttr(1);
  b.Input("d", {D(2), D(4), D(6)});
  b.Input("q", {D(2), D(3), D(1)}, DType::kInt64);
  b.Op("GatherND", {"d", "q"}, {"gn"}).attrs["batch_dims"] = IntAttr(1);
  ASSERT_TRUE(Infer(&b).ok());
  EXPECT_EQ(b.T("ge").shape, (Shape{3, 2}));
  EXPECT_EQ(b.T("gn").shape, (Shape{2, 3, 6}));
}

TEST(ShapeOps, ConstantForms) {
  GraphBuilder b;
  b.Op("Constant", {}, {"c1"}).attrs["value"] = TensorAttr(DType::kInt64, {2}, {3, 4});
  b.Op("Constant", {}, {"c2"}).attrs["value_int"] = IntAttr(7);
  b.Op("Constant", {}, {"c3"}).attrs["value_ints"] = IntsAttr({1, 2, 3});
  b.Op("Constant", {}, {"c4"}).attrs["value_float"] = FloatAttr(0.5f);
  b.Op("Constant", {}, {"c5"}).attrs["value"] = TensorAttr(DType::kFloat, {2, 2}, {}, {1, 2, 3, 4});
  ASSERT_TRUE(Infer(&b).ok());
  EXPECT_EQ(b.T("c1").values, (Shape{3, 4}));
  EXPECT_EQ(b.T("c2").shape, Shape{});
  EXPECT_EQ(b.T("c2").values, (Shape{7}));
  EXPECT_EQ(b.T("c3").values, (Shape{1, 2, 3}));
  EXPECT_EQ(b.T("c4").dtype, DType::kFloat);
  EXPECT_EQ(b.T("c5").shape, (Shape{2, 2}));
  EXPECT_FALSE(b.T("c5").has_values);
}

TEST(ShapeOps, ConstantOfShapeExpandRangeWhere) {
  GraphBuilder b;
  b.Input("x", {D(4), D(1)});
  b.Ints("shp", {2, 3});
  b.Op("ConstantOfShape", {"shp"}, {"z"}).attrs["value"] = TensorAttr(DType::kInt64, {1}, {9});
  b.Ints("eshape", {3, 4, 5});
  b.Op("Expand", {"x", "eshape"}, {"e"});
  b.Scalar("start", 2);
  b.Scalar("limit", 11);
  b.Scalar("delta", 3);
  b.Op("Range", {"start", "limit", "delta"}, {"r"});
  ASSERT_TRUE(Infer(&b).ok());
  EXPECT_EQ(b.T("z").shape, (Shape{2, 3}));
  EXPECT_EQ(b.T("z").values, Shape(6, 9));
  EXPECT_EQ(b.T("e").shape, (Shape{3, 4, 5}));
  EXPECT_EQ(b.T("r").values, (Shape{2, 5, 8}));
}

TEST(ShapeOps, ExpandIncompatibleIsAnError) {
  GraphBuilder b;
  b.Input("x", {D(4), D(2)});
  b.Ints("eshape", {3, 3});
  b.Op("Expand", {"x", "eshape"}, {"e"}, "ex");
  Status s = Infer(&b);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "m.onnx: node 'ex' (Expand): cannot broadcast [4, 2] to [3, 3]");
}

TEST(ShapeOps, SqueezeUnsqueezeAttrAndInputForms) {
  GraphBuilder old(11);
  old.Input("x", {D(3), D(1), D(4)});
  old.Op("Squeeze", {"x"}, {"s"}).attrs["axes"] = IntsAttr({1});
  old.Op("Unsqueeze", {"x"}, {"u"}).attrs["axes"] = IntsAttr({0, -1});
  old.Op("Squeeze", {"x"}, {"all"});
  ASSERT_TRUE(Infer(&old).ok());
  EXPECT_EQ(old.T("s").shape, (Shape{3, 4}));
  EXPECT_EQ(old.T("u").shape, (Shape{1, 3, 1, 4, 1}));
  EXPECT_EQ(old.T("all").shape, (Shape{3, 4}));

  GraphBuilder nu(13);
  nu.Input("x", {D(3), D(1), D(4)});
  nu.Ints("a", {1});
  nu.Op("Squeeze", {"x", "a"}, {"s"});
  nu.Op("Unsqueeze", {"x", "a"}, {"u"});
  nu.Ints("bad", {0});
  nu.Op("Squeeze", {"x", "bad"}, {"no"}, "sq");
  Status s = Infer(&nu);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "m.onnx: node 'sq' (Squeeze): cannot squeeze dim 0 of size 3 in [3, 1, 4]");
  EXPECT_EQ(nu.T("s").shape, (Shape{3, 4}));
  EXPECT_EQ(nu.T("u").shape, (Shape{3, 1, 1, 4}));
}

TEST(ShapeOps, ConcatValuesAndMismatch) {
  GraphBuilder b;
  b.Input("x", {D(2), D(3)});
  b.Input("y", {D(2), D(5)});
  b.Op("Concat", {"x", "y"}, {"c"}).attrs["axis"] = IntAttr(-1);
  b.Ints("a", {1, 2});
  b.Ints("e", {});
  b.Ints("z", {3});
  b.Op("Concat", {"a", "e", "z"}, {"v"}).attrs["axis"] = IntAttr(0);
  ASSERT_TRUE(Infer(&b).ok());
  EXPECT_EQ(b.T("c").shape, (Shape{2, 8}));
  EXPECT_EQ(b.T("v").values, (Shape{1, 2, 3}));

  GraphBuilder bad;
  bad.Input("x", {D(2), D(3)});
  bad.Input("y", {D(4), D(3)});
  bad.Op("Concat", {"x", "y"}, {"c"}).attrs["axis"] = IntAttr(1);
  EXPECT_FALSE(Infer(&bad).ok());
}

TEST(ShapeOps, SplitForms) {
  GraphBuilder b(18);
  b.Input("x", {D(10), D(4)});
  b.Ints("sp", {3, 7});
  b.Op("Split", {"x", "sp"}, {"a", "b"});
  b.Op("Split", {"x"}, {"c", "d", "e"}).attrs["num_outputs"] = IntAttr(3);
  ASSERT_TRUE(Infer(&b).ok());
  EXPECT_EQ(b.T("a").shape, (Shape{3, 4}));
  EXPECT_EQ(b.T("b").shape, (Shape{7, 4}));
  EXPECT_EQ(b.T("c").shape, (Shape{4, 4}));
  EXPECT_EQ(b.T("e").shape, (Shape{2, 4}));

  GraphBuilder old(11);
  old.Input("x", {D(10), D(4)});
  old.Op("Split", {"x"}, {"a", "b"}).attrs["axis"] = IntAttr(0);
  Node& n = old.Op("Split", {"x"}, {"c", "d"});
  n.attrs["split"] = IntsAttr({1, 3});
  n.attrs["axis"] = IntAttr(1);
  ASSERT_TRUE(Infer(&old).ok());
  EXPECT_EQ(old.T("a").shape, (Shape{5, 4}));
  EXPECT_EQ(old.T("d").shape, (Shape{10, 3}));
}

TEST(ShapeOps, SequencesSplitAtConcat) {
  GraphBuilder b;
  b.Input("x", {D(2), D(5), D(2304)});
  b.Scalar("chunk", 768);
  b.Op("SplitToSequence", {"x", "chunk"}, {"seq"}).attrs["axis"] = IntAttr(2);
  b.Scalar("p", -1);
  b.Op("SequenceAt", {"seq", "p"}, {"last"});
  b.Op("ConcatFromSequence", {"seq"}, {"cat"}).attrs["axis"] = IntAttr(0);
  Node& st = b.Op("ConcatFromSequence", {"seq"}, {"stack"});
  st.attrs["axis"] = IntAttr(0);
  st.attrs["new_axis"] = IntAttr(1);
  b.Op("SequenceConstruct", {"x", "last"}, {"pair"});
  ASSERT_TRUE(Infer(&b).ok());
  const Tensor& seq = b.T("seq");
  EXPECT_TRUE(seq.is_sequence);
  ASSERT_EQ(seq.seq_shapes.size(), 3u);
  EXPECT_EQ(seq.seq_shapes[0], (Shape{2, 5, 768}));
  EXPECT_EQ(b.T("last").shape, (Shape{2, 5, 768}));
  EXPECT_EQ(b.T("cat").shape, (Shape{6, 5, 768}));
  EXPECT_EQ(b.T("stack").shape, (Shape{3, 2, 5, 768}));
  EXPECT_EQ(b.T("pair").seq_shapes.size(), 2u);

  GraphBuilder k;
  k.Input("x", {D(3), D(4)});
  k.Op("SplitToSequence", {"x"}, {"seq"}).attrs["keepdims"] = IntAttr(0);
  ASSERT_TRUE(Infer(&k).ok());
  ASSERT_EQ(k.T("seq").seq_shapes.size(), 3u);
  EXPECT_EQ(k.T("seq").seq_shapes[2], (Shape{4}));
}

TEST(ShapeOps, TilePadFlattenTranspose) {
  GraphBuilder b;
  b.Input("x", {D(2), D(3), D(4)});
  b.Ints("rep", {1, 2, 3});
  b.Op("Tile", {"x", "rep"}, {"t"});
  b.Ints("pads", {0, 1, 2, 0, 1, -1});
  b.Op("Pad", {"x", "pads"}, {"p"});
  b.Op("Flatten", {"x"}, {"f"}).attrs["axis"] = IntAttr(2);
  b.Op("Transpose", {"x"}, {"tr"});
  ASSERT_TRUE(Infer(&b).ok());
  EXPECT_EQ(b.T("t").shape, (Shape{2, 6, 12}));
  EXPECT_EQ(b.T("p").shape, (Shape{2, 5, 5}));
  EXPECT_EQ(b.T("f").shape, (Shape{6, 4}));
  EXPECT_EQ(b.T("tr").shape, (Shape{4, 3, 2}));
}

TEST(ShapeOps, TransposeValuesAndBadPerm) {
  GraphBuilder b;
  b.Init("m", {2, 3}, DType::kInt64, {1, 2, 3, 4, 5, 6});
  b.Op("Transpose", {"m"}, {"t"}).attrs["perm"] = IntsAttr({1, 0});
  ASSERT_TRUE(Infer(&b).ok());
  EXPECT_EQ(b.T("t").values, (Shape{1, 4, 2, 5, 3, 6}));
  GraphBuilder bad;
  bad.Input("x", {D(2), D(3)});
  bad.Op("Transpose", {"x"}, {"t"}).attrs["perm"] = IntsAttr({0, 0});
  EXPECT_FALSE(Infer(&bad).ok());
}

TEST(ShapeOps, NonZeroNeedsValues) {
  GraphBuilder b;
  b.Init("m", {2, 2}, DType::kInt64, {0, 1, 1, 0});
  b.Op("NonZero", {"m"}, {"nz"});
  ASSERT_TRUE(Infer(&b).ok());
  EXPECT_EQ(b.T("nz").shape, (Shape{2, 2}));
  EXPECT_EQ(b.T("nz").values, (Shape{0, 1, 1, 0}));

  GraphBuilder d;
  d.Input("x", {D(5)});
  d.Op("NonZero", {"x"}, {"nz"}, "nz");
  Status s = Infer(&d);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "m.onnx: node 'nz' (NonZero): cannot infer: the output size of NonZero depends on "
            "the input data, which is not known");
}

TEST(ShapeOps, CastTopKCumSumOneHotMisc) {
  GraphBuilder b;
  b.Input("x", {D(4), D(10)});
  b.Ints("iv", {1, 0, 2});
  b.Op("Cast", {"iv"}, {"bv"}).attrs["to"] = IntAttr(static_cast<int64_t>(DType::kBool));
  b.Op("Cast", {"x"}, {"h"}).attrs["to"] = IntAttr(static_cast<int64_t>(DType::kFloat16));
  b.Op("CastLike", {"iv", "x"}, {"fv"});
  b.Scalar("k", 3);
  b.Op("TopK", {"x", "k"}, {"vals", "idx"});
  b.Scalar("ax", 0);
  b.Op("CumSum", {"iv", "ax"}, {"cs"});
  b.Scalar("depth", 5);
  b.Init("onoff", {2}, DType::kFloat);
  b.Op("OneHot", {"iv", "depth", "onoff"}, {"oh"});
  b.Op("Shape", {"x"}, {"sh1"}).attrs["start"] = IntAttr(-1);
  b.Op("Size", {"x"}, {"sz"});
  ASSERT_TRUE(Infer(&b).ok());
  EXPECT_EQ(b.T("bv").values, (Shape{1, 0, 1}));
  EXPECT_EQ(b.T("h").dtype, DType::kFloat16);
  EXPECT_EQ(b.T("fv").dtype, DType::kFloat);
  EXPECT_FALSE(b.T("fv").has_values);
  EXPECT_EQ(b.T("vals").shape, (Shape{4, 3}));
  EXPECT_EQ(b.T("idx").dtype, DType::kInt64);
  EXPECT_EQ(b.T("cs").values, (Shape{1, 1, 3}));
  EXPECT_EQ(b.T("oh").shape, (Shape{3, 5}));
  EXPECT_EQ(b.T("sh1").values, (Shape{10}));
  EXPECT_EQ(b.T("sz").values, (Shape{40}));
}

TEST(ShapeOps, DepthSpaceAndScatter) {
  GraphBuilder b;
  b.Input("x", {D(1), D(8), D(3), D(3)});
  b.Op("DepthToSpace", {"x"}, {"d"}).attrs["blocksize"] = IntAttr(2);
  b.Input("y", {D(1), D(2), D(4), D(6)});
  b.Op("SpaceToDepth", {"y"}, {"s"}).attrs["blocksize"] = IntAttr(2);
  b.Input("data", {D(4), D(5)});
  b.Input("ind", {D(2), D(1)}, DType::kInt64);
  b.Input("upd", {D(2), D(5)});
  b.Op("ScatterND", {"data", "ind", "upd"}, {"sn"});
  ASSERT_TRUE(Infer(&b).ok());
  EXPECT_EQ(b.T("d").shape, (Shape{1, 2, 6, 6}));
  EXPECT_EQ(b.T("s").shape, (Shape{1, 8, 2, 3}));
  EXPECT_EQ(b.T("sn").shape, (Shape{4, 5}));
}

TEST(ShapeOps, RandomGenerators) {
  GraphBuilder b;
  b.Input("x", {D(8), D(1), D(1), D(1)});
  b.Op("RandomUniformLike", {"x"}, {"u"});
  b.Op("RandomNormalLike", {"x"}, {"n"}).attrs["dtype"] =
      IntAttr(static_cast<int64_t>(DType::kFloat16));
  b.Op("Bernoulli", {"x"}, {"keep"});
  b.Op("RandomUniform", {}, {"r"}).attrs["shape"] = IntsAttr({2, 3});
  b.Input("p", {D(4), D(10)});
  b.Op("Multinomial", {"p"}, {"draw"}).attrs["sample_size"] = IntAttr(5);
  ASSERT_TRUE(Infer(&b).ok());
  EXPECT_EQ(b.T("u").shape, (Shape{8, 1, 1, 1}));
  EXPECT_EQ(b.T("u").dtype, DType::kFloat);
  EXPECT_EQ(b.T("n").dtype, DType::kFloat16);
  EXPECT_EQ(b.T("keep").shape, (Shape{8, 1, 1, 1}));
  EXPECT_EQ(b.T("r").shape, (Shape{2, 3}));
  EXPECT_EQ(b.T("draw").shape, (Shape{4, 5}));
  EXPECT_EQ(b.T("draw").dtype, DType::kInt32);
  EXPECT_FALSE(FindOp("", "RandomUniformLike")->differentiable);
  // An unknown dtype code is an error naming the node, not a silent guess.
  GraphBuilder bad;
  bad.Input("x", {D(2)});
  bad.Op("RandomUniformLike", {"x"}, {"u"}, "noise").attrs["dtype"] = IntAttr(99);
  const Status st = Infer(&bad);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("noise"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("unknown dtype 99"), std::string::npos) << st.message();
}

TEST(ShapeOps, OpRules) {
  const OpDef* reshape = FindOp("", "Reshape");
  ASSERT_NE(reshape, nullptr);
  EXPECT_EQ(reshape->alias, Alias::kView);
  for (const char* op : {"Flatten", "Squeeze", "Unsqueeze", "Transpose", "Expand", "Identity",
                         "Slice", "SequenceAt", "Split", "SplitToSequence"}) {
    ASSERT_NE(FindOp("", op), nullptr) << op;
    EXPECT_EQ(FindOp("", op)->alias, Alias::kView) << op;
  }
  EXPECT_EQ(FindOp("ai.onnx", "Concat")->alias, Alias::kNone);
  for (const char* op :
       {"Shape", "Size", "Constant", "ConstantOfShape", "Range", "NonZero", "EyeLike", "OneHot"}) {
    EXPECT_FALSE(FindOp("", op)->differentiable) << op;
  }
  // Gather keeps the indices only when the data needs a gradient.
  SaveContext c;
  c.input_requires_grad = {true, false};
  std::vector<Saved> saved;
  FindOp("", "Gather")->saves(c, &saved);
  ASSERT_EQ(saved.size(), 1u);
  EXPECT_EQ(saved[0].kind, Saved::kInput);
  EXPECT_EQ(saved[0].index, 1);
  saved.clear();
  c.input_requires_grad = {false, false};
  FindOp("", "Gather")->saves(c, &saved);
  EXPECT_TRUE(saved.empty());
  EXPECT_EQ(FindOp("", "Reshape")->saves, nullptr);
  EXPECT_EQ(FindOp("", "Concat")->saves, nullptr);
}

TEST(ShapeOps, BadInputsAreErrorsNotCrashes) {
  // Each case must fail cleanly.
  auto fails = [](GraphBuilder* b) { return !Infer(b).ok(); };
  {
    GraphBuilder b;
    b.Input("x", {D(2)});
    b.Op("Reshape", {"x"}, {"y"});
    EXPECT_TRUE(fails(&b));
  }
  {
    GraphBuilder b;
    b.Input("x", {D(2), D(3)});
    b.Op("Concat", {"x"}, {"y"});  // no axis
    EXPECT_TRUE(fails(&b));
  }
  {
    GraphBuilder b;
    b.Input("x", {D(2), D(3)});
    b.Op("Gather", {"x"}, {"y"});
    EXPECT_TRUE(fails(&b));
  }
  {
    GraphBuilder b;
    b.Input("x", {D(2), D(3)});
    b.Scalar("i", 0);
    b.Op("Gather", {"x", "i"}, {"y"}).attrs["axis"] = IntAttr(5);
    EXPECT_TRUE(fails(&b));
  }
  {
    GraphBuilder b;
    b.Input("x", {D(2), D(3)});
    b.Ints("rep", {1});
    b.Op("Tile", {"x", "rep"}, {"y"});
    EXPECT_TRUE(fails(&b));
  }
  {
    GraphBuilder b;
    b.Input("x", {D(2), D(3)});
    b.Ints("pads", {0, -5, 0, 0});
    b.Op("Pad", {"x", "pads"}, {"y"});
    EXPECT_TRUE(fails(&b));
  }
  {
    GraphBuilder b;
    b.Ints("shp", {2, -3});
    b.Op("ConstantOfShape", {"shp"}, {"y"});
    EXPECT_TRUE(fails(&b));
  }
  {
    GraphBuilder b;
    b.Scalar("a", 0);
    b.Scalar("z", 0);
    b.Op("Range", {"a", "a", "z"}, {"y"});
    EXPECT_TRUE(fails(&b));
  }
  {
    GraphBuilder b;
    b.Input("x", {D(2), D(3)});
    b.Ints("t", {kMax, 2});
    b.Op("Reshape", {"x", "t"}, {"y"});
    EXPECT_TRUE(fails(&b));
  }
  {
    GraphBuilder b;
    b.Input("x", {D(int64_t{1} << 40)});
    b.Ints("rep", {int64_t{1} << 40});
    b.Op("Tile", {"x", "rep"}, {"y"});
    EXPECT_TRUE(fails(&b));
  }
  {
    GraphBuilder b;
    b.Input("x", {D(4)});
    b.Scalar("p", 0);
    b.Op("SequenceAt", {"x", "p"}, {"y"});
    EXPECT_TRUE(fails(&b));
  }
}

}  // namespace
}  // namespace memplan
