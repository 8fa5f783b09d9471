#include "planner/evidence.h"
#include "planner/op_registry.h"

namespace memplan {
namespace {

using namespace evidence_sources;  // NOLINT(google-build-using-namespace)

struct OpEntry {
  const char* op;
  Evidence evidence;
};

// Op rules: every op the calibration models and the matching family
// configurations run (evidence_check --print).
const OpEntry kOpEvidence[] = {
    {"Abs", {"family rows of t5_encdec, t5_encdec_c", kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32}},
    {"Add",
     {"calibration rows of bert_base, gpt2, mobilenet_v2, resnet18, resnet50, vit_b_16; family "
      "rows of deeplab_mnv3, llama_gqa, qwen_bigvocab, t5_encdec, unet_ldm, wav2vec2_cls",
      kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {"And", {"calibration rows of gpt2", kAmpBf16, 0}},
    {"BatchNormalization",
     {"calibration rows of mobilenet_v2, resnet18, resnet50; family rows of deeplab_mnv3",
      kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32}},
    {"Cast",
     {"calibration rows of bert_base, gpt2; family rows of llama_gqa, qwen_bigvocab, t5_encdec, "
      "wav2vec2_cls",
      kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {"CastLike",
     {"calibration rows of mobilenet_v2, resnet18, resnet50; family rows of unet_ldm",
      kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32}},
    {"CausalMask", {"family rows of llama_gqa, qwen_bigvocab", kFp32, kFp32}},
    {"Clip", {"calibration rows of mobilenet_v2", kFp32 | kAmpBf16 | kAmpFp16, kFp32}},
    {"Concat",
     {"calibration rows of gpt2, vit_b_16; family rows of deeplab_mnv3, llama_gqa, qwen_bigvocab, "
      "unet_ldm",
      kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32}},
    {"ConstantOfShape", {"family rows of segformer_n", kFp32 | kAmpBf16 | kBf16, kFp32}},
    {"Conv",
     {"calibration rows of mobilenet_v2, resnet18, resnet50, vit_b_16; family rows of "
      "deeplab_mnv3, unet_ldm, wav2vec2_cls, wav2vec2_ln_c",
      kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32}},
    {"Cos",
     {"family rows of llama_gqa, llama_mqa_c, qwen_bigvocab, qwen_bigvocab_c",
      kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32}},
    {"CumSum", {"calibration rows of gpt2", kAmpBf16, 0}},
    {"Div",
     {"calibration rows of bert_base, gpt2; family rows of t5_encdec, t5_encdec_c, unet_ldm, "
      "unet_ldm_c, wav2vec2_cls, wav2vec2_ln_c, wav2vec2_lnb_c",
      kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32}},
    {"Dropout",
     {"calibration rows of bert_base, gpt2, mobilenet_v2; family rows of deeplab_mnv3, lstm_lm, "
      "t5_encdec, unet_ldm, wav2vec2_cls",
      kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {"Equal", {"calibration rows of gpt2", kAmpBf16, 0}},
    {"Expand",
     {"calibration rows of bert_base, gpt2, mobilenet_v2, resnet18, resnet50, vit_b_16; family "
      "rows of gru_lm, gru_seqfirst, llama_gqa, lstm_lm, lstm_tagger, qwen_bigvocab, t5_encdec, "
      "wav2vec2_cls",
      kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {"Flatten",
     {"calibration rows of mobilenet_v2, resnet50", kFp32 | kAmpBf16 | kAmpFp16 | kBf16, 0}},
    {"Floor", {"family rows of segformer_n", kFp32 | kAmpBf16 | kBf16, kFp32}},
    {"GRU",
     {"family rows of gru_lm, gru_lm_c, gru_seqfirst", kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32}},
    {"Gather",
     {"calibration rows of bert_base, gpt2, vit_b_16; family rows of gru_lm, llama_gqa, lstm_lm, "
      "lstm_tagger, qwen_bigvocab, t5_encdec",
      kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {"GatherElements",
     {"calibration rows of bert_base", kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {"GatherND", {"calibration rows of gpt2", kAmpBf16, 0}},
    {"Gelu",
     {"calibration rows of bert_base, vit_b_16; family rows of wav2vec2_cls, wav2vec2_ln_c",
      kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {"Gemm",
     {"calibration rows of bert_base, gpt2, mobilenet_v2, resnet18, resnet50, vit_b_16; family "
      "rows of wav2vec2_cls",
      kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {"GlobalAveragePool",
     {"calibration rows of mobilenet_v2, resnet50; family rows of deeplab_mnv3",
      kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32}},
    {"Greater",
     {"family rows of t5_encdec, t5_encdec_c", kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32}},
    {"GroupNormalization",
     {"family rows of unet_ldm, unet_ldm_c, wav2vec2_cls", kFp32 | kAmpBf16 | kAmpFp16 | kBf16,
      kFp32}},
    {"HardSigmoid", {"family rows of deeplab_mnv3", kFp32 | kAmpBf16 | kBf16, kFp32}},
    {"HardSwish", {"family rows of deeplab_mnv3", kFp32 | kAmpBf16 | kBf16, kFp32}},
    {"Identity",
     {"calibration rows of bert_base, gpt2, vit_b_16; family rows of llama_gqa, qwen_bigvocab, "
      "t5_encdec, unet_ldm",
      kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {"LSTM",
     {"family rows of lstm_lm, lstm_lm_c, lstm_tagger", kFp32 | kAmpBf16 | kAmpFp16 | kBf16,
      kFp32}},
    {"LayerNormalization",
     {"calibration rows of bert_base, gpt2, vit_b_16; family rows of wav2vec2_cls, wav2vec2_ln_c; "
      "over 2^31 elements: wav2vec2_ln_c",
      kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16, true}},
    {"Less",
     {"family rows of convnext_n, t5_encdec, t5_encdec_c", kFp32 | kAmpBf16 | kAmpFp16 | kBf16,
      kFp32}},
    {"LessOrEqual",
     {"calibration rows of gpt2; family rows of t5_encdec, t5_encdec_c",
      kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32}},
    {"Log", {"family rows of t5_encdec, t5_encdec_c", kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32}},
    {"MatMul",
     {"calibration rows of bert_base, gpt2, vit_b_16; family rows of gru_lm, gru_seqfirst, "
      "llama_gqa, lstm_lm, lstm_tagger, qwen_bigvocab, t5_encdec, unet_ldm, wav2vec2_cls; over "
      "2^31 elements: gru_lm, llama_gqa, lstm_lm, qwen_bigvocab",
      kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16, true}},
    {"Max", {"calibration rows of gpt2", kAmpBf16, 0}},
    {"MaxPool",
     {"calibration rows of resnet18, resnet50", kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32}},
    {"Min", {"family rows of t5_encdec, t5_encdec_c", kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32}},
    {"Mul",
     {"calibration rows of gpt2; family rows of deeplab_mnv3, llama_gqa, qwen_bigvocab, t5_encdec, "
      "unet_ldm, wav2vec2_cls",
      kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {"Neg",
     {"family rows of llama_gqa, llama_mqa_c, qwen_bigvocab, qwen_bigvocab_c, t5_encdec, "
      "t5_encdec_c",
      kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32}},
    {"Not", {"calibration rows of gpt2", kAmpBf16, 0}},
    {"Pow",
     {"calibration rows of gpt2; family rows of llama_gqa, qwen_bigvocab, t5_encdec",
      kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {"RandomUniformLike",
     {"family rows of convnext_n, segformer_n", kFp32 | kAmpBf16 | kBf16, kFp32}},
    {"Reciprocal",
     {"family rows of llama_gqa, llama_mqa_c, qwen_bigvocab, qwen_bigvocab_c, t5_encdec, "
      "t5_encdec_c",
      kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32}},
    {"ReduceMean",
     {"calibration rows of mobilenet_v2, resnet18, resnet50; family rows of llama_gqa, "
      "qwen_bigvocab, t5_encdec, wav2vec2_cls",
      kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32}},
    {"Relu",
     {"calibration rows of resnet18, resnet50; family rows of deeplab_mnv3, t5_encdec",
      kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32}},
    {"RepeatInterleave", {"family rows of llama_gqa, qwen_bigvocab", kFp32, kFp32}},
    {"Reshape",
     {"calibration rows of bert_base, gpt2, mobilenet_v2, resnet18, resnet50, vit_b_16; family "
      "rows of gru_lm, gru_seqfirst, llama_gqa, lstm_lm, lstm_tagger, qwen_bigvocab, t5_encdec, "
      "unet_ldm, wav2vec2_cls",
      kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {"Resize",
     {"family rows of deeplab_mnv3, segformer_n, unet_ldm, unet_ldm_c",
      kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32}},
    {"SequenceAt",
     {"calibration rows of gpt2", kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {"Sin",
     {"family rows of llama_gqa, llama_mqa_c, qwen_bigvocab, qwen_bigvocab_c",
      kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32}},
    {"Slice",
     {"calibration rows of bert_base, gpt2; family rows of llama_gqa, qwen_bigvocab, unet_ldm, "
      "wav2vec2_cls",
      kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {"Softmax",
     {"calibration rows of bert_base, gpt2; family rows of llama_gqa, qwen_bigvocab, t5_encdec, "
      "t5_encdec_c, unet_ldm, unet_ldm_c",
      kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32}},
    {"Split", {"calibration rows of gpt2", 0, kFp32 | kFp16}},
    {"SplitToSequence",
     {"calibration rows of gpt2", kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {"Sqrt",
     {"calibration rows of bert_base; family rows of llama_gqa, qwen_bigvocab, t5_encdec, "
      "unet_ldm, wav2vec2_cls",
      kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32}},
    {"Squeeze",
     {"calibration rows of vit_b_16; family rows of unet_ldm", kFp32 | kAmpBf16 | kAmpFp16 | kBf16,
      kFp32}},
    {"Sub",
     {"calibration rows of gpt2; family rows of t5_encdec, t5_encdec_c",
      kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32}},
    {"Swish",
     {"family rows of llama_gqa, llama_mqa_c, qwen_bigvocab, qwen_bigvocab_c, unet_ldm, unet_ldm_c",
      kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32}},
    {"Tanh",
     {"calibration rows of bert_base, gpt2", kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {"Transpose",
     {"calibration rows of bert_base, gpt2, vit_b_16; family rows of gru_lm, gru_seqfirst, "
      "llama_gqa, lstm_lm, lstm_tagger, qwen_bigvocab, t5_encdec, unet_ldm, wav2vec2_cls, "
      "wav2vec2_ln_c; over 2^31 elements: wav2vec2_ln_c",
      kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16, true}},
    {"Unsqueeze",
     {"calibration rows of gpt2, vit_b_16; family rows of llama_gqa, qwen_bigvocab, t5_encdec, "
      "wav2vec2_cls",
      kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32}},
    {"Where",
     {"calibration rows of bert_base, gpt2; family rows of t5_encdec, t5_encdec_c",
      kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32}},
    {"WeightNorm",
     {"family rows of wav2vec2_cls, wav2vec2_ln_c, wav2vec2_lnb_c",
      kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32}},
};

}  // namespace

void AttachOpEvidence(OpTable* t) {
  for (const OpEntry& e : kOpEvidence) t->SetEvidence(e.op, e.evidence);
}

Evidence SynthesizedOpEvidence(const std::string& op_type) {
  for (const OpEntry& e : kOpEvidence) {
    if (op_type == e.op) return e.evidence;
  }
  return Evidence{};
}

}  // namespace memplan
