#include "cli/options.h"

#include <iostream>

#include "cli/commands.h"
#include "cli/files.h"
#include "cli/format.h"
#include "onnx_import/importer.h"

namespace memplan {

void AddModelFlags(CLI::App* cmd, ModelFlags* f) {
  cmd->add_option("model", f->model, "ONNX model file")->required();
  cmd->add_option("--batch,-b", f->batch, "Binds the batch symbol (dim 0 of the first input)");
  cmd->add_option("--dim", f->dims, "Binds a symbolic dim: NAME=VALUE (repeatable)");
}

void AddPlanFlags(CLI::App* cmd, PlanFlags* f, bool with_mode) {
  if (with_mode) {
    cmd->add_option("--mode", f->mode, "train (forward, backward, optimizer) or inference")
        ->check(CLI::IsMember({"train", "inference"}));
  }
  cmd->add_option("--precision", f->precision,
                  "fp32, amp_bf16, amp_fp16 (autocast), bf16, fp16 (whole model cast)")
      ->check(CLI::IsMember({"fp32", "amp_bf16", "amp_fp16", "bf16", "fp16"}));
  cmd->add_option("--optimizer", f->optimizer, "sgd, momentum (SGD + momentum), adam, adamw")
      ->check(CLI::IsMember({"sgd", "momentum", "adam", "adamw"}));
  cmd->add_option("--attention", f->attention, "fused (SDPA kernels) or eager")
      ->check(CLI::IsMember({"fused", "eager"}));
  cmd->add_option("--loss", f->loss, "cross_entropy, mse or none (on the first output)")
      ->check(CLI::IsMember({"cross_entropy", "mse", "none"}));
  cmd->add_option("--step", f->step, "steady (optimizer state exists) or first")
      ->check(CLI::IsMember({"steady", "first"}));
  cmd->add_option("--allocator", f->allocator, "default or expandable (expandable_segments)")
      ->check(CLI::IsMember({"default", "expandable"}));
  cmd->add_option("--reserve", f->reserve,
                  "CUDA context and library memory outside PyTorch (default 767MiB)");
  cmd->add_option("--checkpoint", f->checkpoint,
                  "Modules (name prefixes) to recompute in backward (repeatable)");
}

void AddFormatFlag(CLI::App* cmd, std::string* format, const std::vector<std::string>& choices) {
  *format = choices.front();
  cmd->add_option("--format", *format, "Output format")->check(CLI::IsMember(choices));
}

Result<ShapeBindings> ToBindings(const ModelFlags& f) {
  ShapeBindings b;
  if (f.batch != -1) {
    if (f.batch <= 0) return Status::Error(f.model + ": --batch must be a positive integer");
    b.batch = f.batch;
  }
  for (const std::string& d : f.dims) {
    size_t eq = d.find('=');
    if (eq == std::string::npos || eq == 0) {
      return Status::Error(f.model + ": --dim '" + d + "': expected NAME=VALUE");
    }
    const std::string value = d.substr(eq + 1);
    int64_t v = 0;
    try {
      size_t used = 0;
      v = std::stoll(value, &used);
      if (used != value.size()) throw std::invalid_argument(value);
    } catch (const std::exception&) {
      return Status::Error(f.model + ": --dim '" + d + "': '" + value + "' is not an integer");
    }
    if (v <= 0) return Status::Error(f.model + ": --dim '" + d + "': the value must be positive");
    b.dims[d.substr(0, eq)] = v;
  }
  return b;
}

Result<Precision> ParsePrecision(const std::string& s) {
  if (s == "fp32") return Precision::kFp32;
  if (s == "amp_bf16") return Precision::kAmpBf16;
  if (s == "amp_fp16") return Precision::kAmpFp16;
  if (s == "bf16") return Precision::kBf16;
  if (s == "fp16") return Precision::kFp16;
  return Status::Error("unknown precision '" + s + "'");
}

Result<Optimizer> ParseOptimizer(const std::string& s) {
  if (s == "sgd") return Optimizer::kSgd;
  if (s == "momentum") return Optimizer::kMomentum;
  if (s == "adam") return Optimizer::kAdam;
  if (s == "adamw") return Optimizer::kAdamW;
  return Status::Error("unknown optimizer '" + s + "'");
}

Result<PlanOptions> ToPlanOptions(const PlanFlags& f) {
  PlanOptions o;
  o.mode = f.mode == "inference" ? Mode::kInference : Mode::kTrain;
  auto p = ParsePrecision(f.precision);
  if (!p.ok()) return p.status();
  o.precision = p.value();
  auto opt = ParseOptimizer(f.optimizer);
  if (!opt.ok()) return opt.status();
  o.optimizer = opt.value();
  o.attention = f.attention == "eager" ? Attention::kEager : Attention::kFused;
  o.loss = f.loss == "mse" ? Loss::kMse : f.loss == "none" ? Loss::kNone : Loss::kCrossEntropy;
  o.step = f.step == "first" ? StepKind::kFirst : StepKind::kSteady;
  o.allocator.expandable_segments = f.allocator == "expandable";
  if (!f.reserve.empty()) {
    auto r = ParseSize(f.reserve);
    if (!r.ok()) return Status::Error("--reserve: " + r.message());
    o.context_bytes = r.value();
  }
  o.checkpoint_segments = f.checkpoint;
  return o;
}

Result<Graph> LoadGraph(const std::string& path) {
  NoteInput(path);
  return ImportOnnxFile(path);
}

Result<Graph> BindShapes(const Graph& g, const ShapeBindings& b, std::vector<std::string>* warn) {
  Graph copy = g;
  Status s = InferShapes(&copy, b, warn);
  if (!s.ok()) return s;
  return copy;
}

Result<Plan> PlanFromFlags(const ModelFlags& m, const PlanFlags& p, bool keep_events) {
  auto loaded = LoadGraph(m.model);
  if (!loaded.ok()) return loaded.status();
  auto bindings = ToBindings(m);
  if (!bindings.ok()) return bindings.status();
  auto options = ToPlanOptions(p);
  if (!options.ok()) return options.status();
  options->keep_events = keep_events;
  std::vector<std::string> warnings;
  // Shapes are inferred in the imported graph itself (no copy: a large
  // model is held once).
  Status s = InferShapes(&loaded.value(), bindings.value(), &warnings);
  if (!s.ok()) return s;
  PrintWarnings(warnings);
  auto plan = MakePlan(loaded.value(), bindings->batch, options.value());
  if (plan.ok()) PrintWarnings(plan->warnings);
  return plan;
}

void PrintWarnings(const std::vector<std::string>& warnings) {
  for (const std::string& w : warnings) std::cerr << "warning: " << w << "\n";
}

int Fail(const std::string& message) {
  std::cerr << "memplan: error: " << message << "\n";
  return kExitBadInput;
}

}  // namespace memplan
