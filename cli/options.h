#ifndef MEMPLAN_CLI_OPTIONS_H_
#define MEMPLAN_CLI_OPTIONS_H_

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "onnx_import/importer.h"
#include "planner/devices.h"
#include "planner/graph.h"
#include "planner/plan.h"
#include "planner/plan_model.h"
#include "planner/shape_inference.h"
#include "planner/status.h"

namespace memplan {

/// The model and its symbol bindings.
struct ModelFlags {
  std::string model;
  int64_t batch = -1;
  bool batch_given = false;              ///< --batch was given (-1 is no binding only by default).
  std::string batch_dim;                 ///< --batch-dim: the symbol --batch binds.
  std::vector<std::string> dims;         ///< NAME=VALUE
  int64_t max_nodes = kDefaultMaxNodes;  ///< --max-nodes: the import's node limit.
};

/// How the step runs (the `plan` flags, shared by advise/check/validate).
struct PlanFlags {
  std::string mode = "train";
  std::string precision = "fp32";
  std::string optimizer = "adamw";
  std::string attention = "fused";
  std::string loss = "cross_entropy";
  bool loss_given = false;  ///< --loss (or a budget file's "loss") was given, not defaulted.
  std::string step = "steady";
  std::string allocator = "default";
  std::string reserve;  ///< Context bytes, e.g. "767MiB"; empty = default.
  std::vector<std::string> checkpoint;
  int64_t world_size = 1;               ///< --world-size: ranks (GPUs).
  std::string strategy;                 ///< --strategy; "" = single (one rank).
  std::vector<std::string> fsdp_units;  ///< --fsdp-units.
  std::string reshard_after_forward;    ///< --reshard-after-forward on|off; "" = on.
  std::vector<std::string> freeze;      ///< Module paths or parameter-name regexes.
  std::vector<std::string> train_only;  ///< The same; everything else is frozen.
  std::string lora;                     ///< "r=16,alpha=32,dropout=0.05,targets=q_proj,v_proj"
  std::string weights = "native";       ///< Frozen Linear weights: native, int8, nf4, int4, fp8.
  std::vector<std::string> no_warn;     ///< --no-warn: warning classes left out ("export-mode").
  std::string model_load = "auto";      ///< bf16/fp16: auto, cast, cast-empty-cache, direct.
};

/// A number flag's text as memplan reads it: decimal only (CLI11 alone reads
/// "010" as octal 8 and "0x10" as 16), within int64, finite. The message
/// ("" when fine) names what is wrong with `text`.
[[nodiscard]] std::string IntegerFlagProblem(const std::string& text, bool non_negative);
[[nodiscard]] std::string NumberFlagProblem(const std::string& text);
/// Puts those checks on every integer and number option of `app`'s
/// subcommands (before CLI11 converts the text); an option whose type says
/// NONNEGATIVE or UINT refuses a minus sign.
void CheckNumberFlags(CLI::App* app);

/// Adds MODEL, --batch, --dim and --max-nodes to `cmd`.
void AddModelFlags(CLI::App* cmd, ModelFlags* f);
/// Adds --max-nodes (a positive decimal integer) to `cmd`: the most nodes,
/// all graphs together, that a model may have (default kDefaultMaxNodes).
void AddMaxNodesFlag(CLI::App* cmd, int64_t* max_nodes);
/// Adds --mode, --precision, --optimizer, ... to `cmd`; allowed values come
/// from the option tables (planner/options.h).
void AddPlanFlags(CLI::App* cmd, PlanFlags* f, bool with_mode);
/// Adds the plan flags that `advise` shares with `plan`: --optimizer,
/// --attention, --loss, --allocator (advise searches precision and
/// checkpoints itself).
void AddSharedPlanFlags(CLI::App* cmd, PlanFlags* f);
/// Adds --world-size, --strategy, --fsdp-units and --reshard-after-forward
/// (planner/distributed.h) to `cmd`.
void AddDistFlags(CLI::App* cmd, PlanFlags* f);
/// Adds --format with the given choices (first is the default).
void AddFormatFlag(CLI::App* cmd, std::string* format, const std::vector<std::string>& choices);

/// Parses the --dim list and --batch into bindings.
Result<ShapeBindings> ToBindings(const ModelFlags& f);
/// Parses the plan flags.
Result<PlanOptions> ToPlanOptions(const PlanFlags& f);
/// An error when --model-load is given and none of `precisions` is a
/// whole-model cast (bf16, fp16), which is all it applies to.
[[nodiscard]] Status CheckModelLoad(const PlanOptions& o, const std::vector<Precision>& precisions);

/// "any" (amp_bf16, amp_fp16, fp32) or a comma list of precisions.
Result<std::vector<Precision>> ParsePrecisionList(const std::string& text);

/// --budget / --device / --margin / --reserve, as advise, sweep and compare
/// read them.
struct BudgetFlags {
  std::string budget;
  std::string device;
  std::string margin = "5";
  std::string reserve;
};
/// Adds --budget, --device, --margin, --reserve to `cmd`.
void AddBudgetFlags(CLI::App* cmd, BudgetFlags* f);
/// The budget the flags give: a --device preset's memory (or --budget),
/// its context (or --reserve, else the default); budget 0 without either.
/// `device` is set to the preset (the H100 SXM as a reference without one)
/// and `device_label` to its name ("" without one).
struct BudgetChoice {
  int64_t budget_bytes = 0;
  double margin = 0.05;
  int64_t context_bytes = kDefaultContextBytes;
  std::string device_label;
  DevicePreset device;
};
Result<BudgetChoice> ToBudget(const BudgetFlags& f);

/// Imports the model file (no shapes yet), refusing more than `max_nodes`
/// nodes.
Result<Graph> LoadGraph(const std::string& path, int64_t max_nodes);

/// Imports the model and plans it with the flags through the planner's
/// entry point (PlanModel), ModelWarnings appended to the plan's warnings
/// (the caller prints them once nothing can fail); `keep_events` keeps the
/// allocator trace.
Result<Plan> PlanFromFlags(const ModelFlags& m, const PlanFlags& p, bool keep_events);

/// What no plan shows about the model and the flags: how it was exported
/// (DetectExportMode, for a training step; not with --no-warn export-mode)
/// and the default loss put on an output that does not look like class
/// logits (NotClassLogits, unless --loss was given). `mode` is the step
/// planned.
[[nodiscard]] std::vector<std::string> ModelWarnings(const Graph& g, const PlanFlags& f, Mode mode);

/// Queues warnings for stderr, one line each: FlushWarnings prints them when
/// the run ends, unless it ends on bad input (exit 2), whose one error line
/// is then all that stderr shows.
void PrintWarnings(const std::vector<std::string>& warnings);
/// Prints the queued warnings unless `exit_code` is kExitBadInput.
void FlushWarnings(int exit_code);
/// Prints an error line to stderr and returns kExitBadInput.
int Fail(const std::string& message);

}  // namespace memplan

#endif  // MEMPLAN_CLI_OPTIONS_H_
