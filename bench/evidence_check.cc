// Keeps the evidence tables (planner/evidence.cc) equal to the measurements:
// plans every configuration of the calibration rows (bench/calibration/
// *.jsonl: model, training or inference, precision, optimizer, attention,
// checkpointing; both training exports) and collects which rules each uses.
// A rule used by a measured configuration is measured there. Fails when
//   - a measured configuration's plan is not 100 % backed (a rule the
//     calibration exercises lacks its evidence entry), or
//   - an entry claims a configuration no calibration row measured.
// The family rows (bench/results/families_h200.jsonl: bench/families.py,
// models of families the calibration lacks; convnext_n and segformer_n of
// families_new2_h200.jsonl; the third round, families_check3_h200.jsonl, with
// its exports gzipped in bench/results/families_check3) are measurements too: a family
// configuration (model, training or inference, precision) backs the rules its
// plan uses when the plan matches every one of its rows, allocated peak within
// kEvidenceAllocatedTolerance at each measured batch (first and steady step).
// Its plan must then be backed except for the fitted mechanism (cuDNN RNN
// workspaces the least-squares fit sizes) and the rules past 2^31 elements
// that a configuration which does not match ran too (refuted there), like a
// calibration configuration.
// --print writes the derived bits per rule (to review against the tables).
// --families FILE: per family row, the unbacked share of the plan and its
// error against the measurement.
//
// Usage: evidence_check [--dir bench/calibration] [--models models] [--print]
//                       [--family-rows bench/results/families_h200.jsonl]
//                       [--families bench/results/families_h200.jsonl]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "onnx_import/importer.h"
#include "planner/checkpoint.h"
#include "planner/devices.h"
#include "planner/evidence.h"
#include "planner/op_registry.h"
#include "planner/plan.h"
#include "planner/plan_model.h"

namespace {

using nlohmann::json;

struct Config {
  std::string model, kind, precision, optimizer, attention, checkpoint;
  int64_t batch = 0;
  bool operator<(const Config& o) const {
    return std::tie(model, kind, precision, optimizer, attention, checkpoint) <
           std::tie(o.model, o.kind, o.precision, o.optimizer, o.attention, o.checkpoint);
  }
};

std::string Str(const json& j, const char* key) {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}

// The JSON rows of `path`, one a line, into `rows` (replacing what it
// held); false, with a FAIL line, where the file cannot be read.
bool ReadRows(const std::string& path, std::vector<json>* rows) {
  rows->clear();
  std::ifstream in(path);
  if (!in) {
    std::printf("FAIL: cannot read %s\n", path.c_str());
    return false;
  }
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) rows->push_back(json::parse(line));
  }
  return true;
}

struct Derived {
  uint8_t train = 0, inference = 0;
  bool over_int32 = false;  ///< Used over 2^31 elements by a matching configuration.
  std::set<std::string> models;
};

}  // namespace

int main(int argc, char** argv) {
  std::string dir = std::string(MEMPLAN_SOURCE_DIR) + "/bench/calibration";
  std::string models = std::string(MEMPLAN_SOURCE_DIR) + "/models";
  std::string families;
  const std::string results = std::string(MEMPLAN_SOURCE_DIR) + "/bench/results";
  std::string family_rows = results + "/families_h200.jsonl";
  bool print = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--dir" && i + 1 < argc) dir = argv[++i];
    if (a == "--models" && i + 1 < argc) models = argv[++i];
    if (a == "--families" && i + 1 < argc) families = argv[++i];
    if (a == "--family-rows" && i + 1 < argc) family_rows = argv[++i];
    if (a == "--print") print = true;
  }
  // One configuration per distinct measured setup, at its smallest and its
  // largest batch (shape arithmetic can differ at batch 1).
  std::map<Config, std::pair<int64_t, int64_t>> configs;
  for (const char* f : {"measurements.jsonl", "measurements_bf16.jsonl", "fresh.jsonl",
                        "measurements_ckpt.jsonl"}) {
    std::ifstream in(dir + "/" + f);
    if (!in) {
      std::printf("FAIL: cannot read %s/%s\n", dir.c_str(), f);
      return 1;
    }
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      const json j = json::parse(line);
      Config c;
      c.kind = j.contains("kind") ? j["kind"].get<std::string>() : "train";
      if (c.kind == "env" || j.contains("error")) continue;
      if (c.kind == "fresh") c.kind = "train";
      c.model = Str(j, "model");
      c.precision = j.contains("precision") ? Str(j, "precision") : "fp32";
      c.optimizer = Str(j, "optimizer");
      c.attention = Str(j, "attention");
      c.checkpoint = Str(j, "checkpoint");
      const int64_t b = j.value("batch", int64_t{0});
      auto it = configs.find(c);
      if (it == configs.end()) {
        configs[c] = {b, b};
      } else {
        it->second.first = std::min(it->second.first, b);
        it->second.second = std::max(it->second.second, b);
      }
    }
  }
  std::map<std::string, memplan::Graph> graphs;
  // Exports kept gzipped beside their rows instead of in models/.
  std::map<std::string, std::string> packed_exports;
  auto graph = [&](const std::string& name) -> const memplan::Graph* {
    auto it = graphs.find(name);
    if (it == graphs.end()) {
      auto packed = packed_exports.find(name);
      auto g = memplan::ImportOnnxFile(
          packed != packed_exports.end() ? packed->second : models + "/" + name + ".onnx");
      if (!g.ok()) return nullptr;
      it = graphs.emplace(name, std::move(g.value())).first;
    }
    return &it->second;
  };
  std::map<std::string, Derived> derived;
  // Rules past 2^31 elements that a family configuration refutes (below):
  // rule -> the model.
  std::map<std::string, std::string> refuted_over_int32;
  std::map<std::string, std::string> evidence_of;  // rule -> source claimed
  int fail = 0, plans = 0;
  for (const auto& kv : configs) {
    const Config& c = kv.first;
    const bool infer = c.kind == "infer";
    const std::vector<std::string> styles =
        infer ? std::vector<std::string>{c.model, c.model + "_train"}
              : std::vector<std::string>{c.model + "_train", c.model + "_train_ts"};
    for (int64_t batch : {kv.second.first, kv.second.second}) {
      for (const std::string& style : styles) {
        const memplan::Graph* g = graph(style);
        if (!g) continue;
        memplan::ShapeBindings b;
        b.batch = batch;
        std::vector<std::string> warn;
        auto bound = memplan::BindShapes(*g, b, &warn);
        if (!bound.ok()) {
          std::printf("FAIL: %s: %s\n", style.c_str(), bound.message().c_str());
          ++fail;
          continue;
        }
        memplan::PlanOptions o;
        o.mode = infer ? memplan::Mode::kInference : memplan::Mode::kTrain;
        o.precision = memplan::ParsePrecision(c.precision).value();
        o.optimizer =
            c.optimizer == "sgd" ? memplan::Optimizer::kMomentum : memplan::Optimizer::kAdamW;
        o.attention =
            c.attention == "eager" ? memplan::Attention::kEager : memplan::Attention::kFused;
        if (c.checkpoint == "hf_blocks") {
          o.checkpoint_segments = memplan::FixedPlacement(memplan::FindBlocks(bound.value()),
                                                          memplan::CheckpointStrategy::kAll);
        }
        auto plan = memplan::MakePlan(bound.value(), batch, o);
        if (!plan.ok()) {
          std::printf("FAIL: %s: %s\n", style.c_str(), plan.message().c_str());
          ++fail;
          continue;
        }
        ++plans;
        const uint8_t bit = memplan::PrecisionBit(o.precision);
        for (const memplan::RuleShare& r : plan->coverage.rules) {
          Derived& d = derived[r.rule];
          (infer ? d.inference : d.train) |= bit;
          d.models.insert(c.model);
          evidence_of[r.rule] = r.evidence;
          if (!r.backed) {
            std::printf("FAIL: %s %s %s: rule '%s' is used but has no evidence for it\n",
                        style.c_str(), c.kind.c_str(), c.precision.c_str(), r.rule.c_str());
            ++fail;
          }
        }
        if (plan->coverage.unbacked_bytes != 0) {
          std::printf("FAIL: %s %s %s: %.1f %% of the peak unbacked\n", style.c_str(),
                      c.kind.c_str(), c.precision.c_str(), 100.0 * plan->coverage.UnbackedShare());
          ++fail;
        }
      }
    }
  }
  // Family configurations whose plans match every row back their rules.
  auto family_plan = [&](const json& j) -> memplan::Result<memplan::Plan> {
    const std::string model = j["model"];
    const memplan::Graph* g = graph(model + "_train");
    if (!g) return memplan::Status::Error("cannot import " + model + "_train.onnx");
    const bool infer = j["mode"] == "infer";
    memplan::ShapeBindings b;
    const int64_t batch = j["batch"];
    if (model == "gru_seqfirst") {
      b.dims["batch"] = batch;
    } else {
      b.batch = batch;
    }
    std::vector<std::string> warn;
    auto bound = memplan::BindShapes(*g, b, &warn);
    if (!bound.ok()) return bound.status();
    memplan::PlanOptions o;
    o.mode = infer ? memplan::Mode::kInference : memplan::Mode::kTrain;
    o.precision = memplan::ParsePrecision(j["precision"].get<std::string>()).value();
    if (model.rfind("unet_ldm", 0) == 0) o.loss = memplan::Loss::kMse;
    o.model_load = memplan::ModelLoad::kCast;  // bench/families.py keeps the cache
    return memplan::MakePlan(bound.value(), batch, o);
  };
  {
    struct FamilyConfig {
      bool matches = true;
      double worst = 0;
      std::vector<memplan::Plan> plans;
    };
    std::map<std::tuple<std::string, std::string, std::string>, FamilyConfig> fam;
    std::vector<json> rows;
    std::set<std::string> family_models;
    std::vector<json> read;
    if (!ReadRows(family_rows, &read)) return 1;
    for (json& j : read) {
      family_models.insert(j["model"].get<std::string>());
      rows.push_back(std::move(j));
    }
    // The second round of new families: the two the channels-last and the
    // joined-container rules were built on (the others stay checks).
    if (!ReadRows(results + "/families_new2_h200.jsonl", &read)) return 1;
    for (json& j : read) {
      const std::string model = j["model"].get<std::string>();
      if (model != "convnext_n" && model != "segformer_n") continue;
      family_models.insert(model);
      rows.push_back(std::move(j));
    }
    // The third round (bench/families.py list-check3), the one measured in
    // amp_fp16 as well; its exports are gzipped beside the rows.
    if (!ReadRows(results + "/families_check3_h200.jsonl", &read)) return 1;
    for (json& j : read) {
      if (j.contains("kind") || !j.contains("mode")) continue;
      const std::string model = j["model"].get<std::string>();
      packed_exports[model + "_train"] = results + "/families_check3/" + model + "_train.onnx.gz";
      family_models.insert(model);
      rows.push_back(std::move(j));
    }
    // The same models measured at the batches advise picked for an H200 and
    // at large batches: rows of the same configurations (the held-out "_b"
    // models stay out).
    for (const char* f :
         {"advise_fit/fit_amp_bf16_h200.jsonl", "advise_fit/fit_amp_bf16_h200_2.jsonl",
          "advise_fit/fit_amp_bf16_h200_3.jsonl", "advise_fit/fit_amp_bf16_h200_9.jsonl",
          "advise_fit/fit_fp32_h200.jsonl", "large/families_large_h200.jsonl"}) {
      if (!ReadRows(results + "/" + f, &read)) return 1;
      for (json& j : read) {
        if (j.contains("kind") || !j.contains("mode")) continue;
        if (family_models.count(j["model"].get<std::string>())) rows.push_back(std::move(j));
      }
    }
    const memplan::DevicePreset* h200 = memplan::FindDevice("h200");
    for (const json& j : rows) {
      const bool oom = j.contains("error") && j["error"].get<std::string>().rfind("oom", 0) == 0;
      if (j.contains("error") && !oom) continue;
      FamilyConfig& fc = fam[{j["model"], j["mode"], j["precision"]}];
      auto plan = family_plan(j);
      if (!plan.ok()) {
        std::printf("FAIL: %s: %s\n", j["model"].get<std::string>().c_str(),
                    plan.message().c_str());
        ++fail;
        fc.matches = false;
        continue;
      }
      ++plans;
      if (oom) {
        // Ran out of memory on the H200: the plan matches when it does not
        // fit there either.
        const int64_t need = std::max(plan->steady.reserved_bytes, plan->first_step.reserved_bytes);
        if (need + h200->context_bytes <= h200->memory_bytes) {
          fc.matches = false;
          fc.worst = std::max(fc.worst, 1.0);
        }
        fc.plans.push_back(std::move(plan.value()));
        continue;
      }
      std::vector<std::pair<int64_t, int64_t>> pairs;  // measured, planned
      if (j["mode"] == "infer") {
        pairs.emplace_back(j["peak"].get<int64_t>(), plan->peak.allocated_bytes);
      } else {
        pairs.emplace_back(j["steps"][0]["step_peak"].get<int64_t>(),
                           plan->first_step.allocated_bytes);
        pairs.emplace_back(j["steps"].back()["step_peak"].get<int64_t>(),
                           plan->steady.allocated_bytes);
      }
      for (const auto& [meas, pred] : pairs) {
        const double err = std::abs(static_cast<double>(pred - meas)) / static_cast<double>(meas);
        fc.worst = std::max(fc.worst, err);
        if (err > memplan::kEvidenceAllocatedTolerance) fc.matches = false;
      }
      fc.plans.push_back(std::move(plan.value()));
    }
    // A configuration that does not match its rows and runs an op past 2^31
    // elements refutes that op's rule there (wav2vec2_cls amp_bf16 ran out of
    // memory at batch 3641 where the plan fit): which of its rules failed is
    // not known, so none of them is backed past 2^31 by any other row.
    const std::string over_suffix = memplan::kOverInt32Suffix;
    auto over_base = [&](const std::string& rule) -> std::string {
      if (rule.size() <= over_suffix.size() ||
          rule.compare(rule.size() - over_suffix.size(), over_suffix.size(), over_suffix) != 0) {
        return "";
      }
      return rule.substr(0, rule.size() - over_suffix.size());
    };
    for (const auto& [key, fc] : fam) {
      if (fc.matches) continue;
      for (const memplan::Plan& p : fc.plans) {
        for (const memplan::RuleShare& r : p.coverage.rules) {
          const std::string base = over_base(r.rule);
          if (!base.empty()) refuted_over_int32.emplace(base, std::get<0>(key));
        }
      }
    }
    for (const auto& [key, fc] : fam) {
      const auto& [model, mode, precision] = key;
      if (print) {
        std::printf("family %-14s %-5s %-8s worst allocated error %.1f %%: %s\n", model.c_str(),
                    mode.c_str(), precision.c_str(), 100.0 * fc.worst,
                    fc.matches ? "backs its rules" : "does not back");
      }
      if (!fc.matches) continue;
      const bool infer = mode == "infer";
      const uint8_t bit = memplan::PrecisionBit(memplan::ParsePrecision(precision).value());
      for (const memplan::Plan& p : fc.plans) {
        for (const memplan::RuleShare& r : p.coverage.rules) {
          const std::string base = over_base(r.rule);
          if (!base.empty() && refuted_over_int32.count(base)) continue;
          if (!base.empty()) derived[base].over_int32 = true;
          Derived& d = derived[r.rule];
          (infer ? d.inference : d.train) |= bit;
          d.models.insert(model);
          if (!r.backed &&
              r.rule != memplan::MechanismName(memplan::Mechanism::kRnnWorkspaceFitted)) {
            std::printf("FAIL: family %s %s %s: rule '%s' is used but has no evidence for it\n",
                        model.c_str(), mode.c_str(), precision.c_str(), r.rule.c_str());
            ++fail;
          }
        }
      }
    }
  }
  // No entry claims more than the rows show.
  auto check = [&](const std::string& rule, const memplan::Evidence& e) {
    if (e.source == nullptr) return;
    const Derived d = derived.count(rule) ? derived[rule] : Derived{};
    if (e.over_int32 && refuted_over_int32.count(rule)) {
      std::printf("FAIL: rule '%s' claims evidence over 2^31 elements that %s's rows refute\n",
                  rule.c_str(), refuted_over_int32[rule].c_str());
      ++fail;
    }
    if (e.over_int32 && !d.over_int32) {
      std::printf("FAIL: rule '%s' claims evidence over 2^31 elements that no matching row shows\n",
                  rule.c_str());
      ++fail;
    }
    if ((e.train & ~d.train) != 0 || (e.inference & ~d.inference) != 0) {
      std::printf(
          "FAIL: rule '%s' claims train bits 0x%02x inference 0x%02x; the calibration and "
          "matching family rows show 0x%02x / 0x%02x\n",
          rule.c_str(), e.train, e.inference, d.train, d.inference);
      ++fail;
    }
  };
  for (int m = 0; m < memplan::kNumMechanisms; ++m) {
    const auto mech = static_cast<memplan::Mechanism>(m);
    check(memplan::MechanismName(mech), memplan::MechanismEvidence(mech));
  }
  for (const auto& kv : derived) {
    check(kv.first, memplan::OpEvidence(kv.first));  // ops, synthesized ones included
  }
  for (const char* op : {"LSTM", "GRU", "GroupNormalization", "Resize", "InstanceNormalization"}) {
    check(op, memplan::OpEvidence(op));
  }
  if (print) {
    for (const auto& [rule, model] : refuted_over_int32) {
      std::printf("refuted over 2^31 elements by %s: %s\n", model.c_str(), rule.c_str());
    }
    std::printf("%-44s %-5s %-5s %s  models\n", "rule", "train", "infer", "2^31");
    for (const auto& kv : derived) {
      std::string ms;
      for (const std::string& m : kv.second.models) ms += (ms.empty() ? "" : ", ") + m;
      std::printf("%-44s 0x%02x  0x%02x %s     %s\n", kv.first.c_str(), kv.second.train,
                  kv.second.inference, kv.second.over_int32 ? "L" : "-", ms.c_str());
    }
  }
  std::printf("%d configurations planned, %zu rules used, %d failures\n", plans, derived.size(),
              fail);

  if (!families.empty()) {
    std::ifstream in(families);
    std::string line;
    std::printf("\n%-14s %-5s %-8s %4s %7s %9s %7s  unbacked rules at the peak\n", "model", "mode",
                "prec", "B", "unbkd%", "err_res%", "err/unb");
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      const json j = json::parse(line);
      if (j.contains("error")) continue;
      const std::string model = j["model"];
      const bool infer = j["mode"] == "infer";
      const int64_t batch = j["batch"];
      auto plan = family_plan(j);
      if (!plan.ok()) continue;
      int64_t meas = 0;
      if (infer) {
        meas = j["reserved_peak"];
      } else {
        for (const json& st : j["steps"]) meas = std::max<int64_t>(meas, st["reserved_peak"]);
      }
      const int64_t pred = std::max(plan->steady.reserved_bytes, plan->first_step.reserved_bytes);
      std::string names;
      for (const memplan::RuleShare& r : plan->coverage.rules) {
        if (!r.backed && r.peak_bytes > 0) names += (names.empty() ? "" : ", ") + r.rule;
      }
      const double under = static_cast<double>(meas - pred);
      std::printf("%-14s %-5s %-8s %4lld %6.1f%% %+8.1f%% %7.2f  %s\n", model.c_str(),
                  infer ? "infer" : "train", j["precision"].get<std::string>().c_str(),
                  static_cast<long long>(batch), 100.0 * plan->coverage.UnbackedShare(),
                  100.0 * (pred - meas) / meas,
                  plan->coverage.unbacked_bytes > 0 ? under / plan->coverage.unbacked_bytes : 0.0,
                  names.c_str());
    }
  }
  return fail == 0 ? 0 : 1;
}
