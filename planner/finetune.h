#ifndef MEMPLAN_PLANNER_FINETUNE_H_
#define MEMPLAN_PLANNER_FINETUNE_H_

/// Fine-tuning: which parameters train (--freeze, --train-only), the Linear
/// layers that get LoRA adapters (--lora, as PEFT's lora.Linear), and how
/// the frozen Linear weights are stored (--weights: int8, nf4, int4, fp8).

#include <cstdint>
#include <string>
#include <vector>

#include "planner/graph.h"
#include "planner/options.h"
#include "planner/params.h"
#include "planner/status.h"

namespace memplan {

/// A Linear layer as the exporters write nn.Linear: MatMul(x, Transpose(W))
/// or Gemm(x, W, transB=1), optionally followed by Add(bias).
struct LinearLayer {
  int matmul = -1;     ///< The MatMul/Gemm node.
  int weight = -1;     ///< The weight initializer (tensor index).
  int end_node = -1;   ///< The node writing the layer's output (bias Add or matmul).
  std::string module;  ///< The weight's name without ".weight".
  int64_t in_features = 0;
  int64_t out_features = 0;
  /// The output layer (its output is the first graph output, through views):
  /// transformers keeps it unquantized (get_keys_to_not_convert).
  bool head = false;
};

/// Every Linear layer of `g`, in node order.
std::vector<LinearLayer> FindLinearLayers(const Graph& g, const std::vector<InitRole>& roles);

/// What fine-tuning changes, per graph tensor.
struct FineTuneSetup {
  std::vector<bool> frozen;       ///< Parameter kept fixed (no grad, no state).
  std::vector<bool> quantized;    ///< Stored in options.weights.
  std::vector<LinearLayer> lora;  ///< Layers that get adapters.
};

/// Resolves the options against `g`. Patterns (comma-separated) are module
/// paths or parameter names as `inspect` prints them (m.model.layers.0 or its
/// dotted suffix model.layers.0: every parameter below it), else regular
/// expressions searched in the parameter names (as `re.search` on PyTorch's
/// named_parameters). Errors: a pattern matching no parameter, a bad regex,
/// a LoRA target matching no Linear layer, r < 1, --weights other than native
/// while training with no frozen Linear weight.
[[nodiscard]] Result<FineTuneSetup> ResolveFineTune(const Graph& g,
                                                    const std::vector<InitRole>& roles,
                                                    const PlanOptions& options);
/// The same, with `linears` = FindLinearLayers(g, roles) found before.
[[nodiscard]] Result<FineTuneSetup> ResolveFineTune(const Graph& g,
                                                    const std::vector<InitRole>& roles,
                                                    const std::vector<LinearLayer>& linears,
                                                    const PlanOptions& o);

/// A quantized weight as it sits on the GPU: the packed data and the
/// quantization state's tensors (each a separate allocation).
struct QuantizedWeight {
  int64_t data_bytes = 0;
  std::vector<int64_t> state_bytes;
  /// What one dequantization allocates besides the weight-sized output: the
  /// absmax unpacked to fp32 (double quantization), freed after it.
  int64_t dequant_scratch_bytes = 0;
};

/// The storage of a [rows, cols] Linear weight (rows = out_features) in
/// format `f` (not kNative). NF4 (bitsandbytes Params4bit, blocksize 64,
/// compress_statistics=True): ceil(n/2) bytes of data, an 8-bit absmax per
/// block, nested fp32 absmax per 256 blocks, the fp32 offset, the NF4 code
/// (16 fp32) and the nested code (256 fp32) of its QuantState. int4: the
/// same packing with the fp32 absmax kept (no double quantization). int8
/// (Int8Params): n bytes and an fp32 scale per row. fp8: n bytes and one fp32
/// scale.
QuantizedWeight QuantizedWeightBytes(WeightFormat f, int64_t rows, int64_t cols);

/// What bitsandbytes' LLM.int8 matmul (MatMul8bitLt, Linear8bitLt with
/// has_fp16_weights=False) allocates beyond its output, for an input of
/// `a_numel` elements (`a_is_fp16`: already fp16) over `in_features` and an
/// output of `out_features` columns and `out_bytes` bytes.
struct Int8MatmulBytes {
  /// Inside the forward: the fp16 copy of A, its int8 rows CA and their fp32
  /// scales, then the int32 product beside the output.
  int64_t forward_workspace = 0;
  /// Inside backward for grad_A: the weight dequantized to A's dtype and the
  /// [out, 1] fp32 scale it is multiplied by.
  int64_t backward_workspace = 0;
};
[[nodiscard]] Int8MatmulBytes Int8MatmulWorkspaces(int64_t a_numel, int64_t in_features,
                                                   int64_t out_features, bool a_is_fp16,
                                                   int64_t a_elem_bytes, int64_t out_bytes);

/// The parameters' bytes when the Linear weights (the output layer aside)
/// are stored in `f` and every other parameter takes `other_elem_bytes` per
/// element (2: a bf16 model, as QLoRA loads it); kNative: every parameter at
/// `other_elem_bytes`. Allocator rounding not included.
int64_t ParameterBytesAs(const Graph& g, const std::vector<InitRole>& roles, WeightFormat f,
                         int64_t other_elem_bytes);

/// Parses "r=16,alpha=32,dropout=0.05,targets=q_proj,v_proj" (targets take
/// the rest of the list; `;`-free). Errors name the bad key or value.
[[nodiscard]] Result<LoraOptions> ParseLora(const std::string& spec);

}  // namespace memplan

#endif  // MEMPLAN_PLANNER_FINETUNE_H_
