#ifndef MEMPLAN_PLANNER_OPTIONS_H_
#define MEMPLAN_PLANNER_OPTIONS_H_

/// How a step is run: the planning options and, for each option enum, its
/// one table of names (EnumTable), from which parsing, printing and the
/// CLI's and the budget file's allowed values all come. Adding a value to an
/// option means adding it to its enum and its table; nothing else maps names.

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "planner/status.h"

namespace memplan {

enum class Mode { kInference, kTrain };
/// fp32; autocast (fp32 params) bf16/fp16; or the whole model cast.
enum class Precision { kFp32, kAmpBf16, kAmpFp16, kBf16, kFp16 };
enum class Optimizer { kSgd, kMomentum, kAdam, kAdamW };
enum class Attention { kFused, kEager };
enum class Loss { kCrossEntropy, kMse, kNone };
enum class StepKind { kSteady, kFirst };
/// PyTorch's allocator setting: PYTORCH_CUDA_ALLOC_CONF expandable_segments.
enum class AllocatorKind { kDefault, kExpandable };
/// How the parameters of a whole-model bf16/fp16 run reach the GPU: loaded
/// in fp32 and cast there (`model.cuda().to(torch.bfloat16)`), the fp32
/// copies then freed to the cache (`cast`) or returned to the driver by a
/// `torch.cuda.empty_cache()` after the cast (`cast-empty-cache`, the
/// calibration protocol), or moved already in their dtype (`direct`:
/// `model.to("cuda", torch.bfloat16)`, a cast on the CPU). `auto`:
/// cast-empty-cache for training, cast for inference.
enum class ModelLoad { kAuto, kCast, kCastEmptyCache, kDirect };
/// How the ranks of a data-parallel job hold the model (planner/distributed.h):
/// one process alone, DistributedDataParallel, FSDP2 fully_shard, or DeepSpeed
/// ZeRO stage 1, 2 or 3.
enum class ParallelStrategy { kSingle, kDdp, kFsdp, kZero1, kZero2, kZero3 };
/// --reshard-after-forward of FSDP2's fully_shard.
enum class Switch { kOn, kOff };

/// One value of an option enum and its name (as the CLI and JSON spell it).
template <typename E>
struct EnumEntry {
  E value;
  const char* name;
};

/// The table of an option enum: what the option is called and every value,
/// in the order help texts list them. Specialised for each option enum below.
template <typename E>
struct EnumTable;

template <>
struct EnumTable<Mode> {
  static constexpr const char* kOption = "mode";
  static constexpr EnumEntry<Mode> kEntries[] = {{Mode::kTrain, "train"},
                                                 {Mode::kInference, "inference"}};
};
template <>
struct EnumTable<Precision> {
  static constexpr const char* kOption = "precision";
  static constexpr EnumEntry<Precision> kEntries[] = {{Precision::kFp32, "fp32"},
                                                      {Precision::kAmpBf16, "amp_bf16"},
                                                      {Precision::kAmpFp16, "amp_fp16"},
                                                      {Precision::kBf16, "bf16"},
                                                      {Precision::kFp16, "fp16"}};
};
template <>
struct EnumTable<Optimizer> {
  static constexpr const char* kOption = "optimizer";
  static constexpr EnumEntry<Optimizer> kEntries[] = {{Optimizer::kSgd, "sgd"},
                                                      {Optimizer::kMomentum, "momentum"},
                                                      {Optimizer::kAdam, "adam"},
                                                      {Optimizer::kAdamW, "adamw"}};
};
template <>
struct EnumTable<Attention> {
  static constexpr const char* kOption = "attention";
  static constexpr EnumEntry<Attention> kEntries[] = {{Attention::kFused, "fused"},
                                                      {Attention::kEager, "eager"}};
};
template <>
struct EnumTable<Loss> {
  static constexpr const char* kOption = "loss";
  static constexpr EnumEntry<Loss> kEntries[] = {
      {Loss::kCrossEntropy, "cross_entropy"}, {Loss::kMse, "mse"}, {Loss::kNone, "none"}};
};
template <>
struct EnumTable<StepKind> {
  static constexpr const char* kOption = "step";
  static constexpr EnumEntry<StepKind> kEntries[] = {{StepKind::kSteady, "steady"},
                                                     {StepKind::kFirst, "first"}};
};
template <>
struct EnumTable<AllocatorKind> {
  static constexpr const char* kOption = "allocator";
  static constexpr EnumEntry<AllocatorKind> kEntries[] = {
      {AllocatorKind::kDefault, "default"}, {AllocatorKind::kExpandable, "expandable"}};
};

template <>
struct EnumTable<ModelLoad> {
  static constexpr const char* kOption = "model-load";
  static constexpr EnumEntry<ModelLoad> kEntries[] = {
      {ModelLoad::kAuto, "auto"},
      {ModelLoad::kCast, "cast"},
      {ModelLoad::kCastEmptyCache, "cast-empty-cache"},
      {ModelLoad::kDirect, "direct"}};
};

template <>
struct EnumTable<ParallelStrategy> {
  static constexpr const char* kOption = "strategy";
  static constexpr EnumEntry<ParallelStrategy> kEntries[] = {
      {ParallelStrategy::kSingle, "single"}, {ParallelStrategy::kDdp, "ddp"},
      {ParallelStrategy::kFsdp, "fsdp"},     {ParallelStrategy::kZero1, "zero1"},
      {ParallelStrategy::kZero2, "zero2"},   {ParallelStrategy::kZero3, "zero3"}};
};
template <>
struct EnumTable<Switch> {
  static constexpr const char* kOption = "reshard-after-forward";
  static constexpr EnumEntry<Switch> kEntries[] = {{Switch::kOn, "on"}, {Switch::kOff, "off"}};
};

/// How the frozen base's Linear weights are stored: as the model's dtype, or
/// quantized (weight-only): bitsandbytes LLM.int8 (int8 + an fp32 scale per
/// output row), NF4 with double quantization (4 bits + an 8-bit absmax per
/// 64-weight block, an fp32 scale per 256 blocks), 4-bit with an fp32 absmax
/// per 64-weight block (int4), float8 e4m3 with one fp32 scale per tensor.
enum class WeightFormat { kNative, kInt8, kNf4, kInt4, kFp8 };

template <>
struct EnumTable<WeightFormat> {
  static constexpr const char* kOption = "weights";
  static constexpr EnumEntry<WeightFormat> kEntries[] = {{WeightFormat::kNative, "native"},
                                                         {WeightFormat::kInt8, "int8"},
                                                         {WeightFormat::kNf4, "nf4"},
                                                         {WeightFormat::kInt4, "int4"},
                                                         {WeightFormat::kFp8, "fp8"}};
};

/// The name of `v` in its table ("?" for a value missing from the table,
/// which options_test rules out).
template <typename E>
const char* EnumName(E v) {
  for (const EnumEntry<E>& e : EnumTable<E>::kEntries) {
    if (e.value == v) return e.name;
  }
  return "?";
}

/// Every name of E, in table order.
template <typename E>
std::vector<std::string> EnumNames() {
  std::vector<std::string> out;
  for (const EnumEntry<E>& e : EnumTable<E>::kEntries) out.push_back(e.name);
  return out;
}

/// "a, b, c": the names of E, for messages.
template <typename E>
std::string EnumNameList() {
  std::string out;
  for (const EnumEntry<E>& e : EnumTable<E>::kEntries) {
    if (!out.empty()) out += ", ";
    out += e.name;
  }
  return out;
}

/// The value named `s`; error "unknown precision 'x' (fp32, amp_bf16, ...)".
template <typename E>
[[nodiscard]] Result<E> ParseEnum(const std::string& s) {
  for (const EnumEntry<E>& e : EnumTable<E>::kEntries) {
    if (s == e.name) return e.value;
  }
  return Status::Error("unknown " + std::string(EnumTable<E>::kOption) + " '" + s + "' (" +
                       EnumNameList<E>() + ")");
}

inline const char* ModeName(Mode m) { return EnumName(m); }
inline const char* PrecisionName(Precision p) { return EnumName(p); }
inline const char* OptimizerName(Optimizer o) { return EnumName(o); }
inline const char* AttentionName(Attention a) { return EnumName(a); }
inline const char* LossName(Loss l) { return EnumName(l); }
[[nodiscard]] inline Result<Precision> ParsePrecision(const std::string& s) {
  return ParseEnum<Precision>(s);
}
[[nodiscard]] inline Result<Optimizer> ParseOptimizer(const std::string& s) {
  return ParseEnum<Optimizer>(s);
}

/// Knobs of PyTorch's CUDA caching allocator that change the numbers.
struct AllocatorConfig {
  bool expandable_segments = false;  ///< PYTORCH_CUDA_ALLOC_CONF expandable_segments:True
  int64_t max_split_size = std::numeric_limits<int64_t>::max();  ///< max_split_size_mb
  int64_t device_limit = 0;  ///< cudaMalloc fails past this many reserved bytes; 0 = none.
};

/// Which copies cuDNN's fp32 convolution engines make: its heuristics pick,
/// per shape, engines that copy input, weight and output, or input and weight
/// only (then grouped unstrided 1x1 weight gradients copy all three; ungrouped
/// ones follow UnitConvWeightGradBytes in both). kBoth plans
/// both and keeps the one that needs more device memory.
enum class Fp32ConvCopies { kBoth, kAll, kInputOnly };

/// Whether activations and residual adds run in place (nn.ReLU(inplace=True),
/// `out += identity`): the export does not say. kBoth plans both and keeps the
/// one that needs more device memory.
enum class InPlace { kBoth, kOff, kOn };

/// Data parallelism over several GPUs (planner/distributed.h). The batch
/// planned is the batch of one rank.
struct DistOptions {
  ParallelStrategy strategy = ParallelStrategy::kSingle;
  int64_t world_size = 1;  ///< Ranks (GPUs); 1 with kSingle.
  /// FSDP/ZeRO-3: the modules sharded as units of their own (Node::scope
  /// paths or their dotted suffixes); empty = the repeated blocks
  /// (checkpoint.h FindBlocks). The root is always a unit of its own.
  std::vector<std::string> fsdp_units;
  bool reshard_after_forward = true;  ///< FSDP2 fully_shard(reshard_after_forward=...).
};

/// LoRA adapters as PEFT's lora.Linear adds them (r = 0: none).
struct LoraOptions {
  int64_t r = 0;
  double alpha = -1;      ///< -1: 2 r (the scaling does not change memory).
  double dropout = 0.05;  ///< 0: PEFT uses nn.Identity (no mask, no copy).
  /// Module-name suffixes of the Linear layers adapted (PEFT target_modules).
  std::vector<std::string> targets = {"q_proj", "v_proj"};
};

/// How the step is run.
struct PlanOptions {
  Mode mode = Mode::kInference;
  Precision precision = Precision::kFp32;
  Optimizer optimizer = Optimizer::kAdamW;
  Attention attention = Attention::kFused;
  Loss loss = Loss::kCrossEntropy;
  StepKind step = StepKind::kSteady;
  AllocatorConfig allocator;
  int64_t context_bytes = -1;  ///< CUDA context etc.; -1 = the default.
  /// Modules (Node::scope paths) recomputed in backward; see checkpoint.h.
  std::vector<std::string> checkpoint_segments;
  bool keep_events = false;  ///< Keep the allocator trace (for validation).
  Fp32ConvCopies fp32_conv = Fp32ConvCopies::kBoth;
  InPlace inplace = InPlace::kBoth;
  DistOptions dist;  ///< Several GPUs; the default is one process alone.
  /// Inference under torch.no_grad() rather than inference_mode(): autocast
  /// keeps one low-precision copy of each weight until the forward ends.
  bool no_grad_weight_cache = false;
  /// bf16/fp16: how the parameters reach the GPU (see ModelLoad).
  ModelLoad model_load = ModelLoad::kAuto;
  /// Fine-tuning (see finetune.h): parameters frozen (module paths or name
  /// regexes), or the only ones trained; LoRA adapters; the frozen Linear
  /// weights' storage.
  std::vector<std::string> freeze;
  std::vector<std::string> train_only;
  LoraOptions lora;
  WeightFormat weights = WeightFormat::kNative;
};

}  // namespace memplan

#endif  // MEMPLAN_PLANNER_OPTIONS_H_
