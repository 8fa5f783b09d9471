#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "planner/graph.h"
#include "planner/op_registry.h"
#include "planner/shape_inference.h"

namespace memplan {
namespace {

using Shape = std::vector<int64_t>;

Attribute AInt(int64_t v) {
  Attribute a;
  a.type = AttrType::kInt;
  a.i = v;
  return a;
}

Attribute AInts(std::vector<int64_t> v) {
  Attribute a;
  a.type = AttrType::kInts;
  a.ints = std::move(v);
  return a;
}

Attribute AStr(std::string s) {
  Attribute a;
  a.type = AttrType::kString;
  a.s = std::move(s);
  return a;
}

Attribute AFloats(std::vector<float> v) {
  Attribute a;
  a.type = AttrType::kFloats;
  a.floats = std::move(v);
  return a;
}

/// A hand-built graph: add tensors and nodes, then run one op's rules.
class NnGraph {
 public:
  explicit NnGraph(int64_t opset = 17) {
    g.source = "m.onnx";
    g.opsets[""] = opset;
  }

  /// A tensor with a known shape (a graph input).
  int In(const std::string& name, Shape shape, DType dt = DType::kFloat) {
    const int t = g.FindOrAdd(name);
    Tensor& x = g.tensors[t];
    x.shape = std::move(shape);
    x.shape_known = true;
    x.dtype = dt;
    x.kind = TensorKind::kGraphInput;
    return t;
  }

  /// An int64 tensor whose values are known.
  int Values(const std::string& name, std::vector<int64_t> values) {
    const int t = In(name, {static_cast<int64_t>(values.size())}, DType::kInt64);
    g.tensors[t].values = std::move(values);
    g.tensors[t].has_values = true;
    return t;
  }

  /// A float Constant node producing `name`.
  void FloatConst(const std::string& name, std::vector<double> values) {
    Attribute v;
    v.type = AttrType::kTensor;
    v.t_dtype = DType::kFloat;
    v.t_dims = {static_cast<int64_t>(values.size())};
    v.t_fvalues = values;
    Add("Constant", {}, {name}, {{"value", v}}, name + "_const");
    Tensor& t = g.tensors[g.Find(name)];
    t.shape = {static_cast<int64_t>(values.size())};
    t.shape_known = true;
    t.dtype = DType::kFloat;
  }

  /// Adds a node; "" names an omitted input or output.
  int Add(const std::string& op, const std::vector<std::string>& ins,
          const std::vector<std::string>& outs, std::map<std::string, Attribute> attrs = {},
          const std::string& name = "") {
    Node n;
    n.op_type = op;
    n.name = name.empty() ? "n" + std::to_string(g.nodes.size()) : name;
    for (const auto& i : ins) n.inputs.push_back(i.empty() ? -1 : g.FindOrAdd(i));
    for (const auto& o : outs) n.outputs.push_back(o.empty() ? -1 : g.FindOrAdd(o));
    n.attrs = std::move(attrs);
    g.nodes.push_back(std::move(n));
    g.Link();
    return static_cast<int>(g.nodes.size()) - 1;
  }

  const OpDef& Def(int node) {
    const OpDef* d = FindOp("", g.nodes[node].op_type);
    EXPECT_NE(d, nullptr) << g.nodes[node].op_type;
    return *d;
  }

  Status Infer(int node) {
    ShapeContext ctx(&g, node);
    return Def(node).shape(ctx);
  }

  int64_t Flops(int node) { return Def(node).flops(g, g.nodes[node]); }

  /// Runs the save rule with the given per-input requires_grad flags.
  std::vector<Saved> Saves(int node, std::vector<bool> grad, DType compute = DType::kFloat) {
    SaveContext sc;
    sc.graph = &g;
    sc.node = &g.nodes[node];
    sc.input_requires_grad = std::move(grad);
    sc.input_requires_grad.resize(sc.node->inputs.size(), false);
    sc.input_dtype.assign(sc.node->inputs.size(), compute);
    sc.output_dtype.assign(sc.node->outputs.size(), compute);
    std::vector<Saved> out;
    if (Def(node).saves) Def(node).saves(sc, &out);
    return out;
  }

  const Tensor& T(const std::string& name) { return g.tensors[g.Find(name)]; }

  Graph g;
};

/// "in0", "out1", "extra:mean:float32:[2, 5, 1]" for compact comparisons.
std::vector<std::string> Describe(const std::vector<Saved>& saves) {
  std::vector<std::string> r;
  for (const Saved& s : saves) {
    if (s.kind == Saved::kInput) {
      r.push_back("in" + std::to_string(s.index));
    } else if (s.kind == Saved::kOutput) {
      r.push_back("out" + std::to_string(s.index));
    } else {
      std::string d = "extra:" + s.what + ":" + DTypeName(s.dtype) + ":[";
      for (size_t i = 0; i < s.shape.size(); ++i) {
        d += (i ? ", " : "") + std::to_string(s.shape[i]);
      }
      r.push_back(d + "]");
    }
  }
  return r;
}

using Strings = std::vector<std::string>;

// --------------------------------------------------------------------------
// Conv / ConvTranspose

TEST(NnConv, ResNetStem7x7Stride2Pad3) {
  NnGraph t;
  t.In("x", {8, 3, 224, 224});
  t.In("w", {64, 3, 7, 7});
  int n = t.Add(
      "Conv", {"x", "w"}, {"y"},
      {{"kernel_shape", AInts({7, 7})}, {"strides", AInts({2, 2})}, {"pads", AInts({3, 3, 3, 3})}});
  ASSERT_TRUE(t.Infer(n).ok()) << t.Infer(n).message();
  EXPECT_EQ(t.T("y").shape, (Shape{8, 64, 112, 112}));
  EXPECT_EQ(t.T("y").dtype, DType::kFloat);
  // 2 * N * Cout * Cin * 7 * 7 * 112 * 112.
  EXPECT_EQ(t.Flops(n), int64_t{2} * 8 * 64 * 3 * 49 * 112 * 112);
}

TEST(NnConv, BiasAddsOneFlopPerOutput) {
  NnGraph t;
  t.In("x", {1, 4, 5, 5});
  t.In("w", {2, 4, 3, 3});
  t.In("b", {2});
  int n = t.Add("Conv", {"x", "w", "b"}, {"y"});
  ASSERT_TRUE(t.Infer(n).ok());
  EXPECT_EQ(t.T("y").shape, (Shape{1, 2, 3, 3}));
  EXPECT_EQ(t.Flops(n), 2 * 18 * 36 + 18);
}

TEST(NnConv, GroupedDilatedSameUpper) {
  NnGraph t;
  t.In("x", {2, 32, 17, 17});
  t.In("w", {64, 8, 3, 3});
  int n = t.Add("Conv", {"x", "w"}, {"y"},
                {{"group", AInt(4)},
                 {"dilations", AInts({2, 2})},
                 {"strides", AInts({2, 2})},
                 {"auto_pad", AStr("SAME_UPPER")}});
  ASSERT_TRUE(t.Infer(n).ok()) << t.Infer(n).message();
  EXPECT_EQ(t.T("y").shape, (Shape{2, 64, 9, 9}));
}

TEST(NnConv, OneDimensionalAndThreeDimensionalValid) {
  NnGraph t;
  t.In("x1", {1, 4, 10});
  t.In("w1", {8, 4, 3});
  int n1 = t.Add("Conv", {"x1", "w1"}, {"y1"});
  ASSERT_TRUE(t.Infer(n1).ok());
  EXPECT_EQ(t.T("y1").shape, (Shape{1, 8, 8}));

  t.In("x3", {1, 2, 8, 8, 8}, DType::kBFloat16);
  t.In("w3", {4, 2, 3, 3, 3}, DType::kBFloat16);
  int n3 = t.Add("Conv", {"x3", "w3"}, {"y3"},
                 {{"strides", AInts({3, 3, 3})},
                  {"auto_pad", AStr("VALID")},
                  {"pads", AInts({5, 5, 5, 5, 5, 5})}});
  ASSERT_TRUE(t.Infer(n3).ok());
  EXPECT_EQ(t.T("y3").shape, (Shape{1, 4, 2, 2, 2}));
  EXPECT_EQ(t.T("y3").dtype, DType::kBFloat16);
}

TEST(NnConv, ChannelMismatchErrorIsPinned) {
  NnGraph t;
  t.In("x", {1, 3, 32, 32});
  t.In("w", {16, 4, 3, 3});
  int n = t.Add("Conv", {"x", "w"}, {"y"}, {}, "conv1");
  Status s = t.Infer(n);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "m.onnx: node 'conv1' (Conv): input channels 3 do not match weight "
            "[16, 4, 3, 3] with group 1");
}

TEST(NnConv, NegativeOutputErrorIsPinned) {
  NnGraph t;
  t.In("x", {1, 3, 2, 2});
  t.In("w", {8, 3, 5, 5});
  int n = t.Add("Conv", {"x", "w"}, {"y"}, {}, "conv1");
  Status s = t.Infer(n);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "m.onnx: node 'conv1' (Conv): spatial dim 0: padded input 2 is smaller than the "
            "dilated kernel 5 (output size would be negative)");
}

TEST(NnConv, WrongInputCountErrorIsPinned) {
  NnGraph t;
  t.In("x", {1, 3, 8, 8});
  int n = t.Add("Conv", {"x"}, {"y"}, {}, "conv1");
  Status s = t.Infer(n);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "m.onnx: node 'conv1' (Conv): expects 2..3 inputs, got 1");
}

TEST(NnConv, UnknownShapeAndBadAttributesFail) {
  NnGraph t;
  t.In("x", {1, 3, 8, 8});
  t.g.tensors[t.g.FindOrAdd("w")].shape_known = false;
  int n = t.Add("Conv", {"x", "w"}, {"y"}, {}, "conv1");
  EXPECT_EQ(t.Infer(n).message(), "m.onnx: node 'conv1' (Conv): input 'w' has no known shape");

  t.In("w2", {4, 3, 3, 3});
  int n2 = t.Add("Conv", {"x", "w2"}, {"y2"}, {{"strides", AInts({2})}}, "conv2");
  EXPECT_EQ(t.Infer(n2).message(),
            "m.onnx: node 'conv2' (Conv): attribute 'strides' has 1 values, expected 2");
  int n3 = t.Add("Conv", {"x", "w2"}, {"y3"}, {{"kernel_shape", AInts({5, 5})}}, "conv3");
  EXPECT_FALSE(t.Infer(n3).ok());
  t.In("x2", {1, 3, 8});
  int n4 = t.Add("Conv", {"x2", "w2"}, {"y4"}, {}, "conv4");
  EXPECT_FALSE(t.Infer(n4).ok());
}

TEST(NnConv, ExporterZeroBiasOfConv3dWithoutBiasIsAccepted) {
  // torch.onnx (onnxscript aten_conv3d) writes conv3d(bias=None)'s bias as a
  // zero scalar expanded to [M, 2]; a [M, 2] bias from anything else is an error.
  NnGraph t;
  t.In("x", {2, 3, 16, 112, 112});
  t.In("w", {64, 3, 3, 7, 7});
  t.In("zero", {});
  t.Values("bias_shape", {64, 2});
  int e = t.Add("Expand", {"zero", "bias_shape"}, {"b"});
  ASSERT_TRUE(t.Infer(e).ok()) << t.Infer(e).message();
  ASSERT_EQ(t.T("b").shape, (Shape{64, 2}));
  int n = t.Add("Conv", {"x", "w", "b"}, {"y"},
                {{"strides", AInts({1, 2, 2})}, {"pads", AInts({1, 3, 3, 1, 3, 3})}}, "conv3d");
  ASSERT_TRUE(t.Infer(n).ok()) << t.Infer(n).message();
  EXPECT_EQ(t.T("y").shape, (Shape{2, 64, 16, 56, 56}));

  t.In("b2", {64, 2});
  int bad = t.Add("Conv", {"x", "w", "b2"}, {"y2"},
                  {{"strides", AInts({1, 2, 2})}, {"pads", AInts({1, 3, 3, 1, 3, 3})}}, "c2");
  EXPECT_EQ(t.Infer(bad).message(),
            "m.onnx: node 'c2' (Conv): bias has shape [64, 2], expected [64]");
}

TEST(NnConv, SavesInputAndWeightWhenAnythingNeedsGrad) {
  NnGraph t;
  t.In("x", {1, 3, 8, 8});
  t.In("w", {4, 3, 3, 3});
  t.In("b", {4});
  int n = t.Add("Conv", {"x", "w", "b"}, {"y"});
  ASSERT_TRUE(t.Infer(n).ok());
  EXPECT_EQ(Describe(t.Saves(n, {false, true, true})), (Strings{"in0", "in1"}));
  EXPECT_TRUE(t.Saves(n, {false, false, false}).empty());
}

TEST(NnConvTranspose, StridedUpsampleOutputPaddingAndOutputShape) {
  NnGraph t;
  t.In("x", {1, 16, 14, 14});
  t.In("w", {16, 8, 4, 4});
  int n = t.Add("ConvTranspose", {"x", "w"}, {"y"},
                {{"strides", AInts({2, 2})}, {"pads", AInts({1, 1, 1, 1})}});
  ASSERT_TRUE(t.Infer(n).ok()) << t.Infer(n).message();
  EXPECT_EQ(t.T("y").shape, (Shape{1, 8, 28, 28}));
  // Per input element: Cout/group * kernel multiply-adds.
  EXPECT_EQ(t.Flops(n), int64_t{2} * 16 * 14 * 14 * 8 * 16);

  t.In("w3", {16, 4, 3, 3});
  int n2 = t.Add("ConvTranspose", {"x", "w3"}, {"y2"},
                 {{"strides", AInts({2, 2})},
                  {"pads", AInts({1, 1, 1, 1})},
                  {"output_padding", AInts({1, 1})},
                  {"group", AInt(2)}});
  ASSERT_TRUE(t.Infer(n2).ok()) << t.Infer(n2).message();
  EXPECT_EQ(t.T("y2").shape, (Shape{1, 8, 28, 28}));

  int n3 = t.Add("ConvTranspose", {"x", "w"}, {"y3"},
                 {{"strides", AInts({2, 2})}, {"output_shape", AInts({30, 31})}});
  ASSERT_TRUE(t.Infer(n3).ok());
  EXPECT_EQ(t.T("y3").shape, (Shape{1, 8, 30, 31}));

  t.In("wbad", {8, 8, 4, 4});
  int n4 = t.Add("ConvTranspose", {"x", "wbad"}, {"y4"}, {}, "ct");
  EXPECT_EQ(t.Infer(n4).message(),
            "m.onnx: node 'ct' (ConvTranspose): input channels 16 do not match weight "
            "[8, 8, 4, 4] (dim 0)");
}

// --------------------------------------------------------------------------
// MatMul / Gemm / Einsum

TEST(NnMatMul, BatchBroadcasting) {
  NnGraph t;
  t.In("a", {2, 1, 3, 4});
  t.In("b", {5, 4, 6});
  int n = t.Add("MatMul", {"a", "b"}, {"y"});
  ASSERT_TRUE(t.Infer(n).ok());
  EXPECT_EQ(t.T("y").shape, (Shape{2, 5, 3, 6}));
  EXPECT_EQ(t.Flops(n), 2 * (2 * 5) * 3 * 6 * 4);
}

TEST(NnMatMul, OneDimensionalOperands) {
  NnGraph t;
  t.In("v", {4});
  t.In("m", {4, 6});
  t.In("m2", {7, 3, 4});
  int n1 = t.Add("MatMul", {"v", "m"}, {"y1"});
  int n2 = t.Add("MatMul", {"m2", "v"}, {"y2"});
  int n3 = t.Add("MatMul", {"v", "v"}, {"y3"});
  ASSERT_TRUE(t.Infer(n1).ok());
  ASSERT_TRUE(t.Infer(n2).ok());
  ASSERT_TRUE(t.Infer(n3).ok());
  EXPECT_EQ(t.T("y1").shape, (Shape{6}));
  EXPECT_EQ(t.T("y2").shape, (Shape{7, 3}));
  EXPECT_EQ(t.T("y3").shape, (Shape{}));
  EXPECT_EQ(t.Flops(n2), 2 * 7 * 3 * 4);
}

TEST(NnMatMul, InnerDimensionMismatchErrorIsPinned) {
  NnGraph t;
  t.In("a", {3, 4});
  t.In("b", {5, 6});
  int n = t.Add("MatMul", {"a", "b"}, {"y"}, {}, "mm");
  EXPECT_EQ(t.Infer(n).message(),
            "m.onnx: node 'mm' (MatMul): inner dimensions differ: [3, 4] x [5, 6]");
  t.In("c", {2, 4, 6});
  t.In("d", {3, 3, 4});
  int n2 = t.Add("MatMul", {"d", "c"}, {"y2"}, {}, "mm2");
  EXPECT_EQ(t.Infer(n2).message(),
            "m.onnx: node 'mm2' (MatMul): batch dimensions do not broadcast: [3, 3, 4] x "
            "[2, 4, 6]");
}

TEST(NnMatMul, SavesEachOperandOnlyForTheOthersGradient) {
  NnGraph t;
  t.In("x", {2, 8});
  t.In("w", {8, 4});
  int n = t.Add("MatMul", {"x", "w"}, {"y"});
  ASSERT_TRUE(t.Infer(n).ok());
  EXPECT_EQ(Describe(t.Saves(n, {false, true})), (Strings{"in0"}));
  EXPECT_EQ(Describe(t.Saves(n, {true, false})), (Strings{"in1"}));
  EXPECT_EQ(Describe(t.Saves(n, {true, true})), (Strings{"in0", "in1"}));
}

TEST(NnMatMul, FlopsSaturateInsteadOfOverflowing) {
  NnGraph t;
  t.In("a", {int64_t{1} << 31, int64_t{1} << 31});
  t.In("b", {int64_t{1} << 31, int64_t{1} << 20});
  int n = t.Add("MatMul", {"a", "b"}, {"y"});
  ASSERT_TRUE(t.Infer(n).ok());
  EXPECT_EQ(t.Flops(n), std::numeric_limits<int64_t>::max());
}

TEST(NnGemm, TransBWithBias) {
  NnGraph t;
  t.In("a", {8, 16});
  t.In("b", {32, 16});
  t.In("c", {32});
  int n = t.Add("Gemm", {"a", "b", "c"}, {"y"}, {{"transB", AInt(1)}});
  ASSERT_TRUE(t.Infer(n).ok()) << t.Infer(n).message();
  EXPECT_EQ(t.T("y").shape, (Shape{8, 32}));
  EXPECT_EQ(t.Flops(n), 2 * 8 * 32 * 16 + 8 * 32);
  // The bias keeps nothing; x is kept for the weight's gradient only.
  EXPECT_EQ(Describe(t.Saves(n, {false, true, true})), (Strings{"in0"}));

  int n2 = t.Add("Gemm", {"a", "b"}, {"y2"}, {}, "fc");
  EXPECT_EQ(t.Infer(n2).message(),
            "m.onnx: node 'fc' (Gemm): inner dimensions differ: A [8, 16], B [32, 16]");
  t.In("bt", {8, 32});
  int n3 = t.Add("Gemm", {"b", "bt"}, {"y3"}, {{"transA", AInt(1)}, {"transB", AInt(1)}});
  ASSERT_TRUE(t.Infer(n3).ok());
  EXPECT_EQ(t.T("y3").shape, (Shape{16, 8}));
  EXPECT_EQ(t.Flops(n3), 2 * 16 * 8 * 32);
}

TEST(NnEinsum, AttentionScoresExplicit) {
  NnGraph t;
  t.In("q", {2, 4, 8, 16});
  t.In("k", {2, 4, 10, 16});
  int n = t.Add("Einsum", {"q", "k"}, {"s"}, {{"equation", AStr("bhqd,bhkd->bhqk")}});
  ASSERT_TRUE(t.Infer(n).ok()) << t.Infer(n).message();
  EXPECT_EQ(t.T("s").shape, (Shape{2, 4, 8, 10}));
  EXPECT_EQ(t.Flops(n), 2 * 2 * 4 * 8 * 16 * 10);
  EXPECT_EQ(Describe(t.Saves(n, {true, false})), (Strings{"in1"}));
}

TEST(NnEinsum, ImplicitOutputWithEllipsisBroadcast) {
  NnGraph t;
  t.In("a", {3, 1, 2, 5});
  t.In("b", {4, 5, 7});
  int n = t.Add("Einsum", {"a", "b"}, {"y"}, {{"equation", AStr("...ij,...jk")}});
  ASSERT_TRUE(t.Infer(n).ok()) << t.Infer(n).message();
  EXPECT_EQ(t.T("y").shape, (Shape{3, 4, 2, 7}));
  EXPECT_EQ(t.Flops(n), 2 * 3 * 4 * 2 * 5 * 7);

  // Implicit mode sorts the labels that appear once: "ba" transposes.
  t.In("m", {2, 3});
  int n2 = t.Add("Einsum", {"m"}, {"y2"}, {{"equation", AStr("ba")}});
  ASSERT_TRUE(t.Infer(n2).ok());
  EXPECT_EQ(t.T("y2").shape, (Shape{3, 2}));
  // Explicit ellipsis output and a trace-like reduction.
  t.In("sq", {6, 5, 5});
  int n3 = t.Add("Einsum", {"sq"}, {"y3"}, {{"equation", AStr("...ii->...")}});
  ASSERT_TRUE(t.Infer(n3).ok());
  EXPECT_EQ(t.T("y3").shape, (Shape{6}));
}

TEST(NnEinsum, BadEquationsErrorsArePinned) {
  NnGraph t;
  t.In("a", {2, 3});
  t.In("b", {3, 4});
  int n = t.Add("Einsum", {"a", "b"}, {"y"}, {{"equation", AStr("ij,jk->iz")}}, "es");
  EXPECT_EQ(t.Infer(n).message(),
            "m.onnx: node 'es' (Einsum): bad equation 'ij,jk->iz': output index 'z' does not "
            "appear in the inputs");
  int n2 = t.Add("Einsum", {"a", "b"}, {"y2"}, {{"equation", AStr("ij->i")}}, "es2");
  EXPECT_EQ(t.Infer(n2).message(),
            "m.onnx: node 'es2' (Einsum): bad equation 'ij->i': equation has 1 terms for 2 inputs");
  int n3 = t.Add("Einsum", {"a", "b"}, {"y3"}, {{"equation", AStr("ij,kl->ijk")}}, "es3");
  EXPECT_TRUE(t.Infer(n3).ok());
  int n4 = t.Add("Einsum", {"a", "b"}, {"y4"}, {{"equation", AStr("ij,ik->jk")}}, "es4");
  EXPECT_EQ(t.Infer(n4).message(),
            "m.onnx: node 'es4' (Einsum): bad equation 'ij,ik->jk': index 'i' has sizes 2 and 3");
  int n5 = t.Add("Einsum", {"a", "b"}, {"y5"}, {{"equation", AStr("ijk,jk")}}, "es5");
  EXPECT_FALSE(t.Infer(n5).ok());
  int n6 = t.Add("Einsum", {"a", "b"}, {"y6"}, {{"equation", AStr("i.j,jk")}}, "es6");
  EXPECT_FALSE(t.Infer(n6).ok());
  int n7 = t.Add("Einsum", {"a", "b"}, {"y7"}, {}, "es7");
  EXPECT_FALSE(t.Infer(n7).ok());
}

// --------------------------------------------------------------------------
// Normalisations

TEST(NnLayerNorm, LastAxisSavesExactStatShapes) {
  NnGraph t;
  t.In("x", {2, 5, 8});
  t.In("g", {8});
  t.In("b", {8});
  int n = t.Add("LayerNormalization", {"x", "g", "b"}, {"y"}, {{"axis", AInt(-1)}});
  ASSERT_TRUE(t.Infer(n).ok()) << t.Infer(n).message();
  EXPECT_EQ(t.T("y").shape, (Shape{2, 5, 8}));
  EXPECT_EQ(Describe(t.Saves(n, {false, true, true}, DType::kFloat)),
            (Strings{"in0", "in1", "in2", "extra:mean:float32:[2, 5, 1]",
                     "extra:rstd:float32:[2, 5, 1]"}));
  EXPECT_TRUE(t.Saves(n, {false, false, false}).empty());
  EXPECT_EQ(t.Flops(n), 8 * 80);
}

TEST(NnLayerNorm, AxisOneAndStatOutputs) {
  NnGraph t;
  t.In("x", {2, 5, 8}, DType::kFloat16);
  t.In("g", {5, 8}, DType::kFloat16);
  int n = t.Add("LayerNormalization", {"x", "g"}, {"y", "mean", "inv"}, {{"axis", AInt(1)}});
  ASSERT_TRUE(t.Infer(n).ok()) << t.Infer(n).message();
  EXPECT_EQ(t.T("mean").shape, (Shape{2, 1, 1}));
  EXPECT_EQ(t.T("mean").dtype, DType::kFloat);
  EXPECT_EQ(t.T("y").dtype, DType::kFloat16);
  // The graph's Mean / InvStdDev are the saved statistics (no double count).
  EXPECT_EQ(Describe(t.Saves(n, {true, true})), (Strings{"in0", "in1", "out1", "out2"}));

  t.In("gbad", {7});
  int n2 = t.Add("LayerNormalization", {"x", "gbad"}, {"y2"}, {}, "ln");
  EXPECT_EQ(t.Infer(n2).message(),
            "m.onnx: node 'ln' (LayerNormalization): scale 'gbad' has shape [7], expected to "
            "broadcast to [8]");
}

TEST(NnBatchNorm, TrainingSavesPerChannelStats) {
  NnGraph t;
  t.In("x", {4, 16, 8, 8});
  for (const char* p : {"s", "b", "m", "v"}) t.In(p, {16});
  int n = t.Add("BatchNormalization", {"x", "s", "b", "m", "v"}, {"y", "rm", "rv"},
                {{"training_mode", AInt(1)}});
  ASSERT_TRUE(t.Infer(n).ok()) << t.Infer(n).message();
  EXPECT_EQ(t.T("y").shape, (Shape{4, 16, 8, 8}));
  EXPECT_EQ(t.T("rm").shape, (Shape{16}));
  EXPECT_EQ(t.T("rv").shape, (Shape{16}));
  EXPECT_EQ(
      Describe(t.Saves(n, {false, true, true}, DType::kBFloat16)),
      (Strings{"in0", "in1", "extra:save_mean:float32:[16]", "extra:save_invstd:float32:[16]"}));

  // Several outputs without the attribute (dynamo training export): training.
  int n2 = t.Add("BatchNormalization", {"x", "s", "b", "m", "v"}, {"y2", "rm2", "rv2"});
  ASSERT_TRUE(t.Infer(n2).ok());
  EXPECT_EQ(t.Saves(n2, {false, true, true}).size(), 4u);

  // Inference form: the running statistics are referenced, nothing new.
  int n3 = t.Add("BatchNormalization", {"x", "s", "b", "m", "v"}, {"y3"});
  ASSERT_TRUE(t.Infer(n3).ok());
  EXPECT_EQ(Describe(t.Saves(n3, {false, true, true})), (Strings{"in0", "in1", "in3", "in4"}));

  t.In("sbad", {8});
  int n4 = t.Add("BatchNormalization", {"x", "sbad", "b", "m", "v"}, {"y4"}, {}, "bn");
  EXPECT_EQ(t.Infer(n4).message(),
            "m.onnx: node 'bn' (BatchNormalization): scale 'sbad' has shape [8], expected [16]");
}

TEST(NnGroupNorm, SavesPerGroupStats) {
  NnGraph t;
  t.In("x", {2, 32, 4, 4});
  t.In("s", {32});
  t.In("b", {32});
  int n = t.Add("GroupNormalization", {"x", "s", "b"}, {"y"}, {{"num_groups", AInt(8)}});
  ASSERT_TRUE(t.Infer(n).ok()) << t.Infer(n).message();
  EXPECT_EQ(t.T("y").shape, (Shape{2, 32, 4, 4}));
  EXPECT_EQ(Describe(t.Saves(n, {false, true, true})),
            (Strings{"in0", "in1", "extra:mean:float32:[2, 8]", "extra:rstd:float32:[2, 8]"}));
  // A model cast to bf16 keeps mean and rstd in bf16 (the input's dtype).
  EXPECT_EQ(Describe(t.Saves(n, {true, true, true}, DType::kBFloat16)),
            (Strings{"in0", "in1", "extra:mean:bfloat16:[2, 8]", "extra:rstd:bfloat16:[2, 8]"}));
  int n2 = t.Add("GroupNormalization", {"x", "s", "b"}, {"y2"}, {{"num_groups", AInt(5)}}, "gn");
  EXPECT_EQ(t.Infer(n2).message(),
            "m.onnx: node 'gn' (GroupNormalization): channels 32 are not divisible by "
            "num_groups 5");
}

TEST(NnNorms, InstanceRmsAndLpNormalization) {
  NnGraph t(23);
  t.In("x", {2, 6, 10});
  t.In("s", {6});
  t.In("b", {6});
  int in = t.Add("InstanceNormalization", {"x", "s", "b"}, {"yi"});
  ASSERT_TRUE(t.Infer(in).ok());
  EXPECT_EQ(t.T("yi").shape, (Shape{2, 6, 10}));
  EXPECT_EQ(Describe(t.Saves(in, {true})), (Strings{"in0", "in1", "extra:save_mean:float32:[12]",
                                                    "extra:save_invstd:float32:[12]"}));

  t.In("g", {10});
  int rn = t.Add("RMSNormalization", {"x", "g"}, {"yr"});
  ASSERT_TRUE(t.Infer(rn).ok());
  EXPECT_EQ(t.T("yr").shape, (Shape{2, 6, 10}));
  EXPECT_EQ(Describe(t.Saves(rn, {true, true})),
            (Strings{"in0", "in1", "extra:rstd:float32:[2, 6, 1]"}));

  int lp = t.Add("LpNormalization", {"x"}, {"yl"}, {{"axis", AInt(1)}});
  ASSERT_TRUE(t.Infer(lp).ok());
  EXPECT_EQ(t.T("yl").shape, (Shape{2, 6, 10}));
  EXPECT_EQ(Describe(t.Saves(lp, {true})), (Strings{"in0", "extra:norm:float32:[2, 1, 10]"}));
}

// --------------------------------------------------------------------------
// Pooling

TEST(NnMaxPool, ResNetPoolCeilModeOffAndOn) {
  NnGraph t;
  t.In("x", {8, 64, 112, 112});
  std::map<std::string, Attribute> attrs = {
      {"kernel_shape", AInts({3, 3})}, {"strides", AInts({2, 2})}, {"pads", AInts({1, 1, 1, 1})}};
  int n = t.Add("MaxPool", {"x"}, {"y"}, attrs);
  ASSERT_TRUE(t.Infer(n).ok()) << t.Infer(n).message();
  EXPECT_EQ(t.T("y").shape, (Shape{8, 64, 56, 56}));
  EXPECT_EQ(t.Flops(n), int64_t{9} * 8 * 64 * 56 * 56);
  EXPECT_EQ(Describe(t.Saves(n, {true})), (Strings{"in0", "extra:indices:int64:[8, 64, 56, 56]"}));

  attrs["ceil_mode"] = AInt(1);
  int n2 = t.Add("MaxPool", {"x"}, {"y2", "idx"}, attrs);
  ASSERT_TRUE(t.Infer(n2).ok());
  EXPECT_EQ(t.T("y2").shape, (Shape{8, 64, 57, 57}));
  EXPECT_EQ(t.T("idx").shape, (Shape{8, 64, 57, 57}));
  EXPECT_EQ(t.T("idx").dtype, DType::kInt64);
  EXPECT_EQ(Describe(t.Saves(n2, {true})), (Strings{"in0", "out1"}));
}

TEST(NnMaxPool, CeilModeDropsAWindowStartingInThePadding) {
  NnGraph t;
  t.In("x", {1, 1, 4});
  int n = t.Add("MaxPool", {"x"}, {"y"},
                {{"kernel_shape", AInts({2})},
                 {"strides", AInts({3})},
                 {"pads", AInts({1, 1})},
                 {"ceil_mode", AInt(1)}});
  ASSERT_TRUE(t.Infer(n).ok());
  // ceil((4 + 2 - 2) / 3) + 1 = 3, but the third window would start at 6 >= 4 + 1.
  EXPECT_EQ(t.T("y").shape, (Shape{1, 1, 2}));

  int n2 = t.Add("MaxPool", {"x"}, {"y2"}, {}, "mp");
  EXPECT_EQ(t.Infer(n2).message(), "m.onnx: node 'mp' (MaxPool): missing attribute 'kernel_shape'");
}

TEST(NnPool, AverageAndGlobalPools) {
  NnGraph t;
  t.In("x", {2, 512, 7, 7});
  int avg = t.Add("AveragePool", {"x"}, {"ya"},
                  {{"kernel_shape", AInts({3, 3})}, {"auto_pad", AStr("SAME_LOWER")}});
  ASSERT_TRUE(t.Infer(avg).ok());
  EXPECT_EQ(t.T("ya").shape, (Shape{2, 512, 7, 7}));
  EXPECT_EQ(Describe(t.Saves(avg, {true})), (Strings{"in0"}));

  int gap = t.Add("GlobalAveragePool", {"x"}, {"yg"});
  ASSERT_TRUE(t.Infer(gap).ok());
  EXPECT_EQ(t.T("yg").shape, (Shape{2, 512, 1, 1}));
  EXPECT_TRUE(t.Saves(gap, {true}).empty());
  EXPECT_EQ(t.Flops(gap), 2 * 512 * 49);

  int gmp = t.Add("GlobalMaxPool", {"x"}, {"ym"});
  ASSERT_TRUE(t.Infer(gmp).ok());
  EXPECT_EQ(Describe(t.Saves(gmp, {true})), (Strings{"in0", "extra:indices:int64:[2, 512, 1, 1]"}));

  int lp = t.Add("LpPool", {"x"}, {"yl"}, {{"kernel_shape", AInts({2, 2})}});
  ASSERT_TRUE(t.Infer(lp).ok());
  EXPECT_EQ(t.T("yl").shape, (Shape{2, 512, 6, 6}));
}

// --------------------------------------------------------------------------
// Resize / Upsample

TEST(NnResize, ScalesFromConstantAndSizes) {
  NnGraph t(13);
  t.In("x", {1, 3, 16, 16});
  t.FloatConst("scales", {1.0, 1.0, 2.0, 2.0});
  int n = t.Add("Resize", {"x", "", "scales"}, {"y"}, {{"mode", AStr("nearest")}});
  ASSERT_TRUE(t.Infer(n).ok()) << t.Infer(n).message();
  EXPECT_EQ(t.T("y").shape, (Shape{1, 3, 32, 32}));
  EXPECT_TRUE(t.Saves(n, {true}).empty());

  t.Values("sizes", {1, 3, 20, 24});
  int n2 = t.Add("Resize", {"x", "", "", "sizes"}, {"y2"});
  ASSERT_TRUE(t.Infer(n2).ok()) << t.Infer(n2).message();
  EXPECT_EQ(t.T("y2").shape, (Shape{1, 3, 20, 24}));

  // Opset 18 axes + keep_aspect_ratio_policy: scale = min(20/16, 40/16).
  t.Values("hw", {20, 40});
  int n3 = t.Add("Resize", {"x", "", "", "hw"}, {"y3"},
                 {{"axes", AInts({2, 3})}, {"keep_aspect_ratio_policy", AStr("not_larger")}});
  ASSERT_TRUE(t.Infer(n3).ok()) << t.Infer(n3).message();
  EXPECT_EQ(t.T("y3").shape, (Shape{1, 3, 20, 20}));
}

TEST(NnResize, Opset10FormUpsampleAndUnknownScales) {
  NnGraph t(10);
  t.In("x", {2, 4, 5, 6});
  t.FloatConst("sc", {1.0, 1.0, 1.5, 0.5});
  int n = t.Add("Resize", {"x", "sc"}, {"y"});
  ASSERT_TRUE(t.Infer(n).ok()) << t.Infer(n).message();
  EXPECT_EQ(t.T("y").shape, (Shape{2, 4, 7, 3}));

  int up = t.Add("Upsample", {"x"}, {"yu"}, {{"scales", AFloats({1, 1, 2, 3})}});
  ASSERT_TRUE(t.Infer(up).ok()) << t.Infer(up).message();
  EXPECT_EQ(t.T("yu").shape, (Shape{2, 4, 10, 18}));

  t.In("unknown_scales", {4});
  int n2 = t.Add("Resize", {"x", "", "unknown_scales"}, {"y2"}, {}, "rs");
  EXPECT_EQ(t.Infer(n2).message(),
            "m.onnx: node 'rs' (Resize): cannot infer: scales 'unknown_scales' is not a "
            "constant");
  // A declared output shape is trusted when the scales are not known.
  Tensor& y3 = t.g.tensors[t.g.FindOrAdd("y3")];
  y3.has_declared = true;
  y3.declared = {Dim{2, ""}, Dim{4, ""}, Dim{10, ""}, Dim{12, ""}};
  int n3 = t.Add("Resize", {"x", "", "unknown_scales"}, {"y3"});
  ASSERT_TRUE(t.Infer(n3).ok());
  EXPECT_EQ(t.T("y3").shape, (Shape{2, 4, 10, 12}));
}

// --------------------------------------------------------------------------
// Through InferShapes: a small CNN with a symbolic batch.

TEST(NnInferShapes, SmallCnnWithSymbolicBatch) {
  NnGraph t(17);
  Graph& g = t.g;
  auto declare = [&](const std::string& name, std::vector<Dim> dims, TensorKind kind) {
    const int id = g.FindOrAdd(name);
    Tensor& x = g.tensors[id];
    x.kind = kind;
    x.dtype = DType::kFloat;
    x.has_declared = true;
    x.declared = std::move(dims);
    x.shape_known = false;
    if (kind == TensorKind::kGraphInput) g.inputs.push_back(id);
    if (kind == TensorKind::kInitializer) g.initializers.push_back(id);
    return id;
  };
  declare("x", {Dim{-1, "batch"}, Dim{3, ""}, Dim{32, ""}, Dim{32, ""}}, TensorKind::kGraphInput);
  declare("w", {Dim{16, ""}, Dim{3, ""}, Dim{3, ""}, Dim{3, ""}}, TensorKind::kInitializer);
  declare("scales", {Dim{4, ""}}, TensorKind::kInitializer);  // float data not kept
  declare("fc_w", {Dim{10, ""}, Dim{16, ""}}, TensorKind::kInitializer);
  declare("fc_b", {Dim{10, ""}}, TensorKind::kInitializer);
  t.Add("Conv", {"x", "w"}, {"c"}, {{"pads", AInts({1, 1, 1, 1})}});
  t.Add("MaxPool", {"c"}, {"p"}, {{"kernel_shape", AInts({2, 2})}, {"strides", AInts({2, 2})}});
  t.Add("Resize", {"p", "", "scales"}, {"r"});
  Tensor& r = g.tensors[g.Find("r")];
  r.has_declared = true;
  r.declared = {Dim{-1, "batch"}, Dim{16, ""}, Dim{32, ""}, Dim{32, ""}};
  t.Add("GlobalAveragePool", {"r"}, {"gp"});
  t.Add("ReduceMean", {"gp"}, {"flat"}, {{"axes", AInts({2, 3})}, {"keepdims", AInt(0)}});
  t.Add("Gemm", {"flat", "fc_w", "fc_b"}, {"logits"}, {{"transB", AInt(1)}});
  g.outputs.push_back(g.Find("logits"));
  ShapeBindings b;
  b.batch = 4;
  std::vector<std::string> warnings;
  Status s = InferShapes(&g, b, &warnings);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(t.T("c").shape, (Shape{4, 16, 32, 32}));
  EXPECT_EQ(t.T("p").shape, (Shape{4, 16, 16, 16}));
  EXPECT_EQ(t.T("r").shape, (Shape{4, 16, 32, 32}));
  EXPECT_EQ(t.T("flat").shape, (Shape{4, 16}));
  EXPECT_EQ(t.T("logits").shape, (Shape{4, 10}));
}

// --------------------------------------------------------------------------
// Recurrent layers

TEST(NnLstm, BidirectionalShapesSavesAndFlops) {
  NnGraph t;
  t.In("x", {7, 3, 10}, DType::kBFloat16);
  t.In("w", {2, 80, 10});
  t.In("r", {2, 80, 20});
  t.In("b", {2, 160});
  int n = t.Add("LSTM", {"x", "w", "r", "b"}, {"y", "yh", "yc"},
                {{"hidden_size", AInt(20)}, {"direction", AStr("bidirectional")}});
  ASSERT_TRUE(t.Infer(n).ok()) << t.Infer(n).message();
  EXPECT_EQ(t.T("y").shape, (Shape{7, 2, 3, 20}));
  EXPECT_EQ(t.T("yh").shape, (Shape{2, 3, 20}));
  EXPECT_EQ(t.T("yc").shape, (Shape{2, 3, 20}));
  EXPECT_EQ(t.T("y").dtype, DType::kBFloat16);
  EXPECT_EQ(t.Flops(n), int64_t{2} * 4 * (10 + 20) * 20 * 7 * 3 * 2);
  EXPECT_EQ(Describe(t.Saves(n, {false, true, true, true}, DType::kBFloat16)),
            (Strings{"in0", "in1", "in2", "out0", "extra:reserve:bfloat16:[3360]"}));

  int bad = t.Add("LSTM", {"x", "w", "r"}, {"y2"}, {{"hidden_size", AInt(20)}}, "lstm");
  EXPECT_EQ(t.Infer(bad).message(),
            "m.onnx: node 'lstm' (LSTM): W 'w' has shape [2, 80, 10], expected [1, 80, 10]");
}

TEST(NnGru, BatchFirstLayoutAndHiddenFromR) {
  NnGraph t;
  t.In("x", {3, 7, 10});
  t.In("w", {1, 48, 10});
  t.In("r", {1, 48, 16});
  int n = t.Add("GRU", {"x", "w", "r"}, {"", "yh"}, {{"layout", AInt(1)}});
  ASSERT_TRUE(t.Infer(n).ok()) << t.Infer(n).message();
  EXPECT_EQ(t.T("yh").shape, (Shape{3, 1, 16}));
  // Y is not an output: cuDNN still writes it, so it is kept as an extra.
  EXPECT_EQ(Describe(t.Saves(n, {false, true, true})),
            (Strings{"in0", "in1", "in2", "extra:y:float32:[7, 1, 3, 16]",
                     "extra:reserve:float32:[1008]"}));

  t.In("w1", {1, 16, 10});
  t.In("r1", {1, 16, 16});
  int rnn = t.Add("RNN", {"x", "w1", "r1"}, {"yr"}, {{"layout", AInt(1)}});
  ASSERT_TRUE(t.Infer(rnn).ok());
  EXPECT_EQ(t.T("yr").shape, (Shape{3, 7, 1, 16}));
}

// --------------------------------------------------------------------------
// Reductions

TEST(NnReduce, KeepdimsAndAxesAsAttribute) {
  NnGraph t(13);
  t.In("x", {2, 3, 4});
  int n1 = t.Add("ReduceMean", {"x"}, {"y1"}, {{"axes", AInts({1})}});
  int n0 = t.Add("ReduceMean", {"x"}, {"y0"}, {{"axes", AInts({1, -1})}, {"keepdims", AInt(0)}});
  int all = t.Add("ReduceMax", {"x"}, {"ya"});
  ASSERT_TRUE(t.Infer(n1).ok());
  ASSERT_TRUE(t.Infer(n0).ok());
  ASSERT_TRUE(t.Infer(all).ok());
  EXPECT_EQ(t.T("y1").shape, (Shape{2, 1, 4}));
  EXPECT_EQ(t.T("y0").shape, (Shape{2}));
  EXPECT_EQ(t.T("ya").shape, (Shape{1, 1, 1}));
  EXPECT_TRUE(t.Saves(n1, {true}).empty());
  EXPECT_EQ(Describe(t.Saves(all, {true})), (Strings{"in0", "out0"}));
  EXPECT_EQ(t.Flops(n1), 24);
}

TEST(NnReduce, AxesAsInputAndNoop) {
  NnGraph t(18);
  t.In("x", {2, 3, 4});
  t.Values("ax", {-1});
  int n = t.Add("ReduceSum", {"x", "ax"}, {"y"}, {{"keepdims", AInt(0)}});
  ASSERT_TRUE(t.Infer(n).ok()) << t.Infer(n).message();
  EXPECT_EQ(t.T("y").shape, (Shape{2, 3}));

  t.Values("none", {});
  int noop = t.Add("ReduceL2", {"x", "none"}, {"yn"}, {{"noop_with_empty_axes", AInt(1)}});
  ASSERT_TRUE(t.Infer(noop).ok());
  EXPECT_EQ(t.T("yn").shape, (Shape{2, 3, 4}));
  int every = t.Add("ReduceLogSumExp", {"x", "none"}, {"ye"}, {{"keepdims", AInt(0)}});
  ASSERT_TRUE(t.Infer(every).ok());
  EXPECT_EQ(t.T("ye").shape, (Shape{}));

  t.In("dyn", {1}, DType::kInt64);
  int bad = t.Add("ReduceSum", {"x", "dyn"}, {"yb"}, {}, "rs");
  EXPECT_FALSE(t.Infer(bad).ok());
  t.Values("big", {3});
  int bad2 = t.Add("ReduceProd", {"x", "big"}, {"yc"}, {}, "rp");
  EXPECT_EQ(t.Infer(bad2).message(),
            "m.onnx: node 'rp' (ReduceProd): axes [3] are invalid for input of rank 3");
}

TEST(NnArgMax, Int64OutputNotDifferentiable) {
  NnGraph t;
  t.In("x", {2, 3, 4});
  int n = t.Add("ArgMax", {"x"}, {"y"}, {{"axis", AInt(-1)}, {"keepdims", AInt(0)}});
  ASSERT_TRUE(t.Infer(n).ok());
  EXPECT_EQ(t.T("y").shape, (Shape{2, 3}));
  EXPECT_EQ(t.T("y").dtype, DType::kInt64);
  int m = t.Add("ArgMin", {"x"}, {"z"});
  ASSERT_TRUE(t.Infer(m).ok());
  EXPECT_EQ(t.T("z").shape, (Shape{1, 3, 4}));
  EXPECT_FALSE(t.Def(n).differentiable);
  EXPECT_FALSE(t.Def(m).differentiable);
}

// --------------------------------------------------------------------------
// Attention

TEST(NnAttention, FourDimensionalGqaAndSaves) {
  NnGraph t(23);
  t.In("q", {2, 8, 128, 64}, DType::kBFloat16);
  t.In("k", {2, 2, 256, 64}, DType::kBFloat16);
  t.In("v", {2, 2, 256, 32}, DType::kBFloat16);
  int n = t.Add("Attention", {"q", "k", "v"}, {"y"});
  ASSERT_TRUE(t.Infer(n).ok()) << t.Infer(n).message();
  EXPECT_EQ(t.T("y").shape, (Shape{2, 8, 128, 32}));
  EXPECT_EQ(Describe(t.Saves(n, {true, true, true}, DType::kBFloat16)),
            (Strings{"in0", "in1", "in2", "out0", "extra:logsumexp:float32:[2, 8, 128]"}));
  const int64_t scores = int64_t{2} * 8 * 128 * 256;
  EXPECT_EQ(t.Flops(n), scores * 2 * (64 + 32) + 5 * scores);
}

TEST(NnAttention, ThreeDimensionalNeedsHeadCounts) {
  NnGraph t(23);
  t.In("q", {2, 10, 64});
  t.In("k", {2, 12, 32});
  t.In("v", {2, 12, 32});
  int n = t.Add("Attention", {"q", "k", "v"}, {"y"},
                {{"q_num_heads", AInt(4)}, {"kv_num_heads", AInt(2)}});
  ASSERT_TRUE(t.Infer(n).ok()) << t.Infer(n).message();
  EXPECT_EQ(t.T("y").shape, (Shape{2, 10, 64}));
  int bad = t.Add("Attention", {"q", "k", "v"}, {"y2"}, {}, "att");
  EXPECT_EQ(t.Infer(bad).message(),
            "m.onnx: node 'att' (Attention): 3-D inputs need attributes 'q_num_heads' and "
            "'kv_num_heads'");
}

// --------------------------------------------------------------------------
// Robustness: odd inputs give an error or a shape, never a crash.

TEST(NnRobustness, OddInputsNeverCrash) {
  const std::vector<std::string> ops = {"Conv",
                                        "ConvTranspose",
                                        "MatMul",
                                        "Gemm",
                                        "Einsum",
                                        "BatchNormalization",
                                        "LayerNormalization",
                                        "GroupNormalization",
                                        "InstanceNormalization",
                                        "RMSNormalization",
                                        "LpNormalization",
                                        "MaxPool",
                                        "AveragePool",
                                        "LpPool",
                                        "GlobalAveragePool",
                                        "GlobalMaxPool",
                                        "Resize",
                                        "Upsample",
                                        "LSTM",
                                        "GRU",
                                        "RNN",
                                        "ReduceMean",
                                        "ReduceSum",
                                        "ReduceMax",
                                        "ReduceL2",
                                        "ArgMax",
                                        "Attention"};
  const std::vector<Shape> shapes = {{}, {0}, {1, 0, 3}, {2, 3, 4, 5}, {1, 1, 1}};
  const std::map<std::string, Attribute> attrs = {{"kernel_shape", AInts({3, 3})},
                                                  {"equation", AStr("...,->")},
                                                  {"num_groups", AInt(0)},
                                                  {"axis", AInt(7)},
                                                  {"group", AInt(0)},
                                                  {"hidden_size", AInt(0)},
                                                  {"strides", AInts({0, 0})},
                                                  {"q_num_heads", AInt(0)},
                                                  {"kv_num_heads", AInt(0)},
                                                  {"axes", AInts({9})}};
  int case_id = 0;
  for (const auto& op : ops) {
    for (int nin = 0; nin <= 6; ++nin) {
      for (const Shape& shape : shapes) {
        for (int with_attrs = 0; with_attrs < 2; ++with_attrs) {
          NnGraph t;
          std::vector<std::string> ins;
          for (int i = 0; i < nin; ++i) {
            ins.push_back("i" + std::to_string(i));
            t.In(ins.back(), shape);
          }
          int n = t.Add(op, ins, {"o0", "o1", "o2"},
                        with_attrs ? attrs : std::map<std::string, Attribute>{});
          Status s = t.Infer(n);
          if (s.ok()) {
            (void)t.Flops(n);
            (void)t.Saves(n, std::vector<bool>(nin, true));
          } else {
            EXPECT_EQ(s.message().rfind("m.onnx: node '", 0), 0u) << s.message();
          }
          ++case_id;
        }
      }
    }
  }
  EXPECT_GT(case_id, 0);
}

TEST(NnAttention, ZeroKeyHeadsIsAnError) {
  NnGraph t(23);
  t.In("q", {1, 4, 8, 16});
  t.In("k", {1, 0, 8, 16});
  t.In("v", {1, 0, 8, 16});
  int n = t.Add("Attention", {"q", "k", "v"}, {"y"}, {}, "att");
  EXPECT_EQ(t.Infer(n).message(),
            "m.onnx: node 'att' (Attention): query heads 4 are not a multiple of key/value "
            "heads 0");
}

// --------------------------------------------------------------------------
// Registry facts

TEST(NnRegistry, AutocastAliasAndDifferentiability) {
  const std::vector<std::pair<std::string, Autocast>> expect = {
      {"Conv", Autocast::kLowPrecision},
      {"ConvTranspose", Autocast::kLowPrecision},
      {"MatMul", Autocast::kLowPrecision},
      {"Gemm", Autocast::kLowPrecision},
      {"Einsum", Autocast::kLowPrecision},
      {"LSTM", Autocast::kLowPrecision},
      {"GRU", Autocast::kLowPrecision},
      {"RNN", Autocast::kLowPrecision},
      {"Attention", Autocast::kLowPrecision},
      {"LayerNormalization", Autocast::kFp32},
      {"GroupNormalization", Autocast::kFp32},
      {"ReduceSum", Autocast::kFp32Output},
      {"ReduceProd", Autocast::kFp32Output},
      {"ReduceL2", Autocast::kFp32Output},
      {"ReduceSumSquare", Autocast::kFp32},
      {"ReduceLogSumExp", Autocast::kFp32},
      {"ReduceMean", Autocast::kPassthrough},
      {"ReduceMax", Autocast::kPassthrough},
      {"BatchNormalization", Autocast::kPassthrough},
      {"InstanceNormalization", Autocast::kPassthrough},
      {"MaxPool", Autocast::kPassthrough},
      {"GlobalAveragePool", Autocast::kPassthrough},
      {"Resize", Autocast::kFp32},  // upsample_* are in AT_FORALL_FP32
      {"Upsample", Autocast::kFp32},
  };
  for (const auto& e : expect) {
    const OpDef* d = FindOp("", e.first);
    ASSERT_NE(d, nullptr) << e.first;
    EXPECT_EQ(d->autocast, e.second) << e.first;
    EXPECT_EQ(d->alias, Alias::kNone) << e.first;
    EXPECT_TRUE(d->differentiable) << e.first;
    EXPECT_NE(d->shape, nullptr) << e.first;
  }
  EXPECT_NE(FindOp("ai.onnx", "Upsample"), nullptr);
  EXPECT_NE(FindOp("", "RMSNormalization"), nullptr);
  EXPECT_NE(FindOp("", "LpPool"), nullptr);
}

}  // namespace
}  // namespace memplan
