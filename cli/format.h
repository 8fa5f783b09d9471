#ifndef MEMPLAN_CLI_FORMAT_H_
#define MEMPLAN_CLI_FORMAT_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "planner/plan.h"
#include "planner/status.h"

namespace memplan {

/// "1.50 GiB", "12.0 MiB", "512 B": binary units.
std::string FormatBytes(int64_t bytes);
/// Sizes -> bytes: binary "24GiB" = "24Gi" = "24G" (2^30), decimal "80GB"
/// (10^9), "24000MiB", "1.5 TiB", plain bytes "1073741824"; case-insensitive.
Result<int64_t> ParseSize(const std::string& text);
/// Percentages, the one convention of every flag and key that takes a share
/// (advise/check --margin, validate --tolerance): "5" or "5%" is 5 %, returned
/// as the fraction 0.05. Error "FLAG 'x': expected a percentage in [0, 100),
/// e.g. 5 or 5%".
Result<double> ParsePercent(const std::string& flag, const std::string& text);
/// "1,234,567".
std::string FormatCount(int64_t n);

/// JSON of a peak: bytes, node, phase, breakdown.
nlohmann::json PeakJson(const Peak& p, bool with_at);
/// JSON of a plan's configuration.
nlohmann::json ConfigJson(const Plan& plan);
/// Version of the `plan` JSON contract; grows when a key changes meaning or
/// goes (new keys keep it). 1: config.batch null for fixed shapes, config.dims.
constexpr int kPlanJsonSchemaVersion = 1;
/// The stable `plan` JSON contract.
nlohmann::json PlanJson(const std::string& model, const Plan& plan);
/// One rank's peak by what it holds (null for a single-process plan).
nlohmann::json RankJson(const Plan& plan);
/// The same as table lines ("" for a single-process plan).
std::string RankTable(const Plan& plan);
/// "batch 8", or "fixed shapes" for a model without a batch symbol.
std::string BatchLabel(const Plan& plan);
/// "  dims batch=8, seq=512; loss cross_entropy; no checkpointing\n".
std::string ConfigDetails(const Plan& plan);
/// `plan --format md`: the header, the peaks and the breakdown as Markdown.
std::string PlanMarkdown(const std::string& model, const Plan& plan);
/// The human-readable table of `plan`.
std::string PlanTable(const std::string& model, const Plan& plan);
/// One line on what measurements back the peak: "all of the peak rests on
/// measured rules" or the unmeasured share and its largest rules.
std::string EvidenceLine(const Plan& plan);
/// The rules of the peak as JSON (coverage) and the 32-bit kernel limit.
nlohmann::json CoverageJson(const Plan& plan);
nlohmann::json KernelLimitsJson(const Plan& plan);

}  // namespace memplan

#endif  // MEMPLAN_CLI_FORMAT_H_
