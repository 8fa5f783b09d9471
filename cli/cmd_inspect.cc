// `memplan inspect`: what is in the model, and every tensor's shape.
#include <algorithm>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <utility>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/options.h"
#include "planner/checkpoint.h"
#include "planner/export_mode.h"
#include "planner/finetune.h"
#include "planner/params.h"

namespace memplan {
namespace {

struct InspectArgs {
  ModelFlags model;
  std::string format;
};

std::string DimsText(const Tensor& t) {
  std::ostringstream os;
  os << "[";
  if (t.shape_known) {
    for (size_t i = 0; i < t.shape.size(); ++i) os << (i ? ", " : "") << t.shape[i];
  } else {
    for (size_t i = 0; i < t.declared.size(); ++i) {
      os << (i ? ", " : "");
      if (t.declared[i].known())
        os << t.declared[i].value;
      else
        os << (t.declared[i].symbol.empty() ? "?" : t.declared[i].symbol);
    }
  }
  os << "]";
  return os.str();
}

nlohmann::json TensorJson(const Tensor& t) {
  nlohmann::json j;
  j["name"] = t.name;
  j["dtype"] = DTypeName(t.dtype);
  if (t.shape_known) j["shape"] = t.shape;
  nlohmann::json decl = nlohmann::json::array();
  for (const Dim& d : t.declared) {
    if (d.known())
      decl.push_back(d.value);
    else
      decl.push_back(d.symbol.empty() ? nlohmann::json(nullptr) : nlohmann::json(d.symbol));
  }
  if (t.has_declared) j["declared"] = decl;
  return j;
}

int RunInspect(const InspectArgs& a) {
  auto loaded = LoadGraph(a.model.model, a.model.max_nodes);
  if (!loaded.ok()) return Fail(loaded.message());
  auto bindings = ToBindings(a.model);
  if (!bindings.ok()) return Fail(bindings.message());
  std::vector<std::string> warnings;
  const Graph& raw = loaded.value();
  // Shapes need a binding for every symbol; without --batch show declared dims.
  std::string batch_symbol;
  auto resolved = ResolveBindings(raw, bindings.value(), &batch_symbol);
  if (!resolved.ok()) return Fail(resolved.message());
  const std::vector<std::string> symbol_list = InputSymbols(raw);
  const std::set<std::string> symbols(symbol_list.begin(), symbol_list.end());
  bool all_bound = true;
  for (const std::string& s : symbols) {
    if (!resolved->count(s)) all_bound = false;
  }
  // The module paths --checkpoint takes (each also by a dotted suffix).
  const std::vector<std::string> modules = ModulePaths(raw);
  const BlockChain blocks = FindBlocks(raw);
  // Shapes are inferred in place: a large graph is not held twice.
  Graph g = std::move(loaded.value());
  if (all_bound) {
    Status s = InferShapes(&g, bindings.value(), &warnings);
    if (!s.ok()) return Fail(s.message());
  }
  PrintWarnings(warnings);
  const std::vector<InitRole> roles = ClassifyInitializers(g);
  const ParamSummary params = SummarizeParams(g, roles);
  std::map<std::string, int> histogram;
  for (const Node& n : g.nodes) {
    histogram[n.domain.empty() ? n.op_type : n.domain + "::" + n.op_type]++;
  }
  const ExportModeEvidence mode = DetectExportMode(g);
  if (a.format == "json") {
    nlohmann::json j;
    j["model"] = a.model.model;
    j["ir_version"] = g.ir_version;
    j["producer"] = g.producer_name + (g.producer_version.empty() ? "" : " " + g.producer_version);
    j["opsets"] = g.opsets;
    j["symbols"] = symbols;
    j["batch_symbol"] = batch_symbol;
    j["modules"] = modules;
    j["export_mode"] = {
        {"mode", ExportModeName(mode.mode)}, {"train", mode.train}, {"eval", mode.eval}};
    j["nodes"] = g.nodes.size();
    j["ops"] = histogram;
    for (int id : g.inputs) j["inputs"].push_back(TensorJson(g.tensors[id]));
    for (int id : g.outputs) j["outputs"].push_back(TensorJson(g.tensors[id]));
    j["parameters"] = {{"count", params.parameter_count}, {"bytes", params.parameter_bytes}};
    j["buffers"] = {{"count", params.buffer_count}, {"bytes", params.buffer_bytes}};
    nlohmann::json by_format = {{"fp32", ParameterBytesAs(g, roles, WeightFormat::kNative, 4)},
                                {"bf16", ParameterBytesAs(g, roles, WeightFormat::kNative, 2)}};
    for (WeightFormat f :
         {WeightFormat::kInt8, WeightFormat::kFp8, WeightFormat::kNf4, WeightFormat::kInt4}) {
      by_format[EnumName(f)] = ParameterBytesAs(g, roles, f, 2);
    }
    j["weight_bytes_by_format"] = by_format;
    nlohmann::json plist = nlohmann::json::array();
    for (int id : params.parameters) plist.push_back(TensorJson(g.tensors[id]));
    j["parameter_tensors"] = plist;
    nlohmann::json blist = nlohmann::json::array();
    for (int id : params.buffers) blist.push_back(TensorJson(g.tensors[id]));
    j["buffer_tensors"] = blist;
    if (all_bound) {
      nlohmann::json tensors = nlohmann::json::array();
      for (const Tensor& t : g.tensors) tensors.push_back(TensorJson(t));
      j["tensors"] = tensors;
    }
    j["warnings"] = warnings;
    std::cout << j.dump(2) << "\n";
    return kExitOk;
  }
  std::cout << a.model.model << "\n  producer " << g.producer_name << " " << g.producer_version
            << ", IR " << g.ir_version << ", opsets";
  for (const auto& kv : g.opsets) {
    std::cout << " " << (kv.first.empty() ? "ai.onnx" : kv.first) << ":" << kv.second;
  }
  std::cout << "\n  " << g.nodes.size() << " nodes, symbols:";
  for (const std::string& s : symbols)
    std::cout << " " << s << (s == batch_symbol ? " (batch)" : "");
  std::cout << "\n  export mode " << ExportModeName(mode.mode);
  std::vector<std::string> evidence = mode.train;
  evidence.insert(evidence.end(), mode.eval.begin(), mode.eval.end());
  for (size_t i = 0; i < evidence.size(); ++i) std::cout << (i ? ", " : " (") << evidence[i];
  std::cout << (evidence.empty() ? " (no dropout, no batch norm: cannot be told)" : ")");
  std::cout << "\n\ninputs\n";
  for (int id : g.inputs) {
    std::cout << "  " << g.tensors[id].name << "  " << DTypeName(g.tensors[id].dtype) << " "
              << DimsText(g.tensors[id]) << "\n";
  }
  std::cout << "outputs\n";
  for (int id : g.outputs) {
    std::cout << "  " << g.tensors[id].name << "  " << DTypeName(g.tensors[id].dtype) << " "
              << DimsText(g.tensors[id]) << "\n";
  }
  std::cout << "\nparameters  " << FormatCount(params.parameter_count) << " ("
            << FormatBytes(params.parameter_bytes) << ") in " << params.parameters.size()
            << " tensors\nbuffers     " << FormatCount(params.buffer_count) << " ("
            << FormatBytes(params.buffer_bytes) << ") in " << params.buffers.size() << " tensors\n";
  std::cout << "weights as    fp32 "
            << FormatBytes(ParameterBytesAs(g, roles, WeightFormat::kNative, 4)) << ", bf16 "
            << FormatBytes(ParameterBytesAs(g, roles, WeightFormat::kNative, 2));
  for (WeightFormat f :
       {WeightFormat::kInt8, WeightFormat::kFp8, WeightFormat::kNf4, WeightFormat::kInt4}) {
    std::cout << ", " << EnumName(f) << " " << FormatBytes(ParameterBytesAs(g, roles, f, 2));
  }
  std::cout << "  (--weights: Linear weights but the output layer; the rest bf16)\n\nops\n";
  for (const auto& kv : histogram) std::cout << "  " << kv.first << " " << kv.second << "\n";
  std::cout << "\nmodules (--checkpoint takes these paths, or a dotted suffix of one)\n";
  if (modules.empty()) std::cout << "  none recorded by the exporter\n";
  for (const std::string& m : modules) {
    const size_t depth = static_cast<size_t>(std::count(m.begin(), m.end(), '.'));
    std::cout << "  " << std::string(2 * depth, ' ') << m << "\n";
  }
  if (!blocks.blocks.empty()) {
    std::cout << "repeated blocks (advise --checkpoint auto): " << blocks.pattern << " x"
              << blocks.blocks.size() << "\n";
  }
  if (!all_bound) std::cout << "\n(bind every symbol with --batch/--dim to see all shapes)\n";
  return kExitOk;
}

}  // namespace

void AddInspectCommand(CLI::App* app, CliState* state) {
  auto* cmd = app->add_subcommand("inspect", "Inputs, outputs, symbols, ops, parameters, shapes");
  auto args = std::make_shared<InspectArgs>();
  AddModelFlags(cmd, &args->model);
  AddFormatFlag(cmd, &args->format, {"table", "json"});
  cmd->callback([args, state] { state->exit_code = RunInspect(*args); });
}

}  // namespace memplan
