#include "cli/format.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <stdexcept>

#include "cli/escape.h"
#include "planner/text.h"

namespace memplan {

std::string FormatBytes(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  char buf[64];
  const double a = std::fabs(b);
  if (a >= 1024.0 * 1024 * 1024) {
    std::snprintf(buf, sizeof buf, "%.2f GiB", b / (1024.0 * 1024 * 1024));
  } else if (a >= 1024.0 * 1024) {
    std::snprintf(buf, sizeof buf, "%.1f MiB", b / (1024.0 * 1024));
  } else if (a >= 1024.0) {
    std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024.0);
  } else {
    std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(bytes));
  }
  return buf;
}

std::string FormatCount(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

Result<double> ParsePercent(const std::string& flag, const std::string& text) {
  std::string t = text;
  if (!t.empty() && t.back() == '%') t.pop_back();
  // Decimal text only: std::stod also reads hex ("0x5") and "infinity".
  if (t.empty() || t.find_first_not_of("0123456789.eE+-") != std::string::npos) {
    return Status::Error(flag + " '" + text + "': expected a percentage in [0, 100), e.g. 5 or 5%");
  }
  try {
    size_t used = 0;
    const double v = std::stod(t, &used);
    if (used != t.size() || !(v >= 0 && v < 100)) throw std::invalid_argument(t);
    return v / 100.0;
  } catch (const std::exception&) {
    return Status::Error(flag + " '" + text + "': expected a percentage in [0, 100), e.g. 5 or 5%");
  }
}

Result<int64_t> ParseSize(const std::string& text) {
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) {
    ++i;
  }
  if (i == 0) return Status::Error("'" + text + "' is not a size (try 24GiB, 80GB, 24000MiB)");
  double value = 0;
  try {
    size_t used = 0;
    const std::string number = text.substr(0, i);
    value = std::stod(number, &used);
    // "1.2.3GiB": the whole number must be read, with at most one point.
    if (used != number.size() || number.find('.') != number.rfind('.')) {
      throw std::invalid_argument(number);
    }
  } catch (const std::exception&) {
    return Status::Error("'" + Clip(text, 200) + "' is not a size (try 24GiB, 80GB, 24000MiB)");
  }
  std::string unit;
  for (size_t j = i; j < text.size(); ++j) {
    if (text[j] != ' ')
      unit += static_cast<char>(std::tolower(static_cast<unsigned char>(text[j])));
  }
  double mult = 0;
  if (unit.empty() || unit == "b")
    mult = 1;
  else if (unit == "kib" || unit == "ki" || unit == "k")
    mult = 1024.0;
  else if (unit == "mib" || unit == "mi" || unit == "m")
    mult = 1024.0 * 1024;
  else if (unit == "gib" || unit == "gi" || unit == "g")
    mult = 1024.0 * 1024 * 1024;
  else if (unit == "tib" || unit == "ti" || unit == "t")
    mult = 1024.0 * 1024 * 1024 * 1024;
  else if (unit == "kb")
    mult = 1e3;
  else if (unit == "mb")
    mult = 1e6;
  else if (unit == "gb")
    mult = 1e9;
  else if (unit == "tb")
    mult = 1e12;
  else
    return Status::Error(
        "'" + text + "': unknown unit '" + unit +
        "' (binary: KiB MiB GiB TiB, also Ki/K, Mi/M, Gi/G, Ti/T; decimal: KB MB GB TB)");
  const double bytes = value * mult;
  if (!(bytes >= 0) || bytes > 9.0e18) return Status::Error("'" + text + "' is out of range");
  return static_cast<int64_t>(std::llround(bytes));
}

nlohmann::json PeakJson(const Peak& p, bool with_at) {
  nlohmann::json j;
  j["allocated_bytes"] = p.allocated_bytes;
  j["reserved_bytes"] = p.reserved_bytes;
  j["device_bytes"] = p.device_bytes;
  j["lower_bound_bytes"] = p.lower_bound_bytes;
  j["fragmentation"] = p.fragmentation;
  if (with_at) {
    j["at"] = {{"node", p.node}, {"module", p.module}, {"phase", PhaseName(p.phase)}};
  }
  nlohmann::json b;
  for (int c = 0; c < kNumCategories; ++c) {
    b[CategoryName(static_cast<Category>(c))] = p.breakdown.bytes[c];
  }
  j["breakdown"] = b;
  // Per phase of the step (each phase's start level included), for comparing a
  // run phase by phase (memplan_torch).
  nlohmann::json phases = nlohmann::json::object();
  for (int ph = 0; ph < 3; ++ph) {
    if (p.phase_allocated[ph] == 0 && p.phase_reserved[ph] == 0) continue;
    phases[PhaseName(static_cast<Phase>(ph))] = {{"allocated_bytes", p.phase_allocated[ph]},
                                                 {"reserved_bytes", p.phase_reserved[ph]}};
  }
  j["phases"] = phases;
  return j;
}

nlohmann::json ConfigJson(const Plan& plan) {
  const PlanOptions& o = plan.options;
  nlohmann::json c;
  c["mode"] = ModeName(o.mode);
  // Fixed-shape models have no batch symbol: null, not a made-up number.
  c["batch"] = plan.batch > 0 ? nlohmann::json(plan.batch) : nlohmann::json(nullptr);
  c["batch_symbol"] =
      plan.batch_symbol.empty() ? nlohmann::json(nullptr) : nlohmann::json(plan.batch_symbol);
  c["dims"] = nlohmann::json::object();
  for (const auto& kv : plan.dims) c["dims"][kv.first] = kv.second;
  c["precision"] = PrecisionName(o.precision);
  if (o.mode == Mode::kTrain) {
    c["optimizer"] = OptimizerName(o.optimizer);
    c["loss"] = LossName(o.loss);
    c["step"] = o.step == StepKind::kFirst ? "first" : "steady";
    c["checkpoint"] = o.checkpoint_segments;
  }
  c["attention"] = AttentionName(o.attention);
  c["allocator"] = o.allocator.expandable_segments ? "expandable" : "default";
  c["context_bytes"] = plan.context_bytes;
  if (o.dist.strategy != ParallelStrategy::kSingle) {
    c["strategy"] = EnumName(o.dist.strategy);
    c["world_size"] = o.dist.world_size;
    if (o.dist.strategy == ParallelStrategy::kFsdp || o.dist.strategy == ParallelStrategy::kZero3) {
      c["reshard_after_forward"] = o.dist.reshard_after_forward;
      c["fsdp_units"] = o.dist.fsdp_units;
    }
  }
  return c;
}

namespace {

/// One rank's peak by what it holds (Plan::rank), as label and bytes.
std::vector<std::pair<std::string, int64_t>> RankParts(const RankBreakdown& r) {
  const bool sharded =
      r.strategy == ParallelStrategy::kFsdp || r.strategy == ParallelStrategy::kZero3;
  return {{sharded ? "parameters (shards)" : "parameters (replica)", r.params_local},
          {"gathered full parameters", r.params_gathered},
          {"gradients", r.grads},
          {"optimizer state", r.optimizer_state},
          {"gradient buckets", r.grad_buckets},
          {"reduce-scatter buffers", r.reduce_scatter},
          {"activations and the rest", r.other}};
}

}  // namespace

nlohmann::json RankJson(const Plan& plan) {
  if (plan.options.dist.strategy == ParallelStrategy::kSingle) return nullptr;
  const RankBreakdown& r = plan.rank;
  return {{"strategy", EnumName(r.strategy)},
          {"world_size", r.world_size},
          {"units", r.units},
          {"unit_running", r.unit_running},
          {"params_local_bytes", r.params_local},
          {"params_gathered_bytes", r.params_gathered},
          {"grads_bytes", r.grads},
          {"optimizer_state_bytes", r.optimizer_state},
          {"grad_bucket_bytes", r.grad_buckets},
          {"reduce_scatter_bytes", r.reduce_scatter},
          {"other_bytes", r.other},
          {"nccl_bytes", r.nccl_bytes}};
}

std::string RankTable(const Plan& plan) {
  if (plan.options.dist.strategy == ParallelStrategy::kSingle) return "";
  const RankBreakdown& r = plan.rank;
  std::ostringstream os;
  char line[200];
  os << "\n  per rank of " << r.world_size << " (" << EnumName(r.strategy);
  if (r.units > 0) {
    os << ", " << r.units << " units, reshard after forward "
       << (plan.options.dist.reshard_after_forward ? "on" : "off");
  }
  os << "), at the peak";
  if (!r.unit_running.empty()) os << " (unit " << r.unit_running << ")";
  os << ":\n";
  for (const auto& [label, bytes] : RankParts(r)) {
    std::snprintf(line, sizeof line, "    %-26s %12s\n", label.c_str(), FormatBytes(bytes).c_str());
    os << line;
  }
  std::snprintf(line, sizeof line, "    %-26s %12s  outside the allocator (in device total)\n",
                "NCCL", FormatBytes(r.nccl_bytes).c_str());
  os << line;
  return os.str();
}

nlohmann::json PlanJson(const std::string& model, const Plan& plan) {
  nlohmann::json j;
  j["schema_version"] = kPlanJsonSchemaVersion;
  j["model"] = model;
  j["config"] = ConfigJson(plan);
  nlohmann::json peak = PeakJson(plan.peak, true);
  j["breakdown"] = peak["breakdown"];
  peak.erase("breakdown");
  j["peak"] = peak;
  if (plan.options.mode == Mode::kTrain) {
    j["first_step"] = PeakJson(plan.first_step, true);
    j["steady"] = PeakJson(plan.steady, true);
  }
  j["parameters"] = {
      {"count", plan.parameter_count},          {"bytes", plan.parameter_bytes},
      {"buffer_bytes", plan.buffer_bytes},      {"frozen_count", plan.frozen_count},
      {"lora_count", plan.lora_count},          {"weights", EnumName(plan.options.weights)},
      {"quantized_bytes", plan.quantized_bytes}};
  j["flops"] = {{"forward", plan.forward_flops},
                {"backward", plan.backward_flops},
                {"recompute", plan.recompute_flops}};
  nlohmann::json modules = nlohmann::json::array();
  for (const ModulePeak& m : plan.modules) {
    modules.push_back({{"module", m.module},
                       {"forward_allocated_bytes", m.forward_allocated},
                       {"backward_allocated_bytes", m.backward_allocated},
                       {"forward_rise_bytes", m.forward_rise},
                       // What forward leaves allocated, or (negative) releases.
                       {"forward_kept_bytes", std::max<int64_t>(0, m.forward_kept)},
                       {"forward_released_bytes", std::max<int64_t>(0, -m.forward_kept)},
                       {"backward_rise_bytes", m.backward_rise}});
  }
  j["modules"] = modules;
  j["coverage"] = CoverageJson(plan);
  if (plan.options.dist.strategy != ParallelStrategy::kSingle) j["rank"] = RankJson(plan);
  j["kernel_limits"] = KernelLimitsJson(plan);
  j["warnings"] = plan.warnings;
  return j;
}

std::string BatchLabel(const Plan& plan) {
  if (plan.batch > 0) return "batch " + std::to_string(plan.batch);
  return "fixed shapes";
}

std::string ConfigDetails(const Plan& plan) {
  const PlanOptions& o = plan.options;
  std::string s = "  dims ";
  if (plan.dims.empty()) s += "none (fixed shapes)";
  bool first = true;
  for (const auto& kv : plan.dims) {
    s += (first ? "" : ", ") + kv.first + "=" + std::to_string(kv.second);
    first = false;
  }
  if (o.mode == Mode::kTrain) {
    s += "; loss ";
    s += LossName(o.loss);
    s += "; ";
    if (o.checkpoint_segments.empty()) {
      s += "no checkpointing";
    } else {
      s += "checkpointed (" + std::to_string(o.checkpoint_segments.size()) + "): ";
      for (size_t i = 0; i < o.checkpoint_segments.size(); ++i) {
        s += (i ? ", " : "") + o.checkpoint_segments[i];
      }
    }
  }
  // What fine-tuning was planned, as given.
  auto list = [](const std::vector<std::string>& v) {
    std::string out;
    for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + v[i];
    return out;
  };
  if (!o.freeze.empty()) s += "; frozen " + list(o.freeze);
  if (!o.train_only.empty()) s += "; trained only " + list(o.train_only);
  if (o.lora.r > 0) {
    s += "; LoRA r=" + std::to_string(o.lora.r) + " on " + list(o.lora.targets);
  }
  if (o.weights != WeightFormat::kNative) s += std::string("; weights ") + EnumName(o.weights);
  return s + "\n";
}

std::string PlanMarkdown(const std::string& model, const Plan& plan) {
  std::ostringstream os;
  const PlanOptions& o = plan.options;
  const Peak& p = plan.peak;
  // Model text (the file name, module and node names) as literal Markdown.
  os << "### " << MarkdownText(model, 400) << "\n\n"
     << ModeName(o.mode) << ", " << BatchLabel(plan) << ", " << PrecisionName(o.precision);
  if (o.mode == Mode::kTrain) {
    os << ", " << OptimizerName(o.optimizer) << ", " << AttentionName(o.attention) << " attention, "
       << (o.step == StepKind::kFirst ? "first" : "steady") << " step";
  }
  std::string details = ConfigDetails(plan);
  details = details.substr(2, details.size() - 3);  // without the indent and newline
  os << "; " << MarkdownText(details, 2000) << "\n\n"
     << "| peak | bytes | as PyTorch reports it |\n| --- | ---: | --- |\n"
     << "| allocated | " << FormatBytes(p.allocated_bytes)
     << " | `torch.cuda.max_memory_allocated()` |\n"
     << "| reserved | " << FormatBytes(p.reserved_bytes)
     << " | `torch.cuda.max_memory_reserved()` |\n"
     << "| device | " << FormatBytes(p.device_bytes) << " | nvidia-smi (reserved + context"
     << (o.dist.strategy == ParallelStrategy::kSingle ? "" : " + NCCL") << ") |\n\n"
     << "Peak at " << MarkdownText(p.node, 400) << " (" << PhaseName(p.phase) << "):\n\n"
     << "| category | bytes | share |\n| --- | ---: | ---: |\n";
  char line[160];
  for (int c = 0; c < kNumCategories; ++c) {
    const int64_t b = p.breakdown.bytes[c];
    std::snprintf(line, sizeof line, "| %s | %s | %.1f %% |\n",
                  CategoryName(static_cast<Category>(c)), FormatBytes(b).c_str(),
                  p.allocated_bytes > 0 ? 100.0 * b / p.allocated_bytes : 0.0);
    os << line;
  }
  if (o.dist.strategy != ParallelStrategy::kSingle) {
    os << "\nPer rank of " << plan.rank.world_size << " (" << EnumName(o.dist.strategy)
       << "):\n\n| part | bytes |\n| --- | ---: |\n";
    for (const auto& [label, bytes] : RankParts(plan.rank)) {
      os << "| " << label << " | " << FormatBytes(bytes) << " |\n";
    }
    os << "| NCCL (outside the allocator) | " << FormatBytes(plan.rank.nccl_bytes) << " |\n";
  }
  os << "\nParameters " << FormatCount(plan.parameter_count) << " ("
     << FormatBytes(plan.parameter_bytes) << ")";
  if (o.mode == Mode::kTrain) {
    os << "; first step peak " << FormatBytes(plan.first_step.allocated_bytes)
       << " allocated, steady " << FormatBytes(plan.steady.allocated_bytes);
  }
  os << ".\n";
  for (const std::string& w : plan.warnings) os << "\n> warning: " << MarkdownText(w, 1000) << "\n";
  return os.str();
}

std::string PlanTable(const std::string& model, const Plan& plan) {
  std::ostringstream os;
  const PlanOptions& o = plan.options;
  const Peak& p = plan.peak;
  os << model << "  " << ModeName(o.mode) << ", " << BatchLabel(plan) << ", "
     << PrecisionName(o.precision);
  if (o.mode == Mode::kTrain) {
    os << ", " << OptimizerName(o.optimizer) << ", " << AttentionName(o.attention) << " attention, "
       << (o.step == StepKind::kFirst ? "first" : "steady") << " step";
  }
  os << "\n" << ConfigDetails(plan) << "\n";
  char line[256];
  auto row = [&](const char* label, int64_t bytes, const char* note) {
    std::snprintf(line, sizeof line, "  %-28s %12s  %s\n", label, FormatBytes(bytes).c_str(), note);
    os << line;
  };
  row("peak allocated", p.allocated_bytes, "torch.cuda.max_memory_allocated()");
  row("peak reserved", p.reserved_bytes, "torch.cuda.max_memory_reserved()");
  row("device total", p.device_bytes,
      o.dist.strategy == ParallelStrategy::kSingle
          ? "what nvidia-smi shows (reserved + context)"
          : "what nvidia-smi shows per GPU (reserved + context + NCCL)");
  os << "\n  peak at " << p.node << (p.module.empty() ? "" : " in module " + p.module) << " ("
     << PhaseName(p.phase) << ")\n\n";
  for (int c = 0; c < kNumCategories; ++c) {
    const int64_t b = p.breakdown.bytes[c];
    const double pct = p.allocated_bytes > 0 ? 100.0 * b / p.allocated_bytes : 0.0;
    std::snprintf(line, sizeof line, "    %-22s %12s  %5.1f%%\n",
                  CategoryName(static_cast<Category>(c)), FormatBytes(b).c_str(), pct);
    os << line;
  }
  os << RankTable(plan);
  os << "\n  parameters " << FormatCount(plan.parameter_count);
  if (plan.frozen_count > 0 || plan.lora_count > 0) {
    os << " trained";
    if (plan.lora_count > 0) os << " (LoRA " << FormatCount(plan.lora_count) << ")";
    os << ", " << FormatCount(plan.frozen_count) << " frozen";
  }
  os << " (" << FormatBytes(plan.parameter_bytes);
  if (plan.quantized_bytes > 0) {
    os << ", of which " << EnumName(plan.options.weights) << " Linear weights "
       << FormatBytes(plan.quantized_bytes);
  }
  os << ")";
  if (plan.buffer_bytes > 0) os << ", buffers " << FormatBytes(plan.buffer_bytes);
  os << "\n";
  if (o.mode == Mode::kTrain) {
    os << "  first step peak " << FormatBytes(plan.first_step.allocated_bytes)
       << " allocated, steady " << FormatBytes(plan.steady.allocated_bytes) << "\n";
  }
  os << "\n  evidence: " << EvidenceLine(plan) << "\n";
  const Coverage& cov = plan.coverage;
  for (const RuleShare& r : cov.rules) {
    if (r.backed || r.peak_bytes == 0) continue;
    std::snprintf(line, sizeof line, "    unmeasured %-28s %12s  %5.1f%%\n", r.rule.c_str(),
                  FormatBytes(r.peak_bytes).c_str(),
                  cov.peak_bytes > 0 ? 100.0 * r.peak_bytes / cov.peak_bytes : 0.0);
    os << line;
  }
  return os.str();
}

std::string EvidenceLine(const Plan& plan) {
  const Coverage& c = plan.coverage;
  const std::string config =
      std::string(ModeName(plan.options.mode)) + ", " + PrecisionName(plan.options.precision);
  std::string unused;  // unmeasured rules that hold nothing at the peak
  for (const RuleShare& r : c.rules) {
    if (!r.backed && r.peak_bytes == 0) unused += (unused.empty() ? "" : ", ") + r.rule;
  }
  std::ostringstream os;
  char pct[32];
  std::snprintf(pct, sizeof pct, "%.1f %%", 100.0 * c.UnbackedShare());
  if (c.unbacked_bytes == 0) {
    os << "100 % of the peak rests on rules measured in " << config;
  } else {
    os << pct << " of the peak (" << FormatBytes(c.unbacked_bytes)
       << ") rests on rules not measured in " << config << ":";
    int shown = 0;
    for (const RuleShare& r : c.rules) {
      if (r.backed || r.peak_bytes == 0) continue;
      if (shown++ == 4) {
        os << " ...";
        break;
      }
      os << (shown > 1 ? ", " : " ") << r.rule;
    }
  }
  if (!unused.empty()) os << "; also used, unmeasured: " << unused;
  return os.str();
}

nlohmann::json CoverageJson(const Plan& plan) {
  const Coverage& c = plan.coverage;
  nlohmann::json rules = nlohmann::json::array();
  for (const RuleShare& r : c.rules) {
    rules.push_back({{"rule", r.rule},
                     {"backed", r.backed},
                     {"evidence", r.evidence},
                     {"peak_bytes", r.peak_bytes}});
  }
  return {{"peak_bytes", c.peak_bytes},
          {"unbacked_bytes", c.unbacked_bytes},
          {"unbacked_share", c.UnbackedShare()},
          {"rules", rules}};
}

nlohmann::json KernelLimitsJson(const Plan& plan) {
  auto one = [](const KernelLimit& k) -> nlohmann::json {
    if (k.elements == 0) return nullptr;
    return {{"elements", k.elements}, {"node", k.node}, {"op", k.op_type}};
  };
  return {{"int32_index_elements", kInt32IndexElements},
          {"int32_overflow", one(plan.int32_overflow)},
          {"largest_tensor", one(plan.largest_tensor)}};
}

}  // namespace memplan
