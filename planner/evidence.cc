#include "planner/evidence.h"

#include "planner/op_registry.h"

namespace memplan {
namespace {

using namespace evidence_sources;  // NOLINT(google-build-using-namespace): precision bits

struct MechanismEntry {
  Mechanism m;
  const char* name;
  Evidence evidence;
};

// Mechanisms: names as reports print them, and what backs them.
const MechanismEntry kMechanisms[kNumMechanisms] = {
    {Mechanism::kParameters,
     "parameters and buffers",
     {"calibration rows of bert_base, gpt2, mobilenet_v2, resnet18, resnet50, vit_b_16; family "
      "rows of deeplab_mnv3, gru_lm, gru_seqfirst, llama_gqa, lstm_lm, lstm_tagger, qwen_bigvocab, "
      "t5_encdec, unet_ldm, wav2vec2_cls",
      kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {Mechanism::kModelCast,
     "model cast to half precision",
     {"calibration rows of bert_base, gpt2, resnet50; family rows of deeplab_mnv3, gru_lm, "
      "gru_seqfirst, llama_gqa, lstm_lm, lstm_tagger, qwen_bigvocab, t5_encdec, unet_ldm, "
      "wav2vec2_cls",
      kBf16, kFp16}},
    {Mechanism::kInputBatch,
     "input batch",
     {"calibration rows of bert_base, gpt2, mobilenet_v2, resnet18, resnet50, vit_b_16; family "
      "rows of deeplab_mnv3, gru_lm, gru_seqfirst, llama_gqa, lstm_lm, lstm_tagger, qwen_bigvocab, "
      "t5_encdec, unet_ldm, wav2vec2_cls",
      kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {Mechanism::kAutocastCast,
     "autocast casts",
     {"calibration rows of bert_base, gpt2, mobilenet_v2, resnet18, resnet50, vit_b_16; family "
      "rows of deeplab_mnv3, gru_lm, gru_seqfirst, llama_gqa, lstm_lm, lstm_tagger, qwen_bigvocab, "
      "t5_encdec, unet_ldm, wav2vec2_ln_c",
      kAmpBf16 | kAmpFp16 | kBf16, 0}},
    {Mechanism::kAutocastWeightCache,
     "autocast weight cache",
     {"calibration rows of bert_base, gpt2, mobilenet_v2, resnet18, resnet50, vit_b_16; family "
      "rows of deeplab_mnv3, gru_lm, gru_seqfirst, llama_gqa, lstm_lm, lstm_tagger, qwen_bigvocab, "
      "unet_ldm",
      kFp32 | kAmpBf16 | kAmpFp16, kFp32}},
    {Mechanism::kContiguousCopy,
     "contiguous copies",
     {"calibration rows of bert_base, gpt2, vit_b_16; family rows of gru_lm, llama_gqa, lstm_lm, "
      "lstm_tagger, qwen_bigvocab, t5_encdec, unet_ldm, wav2vec2_cls",
      kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32}},
    {Mechanism::kLinearBias,
     "linear bias (addmm)",
     {"calibration rows of bert_base, vit_b_16; family rows of gru_lm, gru_seqfirst, llama_gqa, "
      "lstm_lm, lstm_tagger, qwen_bigvocab, t5_encdec, wav2vec2_cls; over 2^31 elements: gru_lm, "
      "lstm_lm",
      kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16, true}},
    {Mechanism::kCublasWorkspace,
     "cuBLAS workspaces",
     {"calibration rows of bert_base, gpt2, mobilenet_v2, resnet18, resnet50, vit_b_16; family "
      "rows of gru_lm, gru_seqfirst, llama_gqa, lstm_lm, lstm_tagger, qwen_bigvocab, t5_encdec, "
      "unet_ldm, wav2vec2_cls",
      kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {Mechanism::kConvWorkspace,
     "cuDNN convolution workspaces",
     {"calibration rows of mobilenet_v2, resnet18, resnet50, vit_b_16; family rows of "
      "deeplab_mnv3, unet_ldm, wav2vec2_cls; 522 convolution shapes "
      "(bench/results/cudnn_ws_grid_h200.jsonl, fp32 and bf16)",
      kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32}},
    // cuDNN's standard RNN algorithm: the sizes planner/rnn.cc derives from
    // the calls bench/cudnn_rnn_probe.py measured, backed by the family
    // configurations whose plans match their rows (bench/evidence_check).
    {Mechanism::kRnnWorkspace,
     "cuDNN RNN workspaces",
     {"family rows of gru_lm, gru_lm_c, gru_seqfirst, lstm_lm, lstm_lm_c, lstm_tagger",
      kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32}},
    // The other algorithms and shapes: a least-squares fit to the probed
    // sizes, errors up to 60-90 % on single shapes (bench/cudnn_rnn_fit.py).
    // A fit is not a mechanism that matched: never backed, so advise keeps
    // its allowance.
    {Mechanism::kRnnWorkspaceFitted, "cuDNN RNN workspaces (fitted)", {}},
    {Mechanism::kSdpa,
     "SDPA (fused attention)",
     {"calibration rows of bert_base, gpt2, vit_b_16; family rows of t5_encdec, wav2vec2_cls",
      kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {Mechanism::kSdpaGqa,
     "SDPA with GQA",
     {"family rows of llama_gqa, llama_mqa_c, qwen_bigvocab, qwen_bigvocab_c",
      kAmpBf16 | kAmpFp16 | kBf16, 0}},
    {Mechanism::kSdpaMaskGrad, "SDPA with a mask requiring grad", {}},
    {Mechanism::kCrossEntropy,
     "cross entropy loss",
     {"calibration rows of bert_base, gpt2, mobilenet_v2, resnet18, resnet50, vit_b_16; family "
      "rows of gru_lm, gru_seqfirst, llama_gqa, lstm_lm, lstm_tagger, qwen_bigvocab, t5_encdec, "
      "wav2vec2_cls",
      kFp32 | kAmpBf16 | kAmpFp16 | kBf16, 0}},
    {Mechanism::kCrossEntropyPixels,
     "per-pixel cross entropy loss",
     {"family rows of deeplab_mnv3, deeplab_r50_c, segformer_n",
      kFp32 | kAmpBf16 | kAmpFp16 | kBf16, 0}},
    {Mechanism::kMseLoss,
     "MSE loss",
     {"family rows of unet_ldm, unet_ldm_c", kFp32 | kAmpBf16 | kAmpFp16 | kBf16, 0}},
    {Mechanism::kParameterGradients,
     "parameter gradients",
     {"calibration rows of bert_base, gpt2, mobilenet_v2, resnet18, resnet50, vit_b_16; family "
      "rows of deeplab_mnv3, gru_lm, gru_seqfirst, llama_gqa, lstm_lm, lstm_tagger, qwen_bigvocab, "
      "t5_encdec, unet_ldm, wav2vec2_cls",
      kFp32 | kAmpBf16 | kAmpFp16 | kBf16, 0}},
    {Mechanism::kAdamState,
     "Adam state",
     {"calibration rows of bert_base, gpt2, mobilenet_v2, resnet18, resnet50, vit_b_16; family "
      "rows of deeplab_mnv3, gru_lm, gru_seqfirst, llama_gqa, lstm_lm, lstm_tagger, qwen_bigvocab, "
      "t5_encdec, unet_ldm, wav2vec2_cls",
      kFp32 | kAmpBf16 | kAmpFp16 | kBf16, 0}},
    {Mechanism::kMomentumState,
     "SGD momentum state",
     {"calibration rows of bert_base, gpt2, mobilenet_v2, resnet18, resnet50, vit_b_16", kFp32, 0}},
    {Mechanism::kForeachTemporaries,
     "foreach optimizer temporaries",
     {"calibration rows of bert_base, gpt2, mobilenet_v2, resnet18, resnet50, vit_b_16; family "
      "rows of deeplab_mnv3, gru_lm, gru_seqfirst, llama_gqa, lstm_lm, lstm_tagger, qwen_bigvocab, "
      "t5_encdec, unet_ldm, wav2vec2_cls",
      kFp32 | kAmpBf16 | kAmpFp16 | kBf16, 0}},
    {Mechanism::kCheckpointRecompute,
     "checkpoint recompute",
     {"calibration rows of bert_base, gpt2", kFp32 | kAmpBf16, 0}},
    {Mechanism::kModuleCallHolding,
     "module-call argument holding",
     {"calibration rows of bert_base, gpt2, mobilenet_v2, resnet18, resnet50, vit_b_16; family "
      "rows of deeplab_mnv3, gru_lm, gru_seqfirst, llama_gqa, lstm_lm, lstm_tagger, qwen_bigvocab, "
      "t5_encdec, unet_ldm, wav2vec2_cls",
      kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {Mechanism::kPythonLocals,
     "Python local variables",
     {"calibration rows of bert_base, gpt2, mobilenet_v2, resnet18, resnet50, vit_b_16 (the "
      "dynamo exports); family rows of gru_lm, gru_seqfirst, llama_gqa, lstm_lm, lstm_tagger, "
      "qwen_bigvocab, t5_encdec, unet_ldm; the tuple segformer_n's decoder joins with torch.cat",
      kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
    {Mechanism::kChannelsLast,
     "channels-last layouts",
     {"family rows of convnext_n and segformer_n (bench/results/families_new2_h200.jsonl) and "
      "their allocator traces; 392 convolutions of channels-last inputs "
      "(bench/results/cudnn_channels_last_ws_h200.jsonl)",
      kFp32 | kAmpBf16 | kBf16, kFp32}},
    {Mechanism::kAllocator,
     "caching allocator model",
     {"calibration rows of bert_base, gpt2, mobilenet_v2, resnet18, resnet50, vit_b_16; family "
      "rows of deeplab_mnv3, gru_lm, gru_seqfirst, llama_gqa, lstm_lm, lstm_tagger, qwen_bigvocab, "
      "t5_encdec, unet_ldm, wav2vec2_cls; PyTorch allocator traces replayed exactly "
      "(bench/results/traces)",
      kFp32 | kAmpBf16 | kAmpFp16 | kBf16, kFp32 | kFp16}},
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
  return def ? def->evidence : SynthesizedOpEvidence(op_type);
}

}  // namespace memplan
