#include <gtest/gtest.h>

#include "planner/op_registry.h"
#include "planner/ops/test_graph.h"
#include "planner/shape_inference.h"

namespace memplan {
namespace {

using testing_util::D;
using testing_util::GraphBuilder;
using testing_util::IntAttr;
using testing_util::StringAttr;
using testing_util::TensorAttr;
using Shape = std::vector<int64_t>;

Status Infer(GraphBuilder* b) { return InferShapes(&b->g, ShapeBindings(), nullptr); }

TEST(ElementwiseOps, MultidirectionalBroadcasting) {
  GraphBuilder b;
  b.Input("a", {D(8), D(1), D(6), D(1)});
  b.Input("c", {D(7), D(1), D(5)});
  b.Input("s", {});
  b.Op("Add", {"a", "c"}, {"y"});
  b.Op("Mul", {"a", "s"}, {"z"});
  b.Op("Less", {"a", "c"}, {"lt"});
  b.Op("Sum", {"a", "c", "s"}, {"sum"});
  b.Op("Max", {"a"}, {"m1"});
  ASSERT_TRUE(Infer(&b).ok());
  EXPECT_EQ(b.T("y").shape, (Shape{8, 7, 6, 5}));
  EXPECT_EQ(b.T("y").dtype, DType::kFloat);
  EXPECT_EQ(b.T("z").shape, (Shape{8, 1, 6, 1}));
  EXPECT_EQ(b.T("lt").dtype, DType::kBool);
  EXPECT_EQ(b.T("sum").shape, (Shape{8, 7, 6, 5}));
  EXPECT_EQ(b.T("m1").shape, (Shape{8, 1, 6, 1}));
}

TEST(ElementwiseOps, GluHalvesItsAxis) {
  GraphBuilder b;
  b.Input("x", {D(4), D(512), D(127)});
  b.Op("Glu", {"x"}, {"y"}).attrs["axis"] = IntAttr(1);
  b.Op("Glu", {"x"}, {"z"});  // default axis -1: 127 is odd
  b.g.nodes.back().name = "glu_last";
  Status s = Infer(&b);
  EXPECT_EQ(b.T("y").shape, (Shape{4, 256, 127}));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "m.onnx: node 'glu_last' (Glu): dim 2 of input 'x' is 127, not even");
}

TEST(ElementwiseOps, NonBroadcastableIsAnError) {
  GraphBuilder b;
  b.Input("a", {D(2), D(3)});
  b.Input("c", {D(4), D(3)});
  b.Op("Add", {"a", "c"}, {"y"}, "add");
  Status s = Infer(&b);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "m.onnx: node 'add' (Add): cannot broadcast [2, 3] with [4, 3] (input 'c')");
}

TEST(ElementwiseOps, DtypeMismatchIsAnError) {
  GraphBuilder b;
  b.Input("a", {D(2)});
  b.Input("c", {D(2)}, DType::kInt64);
  b.Op("Add", {"a", "c"}, {"y"}, "add");
  Status s = Infer(&b);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "m.onnx: node 'add' (Add): inputs have different dtypes (float32 and int64)");
}

TEST(ElementwiseOps, IntegerValuePropagation) {
  GraphBuilder b;
  b.Ints("v", {7, -7, 12});
  b.Scalar("two", 2);
  b.Op("Add", {"v", "two"}, {"add"});
  b.Op("Sub", {"v", "two"}, {"sub"});
  b.Op("Mul", {"v", "two"}, {"mul"});
  b.Op("Div", {"v", "two"}, {"div"});
  b.Op("Mod", {"v", "two"}, {"mod"});
  b.Op("Max", {"v", "two"}, {"max"});
  b.Op("Min", {"v", "two"}, {"min"});
  b.Op("Pow", {"v", "two"}, {"pow"});
  b.Op("Equal", {"v", "two"}, {"eq"});
  b.Op("Greater", {"v", "two"}, {"gt"});
  b.Op("Not", {"gt"}, {"ngt"});
  b.Op("And", {"eq", "gt"}, {"and"});
  b.Op("Or", {"eq", "gt"}, {"or"});
  b.Op("Neg", {"v"}, {"neg"});
  b.Op("Where", {"gt", "v", "two"}, {"where"});
  ASSERT_TRUE(Infer(&b).ok());
  EXPECT_EQ(b.T("add").values, (Shape{9, -5, 14}));
  EXPECT_EQ(b.T("sub").values, (Shape{5, -9, 10}));
  EXPECT_EQ(b.T("mul").values, (Shape{14, -14, 24}));
  EXPECT_EQ(b.T("div").values, (Shape{3, -3, 6}));
  EXPECT_EQ(b.T("mod").values, (Shape{1, 1, 0}));  // fmod=0: sign of the divisor
  EXPECT_EQ(b.T("max").values, (Shape{7, 2, 12}));
  EXPECT_EQ(b.T("min").values, (Shape{2, -7, 2}));
  EXPECT_EQ(b.T("pow").values, (Shape{49, 49, 144}));
  EXPECT_EQ(b.T("eq").values, (Shape{0, 0, 0}));
  EXPECT_EQ(b.T("gt").values, (Shape{1, 0, 1}));
  EXPECT_EQ(b.T("ngt").values, (Shape{0, 1, 0}));
  EXPECT_EQ(b.T("and").values, (Shape{0, 0, 0}));
  EXPECT_EQ(b.T("or").values, (Shape{1, 0, 1}));
  EXPECT_EQ(b.T("neg").values, (Shape{-7, 7, -12}));
  EXPECT_EQ(b.T("where").values, (Shape{7, 2, 12}));
}

TEST(ElementwiseOps, DivisionByZeroLeavesValuesUnknown) {
  GraphBuilder b;
  b.Ints("v", {4});
  b.Scalar("zero", 0);
  b.Op("Div", {"v", "zero"}, {"d"});
  b.Ints("big", {INT64_MAX});
  b.Op("Add", {"big", "big"}, {"ovf"});
  ASSERT_TRUE(Infer(&b).ok());
  EXPECT_EQ(b.T("d").shape, (Shape{1}));
  EXPECT_FALSE(b.T("d").has_values);
  EXPECT_FALSE(b.T("ovf").has_values);
}

TEST(ElementwiseOps, BitShiftDirection) {
  GraphBuilder b;
  b.Init("v", {2}, DType::kUint64, {1, 16}, true);
  b.Init("n", {1}, DType::kUint64, {2}, true);
  b.Op("BitShift", {"v", "n"}, {"l"}).attrs["direction"] = StringAttr("LEFT");
  b.Op("BitShift", {"v", "n"}, {"r"}).attrs["direction"] = StringAttr("RIGHT");
  ASSERT_TRUE(Infer(&b).ok());
  EXPECT_EQ(b.T("l").values, (Shape{4, 64}));
  EXPECT_EQ(b.T("r").values, (Shape{0, 4}));
}

TEST(ElementwiseOps, UnaryKeepShapeAndBoolOutputs) {
  GraphBuilder b;
  b.Input("x", {D(3), D(4)}, DType::kFloat16);
  for (const char* op :
       {"Relu", "Sigmoid",    "Tanh",     "Gelu",  "Erf",     "Exp",        "Log",
        "Sqrt", "Reciprocal", "Abs",      "Floor", "Sin",     "Sign",       "LeakyRelu",
        "Elu",  "HardSwish",  "Softplus", "Mish",  "Softmax", "LogSoftmax", "Hardmax"}) {
    b.Op(op, {"x"}, {std::string("y_") + op});
  }
  b.Op("IsNaN", {"x"}, {"nan"});
  b.Op("IsInf", {"x"}, {"inf"});
  b.Op("Clip", {"x", "", ""}, {"clip"});
  ASSERT_TRUE(Infer(&b).ok());
  EXPECT_EQ(b.T("y_Gelu").shape, (Shape{3, 4}));
  EXPECT_EQ(b.T("y_Gelu").dtype, DType::kFloat16);
  EXPECT_EQ(b.T("y_Softmax").shape, (Shape{3, 4}));
  EXPECT_EQ(b.T("nan").dtype, DType::kBool);
  EXPECT_EQ(b.T("inf").dtype, DType::kBool);
  EXPECT_EQ(b.T("clip").shape, (Shape{3, 4}));
}

TEST(ElementwiseOps, SoftmaxAxisChecked) {
  GraphBuilder b;
  b.Input("x", {D(3), D(4)});
  b.Op("Softmax", {"x"}, {"y"}, "sm").attrs["axis"] = IntAttr(2);
  Status s = Infer(&b);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "m.onnx: node 'sm' (Softmax): axis 2 out of range for [3, 4]");
}

TEST(ElementwiseOps, NotNeedsBoolAndPReluSlopeMustBroadcast) {
  GraphBuilder b;
  b.Input("x", {D(2)});
  b.Op("Not", {"x"}, {"y"});
  EXPECT_FALSE(Infer(&b).ok());
  GraphBuilder p;
  p.Input("x", {D(2), D(3)});
  p.Input("slope", {D(3)});
  p.Op("PRelu", {"x", "slope"}, {"y"});
  ASSERT_TRUE(Infer(&p).ok());
  EXPECT_EQ(p.T("y").shape, (Shape{2, 3}));
  GraphBuilder q;
  q.Input("x", {D(2), D(3)});
  q.Input("slope", {D(4), D(2), D(3)});
  q.Op("PRelu", {"x", "slope"}, {"y"});
  EXPECT_FALSE(Infer(&q).ok());
}

TEST(ElementwiseOps, DropoutOutputsAndMaskRule) {
  GraphBuilder b;
  b.Input("x", {D(2), D(8)});
  b.Op("Constant", {}, {"ratio"}).attrs["value"] = TensorAttr(DType::kFloat, {}, {}, {0.1});
  b.Op("Constant", {}, {"train"}).attrs["value"] = TensorAttr(DType::kBool, {}, {1});
  b.Op("Dropout", {"x", "ratio", "train"}, {"y", "mask"}, "drop");
  b.Op("Constant", {}, {"zero"}).attrs["value"] = TensorAttr(DType::kFloat, {}, {}, {0.0});
  b.Op("Dropout", {"x", "zero"}, {"y0"}, "drop0");
  b.Op("Dropout", {"x"}, {"yd"}, "dropd");
  ASSERT_TRUE(Infer(&b).ok());
  EXPECT_EQ(b.T("y").shape, (Shape{2, 8}));
  EXPECT_EQ(b.T("mask").dtype, DType::kBool);
  const OpDef* def = FindOp("", "Dropout");
  ASSERT_NE(def, nullptr);
  EXPECT_EQ(def->alias, Alias::kNone);
  SaveContext c;
  c.graph = &b.g;
  c.input_requires_grad = {true, false, false};
  std::vector<Saved> saved;
  c.node = &b.g.nodes[2];
  def->saves(c, &saved);
  ASSERT_EQ(saved.size(), 1u);
  EXPECT_EQ(saved[0].kind, Saved::kExtra);
  EXPECT_EQ(saved[0].dtype, DType::kBool);
  EXPECT_EQ(saved[0].shape, (Shape{2, 8}));
  EXPECT_EQ(saved[0].what, "mask");
  saved.clear();
  c.node = &b.g.nodes[4];  // ratio 0
  def->saves(c, &saved);
  EXPECT_TRUE(saved.empty());
  c.node = &b.g.nodes[5];  // default ratio 0.5
  def->saves(c, &saved);
  EXPECT_EQ(saved.size(), 1u);
  saved.clear();
  c.node = &b.g.nodes[2];
  c.input_requires_grad = {false, false, false};
  def->saves(c, &saved);
  EXPECT_TRUE(saved.empty());
}

/// Saved list of `op` for the given requires-grad flags.
std::vector<Saved> Saves(const std::string& op, std::vector<bool> rg) {
  std::vector<Saved> out;
  const OpDef* def = FindOp("", op);
  if (def == nullptr || def->saves == nullptr) return out;
  static Graph g;
  static Node n;
  n.op_type = op;
  n.inputs.assign(rg.size(), 0);
  SaveContext c;
  c.graph = &g;
  c.node = &n;
  c.input_requires_grad = std::move(rg);
  def->saves(c, &out);
  return out;
}

std::string Describe(const std::vector<Saved>& s) {
  std::string r;
  for (const Saved& x : s) {
    r += x.kind == Saved::kInput ? "in" : x.kind == Saved::kOutput ? "out" : "extra";
    r += std::to_string(x.index) + " ";
  }
  return r;
}

TEST(ElementwiseOps, SavedForBackward) {
  EXPECT_EQ(Describe(Saves("Relu", {true})), "out0 ");
  EXPECT_EQ(Describe(Saves("Relu", {false})), "");
  EXPECT_EQ(Describe(Saves("Sigmoid", {true})), "out0 ");
  EXPECT_EQ(Describe(Saves("Tanh", {true})), "out0 ");
  EXPECT_EQ(Describe(Saves("Gelu", {true})), "in0 ");
  EXPECT_EQ(Describe(Saves("Exp", {true})), "out0 ");
  EXPECT_EQ(Describe(Saves("Log", {true})), "in0 ");
  EXPECT_EQ(Describe(Saves("Sqrt", {true})), "out0 ");
  EXPECT_EQ(Describe(Saves("Softmax", {true})), "out0 ");
  EXPECT_EQ(Describe(Saves("LogSoftmax", {true})), "out0 ");
  EXPECT_EQ(Describe(Saves("Add", {true, true})), "");
  EXPECT_EQ(Describe(Saves("Sub", {true, true})), "");
  EXPECT_EQ(Describe(Saves("Mul", {true, false})), "in1 ");
  EXPECT_EQ(Describe(Saves("Mul", {false, true})), "in0 ");
  EXPECT_EQ(Describe(Saves("Mul", {true, true})), "in1 in0 ");
  EXPECT_EQ(Describe(Saves("Div", {true, false})), "in1 ");
  EXPECT_EQ(Describe(Saves("Div", {true, true})), "in1 in0 ");
  EXPECT_EQ(Describe(Saves("Pow", {true, false})), "in0 ");
  EXPECT_EQ(Describe(Saves("Pow", {true, true})), "in0 in1 ");
  EXPECT_EQ(Describe(Saves("Max", {true, false})), "in0 in1 ");
  EXPECT_EQ(Describe(Saves("Where", {false, true, false})), "in0 ");
  EXPECT_EQ(Describe(Saves("Clip", {true})), "in0 ");
  EXPECT_EQ(Describe(Saves("LeakyRelu", {true})), "in0 ");
  EXPECT_EQ(Describe(Saves("Elu", {true})), "out0 ");
}

TEST(ElementwiseOps, AutocastAndDifferentiability) {
  for (const char* op : {"Exp", "Log", "Pow", "Reciprocal", "Softplus"}) {
    EXPECT_EQ(FindOp("", op)->autocast, Autocast::kFp32) << op;
  }
  for (const char* op : {"Relu", "Add", "Erf", "Gelu", "Dropout", "Where"}) {
    EXPECT_EQ(FindOp("", op)->autocast, Autocast::kPassthrough) << op;
  }
  EXPECT_EQ(FindOp("", "Softmax")->autocast, Autocast::kFp32Output);
  for (const char* op : {"Equal", "Less", "And", "Not", "IsNaN", "IsInf", "BitwiseNot"}) {
    EXPECT_FALSE(FindOp("", op)->differentiable) << op;
  }
  EXPECT_TRUE(FindOp("", "Mul")->differentiable);
}

// transformers' activation modules take no `inplace` argument; torch.nn's do,
// and a functional call inside another module may pass one.
TEST(ElementwiseOps, ActivationModulesWithoutInPlaceArgument) {
  EXPECT_TRUE(ModuleRunsOutOfPlace("transformers.activations.SiLUActivation"));
  EXPECT_TRUE(ModuleRunsOutOfPlace("transformers.activations.GELUActivation"));
  EXPECT_FALSE(ModuleRunsOutOfPlace("torch.nn.modules.activation.SiLU"));
  EXPECT_FALSE(ModuleRunsOutOfPlace("__main__.ResBlock"));
  EXPECT_FALSE(ModuleRunsOutOfPlace("Activation"));
  EXPECT_FALSE(ModuleRunsOutOfPlace(""));
}

}  // namespace
}  // namespace memplan
