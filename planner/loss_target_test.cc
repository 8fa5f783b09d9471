#include "planner/loss_target.h"

#include <gtest/gtest.h>

#include "planner/ops/test_graph.h"

namespace memplan {
namespace {

using testing_util::D;
using testing_util::GraphBuilder;
using testing_util::S;

/// NotClassLogits on the graph, linked as the importer leaves it.
std::string Check(Graph g) {
  g.Link();
  return NotClassLogits(g);
}

/// x [N, 16] -> MatMul W [16, classes] -> (ops) -> y, y declared [N, classes].
GraphBuilder Head(int64_t classes, const std::vector<std::string>& after = {}) {
  GraphBuilder b;
  b.Input("x", {S("N"), D(16)});
  b.Init("w", {16, classes});
  std::string cur = "logits";
  b.Op("MatMul", {"x", "w"}, {cur}, "fc");
  for (const std::string& op : after) {
    b.Op(op, {cur}, {cur + "_" + op}, op == "Sigmoid" ? "head_sigmoid" : "");
    cur += "_" + op;
  }
  b.ValueInfo(cur, {S("N"), D(classes)}, DType::kFloat);
  b.Output(cur);
  return b;
}

TEST(LossTarget, ClassLogitsPass) {
  EXPECT_EQ(Check(Head(10).g), "");
  // Views in between keep logits logits.
  EXPECT_EQ(Check(Head(10, {"Identity"}).g), "");
}

TEST(LossTarget, AClassDimOfOne) {
  EXPECT_NE(Check(Head(1).g).find("has a class dim of 1"), std::string::npos);
}

TEST(LossTarget, NormalisedOutputs) {
  EXPECT_EQ(Check(Head(10, {"Sigmoid"}).g),
            "the first output 'logits_Sigmoid' comes from a Sigmoid node 'head_sigmoid': "
            "bounded values (a regression, binary or image output), not class logits");
  EXPECT_NE(Check(Head(10, {"Tanh", "Identity"}).g).find("comes from a Tanh node"),
            std::string::npos);
  EXPECT_NE(Check(Head(10, {"Softmax"}).g).find("probabilities"), std::string::npos);
  EXPECT_NE(Check(Head(10, {"LogSoftmax"}).g).find("F.nll_loss"), std::string::npos);
  // A softmax inside the model, followed by a projection, is not the output's producer.
  GraphBuilder b = Head(10, {"Softmax"});
  b.g.outputs.clear();
  b.Init("w2", {10, 10});
  b.Op("MatMul", {"logits_Softmax", "w2"}, {"z"});
  b.ValueInfo("z", {S("N"), D(10)}, DType::kFloat);
  b.Output("z");
  EXPECT_EQ(Check(b.g), "");
}

TEST(LossTarget, AnOutputShapedLikeTheInput) {
  // A latent-diffusion U-Net: [N, 4, 64, 64] in, the noise [N, 4, 64, 64] out.
  GraphBuilder b;
  b.Input("latent", {S("N"), D(4), D(64), D(64)});
  b.Init("w", {4, 4, 1, 1});
  b.Op("Conv", {"latent", "w"}, {"noise"});
  b.ValueInfo("noise", {S("N"), D(4), D(64), D(64)}, DType::kFloat);
  b.Output("noise");
  EXPECT_EQ(Check(b.g),
            "the first output 'noise' [N, 4, 64, 64] has the shape of input 'latent': an "
            "input-to-output map (reconstruction, denoising, a diffusion model's noise), not "
            "class logits");
  // Segmentation logits: 21 classes per pixel of an RGB image.
  GraphBuilder seg;
  seg.Input("image", {S("N"), D(3), D(64), D(64)});
  seg.Init("w", {21, 3, 1, 1});
  seg.Op("Conv", {"image", "w"}, {"masks"});
  seg.ValueInfo("masks", {S("N"), D(21), D(64), D(64)}, DType::kFloat);
  seg.Output("masks");
  EXPECT_EQ(Check(seg.g), "");
}

TEST(LossTarget, ScalarsVectorsAndIntegers) {
  GraphBuilder scalar;
  scalar.Input("x", {S("N"), D(16)});
  scalar.Op("ReduceMean", {"x"}, {"loss"});
  scalar.ValueInfo("loss", {}, DType::kFloat);
  scalar.Output("loss");
  EXPECT_NE(Check(scalar.g).find("is a scalar"), std::string::npos);
  GraphBuilder vec;
  vec.Input("x", {S("N"), D(16)});
  vec.Op("ReduceMean", {"x"}, {"score"});
  vec.ValueInfo("score", {S("N")}, DType::kFloat);
  vec.Output("score");
  EXPECT_NE(Check(vec.g).find("[N] has no class dim"), std::string::npos);
  GraphBuilder ids;
  ids.Input("x", {S("N"), D(16)});
  ids.Op("ArgMax", {"x"}, {"label"});
  ids.ValueInfo("label", {S("N"), D(1)}, DType::kInt64);
  ids.Output("label");
  EXPECT_NE(Check(ids.g).find("is int64, not float logits"), std::string::npos);
}

}  // namespace
}  // namespace memplan
