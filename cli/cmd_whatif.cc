// What-if commands: `memplan sweep` (peaks against one dim), `memplan
// compare` (models side by side), `memplan estimate` (a per-dtype summary).
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/commands.h"
#include "cli/escape.h"
#include "cli/files.h"
#include "cli/format.h"
#include "cli/options.h"
#include "cli/report.h"
#include "cli/sweep_svg.h"
#include "planner/advisor.h"
#include "planner/whatif.h"

namespace memplan {
namespace {

// `message` without its leading "MODEL: ": the planner's messages name the
// file, and the callers here put it in front themselves (or leave it out).
std::string WithoutModelPrefix(const std::string& message, const std::string& model) {
  const std::string prefix = model + ": ";
  return message.rfind(prefix, 0) == 0 ? message.substr(prefix.size()) : message;
}

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// Right-aligned columns (the first left-aligned), two spaces apart.
std::string TextTable(const std::vector<std::string>& header,
                      const std::vector<std::vector<std::string>>& rows,
                      const std::string& indent) {
  std::vector<size_t> w(header.size());
  for (size_t k = 0; k < w.size(); ++k) {
    w[k] = header[k].size();
    for (const auto& r : rows) w[k] = std::max(w[k], r[k].size());
  }
  std::ostringstream os;
  auto line = [&](const std::vector<std::string>& cells) {
    std::string l = indent;
    for (size_t k = 0; k < cells.size(); ++k) {
      const std::string pad(w[k] - cells[k].size(), ' ');
      l += (k ? "  " : "") + (k == 0 ? cells[k] + pad : pad + cells[k]);
    }
    while (!l.empty() && l.back() == ' ') l.pop_back();
    os << l << "\n";
  };
  line(header);
  for (const auto& r : rows) line(r);
  return os.str();
}

std::string BudgetText(const BudgetChoice& b) {
  if (b.budget_bytes <= 0) return "no budget";
  return "budget " + FormatBytes(b.budget_bytes) +
         (b.device_label.empty() ? "" : " (" + b.device_label + ")") + ", margin " +
         Fixed(100 * b.margin, 1) + " % -> fits when reserved + context " +
         FormatBytes(b.context_bytes) + " + unmeasured <= " +
         FormatBytes(FitBudget{b.budget_bytes, b.margin, b.context_bytes}.Usable());
}

nlohmann::json BudgetJson(const BudgetChoice& b) {
  if (b.budget_bytes <= 0) return nullptr;
  return {{"budget_bytes", b.budget_bytes},
          {"margin", b.margin},
          {"usable_bytes", FitBudget{b.budget_bytes, b.margin, b.context_bytes}.Usable()},
          {"context_bytes", b.context_bytes},
          {"device", b.device_label.empty() ? nlohmann::json() : nlohmann::json(b.device_label)}};
}

std::string RunLabel(const PlanOptions& o) {
  std::string s = ModeName(o.mode);
  if (o.mode == Mode::kTrain) {
    s += std::string(", ") + OptimizerName(o.optimizer) +
         (o.step == StepKind::kFirst ? ", first step" : ", steady step");
  }
  s += std::string(", ") + AttentionName(o.attention) + " attention";
  if (o.allocator.expandable_segments) s += ", expandable_segments";
  return s;
}

// ---------------------------------------------------------------- sweep

struct SweepArgs {
  ModelFlags model;
  PlanFlags plan;
  std::string precision = "amp_bf16";
  BudgetFlags budget;
  std::string format;
  std::string plot;
};

std::string LargestText(const SweepCurve& c, const DimRange& r) {
  if (c.largest_fitting < 0) return "";
  if (c.largest_fitting == 0) return "nothing fits, not even " + r.name + "=1";
  if (c.largest_fitting >= r.hi) {
    return std::to_string(c.largest_fitting) + " (the whole range fits; the search stops at " +
           std::to_string(r.hi) + ")";
  }
  return std::to_string(c.largest_fitting);
}

std::string SweepText(const std::string& model, const DimRange& r, const PlanOptions& o,
                      const BudgetChoice& b, const std::vector<SweepCurve>& curves, bool md) {
  std::ostringstream os;
  const std::string head = model + "  sweep " + r.name + "=" + std::to_string(r.lo) + ".." +
                           std::to_string(r.hi) + "; " + RunLabel(o);
  if (md) {
    os << "## memplan sweep: " << MarkdownText(head, 400) << "\n\n"
       << MarkdownText(BudgetText(b), 400) << "\n";
  } else {
    os << head << "\n  " << BudgetText(b) << "\n";
  }
  const bool budget = b.budget_bytes > 0;
  for (const SweepCurve& c : curves) {
    std::vector<std::string> header = {r.name, "allocated", "reserved", "device"};
    if (budget) header.push_back("fits");
    std::vector<std::vector<std::string>> rows;
    for (const SweepPoint& p : c.points) {
      std::vector<std::string> row = {std::to_string(p.value), FormatBytes(p.allocated_bytes),
                                      FormatBytes(p.reserved_bytes), FormatBytes(p.device_bytes)};
      if (budget) row.push_back(p.fits ? "yes" : "no");
      rows.push_back(row);
    }
    if (md) {
      os << "\n### " << PrecisionName(c.precision) << "\n\n"
         << MarkdownTable(header, rows, std::vector<bool>(header.size(), true));
      if (budget)
        os << "\nlargest " << MarkdownText(r.name) << " that fits: " << LargestText(c, r) << "\n";
    } else {
      os << "\n  " << PrecisionName(c.precision) << "\n" << TextTable(header, rows, "    ");
      if (budget) os << "    largest " << r.name << " that fits: " << LargestText(c, r) << "\n";
    }
  }
  return os.str();
}

nlohmann::json SweepJson(const std::string& model, const DimRange& r, const PlanOptions& o,
                         const BudgetChoice& b, const std::vector<SweepCurve>& curves) {
  nlohmann::json j;
  j["schema_version"] = 1;
  j["model"] = model;
  j["dim"] = {{"name", r.name}, {"lo", r.lo}, {"hi", r.hi}, {"values", RangeValues(r)}};
  j["config"] = {{"mode", ModeName(o.mode)},
                 {"optimizer", OptimizerName(o.optimizer)},
                 {"attention", AttentionName(o.attention)},
                 {"step", EnumName(o.step)},
                 {"allocator", o.allocator.expandable_segments ? "expandable" : "default"}};
  j["budget"] = BudgetJson(b);
  j["curves"] = nlohmann::json::array();
  for (const SweepCurve& c : curves) {
    nlohmann::json pts = nlohmann::json::array();
    for (const SweepPoint& p : c.points) {
      nlohmann::json pt = {{"value", p.value},
                           {"allocated_bytes", p.allocated_bytes},
                           {"reserved_bytes", p.reserved_bytes},
                           {"device_bytes", p.device_bytes},
                           {"need_bytes", p.need_bytes}};
      pt["fits"] = b.budget_bytes > 0 ? nlohmann::json(p.fits) : nlohmann::json();
      pts.push_back(pt);
    }
    j["curves"].push_back(
        {{"precision", PrecisionName(c.precision)},
         {"points", pts},
         {"largest_fitting",
          c.largest_fitting < 0 ? nlohmann::json() : nlohmann::json(c.largest_fitting)},
         {"largest_fitting_is_range_end", c.largest_fitting >= r.hi},
         {"plans", c.plans}});
  }
  return j;
}

int RunSweep(const SweepArgs& a) {
  const std::string& file = a.model.model;
  // Exactly one --dim is a range.
  ModelFlags fixed = a.model;
  fixed.dims.clear();
  std::vector<std::string> ranges;
  for (const std::string& d : a.model.dims) {
    (d.find("..") != std::string::npos ? ranges : fixed.dims).push_back(d);
  }
  if (ranges.size() != 1) {
    return Fail(file + ": --dim: sweep needs exactly one range NAME=LO..HI[:STEP|:xFACTOR] (got " +
                std::to_string(ranges.size()) + ")");
  }
  auto range = ParseDimRange(ranges[0]);
  if (!range.ok()) return Fail(file + ": --dim '" + ranges[0] + "': " + range.message());
  std::string plot_format;
  if (!a.plot.empty()) {
    const std::string& p = a.plot;
    auto ends = [&](const std::string& s) {
      return p.size() > s.size() && p.compare(p.size() - s.size(), s.size(), s) == 0;
    };
    if (ends(".svg")) {
      plot_format = "svg";
    } else if (ends(".html")) {
      plot_format = "html";
    } else {
      return Fail("--plot '" + p + "': the file must end in .svg or .html");
    }
    Status s = CheckOutputs({p}, {file});
    if (!s.ok()) return Fail(s.message());
  }
  auto precisions = ParsePrecisionList(a.precision);
  if (!precisions.ok()) return Fail(precisions.message());
  auto options = ToPlanOptions(a.plan);
  if (!options.ok()) return Fail(options.message());
  Status load = CheckModelLoad(options.value(), precisions.value());
  if (!load.ok()) return Fail(load.message());
  auto budget = ToBudget(a.budget);
  if (!budget.ok()) return Fail(budget.message());
  auto bindings = ToBindings(fixed);
  if (!bindings.ok()) return Fail(bindings.message());
  auto g = LoadGraph(file, a.model.max_nodes);
  if (!g.ok()) return Fail(g.message());
  {
    // The swept name must be a symbol of the model (the batch's included).
    const std::vector<std::string> symbols = InputSymbols(g.value());
    std::string batch_symbol =
        a.model.batch_dim.empty() ? BatchSymbol(g.value()) : a.model.batch_dim;
    bool known = range->name == "batch" && !batch_symbol.empty();
    std::string list;
    for (const std::string& s : symbols) {
      known |= s == range->name;
      list += (list.empty() ? "" : ", ") + s;
    }
    if (!known) {
      return Fail(file + ": --dim " + range->name + ": the model has no symbol '" + range->name +
                  "' (" + (list.empty() ? "it has fixed shapes" : "its symbols: " + list) + ")");
    }
    const bool sweeps_batch = range->name == "batch" || range->name == batch_symbol;
    if (sweeps_batch && a.model.batch != -1) {
      return Fail(file + ": --batch: the batch is the swept dim (--dim " + ranges[0] +
                  "); leave --batch out");
    }
    range->binds_batch = sweeps_batch;
    if (bindings->dims.count(range->name) || (sweeps_batch && bindings->dims.count(batch_symbol))) {
      return Fail(file + ": --dim " + range->name + ": given as a range and as a value");
    }
  }
  FitBudget fb{budget->budget_bytes, budget->margin, budget->context_bytes};
  auto curves =
      Sweep(g.value(), bindings.value(), range.value(), precisions.value(), options.value(), fb);
  if (!curves.ok()) return Fail(file + ": " + curves.message());
  const std::vector<std::string> warnings = ModelWarnings(g.value(), a.plan, options->mode);
  PrintWarnings(warnings);
  const std::string text =
      SweepText(file, range.value(), options.value(), budget.value(), curves.value(), false);
  if (!plot_format.empty()) {
    SweepChartStyle style;
    style.title = file + ": " + RunLabel(options.value());
    style.dim = range->name;
    style.log_x = range->step == 0;
    style.budget_bytes = budget->budget_bytes;
    style.usable_bytes = fb.budget_bytes > 0 ? fb.Usable() : 0;
    const std::string svg = SweepSvg(curves.value(), style);
    const std::string out =
        plot_format == "svg"
            ? svg
            : HtmlPage("memplan sweep: " + file,
                       svg.substr(svg.find("<svg")) + "<pre>" + XmlEscape(text) + "</pre>\n");
    Status s = WriteFileAtomically(a.plot, out);
    if (!s.ok()) return Fail(s.message());
  }
  if (a.format == "json") {
    nlohmann::json j =
        SweepJson(file, range.value(), options.value(), budget.value(), curves.value());
    j["warnings"] = warnings;
    std::cout << j.dump(2) << "\n";
  } else if (a.format == "md") {
    std::cout << SweepText(file, range.value(), options.value(), budget.value(), curves.value(),
                           true);
  } else {
    std::cout << text;
  }
  return kExitOk;
}

// ---------------------------------------------------------------- compare

struct CompareArgs {
  std::vector<std::string> models;
  int64_t batch = 1;
  std::vector<std::string> dims;
  int64_t max_nodes = kDefaultMaxNodes;
  std::string precision = "any";
  PlanFlags plan;
  BudgetFlags budget;
  std::string format;
};

struct ModelRow {
  std::string model;
  int64_t parameters = 0;
  int64_t batch = -1;  ///< -1: fixed shapes.
  struct PerPrecision {
    Precision precision;
    int64_t device_at_batch = 0;
    int64_t allocated_at_batch = 0;
    int64_t largest_batch = -1;  ///< -1: fixed shapes; 0: not even 1.
    double samples_per_s = 0;    ///< At the largest batch.
  };
  std::vector<PerPrecision> precisions;
  std::vector<std::string> warnings;  ///< About the model (ModelWarnings).
};

Result<ModelRow> CompareOne(const std::string& file, const CompareArgs& a,
                            const std::vector<Precision>& precisions, const PlanOptions& base,
                            const BudgetChoice& b) {
  ModelRow row;
  row.model = file;
  auto g = LoadGraph(file, a.max_nodes);
  if (!g.ok()) return g.status();
  PlanFlags train = a.plan;
  train.mode = EnumName(Mode::kTrain);
  row.warnings = ModelWarnings(g.value(), train, Mode::kTrain);
  ModelFlags mf;
  mf.model = file;
  mf.dims = a.dims;
  auto bindings = ToBindings(mf);
  if (!bindings.ok()) return bindings.status();
  std::string batch_symbol;
  {
    ShapeBindings probe = bindings.value();
    auto resolved = ResolveBindings(g.value(), probe, &batch_symbol);
    if (!resolved.ok()) return resolved.status();
  }
  ShapeBindings at = bindings.value();
  if (!batch_symbol.empty()) at.batch = a.batch;
  ModelPlanner planner(g.value());
  AdviseRequest r;
  r.base = base;
  r.bindings = bindings.value();
  r.precisions = precisions;
  r.checkpoint = false;
  r.budget_bytes = b.budget_bytes;
  r.margin = b.margin;
  r.context_bytes = b.context_bytes;
  r.device = b.device;
  Result<Advice> advice = Status::Error("");
  if (!batch_symbol.empty()) {
    advice = Advise(g.value(), r);
    if (!advice.ok()) return Status::Error(file + ": " + advice.message());
  }
  for (Precision p : precisions) {
    PlanOptions o = base;
    o.mode = Mode::kTrain;
    o.precision = p;
    o.context_bytes = b.context_bytes;
    auto plan = planner.PlanStep(at, o);
    if (!plan.ok()) return Status::Error(file + ": " + plan.message());
    row.parameters = plan->parameter_count;
    row.batch = plan->batch;
    ModelRow::PerPrecision pp{p, plan->peak.device_bytes, plan->peak.allocated_bytes, -1, 0};
    if (advice.ok()) {
      pp.largest_batch = 0;
      for (const Candidate& c : advice->ranked) {
        if (c.precision == p) {
          pp.largest_batch = c.batch;
          pp.samples_per_s = c.speed.samples_per_s;
        }
      }
    }
    row.precisions.push_back(pp);
  }
  return row;
}

int RunCompare(const CompareArgs& a) {
  if (a.models.size() < 2) return Fail("compare: needs at least two models");
  if (a.batch <= 0) return Fail("--batch must be a positive integer");
  auto budget = ToBudget(a.budget);
  if (!budget.ok()) return Fail(budget.message());
  if (budget->budget_bytes <= 0) return Fail("compare needs --budget SIZE or --device NAME");
  auto precisions = ParsePrecisionList(a.precision);
  if (!precisions.ok()) return Fail(precisions.message());
  auto options = ToPlanOptions(a.plan);
  if (!options.ok()) return Fail(options.message());
  Status load = CheckModelLoad(options.value(), precisions.value());
  if (!load.ok()) return Fail(load.message());
  std::vector<ModelRow> rows;
  for (const std::string& m : a.models) {
    auto row = CompareOne(m, a, precisions.value(), options.value(), budget.value());
    if (!row.ok()) return Fail(row.message());
    rows.push_back(row.value());
  }
  for (const ModelRow& r : rows) PrintWarnings(r.warnings);
  const std::string speed_on = budget->device_label.empty()
                                   ? budget->device.display + " (a reference)"
                                   : budget->device.display;
  if (a.format == "json") {
    nlohmann::json j;
    j["schema_version"] = 1;
    j["budget"] = BudgetJson(budget.value());
    j["batch"] = a.batch;
    j["config"] = {{"mode", "train"},
                   {"optimizer", OptimizerName(options->optimizer)},
                   {"attention", AttentionName(options->attention)}};
    j["speed_device"] = budget->device.name;
    j["models"] = nlohmann::json::array();
    for (const ModelRow& r : rows) {
      nlohmann::json ps = nlohmann::json::array();
      for (const auto& p : r.precisions) {
        ps.push_back({{"precision", PrecisionName(p.precision)},
                      {"allocated_bytes_at_batch", p.allocated_at_batch},
                      {"device_bytes_at_batch", p.device_at_batch},
                      {"largest_batch",
                       p.largest_batch < 0 ? nlohmann::json() : nlohmann::json(p.largest_batch)},
                      {"samples_per_second",
                       p.largest_batch > 0 ? nlohmann::json(p.samples_per_s) : nlohmann::json()}});
      }
      j["models"].push_back({{"model", r.model},
                             {"parameters", r.parameters},
                             {"batch", r.batch < 0 ? nlohmann::json() : nlohmann::json(r.batch)},
                             {"precisions", ps},
                             {"warnings", r.warnings}});
    }
    std::cout << j.dump(2) << "\n";
    return kExitOk;
  }
  const std::string at = "device at b" + std::to_string(a.batch);
  std::vector<std::string> header = {"model", "parameters",    "precision",
                                     at,      "largest batch", "samples/s (est.)"};
  std::vector<std::vector<std::string>> table;
  for (const ModelRow& r : rows) {
    bool first = true;
    for (const auto& p : r.precisions) {
      table.push_back({first ? r.model : "", first ? FormatCount(r.parameters) : "",
                       PrecisionName(p.precision),
                       r.batch < 0 ? FormatBytes(p.device_at_batch) + " (fixed)"
                                   : FormatBytes(p.device_at_batch),
                       p.largest_batch < 0 ? "fixed shapes" : std::to_string(p.largest_batch),
                       p.largest_batch > 0 ? Fixed(p.samples_per_s, 1) : "-"});
      first = false;
    }
  }
  const std::string head = "compare: train, " + std::string(OptimizerName(options->optimizer)) +
                           "; " + BudgetText(budget.value()) +
                           "; throughput at the largest batch on " + speed_on;
  if (a.format == "md") {
    std::cout << "## memplan compare\n\n"
              << MarkdownText(head, 600) << "\n\n"
              << MarkdownTable(header, table, {false, true, false, true, true, true});
  } else {
    std::cout << head << "\n\n";
    // The first three columns read left to right.
    std::vector<size_t> w(header.size());
    for (size_t k = 0; k < w.size(); ++k) {
      w[k] = header[k].size();
      for (const auto& t : table) w[k] = std::max(w[k], t[k].size());
    }
    auto line = [&](const std::vector<std::string>& c) {
      std::string l = " ";
      for (size_t k = 0; k < c.size(); ++k) {
        const std::string pad(w[k] - c[k].size(), ' ');
        l += " " + (k == 0 || k == 2 ? c[k] + pad : pad + c[k]);
      }
      while (!l.empty() && l.back() == ' ') l.pop_back();
      std::cout << l << "\n";
    };
    line(header);
    for (const auto& t : table) line(t);
  }
  return kExitOk;
}

// ---------------------------------------------------------------- estimate

struct EstimateArgs {
  ModelFlags model;
  PlanFlags plan;
  std::string format;
};

int RunEstimate(const EstimateArgs& a) {
  auto options = ToPlanOptions(a.plan);
  if (!options.ok()) return Fail(options.message());
  auto bindings = ToBindings(a.model);
  if (!bindings.ok()) return Fail(bindings.message());
  auto g = LoadGraph(a.model.model, a.model.max_nodes);
  if (!g.ok()) return Fail(g.message());
  auto rows = DtypeSummary(g.value(), bindings.value(), options.value());
  if (!rows.ok()) {
    return Fail(a.model.model + ": " + WithoutModelPrefix(rows.message(), a.model.model));
  }
  std::string batch_symbol;
  auto resolved = ResolveBindings(g.value(), bindings.value(), &batch_symbol);
  if (!resolved.ok()) return Fail(resolved.message());
  std::string dims;
  for (const auto& [k, v] : resolved.value()) {
    dims += (dims.empty() ? "" : " ") + k + "=" + std::to_string(v);
  }
  if (a.format == "json") {
    nlohmann::json j;
    j["schema_version"] = 1;
    j["model"] = a.model.model;
    j["dims"] = resolved.value();
    j["context_bytes"] = options->context_bytes < 0 ? kDefaultContextBytes : options->context_bytes;
    j["rows"] = nlohmann::json::array();
    for (const DtypeRow& r : rows.value()) {
      auto train = [](int64_t allocated, int64_t device) {
        return allocated < 0
                   ? nlohmann::json(nullptr)
                   : nlohmann::json{{"allocated_bytes", allocated}, {"device_bytes", device}};
      };
      nlohmann::json row = {
          {"precision", PrecisionName(r.precision)},
          {"weights", EnumName(r.weights)},
          {"weight_bytes", r.weight_bytes},
          {"inference",
           {{"allocated_bytes", r.inference_allocated}, {"device_bytes", r.inference_bytes}}},
          {"train_sgd", train(r.train_sgd_allocated, r.train_sgd_bytes)},
          {"train_adam", train(r.train_adam_allocated, r.train_adam_bytes)}};
      if (r.weights != WeightFormat::kNative) row["training"] = "lora, base frozen";
      if (!r.training_absent.empty()) row["training_absent"] = r.training_absent;
      j["rows"].push_back(row);
    }
    std::cout << j.dump(2) << "\n";
    return kExitOk;
  }
  std::vector<std::string> header = {"dtype", "weights", "inference", "train SGD", "train Adam"};
  std::vector<std::vector<std::string>> table;
  bool quantized = false;
  std::string absent;
  for (const DtypeRow& r : rows.value()) {
    const bool q = r.weights != WeightFormat::kNative;
    quantized = quantized || q;
    if (!r.training_absent.empty() && absent.empty()) absent = r.training_absent;
    auto train = [&](int64_t b) {
      return b < 0 ? std::string("-") : FormatBytes(b) + (q ? "*" : "");
    };
    table.push_back({q ? std::string("bf16+") + EnumName(r.weights) : PrecisionName(r.precision),
                     FormatBytes(r.weight_bytes), FormatBytes(r.inference_bytes),
                     train(r.train_sgd_bytes), train(r.train_adam_bytes)});
  }
  const int64_t ctx = options->context_bytes < 0 ? kDefaultContextBytes : options->context_bytes;
  const std::string head =
      a.model.model + "  estimate, " + (dims.empty() ? "fixed shapes" : "dims " + dims);
  const std::string note =
      "device peaks (reserved + context " + FormatBytes(ctx) +
      ", what nvidia-smi shows) of an inference pass and a steady training step";
  if (a.format == "md") {
    std::cout << "## memplan estimate: " << MarkdownText(head, 400) << "\n\n"
              << MarkdownText(note, 400) << "\n\n"
              << MarkdownTable(header, table, {false, true, true, true, true});
  } else {
    std::cout << head << "\n  " << note << "\n\n" << TextTable(header, table, "  ");
  }
  std::vector<std::string> foot;
  if (quantized) {
    const LoraOptions lora = options->lora.r > 0 ? options->lora : LoraOptions();
    std::string targets;
    for (const std::string& t : lora.targets) targets += (targets.empty() ? "" : ",") + t;
    foot.push_back(
        "bf16+int8, bf16+nf4: the Linear weights (not the output layer) as "
        "bitsandbytes stores them; inference is weight-only;");
    foot.push_back("* training is LoRA r=" + std::to_string(lora.r > 0 ? lora.r : 16) + " on " +
                   targets + ", the quantized base frozen (QLoRA)");
    if (!absent.empty()) {
      foot.push_back("- not planned: " + WithoutModelPrefix(absent, a.model.model) +
                     "; name the projections with --lora targets=");
    }
  } else {
    foot.push_back("no int8 / nf4 rows: the model has no Linear weight besides its output layer");
  }
  std::cout << "\n";
  for (const std::string& line : foot) {
    if (a.format == "md") {
      std::cout << MarkdownText(line, 1000) << "\n\n";
    } else {
      std::cout << "  " << line << "\n";
    }
  }
  return kExitOk;
}

}  // namespace

void AddSweepCommand(CLI::App* app, CliState* state) {
  auto* cmd = app->add_subcommand(
      "sweep", "Peak memory against one symbolic dim (batch included) and the largest that fits");
  auto a = std::make_shared<SweepArgs>();
  AddModelFlags(cmd, &a->model);
  cmd->add_option("--mode", a->plan.mode, "train (forward, backward, optimizer) or inference")
      ->check(CLI::IsMember(EnumNames<Mode>()));
  cmd->add_option("--precision", a->precision,
                  "any (amp_bf16, amp_fp16, fp32) or a comma list of fp32, amp_bf16, amp_fp16, "
                  "bf16, fp16");
  AddSharedPlanFlags(cmd, &a->plan);
  cmd->add_option("--step", a->plan.step, "steady (optimizer state exists) or first")
      ->check(CLI::IsMember(EnumNames<StepKind>()));
  AddBudgetFlags(cmd, &a->budget);
  cmd->add_option("--plot", a->plot, "Writes a plot of the sweep: FILE.svg or FILE.html");
  AddFormatFlag(cmd, &a->format, {"table", "json", "md"});
  cmd->footer(
      "One --dim is the range: NAME=LO..HI (doubling), NAME=LO..HI:STEP, NAME=LO..HI:xFACTOR.");
  cmd->callback([a, state] { state->exit_code = RunSweep(*a); });
}

void AddCompareCommand(CLI::App* app, CliState* state) {
  auto* cmd = app->add_subcommand(
      "compare", "Models side by side: parameters, peak at a batch, largest batch, throughput");
  auto a = std::make_shared<CompareArgs>();
  cmd->add_option("models", a->models, "ONNX model files (training exports)")->required();
  cmd->add_option("--batch,-b", a->batch, "The batch the peaks are shown at");
  cmd->add_option("--dim", a->dims, "Binds a symbolic dim other than the batch: NAME=VALUE");
  AddMaxNodesFlag(cmd, &a->max_nodes);
  cmd->add_option("--precision", a->precision,
                  "any (amp_bf16, amp_fp16, fp32) or a comma list of fp32, amp_bf16, amp_fp16, "
                  "bf16, fp16");
  AddSharedPlanFlags(cmd, &a->plan);
  AddBudgetFlags(cmd, &a->budget);
  AddFormatFlag(cmd, &a->format, {"table", "json", "md"});
  cmd->callback([a, state] { state->exit_code = RunCompare(*a); });
}

void AddEstimateCommand(CLI::App* app, CliState* state) {
  auto* cmd = app->add_subcommand("estimate",
                                  "Per dtype: weights, inference, training with SGD and with Adam");
  auto a = std::make_shared<EstimateArgs>();
  AddModelFlags(cmd, &a->model);
  cmd->add_option("--attention", a->plan.attention, "fused (SDPA kernels) or eager")
      ->check(CLI::IsMember(EnumNames<Attention>()));
  cmd->add_option("--loss", a->plan.loss, "cross_entropy, mse or none (on the first output)")
      ->check(CLI::IsMember(EnumNames<Loss>()));
  cmd->add_option("--allocator", a->plan.allocator, "default or expandable (expandable_segments)")
      ->check(CLI::IsMember(EnumNames<AllocatorKind>()));
  cmd->add_option("--reserve", a->plan.reserve,
                  "CUDA context and library memory outside PyTorch (default 767MiB)");
  cmd->add_option("--lora", a->plan.lora,
                  "The adapters of the int8 / nf4 rows' training: r=R[,alpha=A,dropout=P,"
                  "targets=NAME,...] (default r=16 on q_proj,v_proj)");
  AddFormatFlag(cmd, &a->format, {"table", "json", "md"});
  cmd->callback([a, state] { state->exit_code = RunEstimate(*a); });
}

}  // namespace memplan
