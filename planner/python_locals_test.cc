#include "planner/python_locals.h"

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

PyStatement Assign(std::vector<std::vector<std::string>> targets) {
  PyStatement st;
  st.kind = PyStatement::Kind::kAssign;
  st.targets = std::move(targets);
  return st;
}

PyStatement Return() {
  PyStatement st;
  st.kind = PyStatement::Kind::kReturn;
  return st;
}

// Frames of a stack trace, as the importer interns them.
struct Frames {
  Graph* g;
  int Add(const std::string& file, int line, PyStatement st) {
    g->frames.push_back({file, line, "forward", std::move(st)});
    return static_cast<int>(g->frames.size()) - 1;
  }
  // Runs node `n` in `modules`, with one frame per module plus the root's.
  void Run(Node& n, std::vector<std::string> modules, std::vector<int> stack) {
    n.modules = std::move(modules);
    n.modules_known = true;
    if (!n.modules.empty()) n.scope = n.modules.back();
    g->stacks.push_back(std::move(stack));
    n.stack = static_cast<int>(g->stacks.size()) - 1;
  }
};

int Held(const Schedule& s, const std::string& name) {
  for (const Val& v : s.vals) {
    if (v.name == name) return v.held_until;
  }
  return -2;
}

// The root's `return self.blk(x)`, then blk's forward:
//   20  h = self.fc(x)          (fc: `return F.linear(...)`)
//   21  a = torch.relu(h)       or, with `rebind`, h = torch.relu(h)
//   22  b = torch.relu(a)       (reads the line-21 name)
//   23  return torch.relu(b)
// [N, 256] throughout.
GraphBuilder Block(bool rebind, bool stacks = true) {
  GraphBuilder b;
  Frames f{&b.g};
  const int root = f.Add("m.py", 10, Return());
  const int l20 = f.Add("m.py", 20, Assign({{"h"}}));
  const int fc = f.Add("linear.py", 134, Return());
  const int l21 = f.Add("m.py", 21, Assign({{rebind ? "h" : "a"}}));
  const int l22 = f.Add("m.py", 22, Assign({{"b"}}));
  const int l23 = f.Add("m.py", 23, Return());
  b.Input("x", {S("N"), D(256)});
  b.Init("W", {256, 256});
  Node* n = &b.Op("MatMul", {"x", "W"}, {"h0"}, "fc");
  if (stacks) f.Run(*n, {"blk", "blk.fc"}, {root, l20, fc});
  n = &b.Op("Relu", {"h0"}, {"a"}, "relu21");
  if (stacks) f.Run(*n, {"blk"}, {root, l21});
  n = &b.Op("Relu", {"a"}, {"b"}, "relu22");
  if (stacks) f.Run(*n, {"blk"}, {root, l22});
  n = &b.Op("Relu", {"b"}, {"out"}, "relu23");
  if (stacks) f.Run(*n, {"blk"}, {root, l23});
  b.Output("out");
  if (!stacks) b.g.frames.clear();
  return b;
}

TEST(PythonLocals, ANameHoldsItsValueUntilTheFrameReturns) {
  GraphBuilder b = Block(false);
  const Schedule s = testing_util::InferenceScheduleOf(b, 8);
  const int ret = OpIndex(s, "relu23");
  // h (fc's output) and a are read by the next line only, but their names
  // refer to them until blk returns.
  EXPECT_EQ(Held(s, "h0"), ret);
  EXPECT_EQ(Held(s, "a"), ret);
  EXPECT_EQ(Held(s, "b"), ret);
}

TEST(PythonLocals, BindingTheNameAgainFreesTheOldValue) {
  GraphBuilder b = Block(true);
  const Schedule s = testing_util::InferenceScheduleOf(b, 8);
  // `h = torch.relu(h)`: the old h goes when the statement binds the new.
  EXPECT_EQ(Held(s, "h0"), OpIndex(s, "relu21"));
  EXPECT_EQ(Held(s, "a"), OpIndex(s, "relu23"));
}

TEST(PythonLocals, GraphsWithoutStackTracesAreLeftAlone) {
  GraphBuilder with = Block(false, /*stacks=*/false);
  const Schedule s = testing_util::InferenceScheduleOf(with, 8);
  // Only the module-call rule: fc's call holds x (the root's argument has
  // no module here), nothing holds h0 or a.
  EXPECT_EQ(Held(s, "a"), -1);
  EXPECT_EQ(Held(s, "b"), -1);
}

TEST(PythonLocals, EachCallOfASequentialIsItsOwnFrame) {
  // nn.Sequential's `input = module(input)` calls two blocks from one line;
  // each block's `y = torch.relu(input)` / `return torch.relu(y)`.
  GraphBuilder b;
  Frames f{&b.g};
  const int root = f.Add("m.py", 10, Assign({{"x"}}));
  const int seq = f.Add("container.py", 253, Assign({{"input"}}));
  const int y = f.Add("m.py", 30, Assign({{"y"}}));
  const int ret = f.Add("m.py", 31, Return());
  const int tail = f.Add("m.py", 11, Return());
  b.Input("x", {S("N"), D(256)});
  f.Run(b.Op("Relu", {"x"}, {"y0"}, "b0_30"), {"seq", "seq.0"}, {root, seq, y});
  f.Run(b.Op("Relu", {"y0"}, {"o0"}, "b0_31"), {"seq", "seq.0"}, {root, seq, ret});
  f.Run(b.Op("Relu", {"o0"}, {"y1"}, "b1_30"), {"seq", "seq.1"}, {root, seq, y});
  f.Run(b.Op("Relu", {"y1"}, {"o1"}, "b1_31"), {"seq", "seq.1"}, {root, seq, ret});
  f.Run(b.Op("Relu", {"o1"}, {"out"}, "tail"), {}, {tail});
  b.Output("out");
  const Schedule s = testing_util::InferenceScheduleOf(b, 8);
  // Block 0's y goes when block 0 returns, not with block 1.
  EXPECT_LE(Held(s, "y0"), OpIndex(s, "b0_31"));
  EXPECT_LE(Held(s, "y1"), OpIndex(s, "b1_31"));
  // The Sequential's `input` holds block 0's output until the next call
  // binds it again (the call's argument tuple does too), and the last
  // block's until the Sequential returns; the root's `x` holds that until
  // the root returns.
  EXPECT_EQ(Held(s, "o0"), OpIndex(s, "b1_31"));
  EXPECT_EQ(Held(s, "o1"), OpIndex(s, "tail"));
}

TEST(PythonLocals, TupleTargetsTakeTheValuesInOrder) {
  // 40  q, k = x.split(2)  (two outputs)
  // 41  q = torch.relu(q)  (binds q again: the first half goes)
  // 42  r = torch.relu(k)  (k's last reader)
  // 43  return q * r
  GraphBuilder b;
  Frames f{&b.g};
  const int root = f.Add("m.py", 40, Assign({{"q", "k"}}));
  const int l41 = f.Add("m.py", 41, Assign({{"q"}}));
  const int l42 = f.Add("m.py", 42, Assign({{"r"}}));
  const int l43 = f.Add("m.py", 43, Return());
  b.Input("x", {S("N"), D(256)});
  Node& split = b.Op("Split", {"x"}, {"q0", "k0"}, "split");
  split.attrs["num_outputs"] = Attribute();
  split.attrs["num_outputs"].type = AttrType::kInt;
  split.attrs["num_outputs"].i = 2;
  split.attrs["axis"] = Attribute();
  split.attrs["axis"].type = AttrType::kInt;
  split.attrs["axis"].i = 1;
  f.Run(split, {}, {root});
  f.Run(b.Op("Relu", {"q0"}, {"q1"}, "relu41"), {}, {l41});
  f.Run(b.Op("Relu", {"k0"}, {"r"}, "relu42"), {}, {l42});
  f.Run(b.Op("Mul", {"q1", "r"}, {"out"}, "mul43"), {}, {l43});
  b.Output("out");
  const Schedule s = testing_util::InferenceScheduleOf(b, 8);
  EXPECT_EQ(Held(s, "q0"), OpIndex(s, "relu41"));
  EXPECT_EQ(Held(s, "k0"), OpIndex(s, "mul43"));  // k is never bound again
}

// A loop that collects tensors in a tuple and joins them:
//   52  feat = torch.relu(x)         (twice: the loop body, 52 and 53)
//   53  feat = torch.relu(feat)
//       feats += (feat,)             (runs no op)
//   54  y = torch.cat(feats, 1)      or, with `rebind`, feats = torch.cat(feats, 1)
//   55  z = torch.relu(y)
//   56  return torch.relu(z)
GraphBuilder JoinLoop(bool rebind) {
  GraphBuilder b;
  Frames f{&b.g};
  const int l52 = f.Add("m.py", 52, Assign({{"feat"}}));
  const int l53 = f.Add("m.py", 53, Assign({{"feat"}}));
  PyStatement cat = Assign({{rebind ? "feats" : "y"}});
  cat.joined = {"feats"};
  const int l54 = f.Add("m.py", 54, cat);
  const int l55 = f.Add("m.py", 55, Assign({{"z"}}));
  const int l56 = f.Add("m.py", 56, Return());
  b.Input("x", {S("N"), D(256)});
  f.Run(b.Op("Relu", {"x"}, {"a1"}, "relu52a"), {}, {l52});
  f.Run(b.Op("Relu", {"a1"}, {"f1"}, "relu53a"), {}, {l53});
  f.Run(b.Op("Relu", {"x"}, {"a2"}, "relu52b"), {}, {l52});
  f.Run(b.Op("Relu", {"a2"}, {"f2"}, "relu53b"), {}, {l53});
  Node& c = b.Op("Concat", {"f1", "f2"}, {"y"}, "cat54");
  c.attrs["axis"] = testing_util::IntAttr(1);
  f.Run(c, {}, {l54});
  f.Run(b.Op("Relu", {"y"}, {"z"}, "relu55"), {}, {l55});
  f.Run(b.Op("Relu", {"z"}, {"out"}, "relu56"), {}, {l56});
  b.Output("out");
  return b;
}

TEST(PythonLocals, AContainerACatJoinsHoldsItsTensorsUntilTheFrameReturns) {
  GraphBuilder b = JoinLoop(false);
  const Schedule s = testing_util::InferenceScheduleOf(b, 8);
  // `feat` lets go of f1 when the second iteration binds it again; the
  // tuple keeps both until the frame returns.
  EXPECT_EQ(Held(s, "f1"), OpIndex(s, "relu56"));
  EXPECT_EQ(Held(s, "f2"), OpIndex(s, "relu56"));
}

TEST(PythonLocals, AContainerBoundAgainByTheCatLetsItsTensorsGo) {
  GraphBuilder b = JoinLoop(true);
  const Schedule s = testing_util::InferenceScheduleOf(b, 8);
  EXPECT_EQ(Held(s, "f1"), OpIndex(s, "relu52b"));  // `feat` bound again
  EXPECT_EQ(Held(s, "f2"), OpIndex(s, "relu56"));   // `feat` still names it
}

// A rotary embedding under torch.no_grad(), which the exporter traces into
// a subgraph: its stack is the subgraph's generated code (one frame,
// `<eval_with_key>.N`), not the module's. A value two of its ops read (emb,
// read by the cosine and the sine) is a local of the forward and lives
// until the region ends; a temporary read once (the cosine before its
// scaling) goes with its reader.
TEST(PythonLocals, AValueATracedRegionReadsTwiceLivesUntilTheRegionEnds) {
  GraphBuilder b;
  Frames f{&b.g};
  const int root = f.Add("m.py", 10, Assign({{"h"}}));
  b.Input("x", {S("N"), D(256)});
  b.Init("scale", {});
  f.Run(b.Op("Relu", {"x"}, {"pre"}, "pre"), {}, {root});
  Node* n = &b.Op("Relu", {"pre"}, {"emb"}, "cat");
  n->fx_region = "<eval_with_key>.42";
  n = &b.Op("Cos", {"emb"}, {"cos0"}, "cos");
  n->fx_region = "<eval_with_key>.42";
  n = &b.Op("Mul", {"cos0", "scale"}, {"cos"}, "cos_scale");
  n->fx_region = "<eval_with_key>.42";
  n = &b.Op("Sin", {"emb"}, {"sin0"}, "sin");
  n->fx_region = "<eval_with_key>.42";
  n = &b.Op("Mul", {"sin0", "scale"}, {"sin"}, "sin_scale");
  n->fx_region = "<eval_with_key>.42";
  b.Op("Add", {"cos", "sin"}, {"out"}, "after");
  b.Output("out");
  const Schedule s = testing_util::InferenceScheduleOf(b, 8);
  EXPECT_EQ(Held(s, "emb"), OpIndex(s, "sin_scale"));
  EXPECT_EQ(Held(s, "cos0"), -1);
  EXPECT_EQ(Held(s, "sin0"), -1);
}

TEST(PythonLocals, HeldLocalsRaiseTheInferencePeak) {
  // Batch 1024: every tensor 1 MiB. Without stack traces h0 dies at line
  // 21 and a at 22; held by their names, both live through line 23, where
  // b and out are alive too: two tensors more at the peak.
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
  EXPECT_EQ(peak_of(Block(false, true)) - peak_of(Block(false, false)), 2 * kMiB);
}

}  // namespace
}  // namespace memplan
