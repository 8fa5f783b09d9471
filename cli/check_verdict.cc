#include "cli/check_verdict.h"

#include <cstdio>
#include <sstream>

#include "cli/format.h"

namespace memplan {

const char* MetricName(Metric m) {
  switch (m) {
    case Metric::kAllocated:
      return "allocated";
    case Metric::kReserved:
      return "reserved";
    case Metric::kDevice:
      return "device";
  }
  return "?";
}

Result<Metric> ParseMetric(const std::string& s) {
  if (s == "allocated") {
    return Metric::kAllocated;
  }
  if (s == "reserved") {
    return Metric::kReserved;
  }
  if (s == "device") {
    return Metric::kDevice;
  }
  return Status::Error("unknown metric '" + s + "' (allocated, reserved, device)");
}

int64_t MetricBytes(const Peak& p, Metric m) {
  switch (m) {
    case Metric::kAllocated:
      return p.allocated_bytes;
    case Metric::kReserved:
      return p.reserved_bytes;
    case Metric::kDevice:
      return p.device_bytes;
  }
  return 0;
}

const char* CheckStatusName(CheckStatus s) {
  switch (s) {
    case CheckStatus::kPass:
      return "pass";
    case CheckStatus::kNoBudget:
      return "no_budget";
    case CheckStatus::kOverBudget:
      return "over_budget";
    case CheckStatus::kRegression:
      return "regression";
  }
  return "?";
}

double ReportCase::increase_pct() const {
  if (baseline_bytes <= 0) {
    return 0;
  }
  return 100.0 * (static_cast<double>(value()) - static_cast<double>(baseline_bytes)) /
         static_cast<double>(baseline_bytes);
}

CheckStatus ReportCase::status() const {
  if (budget_bytes >= 0 && value() > budget_bytes) {
    return CheckStatus::kOverBudget;
  }
  if (baseline_bytes >= 0) {
    const double limit = static_cast<double>(baseline_bytes) * (1.0 + max_increase_pct / 100.0);
    if (static_cast<double>(value()) > limit) {
      return CheckStatus::kRegression;
    }
  }
  return budget_bytes >= 0 ? CheckStatus::kPass : CheckStatus::kNoBudget;
}

bool ReportCase::near_miss() const {
  return status() == CheckStatus::kPass && budget_bytes > 0 &&
         static_cast<double>(headroom()) <
             static_cast<double>(budget_bytes) * kNearMissPercent / 100.0;
}

std::string ReportCase::near_miss_text() const {
  if (!near_miss()) return "";
  char pct[16];
  std::snprintf(pct, sizeof pct, "%g%%", kNearMissPercent);
  return std::string("within ") + pct + " of the budget (headroom " + FormatBytes(headroom()) + ")";
}

std::string ConfigLabel(const Plan& plan) {
  const PlanOptions& o = plan.options;
  std::ostringstream os;
  os << ModeName(o.mode);
  if (plan.batch > 0) {
    os << " b" << plan.batch;
  }
  os << " " << PrecisionName(o.precision);
  if (o.mode == Mode::kTrain) {
    os << " " << OptimizerName(o.optimizer);
    if (o.step == StepKind::kFirst) {
      os << " first-step";
    }
    if (!o.checkpoint_segments.empty()) {
      os << " ckpt" << o.checkpoint_segments.size();
    }
    if (o.dist.strategy != ParallelStrategy::kSingle) {
      os << " " << EnumName(o.dist.strategy) << "x" << o.dist.world_size;
    }
  }
  if (o.attention == Attention::kEager) {
    os << " eager-attn";
  }
  if (o.allocator.expandable_segments) {
    os << " expandable";
  }
  return os.str();
}

bool CaseFailed(const ReportCase& c) {
  const CheckStatus s = c.status();
  return s == CheckStatus::kOverBudget || s == CheckStatus::kRegression;
}

int CheckExitCode(const std::vector<ReportCase>& cases) {
  for (const ReportCase& c : cases) {
    if (CaseFailed(c)) {
      return 1;
    }
  }
  return 0;
}

}  // namespace memplan
