#include "planner/shape_inference.h"

#include <gtest/gtest.h>

#include "planner/ops/test_graph.h"

namespace memplan {
namespace {

using testing_util::D;
using testing_util::GraphBuilder;
using testing_util::IntAttr;
using testing_util::S;
using Shape = std::vector<int64_t>;

ShapeBindings Batch(int64_t b) {
  ShapeBindings s;
  s.batch = b;
  return s;
}

TEST(ShapeInference, BatchSymbolIsDimZeroOfFirstInput) {
  GraphBuilder b;
  b.Input("x", {S("N"), D(3)});
  b.Input("y", {S("M")});
  EXPECT_EQ(BatchSymbol(b.g), "N");
  GraphBuilder fixed;
  fixed.Input("x", {D(4), D(3)});
  EXPECT_EQ(BatchSymbol(fixed.g), "");
  GraphBuilder empty;
  EXPECT_EQ(BatchSymbol(empty.g), "");
}

// nn.LSTM's default layout [seq, batch, feature]: --batch binds the symbol
// called "batch" wherever it is, not dim 0 ("seq").
TEST(ShapeInference, BatchSymbolCalledBatchWinsWhereverItIs) {
  GraphBuilder b;
  b.Input("x", {S("seq"), S("batch"), D(16)});
  b.Op("Relu", {"x"}, {"y"});
  EXPECT_EQ(BatchSymbol(b.g), "batch");
  ShapeBindings s = Batch(8);
  s.dims["seq"] = 32;
  ASSERT_TRUE(InferShapes(&b.g, s, nullptr).ok());
  EXPECT_EQ(b.T("y").shape, (Shape{32, 8, 16}));
  EXPECT_EQ(b.g.batch_symbol, "batch");
  EXPECT_EQ(b.g.bound_symbols, (std::map<std::string, int64_t>{{"batch", 8}, {"seq", 32}}));
}

TEST(ShapeInference, BatchDimNamesAnotherSymbol) {
  GraphBuilder b;
  b.Input("x", {S("s0"), S("s1"), D(16)});
  b.Op("Relu", {"x"}, {"y"});
  ShapeBindings s = Batch(8);
  s.batch_dim = "s1";
  s.dims["s0"] = 32;
  ASSERT_TRUE(InferShapes(&b.g, s, nullptr).ok());
  EXPECT_EQ(b.T("y").shape, (Shape{32, 8, 16}));
  s.batch_dim = "nope";
  Status st = InferShapes(&b.g, s, nullptr);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(),
            "m.onnx: --batch-dim nope: the model has no symbol 'nope' (its symbols: "
            "s0, s1)");
}

TEST(ShapeInference, UnknownDimSymbolIsAnError) {
  GraphBuilder b;
  b.Input("x", {S("batch"), S("sequence")});
  ShapeBindings s = Batch(2);
  s.dims["sequence"] = 4;
  s.dims["seq"] = 1024;
  Status st = InferShapes(&b.g, s, nullptr);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(),
            "m.onnx: --dim seq=1024: the model has no symbol 'seq' (its symbols: "
            "batch, sequence)");
}

TEST(ShapeInference, BatchGivenTwiceMustAgree) {
  GraphBuilder b;
  b.Input("x", {S("batch"), D(3)});
  ShapeBindings s = Batch(2);
  s.dims["batch"] = 4;
  Status st = InferShapes(&b.g, s, nullptr);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(),
            "m.onnx: --batch 2 and --dim batch=4 bind the same symbol to different "
            "values");
  s.dims["batch"] = 2;
  EXPECT_TRUE(InferShapes(&b.g, s, nullptr).ok());
  // --dim batch=N alone is the batch too.
  ShapeBindings d;
  d.dims["batch"] = 8;
  ASSERT_TRUE(InferShapes(&b.g, d, nullptr).ok());
  EXPECT_EQ(b.g.bound_symbols.at(b.g.batch_symbol), 8);
}

TEST(ShapeInference, BindsBatchAndNamedDims) {
  GraphBuilder b;
  b.Input("x", {S("batch"), S("seq"), D(4)});
  b.Op("Relu", {"x"}, {"y"});
  ShapeBindings s = Batch(8);
  s.dims["seq"] = 16;
  ASSERT_TRUE(InferShapes(&b.g, s, nullptr).ok());
  EXPECT_EQ(b.T("y").shape, (Shape{8, 16, 4}));
  EXPECT_EQ(b.T("y").dtype, DType::kFloat);
}

TEST(ShapeInference, UnboundBatchSymbolMessage) {
  GraphBuilder b;
  b.Input("x", {S("batch"), D(3)});
  Status s = InferShapes(&b.g, ShapeBindings(), nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "m.onnx: input 'x': dim 0 is symbolic ('batch'): bind it with --batch N");
}

TEST(ShapeInference, UnboundNamedSymbolMessage) {
  GraphBuilder b;
  b.Input("x", {S("batch"), S("seq")});
  Status s = InferShapes(&b.g, Batch(2), nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "m.onnx: input 'x': dim 1 is symbolic ('seq'): bind it with --dim seq=N");
}

TEST(ShapeInference, FixedBatchWithBatchFlagFails) {
  GraphBuilder b;
  b.Input("x", {D(4), D(3)});
  Status s = InferShapes(&b.g, Batch(2), nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "m.onnx: input 'x' has a fixed batch of 4; export with a dynamic batch dim");
  // Without --batch the fixed shape is fine.
  EXPECT_TRUE(InferShapes(&b.g, ShapeBindings(), nullptr).ok());
}

TEST(ShapeInference, NonPositiveBindingsAndUnknownDimsFail) {
  GraphBuilder b;
  b.Input("x", {S("batch"), S("seq")});
  ShapeBindings s = Batch(0);
  Status st = InferShapes(&b.g, s, nullptr);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("input 'x'"), std::string::npos);
  s = Batch(2);
  s.dims["seq"] = -3;
  st = InferShapes(&b.g, s, nullptr);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(), "m.onnx: input 'x': --dim seq must be positive, got -3");

  GraphBuilder u;
  u.Input("x", {D(2), Dim()});
  st = InferShapes(&u.g, ShapeBindings(), nullptr);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(), "m.onnx: input 'x': dim 1 is unknown (no size and no symbol)");

  GraphBuilder n;
  n.Input("x", {D(2), D(-5)});
  st = InferShapes(&n.g, ShapeBindings(), nullptr);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(), "m.onnx: input 'x': dim 1 is negative (-5)");
}

TEST(ShapeInference, CycleIsAnErrorNamingANode) {
  GraphBuilder b;
  b.Input("x", {D(2)});
  b.Op("Add", {"x", "c"}, {"a"}, "first");
  b.Op("Relu", {"a"}, {"c"}, "second");
  auto order = TopologicalOrder(b.g);
  ASSERT_FALSE(order.ok());
  EXPECT_EQ(order.message(), "m.onnx: graph has a cycle through node 'first' (Add) (tensor 'a')");
  Status s = InferShapes(&b.g, ShapeBindings(), nullptr);
  EXPECT_EQ(s.message(), order.message());
}

TEST(ShapeInference, MissingInputIsAnErrorNamingNodeAndTensor) {
  GraphBuilder b;
  b.Input("x", {D(2)});
  b.Op("Add", {"x", "ghost"}, {"y"}, "adder");
  auto order = TopologicalOrder(b.g);
  ASSERT_FALSE(order.ok());
  EXPECT_EQ(order.message(),
            "m.onnx: node 'adder' (Add): input 'ghost' is not produced by any node, graph input "
            "or initializer");
}

TEST(ShapeInference, TopologicalOrderKeepsFileOrderAndFixesOutOfOrder) {
  GraphBuilder b;
  b.Input("x", {D(2)});
  b.Op("Relu", {"x"}, {"a"});
  b.Op("Relu", {"a"}, {"b"});
  auto order = TopologicalOrder(b.g);
  ASSERT_TRUE(order.ok());
  EXPECT_EQ(order.value(), (std::vector<int>{0, 1}));

  GraphBuilder r;
  r.Input("x", {D(2)});
  r.Op("Relu", {"b"}, {"c"});  // consumes b before it is produced
  r.Op("Relu", {"a"}, {"b"});
  r.Op("Relu", {"x"}, {"a"});
  r.Op("Relu", {"x"}, {"d"});
  order = TopologicalOrder(r.g);
  ASSERT_TRUE(order.ok());
  EXPECT_EQ(order.value(), (std::vector<int>{2, 1, 0, 3}));
  ASSERT_TRUE(InferShapes(&r.g, ShapeBindings(), nullptr).ok());
  EXPECT_EQ(r.T("c").shape, (Shape{2}));
}

TEST(ShapeInference, LongChainIsLinear) {
  GraphBuilder b;
  b.Input("x", {S("batch"), D(4)});
  const int n = 100000;
  // Built in reverse file order: worst case for the ordering.
  for (int i = n - 1; i >= 0; --i) {
    b.Op("Relu", {i == 0 ? "x" : "t" + std::to_string(i - 1)}, {"t" + std::to_string(i)});
  }
  ASSERT_TRUE(InferShapes(&b.g, Batch(3), nullptr).ok());
  EXPECT_EQ(b.T("t99999").shape, (Shape{3, 4}));
}

TEST(ShapeInference, ValueInfoDisagreementMessage) {
  GraphBuilder b;
  b.Input("x", {S("batch"), D(4)});
  b.Op("Relu", {"x"}, {"y"}, "act");
  b.ValueInfo("y", {S("batch"), D(5)});
  Status s = InferShapes(&b.g, Batch(2), nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "m.onnx: tensor 'y' (output of node 'act'): value_info says [batch, 5] but inference "
            "gives [2, 4]");
}

TEST(ShapeInference, ValueInfoBoundSymbolMustMatchUnboundIsFree) {
  GraphBuilder b;
  b.Input("x", {S("batch"), D(4)});
  b.Input("z", {D(3), D(4)});
  b.Op("Relu", {"z"}, {"y"}, "act");
  b.ValueInfo("y", {S("batch"), D(4)});  // bound to 2, but y has 3
  Status s = InferShapes(&b.g, Batch(2), nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("value_info says [batch, 4] but inference gives [3, 4]"),
            std::string::npos);
  b.ValueInfo("y", {S("unk__12"), S("s0")});
  EXPECT_TRUE(InferShapes(&b.g, Batch(2), nullptr).ok());
  b.ValueInfo("y", {S("s0"), D(4), D(1)});  // rank differs
  EXPECT_FALSE(InferShapes(&b.g, Batch(2), nullptr).ok());
}

TEST(ShapeInference, ValueInfoDtypeDisagreement) {
  GraphBuilder b;
  b.Input("x", {D(4)});
  b.Op("Relu", {"x"}, {"y"}, "act");
  b.ValueInfo("y", {D(4)}, DType::kInt64);
  Status s = InferShapes(&b.g, ShapeBindings(), nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "m.onnx: tensor 'y' (output of node 'act'): value_info says int64 but inference gives "
            "float32");
}

TEST(ShapeInference, UnknownOpFallsBackToValueInfoWithWarning) {
  GraphBuilder b;
  b.Input("x", {S("batch"), D(4)});
  Node& n = b.Op("FancyOp", {"x"}, {"y"}, "fancy");
  n.domain = "com.example";
  b.ValueInfo("y", {S("batch"), D(7)}, DType::kFloat16);
  std::vector<std::string> warnings;
  ASSERT_TRUE(InferShapes(&b.g, Batch(5), &warnings).ok());
  EXPECT_EQ(b.T("y").shape, (Shape{5, 7}));
  EXPECT_EQ(b.T("y").dtype, DType::kFloat16);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0],
            "m.onnx: node 'fancy' (com.example::FancyOp): no shape function; using the model's "
            "value_info");
}

TEST(ShapeInference, UnknownOpWithoutValueInfoFails) {
  GraphBuilder b;
  b.Input("x", {D(4)});
  b.Op("FancyOp", {"x"}, {"y"}, "fancy");
  b.ValueInfo("y", {S("s3")}, DType::kFloat);  // open symbol: not enough
  Status s = InferShapes(&b.g, ShapeBindings(), nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "m.onnx: node 'fancy' (ai.onnx::FancyOp): unsupported op (no shape function) in "
            "domain 'ai.onnx'");
}

TEST(ShapeInference, SizeOverflowNamesTheTensor) {
  GraphBuilder b;
  b.Input("x", {D(int64_t{1} << 31), D(int64_t{1} << 31), D(4)});
  Status s = InferShapes(&b.g, ShapeBindings(), nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "m.onnx: tensor 'x': size overflows int64 ([2147483648, 2147483648, 4] of float32)");

  GraphBuilder e;
  e.Input("x", {D(int64_t{1} << 40)});
  e.Ints("shape", {int64_t{1} << 30, int64_t{1} << 40});
  e.Op("Expand", {"x", "shape"}, {"y"}, "grow");
  s = InferShapes(&e.g, ShapeBindings(), nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("tensor 'y' (output of node 'grow'): size overflows int64"),
            std::string::npos);
}

TEST(ShapeInference, InitializerValuesAreKept) {
  GraphBuilder b;
  b.Input("x", {S("batch"), D(6)});
  b.Ints("target", {0, 2, 3});
  b.Op("Reshape", {"x", "target"}, {"y"});
  ASSERT_TRUE(InferShapes(&b.g, Batch(4), nullptr).ok());
  EXPECT_EQ(b.T("y").shape, (Shape{4, 2, 3}));
  EXPECT_TRUE(b.T("target").has_values);
}

TEST(ShapeInference, RerunWithAnotherBatch) {
  GraphBuilder b;
  b.Input("x", {S("batch"), D(6)});
  b.Op("Shape", {"x"}, {"s"});
  b.Op("Relu", {"x"}, {"y"});
  ASSERT_TRUE(InferShapes(&b.g, Batch(4), nullptr).ok());
  EXPECT_EQ(b.T("s").values, (Shape{4, 6}));
  ASSERT_TRUE(InferShapes(&b.g, Batch(64), nullptr).ok());
  EXPECT_EQ(b.T("s").values, (Shape{64, 6}));
  EXPECT_EQ(b.T("y").shape, (Shape{64, 6}));
}

TEST(ShapeInference, ShapeGatherConcatReshapeChain) {
  // x: [batch, seq, 768] -> reshape to [batch, seq, 12, 64] computed from
  // Shape/Gather/Unsqueeze/Concat, the way exporters write it.
  GraphBuilder b(13);
  b.Input("x", {S("batch"), S("seq"), D(768)});
  b.Op("Shape", {"x"}, {"shp"});
  b.Scalar("i0", 0);
  b.Scalar("i1", 1);
  b.Ints("ax0", {0});
  b.Ints("heads", {12, 64});
  b.Op("Gather", {"shp", "i0"}, {"b"}).attrs["axis"] = IntAttr(0);
  b.Op("Gather", {"shp", "i1"}, {"s"}).attrs["axis"] = IntAttr(0);
  b.Op("Unsqueeze", {"b", "ax0"}, {"bu"});
  b.Op("Unsqueeze", {"s", "ax0"}, {"su"});
  b.Op("Concat", {"bu", "su", "heads"}, {"target"}).attrs["axis"] = IntAttr(0);
  b.Op("Reshape", {"x", "target"}, {"y"});
  b.Op("Transpose", {"y"}, {"yt"}).attrs["perm"] = testing_util::IntsAttr({0, 2, 1, 3});
  ShapeBindings s = Batch(8);
  s.dims["seq"] = 128;
  ASSERT_TRUE(InferShapes(&b.g, s, nullptr).ok());
  EXPECT_EQ(b.T("target").values, (Shape{8, 128, 12, 64}));
  EXPECT_EQ(b.T("y").shape, (Shape{8, 128, 12, 64}));
  EXPECT_EQ(b.T("yt").shape, (Shape{8, 12, 128, 64}));
}

TEST(ShapeInference, GraphOutputNeverProducedFails) {
  GraphBuilder b;
  b.Input("x", {D(2)});
  b.Output("nowhere");
  Status s = InferShapes(&b.g, ShapeBindings(), nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "m.onnx: graph output 'nowhere' is not produced by any node or input");
}

TEST(ShapeInference, TensorProducedTwiceFails) {
  GraphBuilder b;
  b.Input("x", {D(2)});
  b.Op("Relu", {"x"}, {"y"}, "one");
  b.Op("Relu", {"x"}, {"y"}, "two");
  auto order = TopologicalOrder(b.g);
  ASSERT_FALSE(order.ok());
  EXPECT_EQ(order.message(),
            "m.onnx: tensor 'y' is produced by both node 'one' (Relu) and node 'two' (Relu)");
}

TEST(ShapeInference, BadInputCountIsAnErrorNotACrash) {
  GraphBuilder b;
  b.Input("x", {D(2)});
  b.Op("Add", {"x"}, {"y"}, "add1");
  Status s = InferShapes(&b.g, ShapeBindings(), nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "m.onnx: node 'add1' (Add): expects 2 inputs, got 1");
}

}  // namespace
}  // namespace memplan
