// End to end: every calibration model imports and every tensor gets a shape
// that agrees with the model's value_info, at several batch sizes.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "onnx_import/importer.h"
#include "planner/shape_inference.h"

namespace memplan {
namespace {

const char* const kModels[] = {
    "bert_base",    "bert_base_train",    "bert_base_train_ts",    "gpt2",     "gpt2_train",
    "mobilenet_v2", "mobilenet_v2_train", "mobilenet_v2_train_ts", "resnet18", "resnet18_train",
    "resnet50",     "resnet50_train",     "resnet50_train_ts",     "vit_b_16", "vit_b_16_train",
};

class ShapeModels : public ::testing::TestWithParam<const char*> {};

TEST_P(ShapeModels, EveryTensorKnownAtBatch1And8And64) {
  const std::string path = std::string(MEMPLAN_MODELS_DIR) + "/" + GetParam() + ".onnx";
  auto g = ImportOnnxFile(path);
  ASSERT_TRUE(g.ok()) << g.message();
  for (int64_t batch : {1, 8, 64}) {
    ShapeBindings b;
    b.batch = batch;
    std::vector<std::string> warnings;
    Status s = InferShapes(&g.value(), b, &warnings);
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_TRUE(warnings.empty()) << warnings.front();
    const std::string batch_sym = BatchSymbol(g.value());
    for (const Tensor& t : g->tensors) {
      ASSERT_TRUE(t.shape_known) << t.name;
      if (t.kind == TensorKind::kGraphInput && !t.shape.empty() && !batch_sym.empty()) {
        EXPECT_EQ(t.shape[0], batch) << t.name;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, ShapeModels, ::testing::ValuesIn(kModels));

}  // namespace
}  // namespace memplan
