#include "planner/evidence.h"
#include "planner/op_registry.h"

namespace memplan {
namespace {

using namespace evidence_sources;  // NOLINT(google-build-using-namespace)

struct OpEntry {
  const char* op;
  Evidence evidence;
};

// Op rules: every op the calibration models run (evidence_check --print).
const OpEntry kOpEvidence[] = {
    {"Add", {kAllModels, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {"And", {kGpt2, kAmpBf16, kFp32 | kFp16}},
    {"BatchNormalization", {kCnns, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32}},
    {"Cast", {kBertGpt2, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {"CastLike", {kCnns, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32}},
    {"Clip", {kMobilenet, kFp32 | kAmpBf16 | kAmpFp16, kFp32}},
    {"Concat", {kGpt2Vit, kFp32 | kAmpBf16 | kAmpFp16, kFp32 | kFp16}},
    {"Conv", {kMobilenetResnet18Resnet50Vit, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32}},
    {"CumSum", {kGpt2, kAmpBf16, kFp32 | kFp16}},
    {"Div", {kBertGpt2, kAmpBf16, 0}},
    {"Dropout", {kBertGpt2Mobilenet, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {"Equal", {kGpt2, kAmpBf16, kFp32 | kFp16}},
    {"Expand", {kAllModels, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {"Flatten", {kMobilenetResnet50, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, 0}},
    {"Gather", {kBertGpt2Vit, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {"GatherElements", {kBert, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {"GatherND", {kGpt2, kAmpBf16, kFp32 | kFp16}},
    {"Gelu", {kBertVit, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {"Gemm", {kAllModels, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {"GlobalAveragePool", {kMobilenetResnet50, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, 0}},
    {"Identity", {kBertGpt2Vit, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {"LayerNormalization", {kBertGpt2Vit, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {"LessOrEqual", {kGpt2, kAmpBf16, 0}},
    {"MatMul", {kBertGpt2Vit, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {"Max", {kGpt2, kAmpBf16, kFp32 | kFp16}},
    {"MaxPool", {kResnet18Resnet50, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32}},
    {"Mul", {kGpt2, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {"Not", {kGpt2, kAmpBf16, kFp32 | kFp16}},
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
    {"Sub", {kGpt2, kAmpBf16, kFp32 | kFp16}},
    {"Tanh", {kBertGpt2, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {"Transpose", {kBertGpt2Vit, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {"Unsqueeze", {kGpt2Vit, kFp32 | kAmpBf16 | kAmpFp16, kFp32 | kFp16}},
    {"Where", {kBertGpt2, kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
};

}  // namespace

void AttachOpEvidence(OpTable* t) {
  for (const OpEntry& e : kOpEvidence) t->SetEvidence(e.op, e.evidence);
}

}  // namespace memplan
