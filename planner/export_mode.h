#ifndef MEMPLAN_PLANNER_EXPORT_MODE_H_
#define MEMPLAN_PLANNER_EXPORT_MODE_H_

/// Was the model exported after model.train() or model.eval()? torch.onnx
/// records no mode flag (neither exporter writes one in the model or graph
/// metadata), so the answer comes from the ops whose export differs between
/// the modes: dropout (eval mode exports none, or an inference-mode one) and
/// batch norm (batch statistics in training, running statistics in eval).
/// A graph with neither cannot tell.

#include <cstdint>
#include <string>
#include <vector>

#include "planner/graph.h"

namespace memplan {

enum class ExportMode {
  kTrain,    ///< Only training-mode evidence.
  kEval,     ///< Only eval-mode evidence.
  kMixed,    ///< Both (e.g. batch norm frozen in eval, dropout training).
  kUnknown,  ///< Neither: no dropout, no batch norm.
};

/// What the graph shows of the mode, each item "N what (why)".
struct ExportModeEvidence {
  ExportMode mode = ExportMode::kUnknown;
  std::vector<std::string> train;
  std::vector<std::string> eval;
};

/// "train", "eval", "mixed", "unknown".
[[nodiscard]] const char* ExportModeName(ExportMode m);

/// The evidence in the nodes of `g` (top level) and what the dynamo exporter
/// recorded (g.exporter). Training: a Dropout whose training_mode input is a
/// constant true or that writes its mask;
/// any op inside an nn.Dropout module (torch.export records none for an
/// eval-mode dropout); a BatchNormalization with training_mode 1 or its
/// statistics outputs (TorchScript exporter); ATen batch norm with batch
/// statistics (dynamo). Eval: a Dropout with training_mode false (or without
/// it, ONNX's inference form, unless torch.onnx wrote it: both exporters
/// lower scaled_dot_product_attention's dropout_p so, in either mode); ATen
/// `_native_batch_norm_legit_no_training` (dynamo); a BatchNormalization in
/// its inference form outside dynamo exports (the dynamo exporter writes
/// training batch norm in that form too, so there its metadata decides).
[[nodiscard]] ExportModeEvidence DetectExportMode(const Graph& g);

/// The warning for a training plan of `g` (`source` names the file): ""
/// when the export is in train mode.
[[nodiscard]] std::string ExportModeWarning(const std::string& source, const ExportModeEvidence& e);

}  // namespace memplan

#endif  // MEMPLAN_PLANNER_EXPORT_MODE_H_
