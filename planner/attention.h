#ifndef MEMPLAN_PLANNER_ATTENTION_H_
#define MEMPLAN_PLANNER_ATTENTION_H_

#include <vector>

#include "planner/graph.h"

namespace memplan {

/// An attention block as exporters write scaled_dot_product_attention:
/// MatMul(q, k^T) -> [scale] -> [mask Add/Where] -> Softmax -> [NaN guard]
/// -> [Dropout] -> MatMul(., v). Tensor ids refer to the graph.
struct AttentionRegion {
  std::vector<int> nodes;  ///< Every node replaced by the attention op.
  int last_node = -1;      ///< The final MatMul.
  int q = -1;              ///< [.., Sq, D] before any scaling.
  int k = -1;              ///< [.., Sk, D], or [.., D, Sk] when k_transposed.
  int v = -1;              ///< [.., Sk, Dv].
  int mask = -1;           ///< Additive/boolean mask entering the block, or -1.
  int out = -1;            ///< The final MatMul's output.
  bool k_transposed = false;
  bool scale_before_matmul = false;
  double dropout = 0.0;  ///< Dropout probability inside the block.
};

/// Finds the attention blocks of `g` (shapes inferred). A candidate whose
/// inner tensors are used outside the block is left alone.
std::vector<AttentionRegion> FindAttentionRegions(const Graph& g);

}  // namespace memplan

#endif  // MEMPLAN_PLANNER_ATTENTION_H_
