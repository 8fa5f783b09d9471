#include "cli/options.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <utility>

#include "cli/commands.h"
#include "cli/files.h"
#include "cli/format.h"
#include "onnx_import/importer.h"
#include "planner/distributed.h"
#include "planner/export_mode.h"
#include "planner/finetune.h"
#include "planner/loss_target.h"
#include "planner/plan_model.h"
#include "planner/text.h"

namespace memplan {

std::string IntegerFlagProblem(const std::string& text, bool non_negative) {
  const size_t first = text.find_first_not_of(' ');
  const size_t last = text.find_last_not_of(' ');
  const std::string t = first == std::string::npos ? "" : text.substr(first, last - first + 1);
  const std::string shown = "'" + PrintableText(Clip(t, 40)) + "'";
  size_t i = (!t.empty() && (t[0] == '+' || t[0] == '-')) ? 1 : 0;
  const std::string digits = t.substr(i);
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) {
    return shown + " is not a decimal integer";
  }
  if (digits.size() > 1 && digits[0] == '0') {
    return shown + " has a leading zero (read as octal elsewhere): write it without";
  }
  if (t[0] == '-' && digits != "0" && non_negative) return shown + " must not be negative";
  if (digits.size() > 19 || (digits.size() == 19 && digits > "9223372036854775807")) {
    return shown + " is out of range (at most 9223372036854775807)";
  }
  return "";
}

std::string NumberFlagProblem(const std::string& text) {
  const std::string shown = "'" + PrintableText(Clip(text, 40)) + "'";
  // [+-] digits [. digits] [e [+-] digits], or [+-] . digits ...
  size_t i = 0;
  const size_t n = text.size();
  auto digits = [&]() {
    const size_t from = i;
    while (i < n && text[i] >= '0' && text[i] <= '9') ++i;
    return i - from;
  };
  if (i < n && (text[i] == '+' || text[i] == '-')) ++i;
  size_t mantissa = digits();
  if (i < n && text[i] == '.') {
    ++i;
    mantissa += digits();
  }
  bool ok = mantissa > 0;
  if (ok && i < n && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    if (i < n && (text[i] == '+' || text[i] == '-')) ++i;
    ok = digits() > 0;
  }
  if (!ok || i != n) return shown + " is not a decimal number";
  const double v = std::strtod(text.c_str(), nullptr);
  if (!std::isfinite(v)) return shown + " is out of range";
  return "";
}

void CheckNumberFlags(CLI::App* app) {
  for (CLI::App* sub : app->get_subcommands([](const CLI::App*) { return true; })) {
    for (CLI::Option* o : sub->get_options()) {
      const std::string type = o->get_type_name();
      const bool uint = type.rfind("UINT", 0) == 0;
      const bool non_negative = uint || type.find("NONNEGATIVE") != std::string::npos;
      if (uint || type.rfind("INT", 0) == 0) {
        o->check(CLI::Validator(
            [non_negative](std::string& v) { return IntegerFlagProblem(v, non_negative); }, ""));
      } else if (type.rfind("FLOAT", 0) == 0) {
        o->check(CLI::Validator([](std::string& v) { return NumberFlagProblem(v); }, ""));
      }
    }
  }
}

void AddModelFlags(CLI::App* cmd, ModelFlags* f) {
  cmd->add_option("model", f->model, "ONNX model file")->required();
  cmd->add_option("--batch,-b", f->batch,
                  "Binds the batch symbol (the input symbol called 'batch', else dim 0 of the "
                  "first input)")
      ->default_str("")
      ->each([f](const std::string&) { f->batch_given = true; });
  cmd->add_option("--batch-dim", f->batch_dim, "Names the symbol --batch binds");
  cmd->add_option("--dim", f->dims, "Binds a symbolic dim: NAME=VALUE (repeatable)");
  AddMaxNodesFlag(cmd, &f->max_nodes);
}

void AddMaxNodesFlag(CLI::App* cmd, int64_t* max_nodes) {
  cmd->add_option("--max-nodes", *max_nodes,
                  "Most nodes a model may have, all graphs together (time and memory grow with "
                  "them; README: Large graphs)")
      ->type_name("INT:POSITIVE")
      ->check(CLI::Validator(
          [](std::string& v) {
            const std::string problem = IntegerFlagProblem(v, true);
            if (!problem.empty()) return problem;
            const size_t digit = v.find_first_of("0123456789");
            const bool zero = v.find_first_not_of("0 ", digit) == std::string::npos;
            return zero ? "'" + v + "' must be positive" : std::string();
          },
          ""));
}

namespace {

/// The values of E as CLI11's allowed set, from its table.
template <typename E>
CLI::IsMember Allowed() {
  return CLI::IsMember(EnumNames<E>());
}

}  // namespace

void AddSharedPlanFlags(CLI::App* cmd, PlanFlags* f) {
  cmd->add_option("--optimizer", f->optimizer, "sgd, momentum (SGD + momentum), adam, adamw")
      ->check(Allowed<Optimizer>());
  cmd->add_option("--attention", f->attention, "fused (SDPA kernels) or eager")
      ->check(Allowed<Attention>());
  cmd->add_option("--loss", f->loss,
                  "cross_entropy, mse or none (on the first output; memplan warns when the "
                  "default meets an output that is not class logits)")
      ->check(Allowed<Loss>())
      ->each([f](const std::string&) { f->loss_given = true; });
  cmd->add_option("--allocator", f->allocator, "default or expandable (expandable_segments)")
      ->check(Allowed<AllocatorKind>());
  cmd->add_option("--no-warn", f->no_warn,
                  "Leaves out a class of warnings: export-mode (how the model was exported, e.g. "
                  "'cannot tell whether ... train mode')")
      ->check(CLI::IsMember({"export-mode"}));
  cmd->add_option("--freeze", f->freeze,
                  "Parameters kept frozen: module paths (or dotted suffixes) or regexes searched "
                  "in parameter names (repeatable, or comma-separated)")
      ->delimiter(',');
  cmd->add_option("--train-only", f->train_only,
                  "The only parameters trained (as --freeze names them); the rest is frozen")
      ->delimiter(',');
  cmd->add_option("--lora", f->lora,
                  "LoRA adapters as PEFT adds them, base frozen: r=R[,alpha=A,dropout=P,"
                  "targets=NAME,...] (default dropout 0.05, targets q_proj,v_proj)");
  cmd->add_option("--model-load", f->model_load,
                  "bf16/fp16: how the weights reach the GPU: cast (fp32, then cast there; the "
                  "fp32 copies stay cached), cast-empty-cache (then torch.cuda.empty_cache()), "
                  "direct (moved in their dtype); auto: cast-empty-cache training, cast inference")
      ->check(Allowed<ModelLoad>());
  cmd->add_option("--weights", f->weights,
                  "Storage of the frozen Linear weights: native, int8, nf4 (QLoRA), int4, fp8")
      ->check(Allowed<WeightFormat>());
}

void AddPlanFlags(CLI::App* cmd, PlanFlags* f, bool with_mode) {
  if (with_mode) {
    cmd->add_option("--mode", f->mode, "train (forward, backward, optimizer) or inference")
        ->check(Allowed<Mode>());
  }
  cmd->add_option("--precision", f->precision,
                  "fp32, amp_bf16, amp_fp16 (autocast), bf16, fp16 (whole model cast)")
      ->check(Allowed<Precision>());
  AddSharedPlanFlags(cmd, f);
  cmd->add_option("--step", f->step, "steady (optimizer state exists) or first")
      ->check(Allowed<StepKind>());
  cmd->add_option("--reserve", f->reserve,
                  "CUDA context and library memory outside PyTorch (default 767MiB)");
  cmd->add_option("--checkpoint", f->checkpoint,
                  "Modules to recompute in backward: full paths or their dotted suffixes "
                  "(repeatable, or comma-separated)")
      ->delimiter(',');
}

void AddDistFlags(CLI::App* cmd, PlanFlags* f) {
  cmd->add_option("--world-size", f->world_size,
                  "Data-parallel ranks (GPUs); the batch is per rank (default 1)");
  cmd->add_option("--strategy", f->strategy,
                  "single, ddp (DistributedDataParallel), fsdp (FSDP2 fully_shard), zero1, "
                  "zero2, zero3 (DeepSpeed ZeRO stages)")
      ->check(Allowed<ParallelStrategy>())
      ->default_str("single");
  cmd->add_option("--fsdp-units", f->fsdp_units,
                  "Modules sharded as FSDP units of their own (default: the repeated blocks; "
                  "the root is one more)")
      ->delimiter(',');
  cmd->add_option("--reshard-after-forward", f->reshard_after_forward,
                  "FSDP: free a unit's gathered parameters after its forward (on, default) "
                  "or keep them for backward (off)")
      ->check(Allowed<Switch>())
      ->default_str("on");
}

void AddFormatFlag(CLI::App* cmd, std::string* format, const std::vector<std::string>& choices) {
  *format = choices.front();
  cmd->add_option("--format", *format, "Output format")->check(CLI::IsMember(choices));
}

Result<ShapeBindings> ToBindings(const ModelFlags& f) {
  ShapeBindings b;
  if (f.batch != -1 || f.batch_given) {
    if (f.batch <= 0) return Status::Error(f.model + ": --batch must be a positive integer");
    b.batch = f.batch;
  }
  b.batch_dim = f.batch_dim;
  for (const std::string& d : f.dims) {
    size_t eq = d.find('=');
    if (eq == std::string::npos || eq == 0) {
      return Status::Error(f.model + ": --dim '" + d + "': expected NAME=VALUE");
    }
    const std::string value = d.substr(eq + 1);
    // Decimal, as every number flag (IntegerFlagProblem): "010" is not 10 or 8.
    const std::string problem = IntegerFlagProblem(value, false);
    if (!problem.empty()) return Status::Error(f.model + ": --dim '" + d + "': " + problem);
    int64_t v = 0;
    try {
      size_t used = 0;
      v = std::stoll(value, &used);
      if (used != value.size()) throw std::invalid_argument(value);
    } catch (const std::exception&) {
      return Status::Error(f.model + ": --dim '" + d + "': '" + value + "' is not an integer");
    }
    if (v <= 0) return Status::Error(f.model + ": --dim '" + d + "': the value must be positive");
    const std::string name = d.substr(0, eq);
    auto prev = b.dims.find(name);
    if (prev != b.dims.end() && prev->second != v) {
      return Status::Error(f.model + ": --dim " + name + " is given twice (" +
                           std::to_string(prev->second) + " and " + std::to_string(v) + ")");
    }
    b.dims[name] = v;
  }
  return b;
}

namespace {

/// Parses one option's value into `out`, the error naming the flag.
template <typename E>
Status ParseFlag(const std::string& value, E* out) {
  auto v = ParseEnum<E>(value);
  if (!v.ok()) return Status::Error("--" + std::string(EnumTable<E>::kOption) + ": " + v.message());
  *out = v.value();
  return Status();
}

}  // namespace

Result<PlanOptions> ToPlanOptions(const PlanFlags& f) {
  PlanOptions o;
  AllocatorKind allocator = AllocatorKind::kDefault;
  for (const Status& s : {ParseFlag(f.mode, &o.mode), ParseFlag(f.precision, &o.precision),
                          ParseFlag(f.optimizer, &o.optimizer),
                          ParseFlag(f.attention, &o.attention), ParseFlag(f.loss, &o.loss),
                          ParseFlag(f.step, &o.step), ParseFlag(f.allocator, &allocator)}) {
    if (!s.ok()) return s;
  }
  o.allocator.expandable_segments = allocator == AllocatorKind::kExpandable;
  if (!f.reserve.empty()) {
    auto r = ParseSize(f.reserve);
    if (!r.ok()) return Status::Error("--reserve: " + r.message());
    o.context_bytes = r.value();
  }
  // Checkpointing recomputes in backward: an inference pass has none.
  if (o.mode == Mode::kInference && !f.checkpoint.empty()) {
    return Status::Error("--checkpoint: recomputation happens in backward; it needs --mode train");
  }
  o.checkpoint_segments = f.checkpoint;
  o.dist.world_size = f.world_size;
  if (f.strategy.empty()) {
    if (f.world_size > 1) {
      return Status::Error("--world-size " + std::to_string(f.world_size) +
                           ": needs --strategy ddp, fsdp, zero1, zero2 or zero3");
    }
  } else {
    Status s = ParseFlag(f.strategy, &o.dist.strategy);
    if (!s.ok()) return s;
  }
  o.dist.fsdp_units = f.fsdp_units;
  if (!f.reshard_after_forward.empty()) {
    Switch reshard = Switch::kOn;
    Status s = ParseFlag(f.reshard_after_forward, &reshard);
    if (!s.ok()) return s;
    if (o.dist.strategy != ParallelStrategy::kFsdp && o.dist.strategy != ParallelStrategy::kZero3) {
      return Status::Error(std::string("--reshard-after-forward: applies to --strategy fsdp or "
                                       "zero3, not ") +
                           EnumName(o.dist.strategy));
    }
    o.dist.reshard_after_forward = reshard == Switch::kOn;
  }
  Status dist = CheckDistOptions(o.dist, o.mode);
  if (!dist.ok()) return dist;
  o.freeze = f.freeze;
  o.train_only = f.train_only;
  Status w = ParseFlag(f.weights, &o.weights);
  if (!w.ok()) return w;
  Status load = ParseFlag(f.model_load, &o.model_load);
  if (!load.ok()) return load;
  if (!f.lora.empty()) {
    auto l = ParseLora(f.lora);
    if (!l.ok()) return l.status();
    o.lora = l.value();
  }
  return o;
}

Status CheckModelLoad(const PlanOptions& o, const std::vector<Precision>& precisions) {
  if (o.model_load == ModelLoad::kAuto) return Status();
  std::string planned;
  for (Precision p : precisions) {
    if (p == Precision::kBf16 || p == Precision::kFp16) return Status();
    planned += (planned.empty() ? "" : ", ") + std::string(PrecisionName(p));
  }
  return Status::Error(std::string("--model-load ") + EnumName(o.model_load) +
                       ": applies to --precision bf16 or fp16 (a whole-model cast), not " +
                       planned);
}

Result<std::vector<Precision>> ParsePrecisionList(const std::string& text) {
  if (text == "any")
    return std::vector<Precision>{Precision::kAmpBf16, Precision::kAmpFp16, Precision::kFp32};
  std::vector<Precision> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    auto p = ParsePrecision(item);
    if (!p.ok()) return Status::Error("--precision: " + p.message());
    if (std::find(out.begin(), out.end(), p.value()) == out.end()) out.push_back(p.value());
  }
  if (out.empty()) return Status::Error("--precision: empty list");
  return out;
}

void AddBudgetFlags(CLI::App* cmd, BudgetFlags* f) {
  cmd->add_option("--budget", f->budget, "Device memory to fit in: 24GiB, 24GB, 24000MiB");
  cmd->add_option("--device", f->device,
                  "A device preset (h100-sxm, a100-40gb, rtx-4090, ...): its memory, context "
                  "and speed");
  cmd->add_option("--margin", f->margin, "Share of the budget kept free, in percent (default 5)");
  cmd->add_option("--reserve", f->reserve,
                  "CUDA context and library memory outside PyTorch (default: the device's, "
                  "else 767MiB)");
}

Result<BudgetChoice> ToBudget(const BudgetFlags& f) {
  BudgetChoice b;
  b.device = *FindDevice("h100-sxm");
  if (!f.device.empty()) {
    const DevicePreset* preset = FindDevice(f.device);
    if (preset == nullptr) {
      std::string names;
      for (const DevicePreset& d : ListDevices()) names += (names.empty() ? "" : ", ") + d.name;
      return Status::Error("--device '" + f.device + "': unknown device (known: " + names + ")");
    }
    b.device = *preset;
    b.device_label = preset->display;
    b.budget_bytes = preset->memory_bytes;
    b.context_bytes = preset->context_bytes;
  }
  if (!f.budget.empty()) {
    auto v = ParseSize(f.budget);
    if (!v.ok()) return Status::Error("--budget: " + v.message());
    if (v.value() <= 0) return Status::Error("--budget: must be positive");
    b.budget_bytes = v.value();
  }
  if (!f.reserve.empty()) {
    auto c = ParseSize(f.reserve);
    if (!c.ok()) return Status::Error("--reserve: " + c.message());
    b.context_bytes = c.value();
  }
  auto margin = ParsePercent("--margin", f.margin);
  if (!margin.ok()) return margin.status();
  if (!(margin.value() >= 0 && margin.value() < 1)) {
    return Status::Error("--margin: must be from 0 to below 100 %");
  }
  b.margin = margin.value();
  return b;
}

Result<Graph> LoadGraph(const std::string& path, int64_t max_nodes) {
  NoteInput(path);
  ImportLimits limits;
  limits.max_nodes = max_nodes;
  return ImportOnnxFile(path, limits);
}

std::vector<std::string> ModelWarnings(const Graph& g, const PlanFlags& f, Mode mode) {
  std::vector<std::string> out;
  if (mode != Mode::kTrain) return out;
  const bool export_mode_silenced =
      std::find(f.no_warn.begin(), f.no_warn.end(), "export-mode") != f.no_warn.end();
  const std::string exported =
      export_mode_silenced ? "" : ExportModeWarning(g.source, DetectExportMode(g));
  if (!exported.empty()) out.push_back(exported);
  if (!f.loss_given && f.loss == EnumName(Loss::kCrossEntropy)) {
    const std::string why = NotClassLogits(g);
    if (!why.empty()) {
      out.push_back(g.source + ": the default loss (cross entropy on class logits) may not fit: " +
                    why + "; pass --loss mse or --loss none (--loss cross_entropy keeps it)");
    }
  }
  return out;
}

Result<Plan> PlanFromFlags(const ModelFlags& m, const PlanFlags& p, bool keep_events) {
  auto loaded = LoadGraph(m.model, m.max_nodes);
  if (!loaded.ok()) return loaded.status();
  auto bindings = ToBindings(m);
  if (!bindings.ok()) return bindings.status();
  auto options = ToPlanOptions(p);
  if (!options.ok()) return options.status();
  Status load = CheckModelLoad(options.value(), {options->precision});
  if (!load.ok()) return load;
  options->keep_events = keep_events;
  std::vector<std::string> model_warnings = ModelWarnings(loaded.value(), p, options->mode);
  auto plan = PlanModel(std::move(loaded.value()), bindings.value(), options.value());
  if (plan.ok()) {
    plan->warnings.insert(plan->warnings.end(), model_warnings.begin(), model_warnings.end());
  }
  return plan;
}

namespace {

std::vector<std::string>& QueuedWarnings() {
  static std::vector<std::string> queued;
  return queued;
}

}  // namespace

void PrintWarnings(const std::vector<std::string>& warnings) {
  QueuedWarnings().insert(QueuedWarnings().end(), warnings.begin(), warnings.end());
}

void FlushWarnings(int exit_code) {
  if (exit_code != kExitBadInput) {
    for (const std::string& w : QueuedWarnings()) std::cerr << "warning: " << w << "\n";
  }
  QueuedWarnings().clear();
}

int Fail(const std::string& message) {
  std::cerr << "memplan: error: " << message << "\n";
  return kExitBadInput;
}

}  // namespace memplan
