// The budget-file schema (`check --config`) on its own: what a file may say,
// how defaults and devices combine, and the one-line errors naming the place.
#include "cli/check_config.h"

#include <gtest/gtest.h>

#include "planner/devices.h"

namespace memplan {
namespace {

constexpr int64_t kGiB = 1LL << 30;

std::vector<CheckSpec> Parse(const std::string& text, std::string* metric = nullptr) {
  std::string m;
  auto r = ParseCheckConfig(text, "ci/budgets.json", metric ? metric : &m);
  EXPECT_TRUE(r.ok()) << r.message();
  return r.ok() ? r.value() : std::vector<CheckSpec>{};
}

std::string Error(const std::string& text) {
  std::string m;
  auto r = ParseCheckConfig(text, "ci/budgets.json", &m);
  EXPECT_FALSE(r.ok());
  return r.ok() ? "" : r.message();
}

TEST(CheckConfig, ListOfChecksWithDefaults) {
  std::string metric;
  const auto specs = Parse(R"({"version": 1, "metric": "reserved",
      "defaults": {"precision": "amp_bf16", "budget": "40GiB"},
      "checks": [{"model": "m.onnx", "batch": 8, "dims": {"seq": 128}},
                 {"name": "big", "model": "/abs/m.onnx", "budget": "20GiB",
                  "checkpoint": ["layer1", "layer2"]}]})",
                           &metric);
  ASSERT_EQ(specs.size(), 2u);
  EXPECT_EQ(metric, "reserved");
  EXPECT_EQ(specs[0].plan_flags.precision, "amp_bf16");
  EXPECT_EQ(specs[0].model_flags.batch, 8);
  EXPECT_EQ(specs[0].model_flags.dims, (std::vector<std::string>{"seq=128"}));
  EXPECT_EQ(specs[0].budget, 40 * kGiB);
  // A model path is relative to the file's folder unless absolute.
  EXPECT_EQ(specs[0].model_path, "ci/m.onnx");
  EXPECT_EQ(specs[1].model_path, "/abs/m.onnx");
  EXPECT_EQ(specs[1].name, "big");
  EXPECT_EQ(specs[1].budget, 20 * kGiB);
  EXPECT_EQ(specs[1].plan_flags.checkpoint, (std::vector<std::string>{"layer1", "layer2"}));
  EXPECT_EQ(specs[1].where, "ci/budgets.json: checks[1]");
  EXPECT_EQ(specs[1].file, "ci/budgets.json");
}

TEST(CheckConfig, DeviceBudgetLessTheMargin) {
  const DevicePreset* h100 = FindDevice("h100");
  ASSERT_NE(h100, nullptr);
  const auto specs = Parse(R"([{"model": "m.onnx", "device": "h100", "margin": 10}])");
  ASSERT_EQ(specs.size(), 1u);
  EXPECT_EQ(specs[0].budget, static_cast<int64_t>(static_cast<double>(h100->memory_bytes) * 0.9));
  EXPECT_EQ(specs[0].budget_text, h100->name + " - 10%");
  auto b = DeviceBudget("h100", 0);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->first, h100->memory_bytes);
  EXPECT_EQ(b->second, h100->name);
}

TEST(CheckConfig, ErrorsNameTheFileTheCheckAndTheKey) {
  EXPECT_EQ(Error(R"({"checks": [{"model": "m.onnx", "btach": 8}]})"),
            "ci/budgets.json: checks[0]: unknown key 'btach'");
  EXPECT_EQ(Error(R"({"checks": [{"batch": 8}]})"), "ci/budgets.json: checks[0]: missing 'model'");
  EXPECT_EQ(Error(R"({"checks": []})"), "ci/budgets.json: 'checks' must be a non-empty list");
  EXPECT_EQ(Error(R"({"version": 2, "checks": [{"model": "m"}]})"),
            "ci/budgets.json: 'version' must be 1");
  EXPECT_EQ(Error(R"({"metric": "peak", "checks": [{"model": "m"}]})"),
            "ci/budgets.json: 'metric' must be allocated, reserved or device");
  EXPECT_EQ(Error(R"({"defaults": {"model": "m"}, "checks": [{"model": "m"}]})"),
            "ci/budgets.json: defaults: unknown key 'model'");
  EXPECT_EQ(Error(R"([{"model": "m", "budget": "1GiB", "margin": 5}])"),
            "ci/budgets.json: checks[0]: 'margin' needs 'device'");
  EXPECT_EQ(Error(R"([{"model": "m", "batch": 0}])"),
            "ci/budgets.json: checks[0]: 'batch' must be a positive integer, got 0");
  EXPECT_NE(Error(R"([{"model": "m", "device": "nosuch"}])").find("unknown device 'nosuch'"),
            std::string::npos);
  EXPECT_NE(
      Error(R"([{"model": "m", "precision": "fp8"}])").find("'precision': 'fp8' is not one of"),
      std::string::npos);
  EXPECT_NE(Error("[1, 2").find("ci/budgets.json"), std::string::npos);
}

}  // namespace
}  // namespace memplan
