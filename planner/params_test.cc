// Tests of ClassifyInitializers / SummarizeParams: which initializers are
// trainable parameters, buffers or constants, counted as PyTorch counts them.
#include "planner/params.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "planner/ops/test_graph.h"

namespace memplan {
namespace {

using testing_util::D;
using testing_util::GraphBuilder;
using testing_util::IntAttr;
using testing_util::IntsAttr;
using testing_util::S;

InitRole RoleOf(const GraphBuilder& b, const std::vector<InitRole>& roles,
                const std::string& name) {
  const int id = b.g.Find(name);
  EXPECT_GE(id, 0) << name;
  return roles.at(id);
}

TEST(Params, ConvAndBatchNormWeightsAreParametersRunningStatsBuffers) {
  GraphBuilder b;
  b.Input("x", {S("N"), D(3), D(8), D(8)});
  b.Init("conv.weight", {16, 3, 3, 3});
  b.Init("conv.bias", {16});
  b.Init("bn.weight", {16});
  b.Init("bn.bias", {16});
  b.Init("bn.running_mean", {16});
  b.Init("bn.running_var", {16});
  b.Op("Conv", {"x", "conv.weight", "conv.bias"}, {"c"}).attrs["kernel_shape"] = IntsAttr({3, 3});
  b.Op("BatchNormalization", {"c", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"},
       {"y"});
  b.Output("y");
  b.g.Link();
  const auto roles = ClassifyInitializers(b.g);
  ASSERT_EQ(roles.size(), b.g.tensors.size());
  EXPECT_EQ(RoleOf(b, roles, "conv.weight"), InitRole::kParameter);
  EXPECT_EQ(RoleOf(b, roles, "conv.bias"), InitRole::kParameter);
  EXPECT_EQ(RoleOf(b, roles, "bn.weight"), InitRole::kParameter);
  EXPECT_EQ(RoleOf(b, roles, "bn.bias"), InitRole::kParameter);
  EXPECT_EQ(RoleOf(b, roles, "bn.running_mean"), InitRole::kBuffer);
  EXPECT_EQ(RoleOf(b, roles, "bn.running_var"), InitRole::kBuffer);
  // Activations and inputs are not initializers.
  EXPECT_EQ(RoleOf(b, roles, "x"), InitRole::kConstant);
  EXPECT_EQ(RoleOf(b, roles, "c"), InitRole::kConstant);

  const ParamSummary s = SummarizeParams(b.g, roles);
  // 16*27 + 16 + 16 + 16 = 480 parameters, 1920 bytes in fp32.
  EXPECT_EQ(s.parameter_count, 480);
  EXPECT_EQ(s.parameter_bytes, 1920);
  EXPECT_EQ(s.buffer_count, 32);
  EXPECT_EQ(s.buffer_bytes, 128);
  EXPECT_EQ(s.constant_bytes, 0);
  EXPECT_EQ(s.parameters, (std::vector<int>{b.g.Find("conv.weight"), b.g.Find("conv.bias"),
                                            b.g.Find("bn.weight"), b.g.Find("bn.bias")}));
  EXPECT_EQ(s.buffers, (std::vector<int>{b.g.Find("bn.running_mean"), b.g.Find("bn.running_var")}));
}

// A rotary embedding's inv_freq reaches a MatMul (the frequencies times the
// positions) but is a module buffer: no gradient, no optimizer state.
TEST(Params, ExportedBufferIsNotAParameter) {
  GraphBuilder b;
  b.Input("pos", {D(1), D(16), D(1)});
  b.Init("inv_freq", {1, 1, 4});
  b.Init("w", {4, 4});
  b.Op("MatMul", {"pos", "inv_freq"}, {"freqs"});
  b.Op("MatMul", {"freqs", "w"}, {"y"});
  b.Output("y");
  b.g.Link();
  auto roles = ClassifyInitializers(b.g);
  EXPECT_EQ(RoleOf(b, roles, "inv_freq"), InitRole::kParameter);
  b.g.tensors[b.g.Find("inv_freq")].exported_buffer = true;
  roles = ClassifyInitializers(b.g);
  EXPECT_EQ(RoleOf(b, roles, "inv_freq"), InitRole::kBuffer);
  EXPECT_EQ(RoleOf(b, roles, "w"), InitRole::kParameter);
  const ParamSummary sum = SummarizeParams(b.g, roles);
  EXPECT_EQ(sum.parameter_count, 16);
  EXPECT_EQ(sum.buffer_count, 4);
}

TEST(Params, IntegerBoolAndOneElementInitializersAreConstants) {
  GraphBuilder b;
  b.Input("x", {S("N"), D(4), D(6)});
  b.Ints("shape", {-1, 24});                     // int64, shape math
  b.Init("half", {}, DType::kFloat);             // scalar 0.5
  b.Init("one", {1}, DType::kFloat);             // [1]
  b.Init("keep", {24}, DType::kBool);            // bool mask
  b.Init("idx", {3}, DType::kInt32, {0, 1, 2});  // int32 indices
  b.Op("Reshape", {"x", "shape"}, {"r"});
  b.Op("Mul", {"r", "half"}, {"m"});
  b.Op("Add", {"m", "one"}, {"a"});
  b.Op("Where", {"keep", "a", "one"}, {"w"});
  b.Op("Gather", {"w", "idx"}, {"y"}).attrs["axis"] = IntAttr(1);
  b.Output("y");
  b.g.Link();
  const auto roles = ClassifyInitializers(b.g);
  for (const char* name : {"shape", "half", "one", "keep", "idx"}) {
    EXPECT_EQ(RoleOf(b, roles, name), InitRole::kConstant) << name;
  }
  const ParamSummary s = SummarizeParams(b.g, roles);
  EXPECT_EQ(s.parameter_count, 0);
  EXPECT_EQ(s.buffer_count, 0);
  // 2*8 + 4 + 4 + 24*1 + 3*4 bytes.
  EXPECT_EQ(s.constant_bytes, 16 + 4 + 4 + 24 + 12);
}

TEST(Params, EmbeddingTableReadByGatherIsAParameter) {
  GraphBuilder b;
  b.Input("ids", {S("N"), D(16)}, DType::kInt64);
  b.Init("wte", {1000, 32});
  b.Op("Gather", {"wte", "ids"}, {"e"});
  b.Output("e");
  b.g.Link();
  const auto roles = ClassifyInitializers(b.g);
  EXPECT_EQ(RoleOf(b, roles, "wte"), InitRole::kParameter);
  EXPECT_EQ(SummarizeParams(b.g, roles).parameter_count, 32000);
}

// Swin's relative position bias: a learned table, transposed, read by GatherND.
TEST(Params, BiasTableReadByGatherNDIsAParameter) {
  GraphBuilder b;
  b.Init("bias_table", {169, 3});
  b.Init("index", {49, 49, 1}, DType::kInt64);
  b.Op("Transpose", {"bias_table"}, {"t"}).attrs["perm"] = IntsAttr({1, 0});
  b.Op("GatherND", {"t", "index"}, {"bias"});
  b.Output("bias");
  b.g.Link();
  const auto roles = ClassifyInitializers(b.g);
  EXPECT_EQ(RoleOf(b, roles, "bias_table"), InitRole::kParameter);
  EXPECT_EQ(SummarizeParams(b.g, roles).parameter_count, 169 * 3);
}

TEST(Params, GatherIndicesTableIsNoParameter) {
  // A float tensor in Gather's index slot is not an embedding table.
  GraphBuilder b;
  b.Input("x", {S("N"), D(8)});
  b.Init("table", {5, 8});
  b.Init("lut", {5, 8});
  b.Op("Less", {"x", "lut"}, {"lt"});
  b.Op("Gather", {"table", "lt"}, {"y"});
  b.Output("y");
  b.g.Link();
  const auto roles = ClassifyInitializers(b.g);
  EXPECT_EQ(RoleOf(b, roles, "table"), InitRole::kParameter);
  // Compared, never trained.
  EXPECT_EQ(RoleOf(b, roles, "lut"), InitRole::kBuffer);
}

TEST(Params, WeightReachedThroughTransposeAndCastIsAParameter) {
  GraphBuilder b;
  b.Input("x", {S("N"), D(8)});
  b.Init("w_t", {4, 8});
  b.Init("w_c", {4, 4}, DType::kFloat16);
  b.Op("Transpose", {"w_t"}, {"wT"}).attrs["perm"] = IntsAttr({1, 0});
  b.Op("MatMul", {"x", "wT"}, {"h"});
  b.Op("Cast", {"w_c"}, {"w_c32"}).attrs["to"] = IntAttr(1);
  b.Op("MatMul", {"h", "w_c32"}, {"y"});
  b.Output("y");
  b.g.Link();
  const auto roles = ClassifyInitializers(b.g);
  EXPECT_EQ(RoleOf(b, roles, "w_t"), InitRole::kParameter);
  EXPECT_EQ(RoleOf(b, roles, "w_c"), InitRole::kParameter);
  const ParamSummary s = SummarizeParams(b.g, roles);
  EXPECT_EQ(s.parameter_count, 32 + 16);
  // Bytes in each initializer's own dtype.
  EXPECT_EQ(s.parameter_bytes, 32 * 4 + 16 * 2);
}

TEST(Params, TiedWeightsAreCountedOnce) {
  // GPT-2 style: the token embedding is also the LM head (through a transpose).
  GraphBuilder b;
  b.Input("ids", {S("N"), D(16)}, DType::kInt64);
  b.Init("wte", {1000, 32});
  b.Init("ln.weight", {32});
  b.Init("ln.bias", {32});
  b.Op("Gather", {"wte", "ids"}, {"e"});
  b.Op("LayerNormalization", {"e", "ln.weight", "ln.bias"}, {"n"});
  b.Op("Transpose", {"wte"}, {"wteT"}).attrs["perm"] = IntsAttr({1, 0});
  b.Op("MatMul", {"n", "wteT"}, {"logits"});
  b.Output("logits");
  b.g.Link();
  const auto roles = ClassifyInitializers(b.g);
  const ParamSummary s = SummarizeParams(b.g, roles);
  EXPECT_EQ(s.parameter_count, 32000 + 64);
  EXPECT_EQ(s.parameter_bytes, (32000 + 64) * 4);
  EXPECT_EQ(s.parameters,
            (std::vector<int>{b.g.Find("wte"), b.g.Find("ln.weight"), b.g.Find("ln.bias")}));
}

TEST(Params, LearnedPositionalEmbeddingAddedElementwiseIsAParameter) {
  GraphBuilder b;
  b.Input("x", {S("N"), D(16), D(32)});
  b.Init("pos", {1, 16, 32});
  b.Init("cls", {1, 1, 32});
  b.Op("Add", {"x", "pos"}, {"a"});
  b.Op("Expand", {"cls", "cls_shape"}, {"cls_e"});
  b.Ints("cls_shape", {2, 1, 32});
  b.Op("Concat", {"cls_e", "a"}, {"y"}).attrs["axis"] = IntAttr(1);
  b.Output("y");
  b.g.Link();
  const auto roles = ClassifyInitializers(b.g);
  EXPECT_EQ(RoleOf(b, roles, "pos"), InitRole::kParameter);
  EXPECT_EQ(RoleOf(b, roles, "cls"), InitRole::kParameter);
  EXPECT_EQ(RoleOf(b, roles, "cls_shape"), InitRole::kConstant);
}

TEST(Params, UnreachedFloatInitializerIsABuffer) {
  GraphBuilder b;
  b.Input("x", {S("N"), D(8)});
  b.Init("stats", {8});     // read only by a comparison
  b.Init("dangling", {8});  // read by nothing
  b.Op("Greater", {"x", "stats"}, {"g"});
  b.Output("g");
  b.g.Link();
  const auto roles = ClassifyInitializers(b.g);
  EXPECT_EQ(RoleOf(b, roles, "stats"), InitRole::kBuffer);
  EXPECT_EQ(RoleOf(b, roles, "dangling"), InitRole::kBuffer);
  const ParamSummary s = SummarizeParams(b.g, roles);
  EXPECT_EQ(s.buffer_count, 16);
  EXPECT_EQ(s.buffer_bytes, 64);
  EXPECT_EQ(s.parameter_count, 0);
}

// How the dynamo exporter writes nn.LSTM's weights: PyTorch's gate rows
// (i, f, g, o) are sliced and concatenated into ONNX's order (i, o, f, c),
// then unsqueezed to [dirs, 4H, .] before the LSTM node.
TEST(Params, LstmWeightsThroughGateReorderingAreParameters) {
  const int64_t hidden = 8;
  const int64_t input = 5;
  GraphBuilder b;
  b.Input("x", {D(7), S("N"), D(input)});
  b.Init("weight_ih", {4 * hidden, input});
  b.Init("weight_hh", {4 * hidden, hidden});
  b.Init("bias_ih", {4 * hidden});
  b.Init("bias_hh", {4 * hidden});
  b.Ints("axes", {0});
  for (const char* w : {"weight_ih", "weight_hh", "bias_ih", "bias_hh"}) {
    const std::string n = w;
    for (int gate = 0; gate < 4; ++gate) {
      b.Ints(n + "_s" + std::to_string(gate), {gate * hidden});
      b.Ints(n + "_e" + std::to_string(gate), {(gate + 1) * hidden});
      b.Op("Slice", {n, n + "_s" + std::to_string(gate), n + "_e" + std::to_string(gate), "axes"},
           {n + "_g" + std::to_string(gate)});
    }
    b.Op("Concat", {n + "_g0", n + "_g3", n + "_g1", n + "_g2"}, {n + "_r"}).attrs["axis"] =
        IntAttr(0);
  }
  b.Op("Unsqueeze", {"weight_ih_r", "axes"}, {"W"});
  b.Op("Unsqueeze", {"weight_hh_r", "axes"}, {"R"});
  b.Op("Concat", {"bias_ih_r", "bias_hh_r"}, {"bias"}).attrs["axis"] = IntAttr(0);
  b.Op("Unsqueeze", {"bias", "axes"}, {"B"});
  b.Op("LSTM", {"x", "W", "R", "B"}, {"y"}).attrs["hidden_size"] = IntAttr(hidden);
  b.Output("y");
  b.g.Link();
  const auto roles = ClassifyInitializers(b.g);
  for (const char* w : {"weight_ih", "weight_hh", "bias_ih", "bias_hh"}) {
    EXPECT_EQ(RoleOf(b, roles, w), InitRole::kParameter) << w;
  }
  // nn.LSTM(5, 8).parameters(): 4*8*5 + 4*8*8 + 2 * 4*8 = 160 + 256 + 64.
  EXPECT_EQ(SummarizeParams(b.g, roles).parameter_count, 480);
}

// Rotary embeddings: a cos table buffer sliced to the sequence and
// multiplied into q is read, never trained.
TEST(Params, SlicedTableMultipliedInIsABuffer) {
  GraphBuilder b;
  b.Input("q", {S("N"), D(16), D(8)});
  b.Init("cos_cached", {64, 8});
  b.Init("pos_table", {64, 8});
  b.Ints("zero", {0});
  b.Ints("sixteen", {16});
  b.Op("Slice", {"cos_cached", "zero", "sixteen", "zero"}, {"cos"});
  b.Op("Mul", {"q", "cos"}, {"qc"});
  // A sliced learned table that reaches a MatMul is trained.
  b.Op("Slice", {"pos_table", "zero", "sixteen", "zero"}, {"pos"});
  b.Op("Transpose", {"pos"}, {"posT"}).attrs["perm"] = IntsAttr({1, 0});
  b.Op("MatMul", {"qc", "posT"}, {"y"});
  b.Output("y");
  b.g.Link();
  const auto roles = ClassifyInitializers(b.g);
  EXPECT_EQ(RoleOf(b, roles, "cos_cached"), InitRole::kBuffer);
  EXPECT_EQ(RoleOf(b, roles, "pos_table"), InitRole::kParameter);
}

// Deep chains and diamonds of view ops are followed to any depth, each node
// once: 3000 levels of a diamond would be 2^3000 paths for a walker that
// revisits shared tensors.
TEST(Params, DeepDiamondChainsAreFollowedOnce) {
  GraphBuilder b;
  b.Input("x", {S("N"), D(4)});
  b.Init("w", {4, 4});
  std::string cur = "w";
  for (int i = 0; i < 3000; ++i) {
    const std::string a = "a" + std::to_string(i);
    const std::string c = "c" + std::to_string(i);
    const std::string d = "d" + std::to_string(i);
    b.Op("Identity", {cur}, {a});
    b.Op("Identity", {cur}, {c});
    b.Op("Concat", {a, c}, {d}).attrs["axis"] = IntAttr(0);
    cur = d;
  }
  b.Init("unused_deep", {4, 4});
  b.Op("Identity", {"unused_deep"}, {"u"});
  b.Op("Greater", {"x", "u"}, {"g"});
  b.Op("MatMul", {"x", cur}, {"y"});
  b.Output("y");
  b.Output("g");
  b.g.Link();
  const auto roles = ClassifyInitializers(b.g);
  EXPECT_EQ(RoleOf(b, roles, "w"), InitRole::kParameter);
  EXPECT_EQ(RoleOf(b, roles, "unused_deep"), InitRole::kBuffer);
}

}  // namespace
}  // namespace memplan
