#include "planner/module_calls.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "planner/ops/test_graph.h"
#include "planner/plan.h"
#include "planner/schedule_test_util.h"
#include "planner/shape_inference.h"

namespace memplan {
namespace {

using testing_util::D;
using testing_util::GraphBuilder;
using testing_util::OpIndex;
using testing_util::S;

constexpr int64_t kMiB = 1 << 20;

Node& In(Node& n, std::vector<std::string> modules) {
  n.modules = std::move(modules);
  n.modules_known = true;
  if (!n.modules.empty()) n.scope = n.modules.back();
  return n;
}

// x -> relu (blk.act) -> "a"; a -> mlp (fc1, relu (blk.act again), fc2) -> y;
// y + a -> out. Widths 256, fc1 widens to 1024. With `modules` false the
// nodes carry no module information.
GraphBuilder Block(bool modules) {
  GraphBuilder b;
  b.Input("x", {S("N"), D(256)});
  b.Init("W1", {256, 1024});
  b.Init("W2", {1024, 256});
  Node* n = &b.Op("Relu", {"x"}, {"a"}, "act0");
  if (modules) In(*n, {"blk", "blk.act"});
  n = &b.Op("MatMul", {"a", "W1"}, {"h"}, "fc1");
  if (modules) In(*n, {"blk", "blk.mlp", "blk.mlp.fc1"});
  n = &b.Op("Relu", {"h"}, {"r"}, "act1");
  if (modules) In(*n, {"blk", "blk.mlp", "blk.mlp.act"});
  n = &b.Op("MatMul", {"r", "W2"}, {"y"}, "fc2");
  if (modules) In(*n, {"blk", "blk.mlp", "blk.mlp.fc2"});
  n = &b.Op("Add", {"y", "a"}, {"out"}, "residual");
  if (modules) In(*n, {"blk"});
  b.Output("out");
  return b;
}

int ValIndex(const Schedule& s, const std::string& name) {
  for (size_t v = 0; v < s.vals.size(); ++v) {
    if (s.vals[v].name == name) return static_cast<int>(v);
  }
  return -1;
}

TEST(ModuleCalls, ArgumentsAreHeldUntilTheCallReturns) {
  GraphBuilder b = Block(true);
  const Schedule s = testing_util::InferenceScheduleOf(b, 8);
  const int a = ValIndex(s, "a");
  const int h = ValIndex(s, "h");
  const int x = ValIndex(s, "x");
  ASSERT_GE(a, 0);
  ASSERT_GE(h, 0);
  // `a` enters blk.mlp (held to fc2) and blk's residual reads it anyway.
  EXPECT_EQ(s.vals[a].held_until, OpIndex(s, "fc2"));
  // fc1's output is made inside blk.mlp: only act1's own call holds it.
  EXPECT_EQ(s.vals[h].held_until, OpIndex(s, "act1"));
  // The graph input enters blk, whose last op is the residual add.
  EXPECT_EQ(s.vals[x].held_until, OpIndex(s, "residual"));
}

TEST(ModuleCalls, TwoCallsOfOneModuleAreTwoCalls) {
  // One activation module called twice with a linear between (as ResNet's
  // blocks reuse their ReLU).
  GraphBuilder b;
  b.Input("x", {S("N"), D(256)});
  b.Init("W1", {256, 256});
  In(b.Op("Relu", {"x"}, {"a"}, "act0"), {"act"});
  In(b.Op("MatMul", {"a", "W1"}, {"h"}, "fc1"), {"fc1"});
  In(b.Op("Relu", {"h"}, {"r"}, "act1"), {"act"});
  b.Output("r");
  const Schedule s = testing_util::InferenceScheduleOf(b, 8);
  EXPECT_EQ(s.vals[ValIndex(s, "x")].held_until, OpIndex(s, "act0"));
  EXPECT_EQ(s.vals[ValIndex(s, "a")].held_until, OpIndex(s, "fc1"));
  EXPECT_EQ(s.vals[ValIndex(s, "h")].held_until, OpIndex(s, "act1"));
}

TEST(ModuleCalls, NodesWithoutModulesNeitherOpenNorCloseCalls) {
  GraphBuilder b = Block(true);
  // An exporter-added node without metadata in the middle of blk.mlp.
  b.g.nodes[2].modules.clear();
  b.g.nodes[2].modules_known = false;
  const Schedule s = testing_util::InferenceScheduleOf(b, 8);
  EXPECT_EQ(s.vals[ValIndex(s, "a")].held_until, OpIndex(s, "fc2"));
}

TEST(ModuleCalls, HeldArgumentsRaiseTheInferencePeak) {
  // Batch 1024: a = 1 MiB, h = r = 4 MiB, y = 1 MiB. The residual would
  // keep `a` alive anyway, so it adds y to itself here instead.
  auto no_residual = [](bool modules) {
    GraphBuilder b = Block(modules);
    b.g.nodes[4].inputs[1] = b.g.FindOrAdd("y");  // out = y + y
    return b;
  };
  PlanOptions o;
  o.mode = Mode::kInference;
  auto peak_of = [&](GraphBuilder b) {
    ShapeBindings bind;
    bind.batch = 1024;
    EXPECT_TRUE(InferShapes(&b.g, bind, nullptr).ok());
    auto plan = MakePlan(b.g, 1024, o);
    EXPECT_TRUE(plan.ok()) << plan.message();
    return plan.ok() ? plan->peak.allocated_bytes : 0;
  };
  // Without modules `a` dies after fc1; inside blk.mlp's call it lives on
  // through act1 (where h and r are both alive): 1 MiB more at the peak.
  EXPECT_EQ(peak_of(no_residual(true)) - peak_of(no_residual(false)), 1 * kMiB);
}

}  // namespace
}  // namespace memplan
