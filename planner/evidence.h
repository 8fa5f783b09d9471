#ifndef MEMPLAN_PLANNER_EVIDENCE_H_
#define MEMPLAN_PLANNER_EVIDENCE_H_

// Which of the planner's rules rest on measurements in the project.
//
// Every byte of a plan is allocated by a rule: an op's rule (its outputs,
// what it keeps for backward, its gradients) or a PyTorch mechanism (the
// caching of autocast casts, cuDNN workspaces, the loss, the optimizer
// state, ...). A rule is backed for a configuration (training or inference,
// precision) when the project holds PyTorch measurements of models that use
// it in that configuration and the planner matches them: the calibration rows
// (bench/calibration/*.jsonl) and the family configurations whose plans match
// their rows (kEvidenceAllocatedTolerance). bench/evidence_check keeps the
// tables in evidence.cc and ops/op_evidence.cc equal to what those rows show.

#include <cstdint>
#include <string>

#include "planner/options.h"

namespace memplan {

class OpTable;

/// The measurements that back one rule, and for which configurations.
struct Evidence {
  const char* source = nullptr;  ///< Models and files; nullptr: never measured.
  uint8_t train = 0;             ///< Bit PrecisionBit(p) per precision measured training.
  uint8_t inference = 0;         ///< The same, measured in inference.
  /// Also measured, and matched, where one of the op's tensors has 2^31
  /// elements or more (kOverInt32Suffix).
  bool over_int32 = false;
  [[nodiscard]] bool Covers(Mode mode, Precision p) const;
};

/// A configuration measured beyond the calibration (the family rows,
/// bench/results/families_h200.jsonl) backs the rules its plan uses only when
/// the plan matches each of its rows: planned allocated peak within this
/// share of the measured one, every batch, first and steady step. 95 % of the
/// calibration's 393 training rows are within 2.9 % (bench/results/accuracy.txt).
inline constexpr double kEvidenceAllocatedTolerance = 0.03;

/// Elements above which PyTorch CUDA kernels that index in 32 bits fail
/// (they check numel < INT_MAX: aten/src/ATen/native/cuda/UpSample*.cu).
constexpr int64_t kInt32IndexElements = (1LL << 31) - 1;

/// A tensor of 2^31 elements or more (over kInt32IndexElements)
/// leaves 32-bit indexing: PyTorch's kernels split or switch paths and cuDNN
/// picks other engines there. The rule of an op with such a tensor is its own ("Conv" -> "Conv over
/// 2^31 elements"), backed only by Evidence::over_int32: wav2vec2_cls at
/// batch 3641 (amp_bf16, [3641, 512, 3199] feature maps) ran out of memory on
/// the H200 where the plan, exact within 1.1 % at batch 1400, had 129 GiB
/// reserved (bench/results/advise_fit).
inline constexpr char kOverInt32Suffix[] = " over 2^31 elements";

/// The bit of `p` in Evidence::train / Evidence::inference.
[[nodiscard]] constexpr uint8_t PrecisionBit(Precision p) {
  return static_cast<uint8_t>(1u << static_cast<int>(p));
}

/// PyTorch mechanisms that allocate memory outside any one op's rule.
enum class Mechanism {
  kParameters,           ///< model.cuda(): parameters and buffers.
  kModelCast,            ///< model.half() / .to(bfloat16) after loading in fp32.
  kInputBatch,           ///< The batch copied to the device.
  kAutocastCast,         ///< Autocast's cast of an activation for one op.
  kAutocastWeightCache,  ///< Autocast's half copy of a parameter, kept to the forward's end.
  kContiguousCopy,       ///< Copies for non-viewable reshapes and contiguous-only kernels.
  kLinearBias,           ///< MatMul + bias Add as one addmm.
  kCublasWorkspace,      ///< cuBLAS workspace per handle (forward, autograd thread).
  kConvWorkspace,        ///< cuDNN convolution workspaces (NHWC copies, split-K sums).
  kRnnWorkspace,         ///< cuDNN RNN workspaces of the standard algorithm (derived).
  kRnnWorkspaceFitted,   ///< Other cuDNN RNN workspaces (a least-squares fit, not a derivation).
  kSdpa,                 ///< Fused scaled_dot_product_attention (MHA, mask without grad).
  kSdpaGqa,              ///< Fused attention with fewer key/value heads than query heads.
  kSdpaMaskGrad,         ///< Fused attention with a float mask that requires grad.
  kCrossEntropy,         ///< Cross entropy over the last dim of [B, C] / [B, S, V].
  kCrossEntropyPixels,   ///< Cross entropy over logits of rank 4 or more.
  kMseLoss,              ///< MSE against a target of the output's shape.
  kParameterGradients,   ///< .grad of each parameter.
  kAdamState,            ///< Adam / AdamW exp_avg, exp_avg_sq.
  kMomentumState,        ///< SGD momentum buffers.
  kForeachTemporaries,   ///< foreach Adam's exp_avg_sq.sqrt() for the whole group.
  kCheckpointRecompute,  ///< torch.utils.checkpoint: the segment's forward run again.
  kModuleCallHolding,    ///< A module call's argument tuple holds its inputs.
  kPythonLocals,         ///< A Python local of a running forward holds its value.
  kChannelsLast,         ///< Channels-last tensors run as they are (NHWC kernels, workspaces).
  kAllocator,            ///< The caching allocator model (segments, rounding).
};
constexpr int kNumMechanisms = 26;

[[nodiscard]] const char* MechanismName(Mechanism m);
/// What backs a mechanism (the table in evidence.cc).
[[nodiscard]] const Evidence& MechanismEvidence(Mechanism m);
/// What backs the rule of ONNX op `op_type` (its OpDef's evidence).
[[nodiscard]] Evidence OpEvidence(const std::string& op_type);
/// Sets OpDef::evidence of every op with measurements (planner/ops/op_evidence.cc).
void AttachOpEvidence(OpTable* t);
/// What backs an op the schedule synthesizes without an OpDef of its own
/// (SDPA's math path: CausalMask, RepeatInterleave).
[[nodiscard]] Evidence SynthesizedOpEvidence(const std::string& op_type);

/// Precision bits for the tables.
namespace evidence_sources {
inline constexpr uint8_t kFp32 = PrecisionBit(Precision::kFp32);
inline constexpr uint8_t kAmpBf16 = PrecisionBit(Precision::kAmpBf16);
inline constexpr uint8_t kAmpFp16 = PrecisionBit(Precision::kAmpFp16);
inline constexpr uint8_t kBf16 = PrecisionBit(Precision::kBf16);
inline constexpr uint8_t kFp16 = PrecisionBit(Precision::kFp16);

// Sources: the calibration rows (bench/calibration/*.jsonl) and the family
// rows (bench/results/families_h200.jsonl), PyTorch 2.11 on an H200, by the
// models they measured; bench/evidence_check derives the bits of every entry
// from the rows and fails when an entry claims more than they show or a
// measured configuration uses a rule without its entry.
}  // namespace evidence_sources

}  // namespace memplan

#endif  // MEMPLAN_PLANNER_EVIDENCE_H_
