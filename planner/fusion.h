#ifndef MEMPLAN_PLANNER_FUSION_H_
#define MEMPLAN_PLANNER_FUSION_H_

#include <set>
#include <string>
#include <vector>

#include "planner/graph.h"

namespace memplan {

/// A group of exported nodes that PyTorch runs as one op. Exporters without
/// a native op decompose it (opset < 20 writes F.gelu as
/// x * 0.5 * (1 + erf(x / sqrt(2)))); planning the pieces would keep every
/// intermediate for backward, which PyTorch does not.
struct FusedRegion {
  std::string op_type;     ///< The op PyTorch runs ("Gelu", "Swish", "Glu", "GroupNormalization",
                           ///< "WeightNorm").
  std::vector<int> nodes;  ///< Nodes replaced.
  int last_node = -1;      ///< Where the fused op is scheduled.
  int input = -1;          ///< Tensor id of the op's (data) input.
  int output = -1;         ///< Tensor id of its output.
  /// GroupNormalization: the weight and bias initializers (-1 without
  /// affine) and the number of groups; WeightNorm: weight is the gain g.
  int weight = -1;
  int bias = -1;
  int64_t groups = 0;
};

/// Finds erf-form GELU, x * sigmoid(x) (SiLU), a * sigmoid(b) of the two
/// halves of one Split (GLU), group norm written as
/// Reshape [N, G, -1] -> InstanceNormalization (unit scale, zero bias) ->
/// Reshape back -> Mul weight -> Add bias (both exporters' decomposition of
/// F.group_norm) and weight norm written as ReduceL2(v) -> Div(v, .) ->
/// Mul(., g) on two parameters (WeightNorm: input v, weight g), whose inner
/// tensors are used only inside the pattern.
[[nodiscard]] std::vector<FusedRegion> FindFusedRegions(const Graph& g);

/// The nodes of RMSNorm written as ops (Hugging Face's LlamaRMSNorm,
/// T5LayerNorm): Pow(x, 2) -> ReduceMean -> [Add eps] -> Sqrt -> Reciprocal
/// (or Rsqrt) -> Mul(x, .) -> Mul(weight, .).
struct RmsNormOps {
  std::set<int> mean_square_pows;  ///< The Pow(x, 2) nodes.
  std::set<int> normalize_muls;    ///< The Mul(x, rsqrt(...)) nodes.
  std::set<int> weight_muls;       ///< The Mul by the weight.
  /// Normalize muls that read the half-precision x although the Pow squares
  /// an fp32 copy: the Pow's line upcasts inline
  /// (`x.to(torch.float32).pow(2)`, T5LayerNorm), where LlamaRMSNorm rebinds
  /// x to the copy first (`x = x.to(torch.float32)`) and both read it.
  std::set<int> half_input_muls;
};
[[nodiscard]] RmsNormOps FindRmsNormOps(const Graph& g);

}  // namespace memplan

#endif  // MEMPLAN_PLANNER_FUSION_H_
