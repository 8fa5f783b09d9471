#ifndef MEMPLAN_PLANNER_PARAMS_H_
#define MEMPLAN_PLANNER_PARAMS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "planner/graph.h"

namespace memplan {

/// What an initializer is in PyTorch terms.
enum class InitRole {
  kParameter,  ///< Trainable: gets a gradient and optimizer state.
  kBuffer,     ///< Float, not trained: running statistics, masks, tables.
  kConstant,   ///< Integer/bool data or scalars: shape math, indices.
};

/// Classifies every initializer of `g` (indexed like g.tensors; activations
/// get kConstant). Rule: a float initializer with more than one element is a
/// parameter when it feeds a weight slot of a compute op (Conv/ConvTranspose
/// W and B, Gemm and MatMul operands, the scale and bias of the
/// normalisations, an embedding table read by Gather, RNN weights, PRelu
/// slope) through view/cast ops (Reshape, Transpose, Identity, Cast, CastLike,
/// Unsqueeze, Squeeze, Expand, Flatten) and value-rearranging ops (Slice,
/// Split, Concat: the exporters' gate reordering of LSTM/GRU weights), or an
/// elementwise/Concat input through view/cast ops only (learned positional
/// embeddings, class tokens). BatchNormalization's running mean and variance
/// are buffers; so is any float initializer that reaches no such slot (a
/// sliced rotary table multiplied in). Integer, bool and one-element tensors
/// are constants. An initializer the exporter recorded as a module buffer
/// (Tensor::exported_buffer: a rotary embedding's inv_freq) is a buffer.
/// Linear in nodes and edges.
std::vector<InitRole> ClassifyInitializers(const Graph& g);

/// Totals over the initializers.
struct ParamSummary {
  int64_t parameter_count = 0;
  int64_t parameter_bytes = 0;
  int64_t buffer_count = 0;
  int64_t buffer_bytes = 0;
  int64_t constant_bytes = 0;
  std::vector<int> parameters;  ///< Tensor indices, in initializer order.
  std::vector<int> buffers;
};

/// Sums the classification (sizes from the tensors' inferred shapes).
ParamSummary SummarizeParams(const Graph& g, const std::vector<InitRole>& roles);

}  // namespace memplan

#endif  // MEMPLAN_PLANNER_PARAMS_H_
