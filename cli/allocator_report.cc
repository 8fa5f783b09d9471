#include "cli/allocator_report.h"

#include <sstream>

#include "cli/format.h"

namespace memplan {
namespace {

// "-0.50 GiB" / "+20.0 MiB".
std::string Delta(int64_t bytes) {
  return (bytes < 0 ? "-" : "+") + FormatBytes(bytes < 0 ? -bytes : bytes);
}

// A change worth a recommendation: more than 1 % of the reserved peak and 20 MiB.
bool Matters(int64_t saved, int64_t reserved) {
  return saved > (20LL << 20) && saved * 100 > reserved;
}

const AllocatorVariant* BestSplit(const AllocatorAdvice& a) {
  const AllocatorVariant* best = nullptr;
  for (const AllocatorVariant& v : a.max_split) {
    if (best == nullptr || v.reserved_bytes < best->reserved_bytes) best = &v;
  }
  return best;
}

}  // namespace

std::vector<std::string> AllocatorRecommendations(const AllocatorAdvice& a, const PlanOptions& o) {
  std::vector<std::string> out;
  const int64_t base = a.reserved_bytes;
  {
    const int64_t saved = base - a.expandable.reserved_bytes;
    std::string l = "expandable_segments:True: reserved " + FormatBytes(base) + " -> " +
                    FormatBytes(a.expandable.reserved_bytes) + " (" +
                    Delta(a.expandable.reserved_bytes - base) + ", allocated " +
                    FormatBytes(a.expandable.allocated_bytes) + ")";
    if (o.allocator.expandable_segments) {
      l += ": already set";
    } else if (Matters(saved, base)) {
      l += ": set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True";
    } else {
      l += ": little to gain";
    }
    out.push_back(l);
  }
  if (const AllocatorVariant* best = BestSplit(a)) {
    const int64_t saved = base - best->reserved_bytes;
    std::string l = best->setting + " (best of";
    for (const AllocatorVariant& v : a.max_split)
      l += " " + v.setting.substr(v.setting.find(':') + 1);
    l += "): reserved " + FormatBytes(base) + " -> " + FormatBytes(best->reserved_bytes) + " (" +
         Delta(best->reserved_bytes - base) + ")";
    if (!Matters(saved, base)) {
      l += ": does not help";
    } else if (best->reserved_bytes < a.expandable.reserved_bytes) {
      l += ": helps, more than expandable_segments";
    } else {
      l += ": helps, less than expandable_segments";
    }
    out.push_back(l);
  }
  {
    const int64_t returns = a.step_end_reserved - a.after_empty_cache_reserved;
    std::string l = "torch.cuda.empty_cache() between steps or epochs: returns " +
                    FormatBytes(returns) + " (reserved " + FormatBytes(a.step_end_reserved) +
                    " -> " + FormatBytes(a.after_empty_cache_reserved) + ")";
    if (o.mode == Mode::kTrain) {
      l += "; the next step maps " + std::to_string(a.next_step_segments) + " segments (" +
           FormatBytes(a.next_step_segment_bytes) + ") again and reserves " +
           FormatBytes(a.next_step_reserved) +
           ": only worth it when something else needs that memory in between";
    }
    out.push_back(l);
  }
  if (o.mode == Mode::kTrain) {
    out.push_back("evaluation under torch.inference_mode(): allocated peak " +
                  FormatBytes(a.eval_inference_mode_allocated) + " (under torch.no_grad() " +
                  FormatBytes(a.eval_no_grad_allocated) +
                  ": autocast keeps its weight cache), against " +
                  FormatBytes(a.forward_train_mode_allocated) +
                  " for a train-mode forward with autograd on (" +
                  Delta(a.eval_inference_mode_allocated - a.forward_train_mode_allocated) + ")");
  }
  return out;
}

std::string AllocatorAdviceText(const AllocatorAdvice& a, const PlanOptions& o) {
  std::ostringstream os;
  os << "\n  allocator advice (PYTORCH_CUDA_ALLOC_CONF; every figure a plan or an allocator "
        "replay of this step)\n";
  for (const std::string& l : AllocatorRecommendations(a, o)) os << "    " << l << "\n";
  return os.str();
}

nlohmann::json AllocatorAdviceJson(const AllocatorAdvice& a, const PlanOptions& o) {
  nlohmann::json j;
  j["allocated_bytes"] = a.allocated_bytes;
  j["reserved_bytes"] = a.reserved_bytes;
  j["expandable_segments"] = {{"allocated_bytes", a.expandable.allocated_bytes},
                              {"reserved_bytes", a.expandable.reserved_bytes},
                              {"saves_bytes", a.reserved_bytes - a.expandable.reserved_bytes}};
  j["max_split_size_mb"] = nlohmann::json::array();
  for (const AllocatorVariant& v : a.max_split) {
    j["max_split_size_mb"].push_back(
        {{"value_mb", std::stoll(v.setting.substr(v.setting.find(':') + 1))},
         {"allocated_bytes", v.allocated_bytes},
         {"reserved_bytes", v.reserved_bytes},
         {"saves_bytes", a.reserved_bytes - v.reserved_bytes}});
  }
  j["empty_cache"] = {{"step_end_reserved_bytes", a.step_end_reserved},
                      {"after_reserved_bytes", a.after_empty_cache_reserved},
                      {"returns_bytes", a.step_end_reserved - a.after_empty_cache_reserved}};
  if (o.mode == Mode::kTrain) {
    j["empty_cache"]["next_step_segments"] = a.next_step_segments;
    j["empty_cache"]["next_step_segment_bytes"] = a.next_step_segment_bytes;
    j["empty_cache"]["next_step_reserved_bytes"] = a.next_step_reserved;
    j["evaluation"] = {{"persistent_bytes", a.persistent_bytes},
                       {"no_grad_allocated_bytes", a.eval_no_grad_allocated},
                       {"inference_mode_allocated_bytes", a.eval_inference_mode_allocated},
                       {"train_mode_forward_allocated_bytes", a.forward_train_mode_allocated}};
  }
  j["recommendations"] = AllocatorRecommendations(a, o);
  return j;
}

}  // namespace memplan
