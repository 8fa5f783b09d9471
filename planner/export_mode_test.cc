#include "planner/export_mode.h"

#include <gtest/gtest.h>

#include "planner/ops/test_graph.h"

namespace memplan {
namespace {

using testing_util::D;
using testing_util::GraphBuilder;
using testing_util::IntAttr;
using testing_util::S;
using testing_util::TensorAttr;

/// DetectExportMode on the graph, linked as the importer leaves it.
ExportModeEvidence Detect(Graph& g) {
  g.Link();
  return DetectExportMode(g);
}

// x [N, 8] -> (the op under test) -> y.
GraphBuilder Base() {
  GraphBuilder b;
  b.Input("x", {S("N"), D(8)});
  return b;
}

void AddConstant(GraphBuilder* b, const std::string& name, int64_t value) {
  b->Op("Constant", {}, {name}).attrs["value"] = TensorAttr(DType::kBool, {}, {value});
}

void AddDropout(GraphBuilder* b, const char* mode, bool mask) {
  b->Init("ratio", {}, DType::kFloat);
  std::vector<std::string> ins = {"x", "ratio"};
  if (mode != nullptr) ins.push_back(mode);
  std::vector<std::string> outs = {"y"};
  if (mask) outs.push_back("mask");
  b->Op("Dropout", ins, outs);
  b->Output("y");
}

void AddBatchNorm(GraphBuilder* b, int64_t training_mode, int outputs) {
  for (const char* n : {"s", "bb", "m", "v"}) b->Init(n, {8});
  std::vector<std::string> outs = {"y"};
  if (outputs == 3) outs = {"y", "rm", "rv"};
  Node& n = b->Op("BatchNormalization", {"x", "s", "bb", "m", "v"}, outs);
  if (training_mode >= 0) n.attrs["training_mode"] = IntAttr(training_mode);
  b->Output("y");
}

TEST(ExportMode, DropoutTrainingModeDecides) {
  GraphBuilder on = Base();
  AddConstant(&on, "t", 1);
  AddDropout(&on, "t", false);
  ExportModeEvidence e = Detect(on.g);
  EXPECT_EQ(e.mode, ExportMode::kTrain);
  ASSERT_EQ(e.train.size(), 1u);
  EXPECT_EQ(e.train[0], "1 dropout node in training mode");
  EXPECT_EQ(ExportModeWarning("m.onnx", e), "");

  GraphBuilder off = Base();
  AddConstant(&off, "f", 0);
  AddDropout(&off, "f", false);
  e = Detect(off.g);
  EXPECT_EQ(e.mode, ExportMode::kEval);
  EXPECT_NE(ExportModeWarning("m.onnx", e)
                .find("m.onnx: the model was exported in eval mode "
                      "(1 dropout node in inference mode)"),
            std::string::npos);

  // The mask output is written only in training (TorchScript exporter).
  GraphBuilder mask = Base();
  AddDropout(&mask, nullptr, true);
  EXPECT_EQ(Detect(mask.g).mode, ExportMode::kTrain);
}

// Without training_mode: ONNX's inference dropout, unless torch.onnx wrote it
// (its lowering of scaled_dot_product_attention's dropout_p, in either mode).
TEST(ExportMode, DropoutWithoutTrainingMode) {
  GraphBuilder plain = Base();
  AddDropout(&plain, nullptr, false);
  EXPECT_EQ(Detect(plain.g).mode, ExportMode::kEval);
  GraphBuilder torch = Base();
  AddDropout(&torch, nullptr, false);
  torch.g.producer_name = "pytorch";
  EXPECT_EQ(Detect(torch.g).mode, ExportMode::kUnknown);
}

TEST(ExportMode, BatchNorm) {
  GraphBuilder ts_train = Base();
  AddBatchNorm(&ts_train, 1, 3);
  EXPECT_EQ(Detect(ts_train.g).mode, ExportMode::kTrain);
  GraphBuilder stats = Base();
  AddBatchNorm(&stats, -1, 3);  // opset < 14: the statistics outputs
  EXPECT_EQ(Detect(stats.g).mode, ExportMode::kTrain);
  GraphBuilder ts_eval = Base();
  AddBatchNorm(&ts_eval, -1, 1);
  ExportModeEvidence e = Detect(ts_eval.g);
  EXPECT_EQ(e.mode, ExportMode::kEval);
  ASSERT_EQ(e.eval.size(), 1u);
  EXPECT_EQ(e.eval[0], "1 BatchNormalization node with running statistics");

  // The dynamo exporter writes training batch norm in the inference form:
  // its metadata decides.
  GraphBuilder dyn_train = Base();
  AddBatchNorm(&dyn_train, -1, 1);
  dyn_train.g.exporter.fx_nodes = 1;
  dyn_train.g.exporter.aten_ops["aten._native_batch_norm_legit_functional.default"] = 1;
  EXPECT_EQ(Detect(dyn_train.g).mode, ExportMode::kTrain);
  GraphBuilder dyn_eval = Base();
  AddBatchNorm(&dyn_eval, -1, 1);
  dyn_eval.g.exporter.fx_nodes = 1;
  dyn_eval.g.exporter.aten_ops["aten._native_batch_norm_legit_no_training.default"] = 1;
  EXPECT_EQ(Detect(dyn_eval.g).mode, ExportMode::kEval);
}

// torchvision's ViT: nn.Dropout(p=0.0) exports a clone in training, nothing in eval.
TEST(ExportMode, OpsInsideDropoutModulesShowTraining) {
  GraphBuilder b = Base();
  b.Op("Identity", {"x"}, {"y"});
  b.Output("y");
  EXPECT_EQ(Detect(b.g).mode, ExportMode::kUnknown);
  b.g.exporter.fx_nodes = 1;
  b.g.exporter.module_classes["torch.nn.modules.dropout.Dropout"] = 1;
  EXPECT_EQ(Detect(b.g).mode, ExportMode::kTrain);
}

TEST(ExportMode, MixedAndUnknownAreSaid) {
  GraphBuilder b = Base();
  AddConstant(&b, "t", 1);
  AddDropout(&b, "t", false);
  b.g.exporter.fx_nodes = 2;
  b.g.exporter.aten_ops["aten._native_batch_norm_legit_no_training.default"] = 3;
  ExportModeEvidence e = Detect(b.g);
  EXPECT_EQ(e.mode, ExportMode::kMixed);
  EXPECT_NE(ExportModeWarning("m.onnx", e).find("partly in eval mode (3 batch norms with running"),
            std::string::npos);

  GraphBuilder none = Base();
  none.Op("Relu", {"x"}, {"y"});
  none.Output("y");
  e = Detect(none.g);
  EXPECT_EQ(e.mode, ExportMode::kUnknown);
  EXPECT_STREQ(ExportModeName(e.mode), "unknown");
  EXPECT_NE(ExportModeWarning("m.onnx", e).find("cannot tell whether the model was exported"),
            std::string::npos);
}

}  // namespace
}  // namespace memplan
