#include "planner/export_mode.h"

#include "planner/op_registry.h"
#include "planner/ops/op_names.h"

namespace memplan {
namespace {

/// ModelProto.producer_name of torch.onnx exports.
constexpr char kTorchProducer[] = "pytorch";

/// 1 / 0 when tensor `id` is a known true / false constant, else -1.
int KnownBool(const Graph& g, int id) {
  if (id < 0 || id >= static_cast<int>(g.tensors.size())) return -1;
  const Tensor& t = g.tensors[id];
  if (t.has_values && !t.values.empty()) return t.values[0] != 0;
  if (t.producer < 0 || t.producer >= static_cast<int>(g.nodes.size())) return -1;
  const Node& p = g.nodes[t.producer];
  const OpDef* def = OpOf(p);
  if (def == nullptr || !def->fills_constant) return -1;
  auto v = p.attrs.find("value");
  if (v == p.attrs.end()) return -1;
  if (!v->second.t_values.empty()) return v->second.t_values[0] != 0;
  if (!v->second.t_fvalues.empty()) return v->second.t_fvalues[0] != 0;
  return -1;
}

bool HasOutput(const Node& n, size_t i) { return i < n.outputs.size() && n.outputs[i] >= 0; }

int64_t Count(const std::map<std::string, int64_t>& m, const std::string& key) {
  auto it = m.find(key);
  return it == m.end() ? 0 : it->second;
}

/// "1 dropout node in training mode", "2 dropout nodes in training mode".
std::string Item(int64_t n, const std::string& noun, const std::string& rest) {
  return std::to_string(n) + " " + noun + (n == 1 ? " " : "s ") + rest;
}

std::string Join(const std::vector<std::string>& items) {
  std::string s;
  for (size_t i = 0; i < items.size(); ++i) s += (i ? ", " : "") + items[i];
  return s;
}

}  // namespace

const char* ExportModeName(ExportMode m) {
  switch (m) {
    case ExportMode::kTrain:
      return "train";
    case ExportMode::kEval:
      return "eval";
    case ExportMode::kMixed:
      return "mixed";
    case ExportMode::kUnknown:
      break;
  }
  return "unknown";
}

ExportModeEvidence DetectExportMode(const Graph& g) {
  const bool dynamo = g.exporter.fx_nodes > 0;
  int64_t train_dropout = 0, eval_dropout = 0, train_bn = 0, eval_bn = 0;
  for (const Node& n : g.nodes) {
    const OpDef* def = OpOf(n);
    if (def != nullptr && def->eval_identity) {  // Dropout
      const bool has_mode = n.inputs.size() > 2 && n.inputs[2] >= 0;
      const int mode = has_mode ? KnownBool(g, n.inputs[2]) : -1;
      if (HasOutput(n, 1) || mode == 1) {
        ++train_dropout;
      } else if (mode == 0) {
        ++eval_dropout;
      } else if (!has_mode && g.producer_name != kTorchProducer) {
        // ONNX's inference form. torch.onnx (both exporters) writes
        // scaled_dot_product_attention's dropout_p so, which PyTorch applies
        // in either mode: from it, no evidence.
        ++eval_dropout;
      }
    } else if (n.domain.empty() && n.op_type == op_names::kBatchNormalization) {
      bool stats_out = false;
      for (size_t i = 1; i < n.outputs.size(); ++i) stats_out |= HasOutput(n, i);
      if (n.GetInt("training_mode", 0) == 1 || stats_out) {
        ++train_bn;
      } else if (!dynamo) {
        ++eval_bn;
      }
    }
  }
  const auto& ops = g.exporter.aten_ops;
  const int64_t aten_train_bn = Count(ops, "aten._native_batch_norm_legit_functional.default") +
                                Count(ops, "aten._native_batch_norm_legit.default");
  const int64_t aten_eval_bn = Count(ops, "aten._native_batch_norm_legit_no_training.default");
  int64_t in_dropout_modules = 0;
  for (const auto& [cls, count] : g.exporter.module_classes) {
    if (cls.rfind("torch.nn.modules.dropout.", 0) == 0) in_dropout_modules += count;
  }

  ExportModeEvidence e;
  if (train_dropout > 0) e.train.push_back(Item(train_dropout, "dropout node", "in training mode"));
  if (train_bn > 0) {
    e.train.push_back(Item(train_bn, "BatchNormalization node", "with batch statistics"));
  }
  if (aten_train_bn > 0) {
    e.train.push_back(Item(aten_train_bn, "batch norm", "with batch statistics (ATen)"));
  }
  if (in_dropout_modules > 0) {
    e.train.push_back(Item(in_dropout_modules, "op", "inside nn.Dropout modules"));
  }
  if (eval_dropout > 0) e.eval.push_back(Item(eval_dropout, "dropout node", "in inference mode"));
  if (eval_bn > 0) {
    e.eval.push_back(Item(eval_bn, "BatchNormalization node", "with running statistics"));
  }
  if (aten_eval_bn > 0) {
    e.eval.push_back(Item(aten_eval_bn, "batch norm",
                          "with running statistics (aten._native_batch_norm_legit_no_training)"));
  }
  if (!e.train.empty()) {
    e.mode = e.eval.empty() ? ExportMode::kTrain : ExportMode::kMixed;
  } else {
    e.mode = e.eval.empty() ? ExportMode::kUnknown : ExportMode::kEval;
  }
  return e;
}

std::string ExportModeWarning(const std::string& source, const ExportModeEvidence& e) {
  switch (e.mode) {
    case ExportMode::kTrain:
      return "";
    case ExportMode::kEval:
      return source + ": the model was exported in eval mode (" + Join(e.eval) +
             "); a training plan needs a train-mode export: call model.train() before "
             "torch.onnx.export (see the README)";
    case ExportMode::kMixed:
      return source + ": the export is partly in eval mode (" + Join(e.eval) + ", beside " +
             Join(e.train) +
             "): planned as exported; unless those parts are kept in eval on purpose (frozen "
             "batch norm), export after model.train()";
    case ExportMode::kUnknown:
      break;
  }
  return source +
         ": cannot tell whether the model was exported in train mode: the graph has no dropout "
         "and no batch norm, the ops whose export shows the mode (an eval-mode export drops "
         "dropout); if the model has dropout, export it after model.train() (one with neither "
         "plans the same either way)";
}

}  // namespace memplan
