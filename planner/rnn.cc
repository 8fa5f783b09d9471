#include "planner/rnn.h"

#include <algorithm>
#include <cstdint>
#include <unordered_set>

#include "planner/checked.h"
#include "planner/op_registry.h"
#include "planner/ops/op_names.h"

namespace memplan {
namespace {

// The op of a default-domain node, or nullptr.
const OpDef* DefaultOp(const Node& n) { return n.domain.empty() ? OpOf(n) : nullptr; }

bool IsRecurrent(const Node& n) {
  const OpDef* def = DefaultOp(n);
  return def != nullptr && def->recurrent;
}

// Ops between two layers of one module: the [T, dirs, B, H] -> [T, B, dirs*H]
// reshuffle (transposes and reshapes) and the between-layer dropout.
bool IsBetweenLayers(const Node& n) {
  const OpDef* def = DefaultOp(n);
  return def != nullptr && (IsTransposeView(*def) || IsReshapeView(*def) || def->eval_identity);
}

// Ops that rearrange weights or initial states on their way to the node
// (gate reordering by slices and concatenations, reshapes, transposes, casts).
bool IsRearranging(const Node& n) {
  const OpDef* def = DefaultOp(n);
  return def != nullptr && (def->rearranges_weight != WeightRearrange::kNone ||
                            IsReshapeView(*def) || IsTransposeView(*def) || IsCast(*def));
}

// The data inputs of a rearranging op (every input of a concatenation, else
// input 0).
std::vector<int> DataInputs(const Node& n) {
  const OpDef* def = DefaultOp(n);
  if (def != nullptr && def->rearranges_weight == WeightRearrange::kAllInputs) return n.inputs;
  return n.inputs.empty() ? std::vector<int>{} : std::vector<int>{n.inputs[0]};
}

// Shape and Size read only a tensor's dims (the exporter's shape math).
bool ReadsDimsOnly(const Node& n) {
  const OpDef* def = DefaultOp(n);
  return def != nullptr && def->reads_dims_only;
}

// The only consumer node of `t` that reads its data, or -1 (several, none).
int OnlyConsumer(const Graph& g, int t) {
  int c = -1;
  for (int ni : g.tensors[t].consumers) {
    if (ReadsDimsOnly(g.nodes[ni])) continue;
    if (c >= 0 && ni != c) return -1;
    c = ni;
  }
  return c;
}

bool ReadOutside(const Graph& g, int t, const std::unordered_set<int>& inside) {
  for (int ni : g.tensors[t].consumers) {
    if (!inside.count(ni) && !ReadsDimsOnly(g.nodes[ni])) return true;
  }
  for (int o : g.outputs) {
    if (o == t) return true;
  }
  return false;
}

// The next layer after `layer`: its Y reaches one recurrent node's X through
// between-layer ops with one consumer each. Fills `between`.
int NextLayer(const Graph& g, const Node& layer, std::vector<int>* between) {
  if (layer.outputs.empty() || layer.outputs[0] < 0) return -1;
  int t = layer.outputs[0];
  for (int depth = 0; depth < 8; ++depth) {
    const int c = OnlyConsumer(g, t);
    if (c < 0) return -1;
    const Node& n = g.nodes[c];
    if (IsRecurrent(n)) {
      if (n.inputs.empty() || n.inputs[0] != t || n.op_type != layer.op_type) return -1;
      if (n.GetString("direction", "forward") != layer.GetString("direction", "forward")) {
        return -1;
      }
      if (n.modules_known && layer.modules_known && n.modules != layer.modules) return -1;
      return c;
    }
    if (!IsBetweenLayers(n) || n.inputs.empty() || n.inputs[0] != t) return -1;
    between->push_back(c);
    t = n.outputs.empty() ? -1 : n.outputs[0];
    if (t < 0) return -1;
  }
  return -1;
}

// Walks back from `t` through rearranging ops read only inside the region,
// adding those ops to `nodes` and the tensors they start from to `leaves`.
void WalkBack(const Graph& g, int t, std::unordered_set<int>* inside, std::vector<int>* nodes,
              std::vector<int>* leaves, std::unordered_set<int>* seen) {
  std::vector<int> stack = {t};
  while (!stack.empty()) {
    const int cur = stack.back();
    stack.pop_back();
    if (cur < 0 || !seen->insert(cur).second) continue;
    const int p = g.tensors[cur].producer;
    bool own = p >= 0 && IsRearranging(g.nodes[p]) && !inside->count(p);
    if (own) {
      for (int out : g.nodes[p].outputs) {
        if (out >= 0 && ReadOutside(g, out, *inside) && out != cur) own = false;
      }
      // `cur` itself must be read only by region nodes.
      if (ReadOutside(g, cur, *inside)) own = false;
    }
    if (!own) {
      leaves->push_back(cur);
      continue;
    }
    inside->insert(p);
    nodes->push_back(p);
    for (int in : DataInputs(g.nodes[p])) stack.push_back(in);
  }
}

}  // namespace

std::vector<RnnRegion> FindRnnRegions(const Graph& g) {
  std::vector<RnnRegion> regions;
  std::vector<char> taken(g.nodes.size(), 0);
  for (int first = 0; first < static_cast<int>(g.nodes.size()); ++first) {
    const Node& n0 = g.nodes[first];
    if (!IsRecurrent(n0) || taken[first] || n0.inputs.size() < 3 || n0.inputs[0] < 0) continue;
    RnnRegion r;
    r.input = n0.inputs[0];
    r.layers.push_back(first);
    std::vector<int> between_all;
    for (;;) {
      std::vector<int> between;
      const int next = NextLayer(g, g.nodes[r.layers.back()], &between);
      if (next < 0 || taken[next] || g.nodes[next].inputs.size() < 3) break;
      for (int b : between) {
        if (g.nodes[b].op_type == op_names::kDropout) r.dropout = true;
      }
      between_all.insert(between_all.end(), between.begin(), between.end());
      r.layers.push_back(next);
    }
    std::unordered_set<int> inside(r.layers.begin(), r.layers.end());
    inside.insert(between_all.begin(), between_all.end());
    r.nodes = r.layers;
    r.nodes.insert(r.nodes.end(), between_all.begin(), between_all.end());
    // Weights (W, R, B) and initial states (initial_h, initial_c).
    std::unordered_set<int> seen;
    std::vector<int> weight_leaves;
    std::vector<int> state_leaves;
    for (int li : r.layers) {
      const Node& n = g.nodes[li];
      for (int slot = 1; slot <= 3 && slot < static_cast<int>(n.inputs.size()); ++slot) {
        if (n.inputs[slot] >= 0) {
          WalkBack(g, n.inputs[slot], &inside, &r.nodes, &weight_leaves, &seen);
        }
      }
      for (int slot = 5; slot <= 6 && slot < static_cast<int>(n.inputs.size()); ++slot) {
        if (n.inputs[slot] >= 0) {
          WalkBack(g, n.inputs[slot], &inside, &r.nodes, &state_leaves, &seen);
        }
      }
    }
    for (int t : weight_leaves) {
      if (std::find(r.weights.begin(), r.weights.end(), t) == r.weights.end()) {
        r.weights.push_back(t);
      }
    }
    // Zeros (an Expand of a constant, or a constant) are no state to keep.
    for (int t : state_leaves) {
      const Tensor& st = g.tensors[t];
      const int p = st.producer;
      const bool constant =
          st.has_values || st.kind == TensorKind::kInitializer ||
          (p >= 0 && DefaultOp(g.nodes[p]) != nullptr &&
           (IsExpandView(*DefaultOp(g.nodes[p])) || DefaultOp(g.nodes[p])->fills_constant));
      if (!constant && std::find(r.states.begin(), r.states.end(), t) == r.states.end()) {
        r.states.push_back(t);
      }
    }
    const Node& last = g.nodes[r.layers.back()];
    r.output = last.outputs.empty() ? -1 : last.outputs[0];
    for (int li : r.layers) {
      const Node& n = g.nodes[li];
      for (size_t k = 1; k < n.outputs.size(); ++k) {
        const int t = n.outputs[k];
        if (t >= 0 && ReadOutside(g, t, inside)) r.state_outputs.push_back(t);
      }
    }
    for (int li : r.layers) taken[li] = 1;
    std::sort(r.nodes.begin(), r.nodes.end());
    regions.push_back(std::move(r));
  }
  return regions;
}

}  // namespace memplan

namespace memplan {
namespace {

int64_t ElemBytes(DType t) {
  int64_t b = 0;
  DTypeBytes(t, 1, &b);
  return b;
}

// Values per hidden unit per step that a layer leaves in the reserve space.
int64_t ReservePerUnit(const std::string& mode) {
  if (mode == op_names::kLSTM) return 6;
  if (mode == op_names::kGRU) return 7;
  return 2;
}

}  // namespace

int64_t RnnReserveBytes(const RnnCall& c) {
  const int64_t unit = SatProduct({c.seq, c.batch, c.hidden});
  const int64_t per_layer = ReservePerUnit(c.mode);
  const int64_t values =
      SatMulNonNeg(SatMulNonNeg(SatAdd(SatMulNonNeg(per_layer, c.layers), -1), c.dirs), unit);
  int64_t bytes = SatMulNonNeg(values, ElemBytes(c.dtype));
  if (c.dropout && c.layers > 1) {
    // A bit per element of each direction's input to the next layer,
    // rounded up to 32 bytes per layer and direction.
    const int64_t chunk = (SatMulNonNeg(c.dirs, unit) + 7) / 8;
    bytes = SatAdd(bytes, SatProduct({c.layers - 1, c.dirs, (chunk + 31) / 32 * 32}));
  }
  return SatAdd(bytes, 256);
}

// The workspace: a copy of the weights in the input dtype, plus
//   const + a * min(T, 256) * B * gates * H * dirs^2 * 4
//         + b * T * B * H * dirs * layers * elem + c * T * B * H * dirs^2 * elem
//         + d * B * H * dirs * layers * 4
// with (const, a, b, c, d) fitted per mode by least squares (residuals
// weighted by 1/sqrt(size)) over the calls measured on the H200 with torch
// 2.11 / cuDNN 9.19 (bench/results/cudnn_rnn_probe_h200.jsonl,
// bench/cudnn_rnn_fit.py): 135 calls, and for training each fp32 call again
// under autocast, a bf16 sample (238 in all). Training workspace error,
// median / worst: LSTM 3.0 % / 85 % (2.0 % / 26 % over calls above 100 MB),
// GRU 9.4 % / 92 % (7.4 % / 25 %), RNN 13 % / 67 %; the worst are small
// calls where the constant dominates. cuDNN does not document these sizes: a
// measured global table, not a per-model constant.
namespace {

struct WorkspaceFit {
  double constant, gates, units_layers, units_dirs, states;
};

WorkspaceFit FitOf(const std::string& mode, bool train) {
  if (mode == op_names::kLSTM) {
    return train ? WorkspaceFit{1.806e7, -0.0123, 1.594, 2.933, 26.79}
                 : WorkspaceFit{1.686e7, 0.205, 0.8475, 2.508, 41.02};
  }
  if (mode == op_names::kGRU) {
    return train ? WorkspaceFit{2.108e7, -0.1927, 1.334, 1.719, 79.84}
                 : WorkspaceFit{2.002e7, 0.4108, 0.7554, 0.602, 72.15};
  }
  return train ? WorkspaceFit{2.127e7, -0.8968, 0.1613, 5.305, 3.054}
               : WorkspaceFit{1.908e7, -0.7562, -0.2054, 3.702, 15.28};
}

int64_t RnnWeightBytes(const RnnCall& c) {
  const int64_t gates = c.mode == op_names::kLSTM ? 4 : (c.mode == op_names::kGRU ? 3 : 1);
  const int64_t first = SatProduct({gates, c.hidden, SatAdd(SatAdd(c.input, c.hidden), 2), c.dirs});
  const int64_t later =
      SatProduct({c.layers - 1, gates, c.hidden,
                  SatAdd(SatAdd(SatMulNonNeg(c.dirs, c.hidden), c.hidden), 2), c.dirs});
  return SatMulNonNeg(SatAdd(first, later), ElemBytes(c.dtype));
}

}  // namespace

int64_t RnnFittedWorkspaceBytes(const RnnCall& c, bool train) {
  const int64_t gates = c.mode == op_names::kLSTM ? 4 : (c.mode == op_names::kGRU ? 3 : 1);
  const double e = static_cast<double>(ElemBytes(c.dtype));
  const double T = static_cast<double>(c.seq);
  const double B = static_cast<double>(c.batch);
  const double H = static_cast<double>(c.hidden);
  const double d = static_cast<double>(c.dirs);
  const double L = static_cast<double>(c.layers);
  const WorkspaceFit f = FitOf(c.mode, train);
  const double terms = f.constant + f.gates * std::min(T, 256.0) * B * gates * H * d * d * 4 +
                       f.units_layers * T * B * H * d * L * e +
                       f.units_dirs * T * B * H * d * d * e + f.states * B * H * d * L * 4;
  const int64_t weights = RnnWeightBytes(c);
  if (!(terms > 0)) return weights;
  if (terms > 4e18) return SatAdd(weights, int64_t{4000000000000000000});
  return SatAdd(weights, static_cast<int64_t>(terms));
}

RnnAlgo RnnAlgoOf(const RnnCall& c, bool forward) {
  const bool rnn = c.mode != op_names::kLSTM && c.mode != op_names::kGRU;
  const int64_t small_h = forward ? (rnn ? 384 : 192) : (rnn ? 256 : 128);
  if (c.hidden <= small_h) return RnnAlgo::kPersistStaticSmallH;
  if (c.dtype == DType::kFloat16 && c.layers == 1 && c.dirs == 1 && c.hidden <= 1024 &&
      c.hidden % 128 == 0 && c.input % 128 == 0 && c.mode != op_names::kGRU && c.batch % 8 == 0 &&
      c.batch <= 128 && (!rnn || c.batch < 96 || c.hidden < 896)) {
    return RnnAlgo::kPersistStatic;
  }
  return RnnAlgo::kStandard;
}

namespace {

// The workspace cuDNN 9.19's standard algorithm asks for, as measured on the
// H200 (bench/results/cudnn_rnn_probe_h200.jsonl, the terms read one at a
// time; checked on bench/results/cudnn_rnn_mechanism_h200.jsonl; both with
// bench/cudnn_rnn_fit.py --derived). PyTorch sets CUDNN_DEFAULT_MATH,
// float math precision and padded IO (cuDNN's API log of its calls); the
// sizes do not depend on the TF32 switch. With T steps,
// batch B, input I, hidden H, L layers, d directions, g gates (LSTM 4, GRU
// 3, RNN 1), e bytes per element, W the weight space (g H (in + H + 2) per
// layer and direction, in = I for the first layer, d H after):
//   W                              (a weight-sized buffer)
// + 8 MiB per layer and direction  (constant: independent of T, B, H, I)
// + T B I e                        (the input)
// + d (g Tc + T) B H e             (per direction: the input projections of
//                                   all steps, Tc = min(T, 256) for one
//                                   direction, else T, and one output row
//                                   per step)
// + (d - 1) 4 T B H e              (bidirectional: the two halves of the
//                                   concatenated outputs, twice)
// + L (d (a B - b) + (d - 1) 4 B) H e   with (a, b) = LSTM (10, 8), GRU
//                                   (5, 6), RNN (3, 2): per-layer states
// + 2 roundup(4 B, 16) + 256       (two int32 arrays of B, and 256 B)
// Inference: derived from the 107 standard-algorithm calls of the first
// probe (106 exact, one 16 B off), then checked on 384 calls of other shapes
// (bench/cudnn_rnn_probe.py --grid mechanism): all exact once one-layer
// calls were seen to project 256 steps at a time too. Training adds, for
// LSTM and GRU with I <= H, one direction: one buffer, the larger of T B H e
// with dropout and T B I e for a one-layer GRU; two directions: T B I e for
// a GRU of several layers, nothing for an LSTM. On the 362 covered training
// calls of both probes: 338 exact, none over, the worst 1.3 % under (GRUs of
// several layers without dropout). Training calls outside that (I > H, one
// direction past 256 steps, vanilla RNN, one 16-bit layer of one direction)
// and the persistent algorithms have sizes this does not derive: the fit
// sizes them instead.
struct PerLayer {
  int64_t a, b;
};

PerLayer PerLayerOf(const std::string& mode) {
  if (mode == op_names::kLSTM) return {10, 8};
  if (mode == op_names::kGRU) return {5, 6};
  return {3, 2};
}

int64_t GatesOf(const std::string& mode) {
  return mode == op_names::kLSTM ? 4 : (mode == op_names::kGRU ? 3 : 1);
}

// Whether the derivation covers the call in this mode.
bool DerivedCovers(const RnnCall& c, bool train) {
  if (!train) return true;
  if (c.mode != op_names::kLSTM && c.mode != op_names::kGRU) return false;
  if (c.input > c.hidden) return false;
  // One direction past 256 steps: training projects more steps at a time.
  if (c.dirs == 1 && c.seq > 256) return false;
  return !(c.layers == 1 && c.dirs == 1 && c.dtype != DType::kFloat);
}

int64_t DerivedWorkspaceBytes(const RnnCall& c, bool train) {
  const int64_t e = ElemBytes(c.dtype);
  const int64_t g = GatesOf(c.mode);
  const PerLayer pl = PerLayerOf(c.mode);
  const int64_t L = c.layers, d = c.dirs, T = c.seq, B = c.batch, H = c.hidden;
  const int64_t tc = d == 1 ? std::min<int64_t>(T, 256) : T;
  const int64_t bh = SatProduct({B, H, e});
  int64_t bytes = RnnWeightBytes(c);
  bytes = SatAdd(bytes, SatProduct({8 << 20, L, d}));
  bytes = SatAdd(bytes, SatProduct({T, B, c.input, e}));
  bytes = SatAdd(bytes, SatProduct({d, SatAdd(SatMulNonNeg(g, tc), T), bh}));
  bytes = SatAdd(bytes, SatProduct({d - 1, 4, T, bh}));
  // L (d (a B - b) + (d - 1) 4 B) H e, the negative part subtracted last
  // (it is smaller than the rest: a B > b for B >= 2, and the GRU's 5 B - 6
  // at B = 1 is offset by the terms above).
  const int64_t per_layer_b = SatAdd(SatMulNonNeg(d, pl.a), SatMulNonNeg(d - 1, 4));
  bytes = SatAdd(bytes, SatProduct({L, per_layer_b, B, H, e}));
  if (bytes < INT64_MAX) bytes -= SatProduct({L, d, pl.b, H, e});
  bytes = SatAdd(bytes, SatAdd(SatMulNonNeg(2, (SatMulNonNeg(4, B) + 15) / 16 * 16), 256));
  if (train) {
    if (d == 1) {
      // One buffer: the dropout mask's output, or a one-layer GRU's input.
      const int64_t drop = c.dropout ? SatMulNonNeg(T, bh) : 0;
      const int64_t gru_input =
          c.mode == op_names::kGRU && L == 1 ? SatProduct({T, B, c.input, e}) : 0;
      bytes = SatAdd(bytes, std::max(drop, gru_input));
    }
    if (d == 2 && L >= 2 && c.mode == op_names::kGRU) {
      bytes = SatAdd(bytes, SatProduct({T, B, c.input, e}));
    }
  }
  return bytes;
}

RnnWorkspace WorkspaceOf(const RnnCall& c, bool train, bool forward) {
  if (RnnAlgoOf(c, forward) == RnnAlgo::kStandard && DerivedCovers(c, train)) {
    return {DerivedWorkspaceBytes(c, train), true};
  }
  return {RnnFittedWorkspaceBytes(c, train), false};
}

}  // namespace

RnnWorkspace RnnForwardWorkspace(const RnnCall& c, bool train) {
  return WorkspaceOf(c, train, true);
}

RnnWorkspace RnnBackwardWorkspace(const RnnCall& c) { return WorkspaceOf(c, true, false); }

// Measured on the H200 with torch 2.11: _cudnn_init_dropout_state's size
// (bench/results/cudnn_rnn_probe_h200.jsonl, first line), the 6,488,064
// bytes the first nn.LSTM/nn.GRU call with dropout allocates and never frees
// in bench/results/traces/families/lstm_lm_train_8_fp32.json.gz. It depends
// on the GPU (cuDNN keeps RNG states per thread it launches).
int64_t RnnDropoutStateBytes() { return 6488064; }

}  // namespace memplan
