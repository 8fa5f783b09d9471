// Tests of the recurrent-call model: grouping exported layers into the one
// cuDNN call PyTorch makes, the sizes cuDNN asks for (measured on the H200,
// bench/results/traces/families/ and bench/results/cudnn_rnn_probe_h200.jsonl),
// and what a plan allocates around the call.
#include "planner/rnn.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "planner/ops/test_graph.h"
#include "planner/params.h"
#include "planner/plan.h"
#include "planner/schedule.h"
#include "planner/shape_inference.h"

namespace memplan {
namespace {

using testing_util::D;
using testing_util::FloatAttr;
using testing_util::GraphBuilder;
using testing_util::IntAttr;
using testing_util::IntsAttr;
using testing_util::S;
using testing_util::StringAttr;

// A `layers`-layer LSTM module as the dynamo exporter writes it: each
// layer's weights sliced into gates and concatenated in ONNX order, its
// initial states sliced from one zeros tensor, the layers joined by
// Transpose / Reshape / Dropout; batch_first input [N, T, I] transposed in.
GraphBuilder LstmModule(int layers, int64_t seq, int64_t input, int64_t hidden, bool dropout,
                        const std::string& module = "rnn") {
  GraphBuilder b;
  b.Input("x", {S("N"), D(seq), D(input)});
  b.Ints("axes0", {0});
  b.Op("Transpose", {"x"}, {"x_t"}).attrs["perm"] = IntsAttr({1, 0, 2});
  b.Init("zero", {}, DType::kFloat);
  b.Ints("zshape", {layers, 1, hidden});  // the batch dim is broadcast
  b.Op("Expand", {"zero", "zshape"}, {"zeros"});
  std::string cur = "x_t";
  for (int l = 0; l < layers; ++l) {
    const std::string p = "l" + std::to_string(l) + "_";
    const int64_t in = l == 0 ? input : hidden;
    b.Init(p + "w_ih", {4 * hidden, in});
    b.Init(p + "w_hh", {4 * hidden, hidden});
    b.Init(p + "b_ih", {4 * hidden});
    b.Init(p + "b_hh", {4 * hidden});
    for (const char* w : {"w_ih", "w_hh", "b_ih", "b_hh"}) {
      const std::string n = p + w;
      for (int gate = 0; gate < 4; ++gate) {
        const std::string g = std::to_string(gate);
        b.Ints(n + "_s" + g, {gate * hidden});
        b.Ints(n + "_e" + g, {(gate + 1) * hidden});
        b.Op("Slice", {n, n + "_s" + g, n + "_e" + g, "axes0"}, {n + "_g" + g});
      }
      b.Op("Concat", {n + "_g0", n + "_g3", n + "_g1", n + "_g2"}, {n + "_r"}).attrs["axis"] =
          IntAttr(0);
    }
    b.Op("Unsqueeze", {p + "w_ih_r", "axes0"}, {p + "W"});
    b.Op("Unsqueeze", {p + "w_hh_r", "axes0"}, {p + "R"});
    b.Op("Concat", {p + "b_ih_r", p + "b_hh_r"}, {p + "bias"}).attrs["axis"] = IntAttr(0);
    b.Op("Unsqueeze", {p + "bias", "axes0"}, {p + "B"});
    b.Ints(p + "hs", {l});
    b.Ints(p + "he", {l + 1});
    b.Op("Slice", {"zeros", p + "hs", p + "he", "axes0"}, {p + "h0"});
    b.Op("Slice", {"zeros", p + "hs", p + "he", "axes0"}, {p + "c0"});
    Node& n = b.Op("LSTM", {cur, p + "W", p + "R", p + "B", "", p + "h0", p + "c0"}, {p + "Y"});
    n.attrs["hidden_size"] = IntAttr(hidden);
    n.modules = {module};
    n.modules_known = true;
    b.Op("Transpose", {p + "Y"}, {p + "Yt"}).attrs["perm"] = IntsAttr({0, 2, 1, 3});
    b.Op("Shape", {p + "Yt"}, {p + "Yt_shape"});  // the exporter's shape math
    b.Ints(p + "shape", {seq, -1, hidden});
    b.Op("Reshape", {p + "Yt", p + "shape"}, {p + "out"});
    cur = p + "out";
    if (l + 1 < layers && dropout) {
      b.Op("Dropout", {cur}, {p + "drop"}).attrs["ratio"] = FloatAttr(0.2f);
      cur = p + "drop";
    }
  }
  b.Op("Transpose", {cur}, {"y"}).attrs["perm"] = IntsAttr({1, 0, 2});
  b.Output("y");
  for (Node& n : b.g.nodes) {
    if (!n.modules_known) {
      n.modules = {module};
      n.modules_known = true;
    }
  }
  return b;
}

void Infer(GraphBuilder* b, int64_t batch) {
  ShapeBindings bind;
  bind.dims["N"] = batch;
  b->g.Link();
  Status s = InferShapes(&b->g, bind, nullptr);
  ASSERT_TRUE(s.ok()) << s.message();
}

TEST(RnnRegions, ExportedLayersOfOneModuleAreOneCall) {
  GraphBuilder b = LstmModule(2, 16, 32, 64, true);
  Infer(&b, 4);
  const std::vector<RnnRegion> regions = FindRnnRegions(b.g);
  ASSERT_EQ(regions.size(), 1u);
  const RnnRegion& r = regions[0];
  EXPECT_EQ(r.layers.size(), 2u);
  EXPECT_TRUE(r.dropout);
  EXPECT_EQ(r.input, b.g.Find("x_t"));
  EXPECT_EQ(r.output, b.g.Find("l1_Y"));
  EXPECT_TRUE(r.states.empty());  // zeros
  // Eight weight tensors, the initializers behind the gate reordering.
  ASSERT_EQ(r.weights.size(), 8u);
  for (int t : r.weights) EXPECT_EQ(b.g.tensors[t].kind, TensorKind::kInitializer);
  // Per layer 16 Slice + 5 Concat + 3 Unsqueeze + 2 state Slice + the LSTM;
  // between the layers Transpose, Reshape and Dropout.
  EXPECT_EQ(r.nodes.size(), 2u * 27 + 3);
}

TEST(RnnRegions, LayersOfTwoModulesAreTwoCalls) {
  GraphBuilder b = LstmModule(2, 16, 32, 64, false);
  int seen = 0;
  for (Node& n : b.g.nodes) {
    if (n.op_type == "LSTM" && seen++ == 1) n.modules = {"rnn2"};
  }
  Infer(&b, 4);
  const std::vector<RnnRegion> regions = FindRnnRegions(b.g);
  ASSERT_EQ(regions.size(), 2u);
  EXPECT_EQ(regions[0].layers.size(), 1u);
  EXPECT_EQ(regions[1].layers.size(), 1u);
  EXPECT_FALSE(regions[0].dropout);
}

TEST(RnnRegions, AnIntermediateOutputReadElsewhereEndsTheCall) {
  GraphBuilder b = LstmModule(2, 16, 32, 64, false);
  b.Op("Relu", {"l0_out"}, {"side"});
  b.Output("side");
  Infer(&b, 4);
  EXPECT_EQ(FindRnnRegions(b.g).size(), 2u);
}

// The reserve space: per layer and direction 6 (LSTM) / 7 (GRU) values per
// hidden unit and step, less the last layer's hidden states (they are the
// output y), in the input dtype; a bit per element of each direction's input
// to a later layer for the between-layer dropout mask; 256 bytes.
TEST(RnnSizes, ReserveSpaceAsMeasured) {
  RnnCall lstm;  // bench/families.py lstm_lm at batch 8
  lstm.mode = "LSTM";
  lstm.layers = 2;
  lstm.seq = 128;
  lstm.batch = 8;
  lstm.input = 512;
  lstm.hidden = 1024;
  lstm.dropout = true;
  // (6 * 2 - 1) * 128 * 8 * 1024 * 4 + 128 * 8 * 1024 / 8 + 256
  EXPECT_EQ(RnnReserveBytes(lstm), 46268672);  // lstm_lm_train_8_fp32 trace
  lstm.dtype = DType::kBFloat16;
  // (6 * 2 - 1) * 128 * 8 * 1024 * 2 + 131072 + 256
  EXPECT_EQ(RnnReserveBytes(lstm), 23200000);  // lstm_lm_train_8_amp_bf16 trace
  RnnCall gru;                                 // gru_seqfirst at batch 8: 3 layers, bidirectional
  gru.mode = "GRU";
  gru.layers = 3;
  gru.dirs = 2;
  gru.seq = 200;
  gru.batch = 8;
  gru.input = 80;
  gru.hidden = 512;
  gru.dropout = true;
  // (7 * 3 - 1) * 2 * 200 * 8 * 512 * 4 + 2 * 2 * (200 * 8 * 1024) / 8 + 256
  EXPECT_EQ(RnnReserveBytes(gru), 131891456);  // gru_seqfirst_train_8_fp32 trace
}

// The schedule runs the module as one op: no weight copies from the gate
// reordering, the batch-first input copied inside the call, the reserve
// kept for backward, one flat gradient for all weights.
TEST(RnnSchedule, OneOpForTheModule) {
  GraphBuilder b = LstmModule(2, 16, 32, 64, true);
  Infer(&b, 4);
  PlanOptions o;
  o.mode = Mode::kTrain;
  auto s = BuildSchedule(b.g, o);
  ASSERT_TRUE(s.ok()) << s.message();
  int rnn_ops = 0;
  for (const ExecOp& op : s.value().ops) {
    EXPECT_NE(op.op_type, "Concat") << op.label;
    EXPECT_NE(op.op_type, "Dropout") << op.label;
    if (op.op_type != "LSTM") continue;
    ++rnn_ops;
    // x copy 4 * 16 * 32 * 4 B before the outputs; hy and cy
    // 2 * 4 * 64 * 4 B each after them.
    EXPECT_EQ(op.fwd_temp_bytes, 8192);
    EXPECT_EQ(op.fwd_late_temp_bytes, (std::vector<int64_t>{2048, 2048}));
    EXPECT_TRUE(op.saved_in_kernel);
    EXPECT_EQ(op.process_state_bytes, RnnDropoutStateBytes());
    EXPECT_TRUE(op.flat_weight_grads);
    int64_t extra = 0;
    for (const SavedRef& r : op.saved) extra += r.val < 0 ? r.bytes : 0;
    // (6 * 2 - 1) * 16 * 4 * 64 * 4 + 16 * 4 * 64 / 8 + 256
    EXPECT_EQ(extra, 180224 + 512 + 256);
    EXPECT_EQ(op.in.size(), 1u + 8u);
  }
  EXPECT_EQ(rnn_ops, 1);
  // nn.LSTM(32, 64, 2): per layer 4H * (in + H) + 2 * 4H.
  EXPECT_EQ(s.value().parameter_count, 4 * 64 * (32 + 64) + 4 * 64 * (64 + 64) + 2 * 2 * 4 * 64);
}

// The fallback: a copy of the weights plus the fitted size terms (see
// RnnFittedWorkspaceBytes), against calls measured on the H200.
TEST(RnnSizes, WorkspaceNearTheMeasuredSizes) {
  RnnCall lstm;  // lstm_lm at batch 8 and 128 (traces and probe)
  lstm.mode = "LSTM";
  lstm.layers = 2;
  lstm.seq = 128;
  lstm.batch = 8;
  lstm.input = 512;
  lstm.hidden = 1024;
  lstm.dropout = true;
  // weights 4*1024*(512+1024+2) + 4*1024*(2048+2) floats = 58,785,792 B;
  // + 1.74e7 + 0.2172 * 128*8*4*1024*4 + 1.539 * 128*8*1024*2*4
  // + 2.135 * 128*8*1024*4 + 35.39 * 8*1024*2*4 = 103,343,283 B.
  EXPECT_NEAR(RnnFittedWorkspaceBytes(lstm, true), 103416128, 0.01 * 103416128);
  lstm.batch = 128;
  EXPECT_NEAR(RnnFittedWorkspaceBytes(lstm, true), 522192128, 0.03 * 522192128);
  RnnCall gru;  // gru_seqfirst at batch 32
  gru.mode = "GRU";
  gru.layers = 3;
  gru.dirs = 2;
  gru.seq = 200;
  gru.batch = 32;
  gru.input = 80;
  gru.hidden = 512;
  gru.dropout = true;
  EXPECT_NEAR(RnnFittedWorkspaceBytes(gru, true), 259490304, 0.1 * 259490304);
  // Never less than the weights' copy, whatever the sizes.
  gru.seq = 1;
  gru.batch = 1;
  gru.hidden = 1;
  EXPECT_GE(RnnFittedWorkspaceBytes(gru, true), 0);
}

// A call of `mode` with the given sizes (fp32, no dropout).
RnnCall Call(const std::string& mode, int64_t layers, int64_t dirs, int64_t seq, int64_t batch,
             int64_t hidden, int64_t input) {
  RnnCall c;
  c.mode = mode;
  c.layers = layers;
  c.dirs = dirs;
  c.seq = seq;
  c.batch = batch;
  c.hidden = hidden;
  c.input = input;
  return c;
}

// PyTorch's get_algo: the persistent small-hidden algorithm up to hidden 192
// (LSTM/GRU) or 384 (RNN) in forward, 128 / 256 in backward; the persistent
// static one only for fp16 inputs of one layer and direction.
TEST(RnnAlgo, AsPyTorchPicksIt) {
  RnnCall c = Call("LSTM", 2, 1, 64, 8, 192, 128);
  EXPECT_EQ(RnnAlgoOf(c, true), RnnAlgo::kPersistStaticSmallH);
  EXPECT_EQ(RnnAlgoOf(c, false), RnnAlgo::kStandard);
  c.hidden = 128;
  EXPECT_EQ(RnnAlgoOf(c, false), RnnAlgo::kPersistStaticSmallH);
  c.hidden = 200;
  EXPECT_EQ(RnnAlgoOf(c, true), RnnAlgo::kStandard);
  c.mode = "RNN";
  c.hidden = 320;
  EXPECT_EQ(RnnAlgoOf(c, true), RnnAlgo::kPersistStaticSmallH);
  EXPECT_EQ(RnnAlgoOf(c, false), RnnAlgo::kStandard);
  RnnCall h = Call("LSTM", 1, 1, 64, 16, 512, 512);
  h.dtype = DType::kFloat16;
  EXPECT_EQ(RnnAlgoOf(h, true), RnnAlgo::kPersistStatic);
  h.batch = 12;  // not a multiple of 8
  EXPECT_EQ(RnnAlgoOf(h, true), RnnAlgo::kStandard);
  h.batch = 16;
  h.dtype = DType::kBFloat16;  // only CUDNN_DATA_HALF
  EXPECT_EQ(RnnAlgoOf(h, true), RnnAlgo::kStandard);
  h.dtype = DType::kFloat16;
  h.mode = "GRU";  // excluded on devices of major >= 8
  EXPECT_EQ(RnnAlgoOf(h, true), RnnAlgo::kStandard);
}

// The standard algorithm's inference workspace (planner/rnn.cc), against
// cudnnGetRNNTempSpaceSizes as PyTorch allocated it on the H200 (eval
// forward under inference_mode, bench/results/cudnn_rnn_probe_h200.jsonl).
TEST(RnnSizes, StandardInferenceWorkspaceAsMeasured) {
  struct Case {
    RnnCall c;
    int64_t measured;
  };
  RnnCall bf16 = Call("LSTM", 1, 2, 50, 16, 768, 300);
  bf16.dtype = DType::kBFloat16;
  const Case cases[] = {
      // lstm_lm's shape: W 58,785,792 + 2 x 8 MiB + x 2 MiB + (4 + 1) steps
      // of 128 x 8 x 1024 floats + 2 (10 x 8 - 8) x 1024 floats + 64 + 256.
      {Call("LSTM", 2, 1, 128, 8, 1024, 512), 99221824},
      // Past 256 steps one direction of several layers projects 256 at a time.
      {Call("LSTM", 2, 1, 512, 8, 1024, 512), 134873408},
      {Call("LSTM", 3, 1, 300, 8, 768, 640), 119636288},
      // Batch 1: the GRU's per-layer 5 B - 6 states go below zero.
      {Call("GRU", 2, 1, 128, 1, 1024, 512), 63217952},
      // Bidirectional: 8 MiB per layer and direction, no chunking.
      {Call("GRU", 3, 2, 200, 32, 512, 80), 257442304},
      {Call("LSTM", 1, 2, 300, 48, 768, 640), 711099008},
      {Call("LSTM", 2, 2, 128, 8, 1024, 512), 246939968},
      {Call("RNN", 1, 2, 50, 100, 512, 640), 118264864},
      {bf16, 48174208},
      // Shapes of the second probe (--grid mechanism), none among those the
      // terms were read from: one layer past 256 steps projects 256 at a
      // time too; lstm_tagger's shape at batch 16384 (36 GB).
      {Call("LSTM", 1, 1, 512, 64, 512, 256), 250872576},
      {Call("LSTM", 1, 2, 96, 16384, 384, 256), 36062232832},
  };
  for (const Case& k : cases) {
    const RnnWorkspace ws = RnnForwardWorkspace(k.c, false);
    EXPECT_TRUE(ws.derived) << k.c.mode << " " << k.c.hidden;
    EXPECT_EQ(ws.bytes, k.measured) << k.c.mode << " L" << k.c.layers << " d" << k.c.dirs << " T"
                                    << k.c.seq << " B" << k.c.batch << " H" << k.c.hidden;
  }
}

// Training adds a dropout buffer or a one-layer GRU's input (one direction)
// or an input-sized buffer (a bidirectional GRU of several layers); both
// backward calls take the forward's size.
TEST(RnnSizes, StandardTrainingWorkspaceAsMeasured) {
  RnnCall lstm = Call("LSTM", 2, 1, 128, 8, 1024, 512);  // lstm_lm at batch 8
  lstm.dropout = true;
  EXPECT_EQ(RnnForwardWorkspace(lstm, true).bytes, 103416128);  // + 128 x 8 x 1024 x 4
  EXPECT_EQ(RnnBackwardWorkspace(lstm).bytes, 103416128);
  lstm.dropout = false;
  EXPECT_EQ(RnnForwardWorkspace(lstm, true).bytes, 99221824);
  lstm.seq = 256;
  lstm.dropout = true;
  EXPECT_EQ(RnnForwardWorkspace(lstm, true).bytes, 130679104);
  RnnCall gru = Call("GRU", 3, 2, 200, 32, 512, 80);  // gru_seqfirst at batch 32
  gru.dropout = true;
  EXPECT_EQ(RnnForwardWorkspace(gru, true).bytes, 259490304);  // + 200 x 32 x 80 x 4
  gru.batch = 8;
  gru.dtype = DType::kBFloat16;  // its autocast call
  EXPECT_EQ(RnnForwardWorkspace(gru, true).bytes, 93360448);
  RnnCall bi = Call("LSTM", 2, 2, 128, 8, 1024, 512);  // the dropout buffer fits
  bi.dropout = true;
  EXPECT_EQ(RnnForwardWorkspace(bi, true).bytes, 246939968);
  EXPECT_TRUE(RnnForwardWorkspace(bi, true).derived);
  // Second probe: a one-layer GRU keeps an input-sized buffer instead
  // (+ 64 x 64 x 256 x 4), and the family shapes at other batches.
  EXPECT_EQ(RnnForwardWorkspace(Call("GRU", 1, 1, 64, 64, 512, 256), true).bytes, 55706368);
  RnnCall held_out = Call("GRU", 2, 2, 200, 200, 384, 40);  // gru_seqfirst_b at batch 200
  held_out.dropout = true;
  EXPECT_EQ(RnnForwardWorkspace(held_out, true).bytes, 806762304);
  RnnCall gru_lm = Call("GRU", 3, 1, 64, 1024, 768, 384);  // its autocast call at batch 1024
  gru_lm.dropout = true;
  gru_lm.dtype = DType::kBFloat16;
  EXPECT_EQ(RnnForwardWorkspace(gru_lm, true).bytes, 621879552);
  RnnCall lstm_b = Call("LSTM", 3, 1, 64, 512, 768, 256);  // lstm_lm_b at batch 512
  lstm_b.dropout = true;
  EXPECT_EQ(RnnForwardWorkspace(lstm_b, true).bytes, 760221952);
  gru.dtype = DType::kFloat;
  gru.batch = 1024;
  EXPECT_EQ(RnnForwardWorkspace(gru, true).bytes, 5347680512);
}

// What the derivation does not cover goes to the fit, and says so.
TEST(RnnSizes, OtherAlgorithmsAndShapesAreFitted) {
  // Hidden 128: the persistent small-hidden algorithm in both passes.
  RnnCall small = Call("LSTM", 2, 1, 128, 8, 128, 128);
  EXPECT_FALSE(RnnForwardWorkspace(small, true).derived);
  EXPECT_FALSE(RnnBackwardWorkspace(small).derived);
  EXPECT_EQ(RnnForwardWorkspace(small, true).bytes, RnnFittedWorkspaceBytes(small, true));
  // Hidden 160: small-hidden forward, standard backward.
  small.hidden = 160;
  EXPECT_FALSE(RnnForwardWorkspace(small, true).derived);
  EXPECT_TRUE(RnnBackwardWorkspace(small).derived);
  // Training with an input wider than the hidden size (measured 30,982,464 B
  // for H 256, I 512 with dropout: the derivation's 29,524,288 + 1,048,576
  // would miss by 1.3 %), and vanilla RNN training.
  RnnCall wide = Call("LSTM", 2, 1, 128, 8, 256, 512);
  wide.dropout = true;
  EXPECT_FALSE(RnnForwardWorkspace(wide, true).derived);
  EXPECT_TRUE(RnnForwardWorkspace(wide, false).derived);
  EXPECT_EQ(RnnForwardWorkspace(wide, false).bytes, 29524288);
  EXPECT_FALSE(RnnForwardWorkspace(Call("RNN", 2, 1, 128, 8, 1024, 512), true).derived);
  EXPECT_TRUE(RnnForwardWorkspace(Call("RNN", 2, 1, 128, 8, 1024, 512), false).derived);
  // One direction past 256 steps in training (measured 351,666,944 B where
  // the inference terms give 250,872,576).
  const RnnCall long_seq = Call("LSTM", 1, 1, 512, 64, 512, 256);
  EXPECT_FALSE(RnnForwardWorkspace(long_seq, true).derived);
  EXPECT_TRUE(RnnForwardWorkspace(long_seq, false).derived);
}

// One seq-first LSTM layer straight on its input (no copy), weights as
// initializers: the forward of a training step peaks inside the call with
// parameters, input, y, hy, cy, the workspace and the reserve; the
// backward's weight pass adds one flat gradient of all weights.
TEST(RnnPlan, ForwardAndBackwardPeaksOfOneCall) {
  const int64_t T = 8, N = 8, I = 64, H = 128;
  GraphBuilder b;
  b.Input("x", {D(T), S("N"), D(I)});
  b.Init("W", {1, 4 * H, I});
  b.Init("R", {1, 4 * H, H});
  b.Init("B", {1, 8 * H});
  b.Op("LSTM", {"x", "W", "R", "B"}, {"y"}).attrs["hidden_size"] = IntAttr(H);
  b.Output("y");
  Infer(&b, N);
  PlanOptions o;
  o.mode = Mode::kTrain;
  o.optimizer = Optimizer::kSgd;
  o.loss = Loss::kNone;
  auto plan = MakePlan(b.g, N, o);
  ASSERT_TRUE(plan.ok()) << plan.message();
  const int64_t P = 4 * H * I * 4 + 4 * H * H * 4 + 8 * H * 4;  // 397,312 B
  const int64_t X = T * N * I * 4;                              // 16 KiB
  const int64_t Y = T * N * H * 4;                              // 32 KiB
  const int64_t hy = N * H * 4;                                 // 4 KiB, and cy
  RnnCall c;
  c.mode = "LSTM";
  c.seq = T;
  c.batch = N;
  c.input = I;
  c.hidden = H;
  const int64_t ws = (RnnFittedWorkspaceBytes(c, true) + 511) / 512 * 512;
  // (6 - 1) * 8 * 8 * 128 * 4 + 256, rounded to 512 B by the allocator.
  const int64_t reserve = 164352;
  // The workspace (17.8 MiB) gets its own segment in the first step, rounded
  // up to 2 MiB; in the steady step it takes that cached block whole (the
  // allocator splits only for a remainder over 1 MiB), and backward's small
  // buffers fit in what it leaves.
  const int64_t ws_block = (ws + (2 << 20) - 1) / (2 << 20) * (2 << 20);
  ASSERT_LT(ws_block - ws, 1 << 20);
  ASSERT_GE(ws_block - ws, 4 * hy + X);
  EXPECT_EQ(plan.value().peak.phase_allocated[0], P + X + Y + 2 * hy + ws_block + reserve);
  // Backward: dhy, dcy zeros and dhx, dcx (4 * hy) and the unused dx (X),
  // allocations of their own through both passes, beside the workspace (the
  // same size in both passes: the cached block again), then the flat dw (P)
  // with the second one; y and the reserve are still held, and the loss's
  // 4-byte scalar (512 B).
  EXPECT_EQ(plan.value().peak.phase_allocated[1],
            P + X + Y + reserve + P + ws_block + 4 * hy + X + 512);
}

// The training schedule of `b` at batch 4 and `p`.
Result<Schedule> TrainSchedule(GraphBuilder* b, Precision p) {
  Infer(b, 4);
  PlanOptions o;
  o.mode = Mode::kTrain;
  o.precision = p;
  return BuildSchedule(b->g, o);
}

// The training schedule of a 2-layer LSTM module (batch 4) at `p`.
Result<Schedule> TwoLayerLstmSchedule(Precision p) {
  GraphBuilder b = LstmModule(2, 16, 32, 64, false);
  return TrainSchedule(&b, p);
}

// Under autocast the call runs in float16 (AutocastRNN.cpp casts to at::kHalf
// whatever autocast's dtype) on one flat float16 copy of all its weights,
// kept for backward.
// ... and casts them before the input (AutocastRNN.cpp flattens the weights,
// then passes cached_cast(input) to _cudnn_rnn).
TEST(RnnSchedule, AutocastCastsTheWeightsIntoOneFlatCopy) {
  auto s = TwoLayerLstmSchedule(Precision::kAmpBf16);
  ASSERT_TRUE(s.ok()) << s.message();
  const Schedule& sc = s.value();
  int flat = -1;
  size_t flat_at = 0;
  for (size_t i = 0; i < sc.ops.size(); ++i) {
    const ExecOp& op = sc.ops[i];
    if (op.op_type == "Cast" && op.in.size() == 8) {
      flat = op.out[0];
      flat_at = i;
    }
    if (op.op_type != "LSTM") continue;
    ASSERT_GE(flat, 0);
    EXPECT_EQ(op.in[1], flat);
    EXPECT_EQ(sc.vals[op.in[0]].dtype, DType::kFloat16);
    EXPECT_EQ(sc.vals[flat].dtype, DType::kFloat16);
    size_t input_cast_at = sc.ops.size();
    for (size_t j = 0; j < i; ++j) {
      if (sc.ops[j].op_type == "Cast" && sc.ops[j].out.size() == 1 &&
          sc.ops[j].out[0] == op.in[0]) {
        input_cast_at = j;
      }
    }
    ASSERT_LT(input_cast_at, i);
    EXPECT_LT(flat_at, input_cast_at);
  }
  ASSERT_GE(flat, 0);
  EXPECT_EQ(sc.vals[flat].bytes, 2 * sc.parameter_count);
  // Its fp32 parameters are flattened when the module is moved to the GPU.
  ASSERT_EQ(sc.flattened_rnn_weights.size(), 1u);
  EXPECT_EQ(sc.flattened_rnn_weights[0].size(), 8u);
}

// Under bf16 autocast the module's float16 output is cast again by the next
// autocast op (the head's linear: a float16 -> bfloat16 copy, as the H100
// allocator history of a batch-first LSTM, dropout and head shows: at::to
// under linear.py), and float16 added to bfloat16 promotes to float32. Under
// fp16 autocast the output is what the linear wants: no copy.
TEST(RnnSchedule, RnnRunsInFloat16UnderAutocast) {
  for (Precision p : {Precision::kAmpBf16, Precision::kAmpFp16}) {
    GraphBuilder b = LstmModule(1, 16, 32, 64, false);
    b.Init("head_w", {64, 64});
    b.Op("MatMul", {"y", "head_w"}, {"proj"}, "head");
    b.Op("Add", {"proj", "y"}, {"mixed"}, "mix");
    b.Output("mixed");
    for (Node& n : b.g.nodes) {
      if (!n.modules_known) n.modules_known = true;
    }
    auto s = TrainSchedule(&b, p);
    ASSERT_TRUE(s.ok()) << s.message();
    const Schedule& sc = s.value();
    const int y = b.g.Find("y");
    EXPECT_EQ(sc.vals[y].dtype, DType::kFloat16);
    const ExecOp* head = nullptr;
    const ExecOp* mix = nullptr;
    for (const ExecOp& op : sc.ops) {
      if (op.node >= 0 && b.g.nodes[op.node].name == "head") head = &op;
      if (op.node >= 0 && b.g.nodes[op.node].name == "mix") mix = &op;
    }
    ASSERT_TRUE(head && mix);
    const bool bf16 = p == Precision::kAmpBf16;
    // Casts of y: a bfloat16 copy for the linear under bf16 autocast, none
    // under fp16 (the Add promotes without a cast op of its own).
    int casts_of_y = 0;
    for (const ExecOp& op : sc.ops) {
      if (op.op_type == "Cast" && op.in.size() == 1 && op.in[0] == y) {
        ++casts_of_y;
        EXPECT_EQ(sc.vals[op.out[0]].dtype, DType::kBFloat16);
        EXPECT_EQ(sc.vals[op.out[0]].bytes, sc.vals[y].bytes);
      }
    }
    EXPECT_EQ(casts_of_y, bf16 ? 1 : 0) << static_cast<int>(p);
    EXPECT_EQ(sc.vals[head->in[0]].dtype, bf16 ? DType::kBFloat16 : DType::kFloat16);
    EXPECT_EQ(sc.vals[mix->out[0]].dtype, bf16 ? DType::kFloat : DType::kFloat16);
  }
}

// _cudnn_impl makes the cached dropout states before it dispatches to
// _cudnn_rnn: under autocast, before AutocastRNN.cpp casts the weights (the
// H100 trace of lstm_lm_g amp_bf16 b12); in fp32 at the call.
TEST(RnnSchedule, DropoutStatesComeBeforeTheAutocastCasts) {
  for (Precision p : {Precision::kAmpBf16, Precision::kFp32}) {
    GraphBuilder b = LstmModule(2, 16, 32, 64, true);
    auto s = TrainSchedule(&b, p);
    ASSERT_TRUE(s.ok()) << s.message();
    int with_states = -1;
    int lstm = -1;
    for (size_t i = 0; i < s->ops.size(); ++i) {
      if (s->ops[i].process_state_bytes > 0) {
        EXPECT_EQ(with_states, -1) << "one op makes them";
        with_states = static_cast<int>(i);
      }
      if (s->ops[i].op_type == "LSTM") lstm = static_cast<int>(i);
    }
    ASSERT_GE(with_states, 0);
    ASSERT_GE(lstm, 0);
    if (p == Precision::kFp32) {
      EXPECT_EQ(with_states, lstm);
    } else {
      EXPECT_EQ(s->ops[with_states].op_type, "Cast");
      EXPECT_EQ(s->ops[with_states].in.size(), 8u);  // the flat weight cast
      EXPECT_LT(with_states, lstm);
    }
  }
}

// A bf16 module is flattened only while it is loaded in fp32, never after
// the cast (cudnn.is_acceptable rejects bf16): each call copies its weights
// into a new flat buffer, whose backward hands every weight its view of one
// flat gradient (nothing cast back).
TEST(RnnSchedule, Bf16WeightsAreCopiedAtEveryCall) {
  auto s = TwoLayerLstmSchedule(Precision::kBf16);
  ASSERT_TRUE(s.ok()) << s.message();
  const Schedule& sc = s.value();
  ASSERT_EQ(sc.flattened_rnn_weights.size(), 1u);
  const ExecOp* copy = nullptr;
  for (const ExecOp& op : sc.ops) {
    if (op.op_type == "Cast" && op.in.size() == 8) copy = &op;
  }
  ASSERT_NE(copy, nullptr);
  EXPECT_EQ(copy->grad_kind, GradKind::kAlias);
  EXPECT_TRUE(sc.vals[copy->out[0]].param_copy);
  EXPECT_EQ(sc.vals[copy->out[0]].bytes, 2 * sc.parameter_count);
}

// A training plan (SGD, no loss) of a one-layer LSTM over [N, 16, 32] with
// hidden 64 that keeps its events.
Result<Plan> SmallLstmTrainPlan(Precision precision) {
  GraphBuilder b = LstmModule(1, 16, 32, 64, false);
  Infer(&b, 4);
  PlanOptions o;
  o.mode = Mode::kTrain;
  o.precision = precision;
  o.optimizer = Optimizer::kSgd;
  o.loss = Loss::kNone;
  o.keep_events = true;
  return MakePlan(b.g, 4, o);
}

// fp32: model.cuda() moves each weight, then flatten_parameters copies them
// into one buffer and frees what they were moved into (cached, so reserved
// keeps both).
// The backward call allocates in the order of aten/src/ATen/native/cudnn/
// RNN.cpp (an H200 trace, lstm_tagger_train_64_fp32, shows the same):
// _cudnn_rnn_backward's zeros for dhy and dcy; _cudnn_rnn_backward_input's
// x.contiguous() and dy.contiguous() (batch-first: copies), dx (x needs
// none here: a graph input), dhx, dcx and the workspace, after which dy's
// copy and then x's die; _cudnn_rnn_backward_weight's x copy, dw (all
// weights, flat) and workspace; the zeros die, then dx, dhx, dcx. The
// forward: x's copy, y, hy and cy, the workspace, the reserve.
TEST(RnnPlan, BackwardAllocatesInCudnnOrder) {
  const int64_t N = 4, T = 16, I = 32, H = 64;
  auto plan = SmallLstmTrainPlan(Precision::kFp32);
  ASSERT_TRUE(plan.ok()) << plan.message();
  const Plan& p = plan.value();
  const int64_t X = N * T * I * 4, Y = N * T * H * 4, hy = N * H * 4;
  const int64_t W = 4 * H * (I + H + 2) * 4;
  RnnCall c;
  c.mode = "LSTM";
  c.seq = T;
  c.batch = N;
  c.input = I;
  c.hidden = H;
  const int64_t ws = RnnBackwardWorkspace(c).bytes;
  const int64_t fwd_ws = RnnForwardWorkspace(c, true).bytes;
  std::vector<int64_t> fwd, bwd;  // +bytes for an allocation, -bytes for a free
  std::map<int64_t, int64_t> bytes_of;
  for (size_t e = 0; e < p.events.size(); ++e) {
    const MemEvent& ev = p.events[e];
    if (ev.empty_cache) continue;
    if (ev.is_alloc) bytes_of[ev.id] = ev.bytes;
    if (p.event_nodes[e].find("LSTM") == std::string::npos) continue;
    const int64_t signed_bytes = ev.is_alloc ? ev.bytes : -bytes_of[ev.id];
    (p.event_phases[e] == Phase::kBackward ? bwd : fwd).push_back(signed_bytes);
  }
  const int64_t reserve = RnnReserveBytes(c);
  // The first step's (the plan runs several).
  const std::vector<int64_t> want_fwd = {X, Y, hy, hy, fwd_ws, reserve, -fwd_ws, -X, -hy, -hy};
  ASSERT_GE(fwd.size(), want_fwd.size());
  EXPECT_EQ(std::vector<int64_t>(fwd.begin(), fwd.begin() + want_fwd.size()), want_fwd);
  const std::vector<int64_t> want = {hy, hy, X,  Y,   X,  hy,  hy,  ws, -ws, -Y, -X,
                                     X,  W,  ws, -ws, -X, -hy, -hy, -X, -hy, -hy};
  ASSERT_GE(bwd.size(), want.size());
  EXPECT_EQ(std::vector<int64_t>(bwd.begin(), bwd.begin() + want.size()), want);
}

// bf16 weights are never flattened (nn.RNNBase.flatten_parameters returns
// early for them), so _cudnn_rnn copies them into a new flat buffer after
// allocating y, hy and cy, before its workspace (RNN.cpp; the H200 traces of
// lstm_tagger_train_19_bf16 and _64_bf16 place it there).
TEST(RnnPlan, Bf16FlatWeightCopyAfterTheOutputs) {
  const int64_t N = 4, T = 16, I = 32, H = 64;
  auto plan = SmallLstmTrainPlan(Precision::kBf16);
  ASSERT_TRUE(plan.ok()) << plan.message();
  const Plan& p = plan.value();
  const int64_t X = N * T * I * 2, Y = N * T * H * 2, hy = N * H * 2;
  const int64_t W = 4 * H * (I + H + 2) * 2;
  std::vector<int64_t> fwd;
  for (size_t e = 0; e < p.events.size(); ++e) {
    const MemEvent& ev = p.events[e];
    if (ev.empty_cache || !ev.is_alloc || p.event_phases[e] != Phase::kForward) continue;
    if (p.event_nodes[e].find("LSTM") == std::string::npos &&
        p.event_nodes[e].find("weights") == std::string::npos) {
      continue;
    }
    fwd.push_back(ev.bytes);
  }
  ASSERT_GE(fwd.size(), 5u);
  EXPECT_EQ(std::vector<int64_t>(fwd.begin(), fwd.begin() + 5),
            (std::vector<int64_t>{X, Y, hy, hy, W}));
}

TEST(RnnPlan, Fp32WeightsAreFlattenedWhenLoaded) {
  GraphBuilder b = LstmModule(1, 16, 32, 64, false);
  Infer(&b, 4);
  PlanOptions o;
  o.mode = Mode::kInference;
  o.keep_events = true;
  auto plan = MakePlan(b.g, 4, o);
  ASSERT_TRUE(plan.ok()) << plan.message();
  // W [4H, I], R [4H, H] and the two biases, 4 bytes each: no one of
  // them is that big, their flat copy is.
  const int64_t weights = 4 * 4 * 64 * (32 + 64 + 2);
  int64_t before = 0;
  bool flat = false;
  for (const MemEvent& e : plan->events) {
    if (!e.is_alloc) continue;
    if (e.bytes == weights) {
      flat = true;
      break;
    }
    before += e.bytes;
  }
  EXPECT_TRUE(flat);
  EXPECT_GE(before, weights);  // each moved first
}

}  // namespace
}  // namespace memplan
