#ifndef MEMPLAN_PLANNER_RNN_H_
#define MEMPLAN_PLANNER_RNN_H_
/// Recurrent layers as PyTorch runs them on CUDA: one cuDNN call per
/// nn.LSTM / nn.GRU / nn.RNN module (all layers and directions), and what
/// that call allocates (aten/src/ATen/native/cudnn/RNN.cpp).

#include <cstdint>
#include <string>
#include <vector>

#include "planner/dtype.h"
#include "planner/graph.h"

namespace memplan {

/// A stack of ONNX LSTM/GRU/RNN nodes that PyTorch runs as one cuDNN call.
/// Exporters write a multi-layer module as one node per layer, joined by
/// Transpose/Reshape and the between-layer Dropout, each layer's weights
/// reordered by Slice/Concat/Unsqueeze and its initial state sliced from one
/// [layers * dirs, B, H] tensor. Tensor ids refer to the graph.
struct RnnRegion {
  std::vector<int> nodes;   ///< Every node the call replaces.
  std::vector<int> layers;  ///< The recurrent nodes, first layer first.
  int input = -1;           ///< X of the first layer.
  int output = -1;          ///< Y of the last layer (-1 when not exported).
  /// Y_h / Y_c of any layer that the rest of the graph reads.
  std::vector<int> state_outputs;
  /// Initial hidden/cell states the graph computes (an encoder's state), not
  /// zeros: inputs of the call.
  std::vector<int> states;
  /// What feeds W, R and B: initializers behind the gate reordering, each
  /// once, in first-use order (or the tensor itself when no initializer is
  /// behind it).
  std::vector<int> weights;
  bool dropout = false;  ///< Dropout between layers (cuDNN's dropout states).
};

/// Finds the recurrent calls of `g` (shapes inferred). Layers are grouped
/// when one's Y reaches the next one's X only through view and dropout ops
/// inside the same module call; a tensor read outside a call ends it there.
std::vector<RnnRegion> FindRnnRegions(const Graph& g);

/// The sizes of one cuDNN RNN call.
struct RnnCall {
  std::string mode;  ///< "LSTM", "GRU" or "RNN".
  int64_t layers = 1;
  int64_t dirs = 1;
  int64_t seq = 0;
  int64_t batch = 0;
  int64_t input = 0;
  int64_t hidden = 0;
  DType dtype = DType::kFloat;
  bool dropout = false;
};

/// Bytes of the reserve space cuDNN fills in a training forward and reads
/// in backward (cudnnGetRNNTempSpaceSizes, CUDNN_FWD_MODE_TRAINING).
[[nodiscard]] int64_t RnnReserveBytes(const RnnCall& c);

/// cuDNN's RNN algorithms PyTorch picks between (get_algo in
/// aten/src/ATen/native/cudnn/RNN.cpp, unpacked input).
enum class RnnAlgo {
  kStandard,
  kPersistStaticSmallH,  ///< Hidden <= 192 (LSTM/GRU) / 384 (RNN) forward, 128 / 256 backward.
  kPersistStatic,        ///< fp16, one layer and direction, sizes multiples of 128, batch <= 128.
};
/// The algorithm of the forward (`forward`) or the backward calls on the
/// H200 (compute capability 9.0, 132 SMs: the persistent-static branch for
/// devices of major >= 8 with >= 98 SMs).
[[nodiscard]] RnnAlgo RnnAlgoOf(const RnnCall& c, bool forward);

/// A workspace and the rule that sized it.
struct RnnWorkspace {
  int64_t bytes = 0;
  /// From cuDNN's standard algorithm as derived (RnnForwardWorkspace);
  /// false: the least-squares fit (other algorithms, shapes the derivation
  /// does not cover).
  bool derived = false;
};
/// The workspace of the forward call (cudnnGetRNNTempSpaceSizes in the
/// training or inference mode; PyTorch allocates exactly that).
[[nodiscard]] RnnWorkspace RnnForwardWorkspace(const RnnCall& c, bool train);
/// The workspace of each backward call (data, then weights: one size, the
/// training mode's, for the backward algorithm).
[[nodiscard]] RnnWorkspace RnnBackwardWorkspace(const RnnCall& c);
/// The least-squares fit over the probed calls (bench/cudnn_rnn_fit.py).
[[nodiscard]] int64_t RnnFittedWorkspaceBytes(const RnnCall& c, bool train);
/// cuDNN's dropout random states, allocated at the first training call with
/// dropout and cached by PyTorch for the process (get_dropout_state).
[[nodiscard]] int64_t RnnDropoutStateBytes();

}  // namespace memplan

#endif  // MEMPLAN_PLANNER_RNN_H_
