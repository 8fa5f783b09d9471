// Tests of FindFusedRegions: erf-form GELU written out by exporters.
#include "planner/fusion.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "planner/ops/test_graph.h"
#include "planner/plan.h"
#include "planner/schedule.h"
#include "planner/shape_inference.h"

namespace memplan {
namespace {

using testing_util::D;
using testing_util::GraphBuilder;
using testing_util::TensorAttr;

void FloatConstant(GraphBuilder* b, const std::string& name, double v) {
  b->Op("Constant", {}, {name}, name + "_const").attrs["value"] =
      TensorAttr(DType::kFloat, {}, {}, {v});
}

enum class Assoc {
  kProductThenHalf,  // (x * (1 + erf)) * 0.5
  kHalfThenProduct,  // (x * 0.5) * (1 + erf)
};

struct GeluOptions {
  Assoc assoc = Assoc::kProductThenHalf;
  bool multiply_by_inverse = false;  // x * (1/sqrt 2) instead of x / sqrt 2
  double divisor = std::sqrt(2.0);
  bool erf_is_output = false;
};

// x [2, 8] -> erf-GELU -> y.
GraphBuilder GeluGraph(const GeluOptions& o) {
  GraphBuilder b;
  b.Input("x", {D(2), D(8)});
  if (o.multiply_by_inverse) {
    FloatConstant(&b, "c", 1.0 / o.divisor);
    b.Op("Mul", {"x", "c"}, {"a"}, "scale");
  } else {
    FloatConstant(&b, "c", o.divisor);
    b.Op("Div", {"x", "c"}, {"a"}, "scale");
  }
  b.Op("Erf", {"a"}, {"e"}, "erf");
  FloatConstant(&b, "one", 1.0);
  b.Op("Add", {"e", "one"}, {"f"}, "add");
  FloatConstant(&b, "half", 0.5);
  if (o.assoc == Assoc::kProductThenHalf) {
    b.Op("Mul", {"x", "f"}, {"g"}, "mul_x");
    b.Op("Mul", {"g", "half"}, {"y"}, "mul_half");
  } else {
    b.Op("Mul", {"x", "half"}, {"h"}, "mul_half");
    b.Op("Mul", {"f", "h"}, {"y"}, "mul_x");
  }
  b.Op("Relu", {"y"}, {"z"}, "after");
  b.Output("z");
  if (o.erf_is_output) b.Output("e");
  return b;
}

std::vector<FusedRegion> Find(GraphBuilder* b) {
  Status s = InferShapes(&b->g, ShapeBindings(), nullptr);
  EXPECT_TRUE(s.ok()) << s.message();
  return FindFusedRegions(b->g);
}

int NodeIndex(const Graph& g, const std::string& name) {
  for (int i = 0; i < static_cast<int>(g.nodes.size()); ++i) {
    if (g.nodes[i].name == name) return i;
  }
  return -1;
}

void ExpectGelu(const GraphBuilder& b, const std::vector<FusedRegion>& regions) {
  ASSERT_EQ(regions.size(), 1u);
  const FusedRegion& r = regions[0];
  EXPECT_EQ(r.op_type, "Gelu");
  EXPECT_EQ(r.input, b.g.Find("x"));
  EXPECT_EQ(r.output, b.g.Find("y"));
  EXPECT_EQ(r.last_node, b.g.tensors[b.g.Find("y")].producer);
  std::vector<int> nodes = r.nodes;
  std::sort(nodes.begin(), nodes.end());
  std::vector<int> want;
  for (const char* n : {"scale", "erf", "add", "mul_x", "mul_half"}) {
    want.push_back(NodeIndex(b.g, n));
  }
  std::sort(want.begin(), want.end());
  EXPECT_EQ(nodes, want) << "the five arithmetic nodes, not the constants or the consumer";
}

TEST(Fusion, ErfGeluProductThenHalf) {
  GraphBuilder b = GeluGraph(GeluOptions());
  ExpectGelu(b, Find(&b));
}

TEST(Fusion, ErfGeluHalfThenProduct) {
  GeluOptions o;
  o.assoc = Assoc::kHalfThenProduct;
  GraphBuilder b = GeluGraph(o);
  ExpectGelu(b, Find(&b));
}

TEST(Fusion, ErfGeluMultipliedByInverseSqrt2) {
  GeluOptions o;
  o.multiply_by_inverse = true;
  GraphBuilder b = GeluGraph(o);
  ExpectGelu(b, Find(&b));
}

TEST(Fusion, NearMissConstantIsNotGelu) {
  for (Assoc a : {Assoc::kProductThenHalf, Assoc::kHalfThenProduct}) {
    GeluOptions o;
    o.assoc = a;
    o.divisor = 1.5;
    GraphBuilder b = GeluGraph(o);
    EXPECT_TRUE(Find(&b).empty());
  }
  GeluOptions o;
  o.divisor = 1.5;
  o.multiply_by_inverse = true;
  GraphBuilder b = GeluGraph(o);
  EXPECT_TRUE(Find(&b).empty());
}

TEST(Fusion, InnerTensorUsedOutsideIsNotFused) {
  GeluOptions o;
  o.erf_is_output = true;
  GraphBuilder b = GeluGraph(o);
  EXPECT_TRUE(Find(&b).empty());
}

TEST(Fusion, WrongHalfIsNotGelu) {
  GraphBuilder b;
  b.Input("x", {D(2), D(8)});
  FloatConstant(&b, "c", std::sqrt(2.0));
  b.Op("Div", {"x", "c"}, {"a"});
  b.Op("Erf", {"a"}, {"e"});
  FloatConstant(&b, "one", 1.0);
  b.Op("Add", {"e", "one"}, {"f"});
  b.Op("Mul", {"x", "f"}, {"g"});
  FloatConstant(&b, "third", 0.33);
  b.Op("Mul", {"g", "third"}, {"y"});
  b.Output("y");
  EXPECT_TRUE(Find(&b).empty());
}

TEST(Fusion, ScheduleRunsOneGeluThatKeepsItsInput) {
  // x @ W -> GELU -> y: training keeps only the GELU input, not erf's.
  GraphBuilder b;
  b.Input("x0", {D(2), D(8)});
  b.Init("W", {8, 8});
  b.Op("MatMul", {"x0", "W"}, {"x"}, "mm");
  FloatConstant(&b, "c", std::sqrt(2.0));
  b.Op("Div", {"x", "c"}, {"a"}, "scale");
  b.Op("Erf", {"a"}, {"e"}, "erf");
  FloatConstant(&b, "one", 1.0);
  b.Op("Add", {"e", "one"}, {"f"}, "add");
  b.Op("Mul", {"x", "f"}, {"g"}, "mul_x");
  FloatConstant(&b, "half", 0.5);
  b.Op("Mul", {"g", "half"}, {"y"}, "mul_half");
  b.Output("y");
  Status st = InferShapes(&b.g, ShapeBindings(), nullptr);
  ASSERT_TRUE(st.ok()) << st.message();
  PlanOptions o;
  o.mode = Mode::kTrain;
  auto s = BuildSchedule(b.g, o);
  ASSERT_TRUE(s.ok()) << s.message();
  int gelu = 0;
  for (const ExecOp& op : s->ops) {
    EXPECT_NE(op.op_type, "Erf");
    EXPECT_NE(op.op_type, "Div");
    if (op.op_type != "Gelu") continue;
    ++gelu;
    EXPECT_EQ(op.in, (std::vector<int>{b.g.Find("x")}));
    EXPECT_EQ(op.out, (std::vector<int>{b.g.Find("y")}));
    ASSERT_EQ(op.saved.size(), 1u);
    EXPECT_EQ(op.saved[0].val, b.g.Find("x"));
  }
  EXPECT_EQ(gelu, 1);
}

TEST(Fusion, SigmoidTimesItsInputIsOneSiluThatKeepsItsInput) {
  // x @ W -> x * sigmoid(x) -> y; and an SE-style gate z * sigmoid(x), which
  // is no SiLU.
  GraphBuilder b;
  b.Input("x0", {D(2), D(8)});
  b.Input("z", {D(2), D(8)});
  b.Init("W", {8, 8});
  b.Op("MatMul", {"x0", "W"}, {"x"}, "mm");
  b.Op("Sigmoid", {"x"}, {"s"}, "sig");
  b.Op("Mul", {"s", "x"}, {"y"}, "mul");
  b.Op("Sigmoid", {"x"}, {"s2"}, "gate_sig");
  b.Op("Mul", {"z", "s2"}, {"gated"}, "gate");
  b.Op("Add", {"y", "gated"}, {"out"}, "add");
  b.Output("out");
  ASSERT_TRUE(InferShapes(&b.g, ShapeBindings(), nullptr).ok());
  auto regions = FindFusedRegions(b.g);
  ASSERT_EQ(regions.size(), 1u);
  EXPECT_EQ(regions[0].op_type, "Swish");
  EXPECT_EQ(regions[0].input, b.g.Find("x"));
  EXPECT_EQ(regions[0].output, b.g.Find("y"));
  PlanOptions o;
  o.mode = Mode::kTrain;
  auto s = BuildSchedule(b.g, o);
  ASSERT_TRUE(s.ok()) << s.message();
  int swish = 0, sigmoid = 0;
  for (const ExecOp& op : s->ops) {
    if (op.op_type == "Sigmoid") ++sigmoid;
    if (op.op_type != "Swish") continue;
    ++swish;
    ASSERT_EQ(op.saved.size(), 1u);
    EXPECT_EQ(op.saved[0].val, b.g.Find("x"));
  }
  EXPECT_EQ(swish, 1);
  EXPECT_EQ(sigmoid, 1);  // the gate's
}

}  // namespace
}  // namespace memplan
