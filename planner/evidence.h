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
// (bench/calibration/*.jsonl). bench/evidence_check keeps the tables in
// evidence.cc equal to what those rows show.

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
  [[nodiscard]] bool Covers(Mode mode, Precision p) const;
};

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
  kAllocator,            ///< The caching allocator model (segments, rounding).
};
constexpr int kNumMechanisms = 22;

[[nodiscard]] const char* MechanismName(Mechanism m);
/// What backs a mechanism (the table in evidence.cc).
[[nodiscard]] const Evidence& MechanismEvidence(Mechanism m);
/// What backs the rule of ONNX op `op_type` (its OpDef's evidence).
[[nodiscard]] Evidence OpEvidence(const std::string& op_type);
/// Sets OpDef::evidence of every op with measurements (planner/ops/op_evidence.cc).
void AttachOpEvidence(OpTable* t);

/// Precision bits and the names of the measurements the tables cite.
namespace evidence_sources {
inline constexpr uint8_t kFp32 = PrecisionBit(Precision::kFp32);
inline constexpr uint8_t kAmpBf16 = PrecisionBit(Precision::kAmpBf16);
inline constexpr uint8_t kAmpFp16 = PrecisionBit(Precision::kAmpFp16);
inline constexpr uint8_t kBf16 = PrecisionBit(Precision::kBf16);
inline constexpr uint8_t kFp16 = PrecisionBit(Precision::kFp16);

// The calibration rows (bench/calibration/*.jsonl, PyTorch 2.11 on an H200)
// by the models they measured; bench/evidence_check derives the bits below
// from the rows and fails when an entry claims more than they show or a
// measured configuration uses a rule without its entry.
inline constexpr char kAllModels[] =
    "calibration rows of bert_base, gpt2, mobilenet_v2, resnet18, resnet50, vit_b_16";
inline constexpr char kGpt2[] = "calibration rows of gpt2";
inline constexpr char kCnns[] = "calibration rows of mobilenet_v2, resnet18, resnet50";
inline constexpr char kBertGpt2[] = "calibration rows of bert_base, gpt2";
inline constexpr char kMobilenet[] = "calibration rows of mobilenet_v2";
inline constexpr char kGpt2Vit[] = "calibration rows of gpt2, vit_b_16";
inline constexpr char kMobilenetResnet18Resnet50Vit[] =
    "calibration rows of mobilenet_v2, resnet18, resnet50, vit_b_16";
inline constexpr char kBertGpt2Mobilenet[] = "calibration rows of bert_base, gpt2, mobilenet_v2";
inline constexpr char kMobilenetResnet50[] = "calibration rows of mobilenet_v2, resnet50";
inline constexpr char kBertGpt2Vit[] = "calibration rows of bert_base, gpt2, vit_b_16";
inline constexpr char kBert[] = "calibration rows of bert_base";
inline constexpr char kBertVit[] = "calibration rows of bert_base, vit_b_16";
inline constexpr char kResnet18Resnet50[] = "calibration rows of resnet18, resnet50";
inline constexpr char kVit[] = "calibration rows of vit_b_16";
inline constexpr char kBertGpt2Resnet50[] = "calibration rows of bert_base, gpt2, resnet50";

// Mechanisms measured beyond the calibration rows as well.
inline constexpr char kConvs[] =
    "calibration rows of mobilenet_v2, resnet18, resnet50, vit_b_16; 522 convolution shapes "
    "(bench/results/cudnn_ws_grid_h200.jsonl, fp32 and bf16)";
inline constexpr char kAllocatorTraces[] =
    "calibration rows of all six models; PyTorch allocator traces replayed exactly "
    "(bench/results/traces)";
}  // namespace evidence_sources

}  // namespace memplan

#endif  // MEMPLAN_PLANNER_EVIDENCE_H_
