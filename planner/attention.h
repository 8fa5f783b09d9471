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
  /// The mask is a causal pattern computed from shapes and constants alone
  /// (position comparisons or a triangle; no input data, no parameter),
  /// which Hugging Face decoders pass to SDPA as is_causal=True with no mask
  /// when they run (the export materialises it because it traces).
  bool causal_mask = false;
  /// The mask is computed from shapes and constants alone with no position
  /// comparison among its ops: the all-true padding mask of a model run
  /// without an attention mask, which Hugging Face models pass to SDPA as no
  /// mask at all when they run (transformers' masking_utils,
  /// _ignore_bidirectional_mask_sdpa: skipped unless tracing; H200 traces of
  /// wav2vec2_cls and bert_base allocate none), or a causal table the
  /// exporter folded into a constant (gpt2.onnx, [1, 1, 512, 512]), which
  /// they run as is_causal, or T5's zero cross-attention bias plus such a
  /// padding mask, which they pass as none (t5_encdec's bf16 trace: flash).
  /// Planned as no mask tensor.
  bool full_mask = false;
  /// The mask is Where(cond, bias, fill) with `cond` computed from shapes and
  /// constants alone and no position comparison: T5's position bias under
  /// the all-true padding mask of a model run without an attention mask.
  /// Hugging Face models skip that padding mask when they run (see
  /// full_mask) and pass the bias alone, un-expanded, as the SDPA mask
  /// (t5_encdec_c's amp_bf16 trace: no [B, H, S, S] tensor before the
  /// call). The bias, or -1.
  int bias_mask = -1;
  /// k and v before a head repeat (Unsqueeze-Expand-Reshape, HF repeat_kv),
  /// [B, kv_heads, S, D]; -1 when they are not repeated.
  int k_kv = -1;
  int v_kv = -1;
};

/// True when tensor `t` of `g` is computed from graph-input shapes and
/// constants only (no graph input's values, no float initializer);
/// *triangular (optional) says whether a comparison or Trilu is among them.
[[nodiscard]] bool DependsOnShapesOnly(const Graph& g, int t, bool* triangular = nullptr);

/// The bias b when tensor `t` of `g` is Where(cond, b, fill) with `cond`
/// all true by construction (shapes and constants only, no position
/// comparison) and `fill` a constant: what a model that skips an all-true
/// padding mask gets instead of `t` (AttentionRegion::bias_mask); else -1.
[[nodiscard]] int BiasUnderFullMask(const Graph& g, int t);

/// The strides PyTorch gives tensor `t` of `g` when it runs: views
/// (Transpose, Reshape, Unsqueeze, Squeeze, Flatten, Expand) and elementwise
/// ops (TensorIterator keeps its inputs' layout) followed back from it;
/// other ops write contiguous outputs.
[[nodiscard]] std::vector<int64_t> RuntimeStrides(const Graph& g, int t);

/// The [B, kv_heads, S, D] tensor that `t` ([B, heads, S, D]) repeats along
/// its head dim (t = reshape(expand(unsqueeze(x, 2)))), or -1.
[[nodiscard]] int UnrepeatedHeads(const Graph& g, int t);

/// Finds the attention blocks of `g` (shapes inferred). A candidate whose
/// inner tensors are used outside the block is left alone.
std::vector<AttentionRegion> FindAttentionRegions(const Graph& g);

}  // namespace memplan

#endif  // MEMPLAN_PLANNER_ATTENTION_H_
