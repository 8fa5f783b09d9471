// Tests of FindAttentionRegions on hand-built exports of
// scaled_dot_product_attention (MatMul-Softmax-MatMul and what surrounds it).
#include "planner/attention.h"

#include <gtest/gtest.h>

#include <algorithm>
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
using testing_util::IntAttr;
using testing_util::IntsAttr;
using testing_util::TensorAttr;

// B=2, H=4, S=16, D=8.
constexpr int64_t kB = 2, kH = 4, kS = 16, kD = 8;

void FloatConstant(GraphBuilder* b, const std::string& name, double v) {
  b->Op("Constant", {}, {name}, name + "_const").attrs["value"] =
      TensorAttr(DType::kFloat, {}, {}, {v});
}

struct Options {
  bool k_transposed_input = false;  // k arrives as [B, H, D, S]
  bool additive_mask = true;
  bool bool_mask = false;
  bool nan_guard = true;
  bool dropout = true;
  bool scale_q = false;  // scale q before the product instead of the scores
  bool probs_are_output = false;
  bool scores_are_output = false;
  // The additive mask is Where(cond, bias [1, H, S, S], -1e30), cond a
  // ConstantOfShape of true (all true by construction) or, with
  // data_condition, a graph input.
  bool bias_under_mask = false;
  bool data_condition = false;
};

// q, k, v [B, H, S, D] -> [k^T] -> q @ k^T -> * scale -> + mask -> softmax
// -> IsNaN/Where guard -> dropout(0.1) -> @ v.
GraphBuilder AttentionGraph(const Options& o) {
  GraphBuilder b;
  b.Input("q", {D(kB), D(kH), D(kS), D(kD)});
  if (o.k_transposed_input) {
    b.Input("k", {D(kB), D(kH), D(kD), D(kS)});
  } else {
    b.Input("k", {D(kB), D(kH), D(kS), D(kD)});
  }
  b.Input("v", {D(kB), D(kH), D(kS), D(kD)});
  if (o.additive_mask && !o.bias_under_mask) b.Input("mask", {D(kB), D(1), D(kS), D(kS)});
  if (o.additive_mask && o.bias_under_mask) {
    b.Input("bias", {D(1), D(kH), D(kS), D(kS)});
    if (o.data_condition) {
      b.Input("cond", {D(kB), D(1), D(kS), D(kS)}, DType::kBool);
    } else {
      b.Ints("cond_shape", {kB, 1, kS, kS});
      b.Op("ConstantOfShape", {"cond_shape"}, {"cond"}, "full").attrs["value"] =
          TensorAttr(DType::kBool, {1}, {1});
    }
    FloatConstant(&b, "fill", -1e30);
    b.Op("Where", {"cond", "bias", "fill"}, {"mask"}, "bias_where");
  }
  if (o.bool_mask) b.Input("bmask", {D(1), D(1), D(kS), D(kS)}, DType::kBool);
  FloatConstant(&b, "scale", 0.35355339);
  std::string q = "q";
  if (o.scale_q) {
    b.Op("Mul", {"q", "scale"}, {"q_scaled"}, "scale_q");
    q = "q_scaled";
  }
  std::string kt = "k";
  if (!o.k_transposed_input) {
    b.Op("Transpose", {"k"}, {"kt"}, "k_transpose").attrs["perm"] = IntsAttr({0, 1, 3, 2});
    kt = "kt";
  }
  b.Op("MatMul", {q, kt}, {"scores"}, "scores");
  std::string cur = "scores";
  if (!o.scale_q) {
    b.Op("Mul", {cur, "scale"}, {"scaled"}, "scale");
    cur = "scaled";
  }
  if (o.additive_mask) {
    b.Op("Add", {cur, "mask"}, {"masked"}, "mask_add");
    cur = "masked";
  }
  if (o.bool_mask) {
    FloatConstant(&b, "neg_inf", -1e30);
    b.Op("Where", {"bmask", cur, "neg_inf"}, {"bmasked"}, "mask_where");
    cur = "bmasked";
  }
  b.Op("Softmax", {cur}, {"probs"}, "softmax").attrs["axis"] = IntAttr(-1);
  cur = "probs";
  if (o.nan_guard) {
    FloatConstant(&b, "zero", 0.0);
    b.Op("IsNaN", {cur}, {"isnan"}, "isnan");
    b.Op("Where", {"isnan", "zero", cur}, {"guarded"}, "guard");
    cur = "guarded";
  }
  if (o.dropout) {
    FloatConstant(&b, "ratio", 0.1);
    b.Op("Constant", {}, {"train"}, "train_const").attrs["value"] =
        TensorAttr(DType::kBool, {}, {1});
    b.Op("Dropout", {cur, "ratio", "train"}, {"dropped"}, "dropout");
    cur = "dropped";
  }
  b.Op("MatMul", {cur, "v"}, {"out"}, "context");
  b.Output("out");
  if (o.probs_are_output) b.Output("probs");
  if (o.scores_are_output) b.Output("scores");
  return b;
}

std::vector<AttentionRegion> Find(GraphBuilder* b) {
  Status s = InferShapes(&b->g, ShapeBindings(), nullptr);
  EXPECT_TRUE(s.ok()) << s.message();
  return FindAttentionRegions(b->g);
}

int NodeIndex(const Graph& g, const std::string& name) {
  for (int i = 0; i < static_cast<int>(g.nodes.size()); ++i) {
    if (g.nodes[i].name == name) return i;
  }
  return -1;
}

std::vector<int> Nodes(const Graph& g, std::vector<std::string> names) {
  std::vector<int> out;
  for (const auto& n : names) out.push_back(NodeIndex(g, n));
  std::sort(out.begin(), out.end());
  return out;
}

TEST(Attention, FindsTheFullSdpaDecomposition) {
  GraphBuilder b = AttentionGraph(Options());
  auto regions = Find(&b);
  ASSERT_EQ(regions.size(), 1u);
  const AttentionRegion& r = regions[0];
  EXPECT_EQ(r.q, b.g.Find("q"));
  EXPECT_EQ(r.k, b.g.Find("k")) << "k is traced back through its transpose";
  EXPECT_FALSE(r.k_transposed);
  EXPECT_EQ(r.v, b.g.Find("v"));
  EXPECT_EQ(r.mask, b.g.Find("mask"));
  EXPECT_EQ(r.out, b.g.Find("out"));
  EXPECT_NEAR(r.dropout, 0.1, 1e-9);
  EXPECT_EQ(r.last_node, NodeIndex(b.g, "context"));
  std::vector<int> nodes = r.nodes;
  std::sort(nodes.begin(), nodes.end());
  EXPECT_EQ(nodes, Nodes(b.g, {"k_transpose", "scores", "scale", "mask_add", "softmax", "isnan",
                               "guard", "dropout", "context"}));
}

TEST(Attention, KeyGivenTransposed) {
  Options o;
  o.k_transposed_input = true;
  o.dropout = false;
  o.additive_mask = false;
  o.nan_guard = false;
  GraphBuilder b = AttentionGraph(o);
  auto regions = Find(&b);
  ASSERT_EQ(regions.size(), 1u);
  const AttentionRegion& r = regions[0];
  EXPECT_EQ(r.q, b.g.Find("q"));
  EXPECT_EQ(r.k, b.g.Find("k"));
  EXPECT_TRUE(r.k_transposed);
  EXPECT_EQ(r.v, b.g.Find("v"));
  EXPECT_EQ(r.mask, -1);
  EXPECT_EQ(r.dropout, 0.0);
  std::vector<int> nodes = r.nodes;
  std::sort(nodes.begin(), nodes.end());
  EXPECT_EQ(nodes, Nodes(b.g, {"scores", "scale", "softmax", "context"}));
}

TEST(Attention, ScaledQueryAndBooleanMask) {
  Options o;
  o.scale_q = true;
  o.additive_mask = false;
  o.bool_mask = true;
  o.dropout = false;
  GraphBuilder b = AttentionGraph(o);
  auto regions = Find(&b);
  ASSERT_EQ(regions.size(), 1u);
  const AttentionRegion& r = regions[0];
  EXPECT_EQ(r.q, b.g.Find("q")) << "q is the tensor before the scaling";
  EXPECT_TRUE(r.scale_before_matmul);
  EXPECT_EQ(r.k, b.g.Find("k"));
  EXPECT_EQ(r.mask, b.g.Find("bmask"));
  EXPECT_EQ(r.dropout, 0.0);
  EXPECT_NE(std::find(r.nodes.begin(), r.nodes.end(), NodeIndex(b.g, "scale_q")), r.nodes.end());
  EXPECT_NE(std::find(r.nodes.begin(), r.nodes.end(), NodeIndex(b.g, "mask_where")), r.nodes.end());
}

// T5's position bias under an all-true padding mask: the model runs with
// the bias alone as the SDPA mask (AttentionRegion::bias_mask), and the
// [B, H, S, S] Where output is not made. A data-dependent condition keeps
// the exported mask.
TEST(Attention, BiasUnderAnAllTrueMaskIsTheMask) {
  Options o;
  o.bias_under_mask = true;
  o.dropout = false;
  GraphBuilder b = AttentionGraph(o);
  auto regions = Find(&b);
  ASSERT_EQ(regions.size(), 1u);
  EXPECT_EQ(regions[0].mask, b.g.Find("mask"));
  EXPECT_FALSE(regions[0].full_mask);
  EXPECT_EQ(regions[0].bias_mask, b.g.Find("bias"));
  PlanOptions po;
  po.mode = Mode::kInference;
  po.attention = Attention::kFused;
  auto s = BuildSchedule(b.g, po);
  ASSERT_TRUE(s.ok()) << s.message();
  int sdpa = 0;
  for (const ExecOp& op : s->ops) {
    EXPECT_NE(op.op_type, "Where") << op.label;
    if (op.op_type != "ScaledDotProductAttention") continue;
    ++sdpa;
    ASSERT_EQ(op.in.size(), 4u);
    EXPECT_EQ(op.in[3], b.g.Find("bias"));
  }
  EXPECT_EQ(sdpa, 1);

  o.data_condition = true;
  GraphBuilder d = AttentionGraph(o);
  auto data = Find(&d);
  ASSERT_EQ(data.size(), 1u);
  EXPECT_EQ(data[0].bias_mask, -1);
}

TEST(Attention, ProbabilitiesThatAreAGraphOutputStayUnfused) {
  Options o;
  o.probs_are_output = true;
  GraphBuilder b = AttentionGraph(o);
  EXPECT_TRUE(Find(&b).empty());
}

TEST(Attention, ScoresThatAreAGraphOutputStayUnfused) {
  Options o;
  o.scores_are_output = true;
  GraphBuilder b = AttentionGraph(o);
  EXPECT_TRUE(Find(&b).empty());
}

TEST(Attention, ProbabilitiesReadOutsideTheBlockStayUnfused) {
  GraphBuilder b = AttentionGraph(Options());
  b.Op("ReduceMax", {"probs"}, {"pmax"}, "outside");
  b.Output("pmax");
  EXPECT_TRUE(Find(&b).empty());
}

TEST(Attention, SoftmaxWithoutAProductIsNoAttention) {
  GraphBuilder b;
  b.Input("x", {D(2), D(16)});
  b.Init("W", {16, 16});
  b.Op("Softmax", {"x"}, {"p"}).attrs["axis"] = IntAttr(-1);
  b.Op("MatMul", {"p", "W"}, {"y"});
  b.Output("y");
  EXPECT_TRUE(Find(&b).empty());
}

TEST(Attention, ScheduleReplacesTheBlockByOneFusedCall) {
  GraphBuilder b = AttentionGraph(Options());
  Status st = InferShapes(&b.g, ShapeBindings(), nullptr);
  ASSERT_TRUE(st.ok()) << st.message();
  PlanOptions o;
  o.mode = Mode::kInference;
  o.attention = Attention::kFused;
  auto s = BuildSchedule(b.g, o);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(s->attention_regions, 1);
  int sdpa = 0;
  for (const ExecOp& op : s->ops) {
    if (op.op_type == "ScaledDotProductAttention") ++sdpa;
    EXPECT_NE(op.op_type, "Softmax") << "no S x S softmax in the fused path";
  }
  EXPECT_EQ(sdpa, 1);
  // Eager keeps the product/softmax/product.
  o.attention = Attention::kEager;
  auto e = BuildSchedule(b.g, o);
  ASSERT_TRUE(e.ok()) << e.message();
  int softmax = 0;
  int dropout = 0;
  for (const ExecOp& op : e->ops) {
    softmax += op.op_type == "Softmax";
    dropout += op.op_type == "Dropout";
  }
  EXPECT_EQ(softmax, 1);
  EXPECT_EQ(dropout, 1);
}

}  // namespace
}  // namespace memplan
