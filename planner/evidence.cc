#include "planner/evidence.h"

#include "planner/op_registry.h"

namespace memplan {
namespace {

constexpr uint8_t kFp32 = PrecisionBit(Precision::kFp32);
constexpr uint8_t kAmpBf16 = PrecisionBit(Precision::kAmpBf16);
constexpr uint8_t kAmpFp16 = PrecisionBit(Precision::kAmpFp16);
constexpr uint8_t kBf16 = PrecisionBit(Precision::kBf16);
constexpr uint8_t kFp16 = PrecisionBit(Precision::kFp16);

// The calibration rows (bench/calibration/*.jsonl, PyTorch 2.11 on an H200)
// by the models they measured; bench/evidence_check derives the bits below
// from the rows and fails when an entry claims more than they show or a
// measured configuration uses a rule without its entry.
constexpr const char kAllModels[] =
    "calibration rows of bert_base, gpt2, mobilenet_v2, resnet18, resnet50, vit_b_16";
constexpr const char kGpt2[] = "calibration rows of gpt2";
constexpr const char kCnns[] = "calibration rows of mobilenet_v2, resnet18, resnet50";
constexpr const char kBertGpt2[] = "calibration rows of bert_base, gpt2";
constexpr const char kMobilenet[] = "calibration rows of mobilenet_v2";
constexpr const char kGpt2Vit[] = "calibration rows of gpt2, vit_b_16";
constexpr const char kMobilenetResnet18Resnet50Vit[] =
    "calibration rows of mobilenet_v2, resnet18, resnet50, vit_b_16";
constexpr const char kBertGpt2Mobilenet[] = "calibration rows of bert_base, gpt2, mobilenet_v2";
constexpr const char kMobilenetResnet50[] = "calibration rows of mobilenet_v2, resnet50";
constexpr const char kBertGpt2Vit[] = "calibration rows of bert_base, gpt2, vit_b_16";
constexpr const char kBert[] = "calibration rows of bert_base";
constexpr const char kBertVit[] = "calibration rows of bert_base, vit_b_16";
constexpr const char kResnet18Resnet50[] = "calibration rows of resnet18, resnet50";
constexpr const char kVit[] = "calibration rows of vit_b_16";
constexpr const char kBertGpt2Resnet50[] = "calibration rows of bert_base, gpt2, resnet50";

// Mechanisms measured beyond the calibration rows as well.
constexpr const char kConvs[] =
    "calibration rows of mobilenet_v2, resnet18, resnet50, vit_b_16; 522 convolution shapes "
    "(bench/results/cudnn_ws_grid_h200.jsonl, fp32 and bf16)";
constexpr const char kAllocatorTraces[] =
    "calibration rows of all six models; PyTorch allocator traces replayed exactly "
    "(bench/results/traces)";

struct OpEntry {
  const char* op;
  Evidence evidence;
};

// Op rules: every op the calibration models run (evidence_check --print).
const OpEntry kOpEvidence[] = {
    {"Add", {kAllModels, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {"And", {kGpt2, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {"BatchNormalization", {kCnns, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32}},
    {"Cast", {kBertGpt2, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {"CastLike", {kCnns, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32}},
    {"Clip", {kMobilenet, kFp32 | kAmpBf16 | kAmpFp16, kFp32}},
    {"Concat", {kGpt2Vit, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {"Conv", {kMobilenetResnet18Resnet50Vit, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32}},
    {"CumSum", {kGpt2, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {"Div", {kBertGpt2, kAmpBf16, 0}},
    {"Dropout", {kBertGpt2Mobilenet, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {"Equal", {kGpt2, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {"Expand", {kAllModels, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {"Flatten", {kMobilenetResnet50, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, 0}},
    {"Gather", {kBertGpt2Vit, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {"GatherElements", {kBert, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {"GatherND", {kGpt2, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {"Gelu", {kBertVit, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {"Gemm", {kAllModels, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {"GlobalAveragePool", {kMobilenetResnet50, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, 0}},
    {"Identity", {kBertGpt2Vit, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {"LayerNormalization", {kBertGpt2Vit, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {"LessOrEqual", {kGpt2, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {"MatMul", {kBertGpt2Vit, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {"Max", {kGpt2, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {"MaxPool", {kResnet18Resnet50, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32}},
    {"Mul", {kGpt2, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {"Not", {kGpt2, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {"Pow", {kGpt2, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {"ReduceMean", {kCnns, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32}},
    {"Relu", {kResnet18Resnet50, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32}},
    {"Reshape", {kAllModels, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {"SequenceAt", {kGpt2, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {"Slice", {kBertGpt2, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {"Softmax", {kBertGpt2, kAmpBf16, 0}},
    {"Split", {kGpt2, 0, kFp32 | kFp16}},
    {"SplitToSequence", {kGpt2, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {"Sqrt", {kBert, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, 0}},
    {"Squeeze", {kVit, kFp32 | kAmpBf16 | kAmpFp16, kFp32}},
    {"Sub", {kGpt2, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {"Tanh", {kBertGpt2, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {"Transpose", {kBertGpt2Vit, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {"Unsqueeze", {kGpt2Vit, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {"Where", {kBertGpt2, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
};

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

void AttachOpEvidence(OpTable* t) {
  for (const OpEntry& e : kOpEvidence) t->SetEvidence(e.op, e.evidence);
}

}  // namespace memplan
