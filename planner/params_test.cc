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

}  // namespace
}  // namespace memplan
