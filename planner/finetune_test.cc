// Tests of fine-tuning's resolution (finetune.h): which parameters freeze,
// which Linear layers get LoRA adapters, quantized weight sizes, --lora.
#include "planner/finetune.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "planner/ops/test_graph.h"
#include "planner/params.h"

namespace memplan {
namespace {

using testing_util::D;
using testing_util::GraphBuilder;
using testing_util::IntsAttr;
using testing_util::S;

// x -> l0.q_proj -> Relu -> l1.q_proj (+ bias) -> head: three nn.Linear as
// the dynamo exporter writes them (MatMul of a transposed weight).
GraphBuilder TwoLayers() {
  GraphBuilder b;
  b.g.source = "m.onnx";
  b.Input("x", {S("batch"), D(8)});
  b.Init("m.l0.q_proj.weight", {16, 8});
  b.Init("m.l1.q_proj.weight", {16, 16});
  b.Init("m.l1.q_proj.bias", {16});
  b.Init("m.head.weight", {4, 16});
  b.Op("Transpose", {"m.l0.q_proj.weight"}, {"w0"}).attrs["perm"] = IntsAttr({1, 0});
  b.Op("MatMul", {"x", "w0"}, {"h0"});
  b.Op("Relu", {"h0"}, {"r0"});
  b.Op("Transpose", {"m.l1.q_proj.weight"}, {"w1"}).attrs["perm"] = IntsAttr({1, 0});
  b.Op("MatMul", {"r0", "w1"}, {"p1"});
  b.Op("Add", {"p1", "m.l1.q_proj.bias"}, {"h1"});
  b.Op("Transpose", {"m.head.weight"}, {"wh"}).attrs["perm"] = IntsAttr({1, 0});
  b.Op("MatMul", {"h1", "wh"}, {"logits"});
  b.Output("logits");
  b.g.Link();
  return b;
}

Result<FineTuneSetup> Resolve(const GraphBuilder& b, const PlanOptions& o) {
  return ResolveFineTune(b.g, ClassifyInitializers(b.g), o);
}

PlanOptions Train() {
  PlanOptions o;
  o.mode = Mode::kTrain;
  return o;
}

TEST(FineTune, FindsLinearLayersTheirFeaturesBiasAndTheHead) {
  GraphBuilder b = TwoLayers();
  const auto layers = FindLinearLayers(b.g, ClassifyInitializers(b.g));
  ASSERT_EQ(layers.size(), 3u);
  EXPECT_EQ(layers[0].module, "m.l0.q_proj");
  EXPECT_EQ(layers[0].in_features, 8);
  EXPECT_EQ(layers[0].out_features, 16);
  EXPECT_FALSE(layers[0].head);
  // The bias Add is the layer's end; the head's output is the graph output.
  EXPECT_EQ(b.g.nodes[layers[1].end_node].op_type, "Add");
  EXPECT_TRUE(layers[2].head);
}

TEST(FineTune, ModulePathFreezesWhatIsBelowItRegexSearchesNames) {
  GraphBuilder b = TwoLayers();
  PlanOptions o = Train();
  o.freeze = {"l0"};  // a dotted suffix of the module path m.l0
  auto s = Resolve(b, o);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(s->frozen[b.g.Find("m.l0.q_proj.weight")]);
  EXPECT_FALSE(s->frozen[b.g.Find("m.l1.q_proj.weight")]);
  o.freeze = {"q_proj\\.weight$"};
  s = Resolve(b, o);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(s->frozen[b.g.Find("m.l0.q_proj.weight")]);
  EXPECT_TRUE(s->frozen[b.g.Find("m.l1.q_proj.weight")]);
  EXPECT_FALSE(s->frozen[b.g.Find("m.l1.q_proj.bias")]);
  o.freeze.clear();
  o.train_only = {"head"};
  s = Resolve(b, o);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(s->frozen[b.g.Find("m.l1.q_proj.bias")]);
  EXPECT_FALSE(s->frozen[b.g.Find("m.head.weight")]);
}

TEST(FineTune, PatternsMatchingNothingAndBadRegexesAreErrors) {
  GraphBuilder b = TwoLayers();
  PlanOptions o = Train();
  o.freeze = {"encoder"};
  auto s = Resolve(b, o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("m.onnx: --freeze: 'encoder' matches no parameter"), std::string::npos)
      << s.message();
  o.freeze = {"(unclosed"};
  s = Resolve(b, o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("valid regex"), std::string::npos) << s.message();
  o = PlanOptions();  // inference
  o.freeze = {"l0"};
  EXPECT_FALSE(Resolve(b, o).ok());
}

TEST(FineTune, LoraFreezesTheBaseAndAdaptsMatchedLinears) {
  GraphBuilder b = TwoLayers();
  PlanOptions o = Train();
  o.lora.r = 4;
  o.lora.targets = {"q_proj"};
  auto s = Resolve(b, o);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_EQ(s->lora.size(), 2u);
  for (const char* p : {"m.l0.q_proj.weight", "m.l1.q_proj.bias", "m.head.weight"}) {
    EXPECT_TRUE(s->frozen[b.g.Find(p)]) << p;
  }
  o.lora.targets = {"v_proj"};
  s = Resolve(b, o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("target 'v_proj' matches no Linear layer"), std::string::npos);
}

TEST(FineTune, QuantizedWeightsNeedAFrozenBaseAndSkipTheHead) {
  GraphBuilder b = TwoLayers();
  PlanOptions o = Train();
  o.weights = WeightFormat::kNf4;
  auto s = Resolve(b, o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("--weights nf4: no frozen Linear weight"), std::string::npos);
  o.lora.r = 4;
  o.lora.targets = {"q_proj"};
  s = Resolve(b, o);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(s->quantized[b.g.Find("m.l0.q_proj.weight")]);
  EXPECT_FALSE(s->quantized[b.g.Find("m.l1.q_proj.bias")]);
  EXPECT_FALSE(s->quantized[b.g.Find("m.head.weight")]);
  // Inference: every Linear weight is frozen.
  o = PlanOptions();
  o.weights = WeightFormat::kInt8;
  s = Resolve(b, o);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(s->quantized[b.g.Find("m.l1.q_proj.weight")]);
}

TEST(FineTune, Nf4StorageIsHalfAByteAndDoubleQuantizedAbsmax) {
  // q_proj of the 1.07 B LLaMA-style model: 2048 x 2048, 65536 blocks of 64.
  const QuantizedWeight q = QuantizedWeightBytes(WeightFormat::kNf4, 2048, 2048);
  EXPECT_EQ(q.data_bytes, 2048 * 2048 / 2);
  ASSERT_EQ(q.state_bytes.size(), 5u);
  EXPECT_EQ(q.state_bytes[0], 65536);    // 8-bit absmax per block
  EXPECT_EQ(q.state_bytes[1], 256 * 4);  // fp32 absmax per 256 blocks
  EXPECT_EQ(q.dequant_scratch_bytes, 65536 * 8);
  const QuantizedWeight i8 = QuantizedWeightBytes(WeightFormat::kInt8, 16, 8);
  EXPECT_EQ(i8.data_bytes, 128);
  EXPECT_EQ(i8.state_bytes, std::vector<int64_t>{64});  // fp32 scale per row
}

TEST(FineTune, Int8MatmulWorkspacesFollowMatMul8bitLt) {
  // A bf16 [4096, 2048] input to a 2048 -> 5632 Linear: CA (1 B per element)
  // and its fp32 row scales, then the larger of the fp16 copy of A (less the
  // output, which does not exist yet) and the int32 product.
  const int64_t rows = 4096;
  const int64_t out_bytes = rows * 5632 * 2;
  const Int8MatmulBytes b = Int8MatmulWorkspaces(rows * 2048, 2048, 5632, false, 2, out_bytes);
  EXPECT_EQ(b.forward_workspace, rows * 2048 + rows * 4 + rows * 5632 * 4);
  EXPECT_EQ(b.backward_workspace, 2048 * 5632 * 2 + 5632 * 4);
  // A wide input (down_proj): the fp16 copy decides; an fp16 input needs none.
  const Int8MatmulBytes d = Int8MatmulWorkspaces(rows * 5632, 5632, 64, false, 2, rows * 64 * 2);
  EXPECT_EQ(d.forward_workspace, rows * 5632 + rows * 4 + rows * 5632 * 2 - rows * 64 * 2);
  const Int8MatmulBytes h = Int8MatmulWorkspaces(rows * 5632, 5632, 64, true, 2, rows * 64 * 2);
  EXPECT_EQ(h.forward_workspace, rows * 5632 + rows * 4 + rows * 64 * 4);
}

TEST(FineTune, ParsesLoraSpecs) {
  auto l = ParseLora("r=16,alpha=32,dropout=0,targets=q,k,v");
  ASSERT_TRUE(l.ok()) << l.message();
  EXPECT_EQ(l->r, 16);
  EXPECT_EQ(l->dropout, 0.0);
  EXPECT_EQ(l->targets, (std::vector<std::string>{"q", "k", "v"}));
  l = ParseLora("r=8");
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->targets, (std::vector<std::string>{"q_proj", "v_proj"}));
  for (const char* bad :
       {"r=0", "r=x", "alpha=2", "r=4,dropout=1.5", "r=4,rank=2", "r=4,x",
        // A key twice, no target, non-decimal or infinite numbers.
        "r=8,r=16", "r=8,targets=", "r=8,alpha=inf", "r=8,alpha=0x1p3", "r=8,dropout=nan"}) {
    EXPECT_FALSE(ParseLora(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace memplan
