#include "planner/evidence.h"

#include "planner/op_registry.h"

namespace memplan {
namespace {

using namespace evidence_sources;  // NOLINT(google-build-using-namespace)

struct MechanismEntry {
  Mechanism m;
  const char* name;
  Evidence evidence;
};

// Mechanisms: names as reports print them, and what backs them.
const MechanismEntry kMechanisms[kNumMechanisms] = {
    {Mechanism::kParameters,
     "parameters and buffers",
     {kAllModels, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {Mechanism::kModelCast, "model cast to half precision", {kBertGpt2Resnet50, kBf16, kFp16}},
    {Mechanism::kInputBatch,
     "input batch",
     {kAllModels, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {Mechanism::kAutocastCast, "autocast casts", {kAllModels, kAmpBf16 | kAmpFp16, 0}},
    {Mechanism::kAutocastWeightCache,
     "autocast weight cache",
     {kAllModels, kAmpBf16 | kAmpFp16, 0}},
    {Mechanism::kContiguousCopy,
     "contiguous copies",
     {kBertGpt2Vit, kFp32 | kAmpBf16 | kAmpFp16, kFp32}},
    {Mechanism::kLinearBias,
     "linear bias (addmm)",
     {kBertVit, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {Mechanism::kCublasWorkspace,
     "cuBLAS workspaces",
     {kAllModels, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {Mechanism::kConvWorkspace,
     "cuDNN convolution workspaces",
     {kConvs, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32}},
    {Mechanism::kSdpa,
     "SDPA (fused attention)",
     {kBertGpt2Vit, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {Mechanism::kSdpaGqa, "SDPA with GQA", {}},
    {Mechanism::kSdpaMaskGrad, "SDPA with a mask requiring grad", {}},
    {Mechanism::kCrossEntropy,
     "cross entropy loss",
     {kAllModels, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, 0}},
    {Mechanism::kCrossEntropyPixels, "per-pixel cross entropy loss", {}},
    {Mechanism::kMseLoss, "MSE loss", {}},
    {Mechanism::kParameterGradients,
     "parameter gradients",
     {kAllModels, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, 0}},
    {Mechanism::kAdamState, "Adam state", {kAllModels, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, 0}},
    {Mechanism::kMomentumState, "SGD momentum state", {kAllModels, kFp32, 0}},
    {Mechanism::kForeachTemporaries,
     "foreach optimizer temporaries",
     {kAllModels, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, 0}},
    {Mechanism::kCheckpointRecompute, "checkpoint recompute", {kBertGpt2, kFp32 | kAmpBf16, 0}},
    {Mechanism::kModuleCallHolding,
     "module-call argument holding",
     {kAllModels, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {Mechanism::kAllocator,
     "caching allocator model",
     {kAllocatorTraces, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
};

}  // namespace

bool Evidence::Covers(Mode mode, Precision p) const {
  const uint8_t bits = mode == Mode::kTrain ? train : inference;
  return source != nullptr && (bits & PrecisionBit(p)) != 0;
}

const char* MechanismName(Mechanism m) { return kMechanisms[static_cast<int>(m)].name; }

const Evidence& MechanismEvidence(Mechanism m) { return kMechanisms[static_cast<int>(m)].evidence; }

Evidence OpEvidence(const std::string& op_type) {
  const OpDef* def = FindOp("", op_type);
  return def ? def->evidence : Evidence{};
}

}  // namespace memplan
