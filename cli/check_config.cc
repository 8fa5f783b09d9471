#include "cli/check_config.h"

#include <set>

#include "cli/check_verdict.h"
#include "cli/files.h"
#include "cli/format.h"

#if __has_include("planner/devices.h")
#include "planner/devices.h"
#define MEMPLAN_HAVE_DEVICES 1
#endif

namespace memplan {

Result<std::pair<int64_t, std::string>> DeviceBudget(const std::string& device, double margin) {
  if (!(margin >= 0 && margin < 100)) {
    return Status::Error("margin must be a percent in [0, 100)");
  }
#ifdef MEMPLAN_HAVE_DEVICES
  const DevicePreset* d = FindDevice(device);
  if (d == nullptr) {
    std::string names;
    for (const DevicePreset& p : ListDevices()) {
      names += (names.empty() ? "" : ", ") + p.name;
    }
    return Status::Error("unknown device '" + device + "' (known: " + names + ")");
  }
  const int64_t bytes =
      static_cast<int64_t>(static_cast<double>(d->memory_bytes) * (100.0 - margin) / 100.0);
  char text[128];
  std::snprintf(text, sizeof text, "%s - %g%%", d->name.c_str(), margin);
  return std::make_pair(bytes, std::string(margin > 0 ? text : d->name.c_str()));
#else
  return Status::Error("device budgets ('" + device +
                       "') need device presets, which this build lacks; give a size");
#endif
}

namespace {

std::string Dirname(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash + 1);
}

// A JSON value as text for messages.
std::string Show(const nlohmann::json& v) {
  std::string s = v.dump();
  return s.size() > 40 ? s.substr(0, 37) + "..." : s;
}

const std::set<std::string> kCheckKeys = {
    "name",      "model",      "mode",      "batch",  "batch_dim", "dims",
    "precision", "optimizer",  "attention", "loss",   "step",      "allocator",
    "reserve",   "checkpoint", "budget",    "device", "margin"};

Status Choice(const nlohmann::json& v, const std::string& key,
              const std::vector<std::string>& allowed, std::string* out) {
  if (!v.is_string()) {
    return Status::Error("'" + key + "' must be a string, got " + Show(v));
  }
  const std::string s = v.get<std::string>();
  for (const std::string& a : allowed) {
    if (s == a) {
      *out = s;
      return Status();
    }
  }
  std::string list;
  for (const std::string& a : allowed) {
    list += (list.empty() ? "" : ", ") + a;
  }
  return Status::Error("'" + key + "': '" + Clip(s, 200) + "' is not one of " + list);
}

// Applies one key of a check (or of "defaults") to `spec`.
Status ApplyKey(const std::string& key, const nlohmann::json& v, CheckSpec* spec,
                std::string* device, double* margin, bool* has_margin) {
  if (key == "name") {
    if (!v.is_string() || v.get<std::string>().empty()) {
      return Status::Error("'name' must be a non-empty string");
    }
    if (HasControlChar(v.get<std::string>()) || v.get<std::string>().size() > 1000) {
      return Status::Error("'name' must be printable text of at most 1000 bytes");
    }
    spec->name = v.get<std::string>();
  } else if (key == "model") {
    if (!v.is_string() || v.get<std::string>().empty()) {
      return Status::Error("'model' must be a path string");
    }
    if (HasControlChar(v.get<std::string>())) {
      return Status::Error("'model' contains a control character");
    }
    spec->model = v.get<std::string>();
  } else if (key == "mode") {
    return Choice(v, key, EnumNames<Mode>(), &spec->plan_flags.mode);
  } else if (key == "batch") {
    if (!v.is_number_integer() || v.get<int64_t>() <= 0) {
      return Status::Error("'batch' must be a positive integer, got " + Show(v));
    }
    spec->model_flags.batch = v.get<int64_t>();
  } else if (key == "batch_dim") {
    if (!v.is_string() || v.get<std::string>().empty()) {
      return Status::Error("'batch_dim' must be a symbol name, got " + Show(v));
    }
    spec->model_flags.batch_dim = v.get<std::string>();
  } else if (key == "dims") {
    if (!v.is_object()) {
      return Status::Error("'dims' must be an object {\"NAME\": VALUE}");
    }
    spec->model_flags.dims.clear();
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (!it.value().is_number_integer() || it.value().get<int64_t>() <= 0) {
        return Status::Error("'dims." + it.key() + "' must be a positive integer");
      }
      spec->model_flags.dims.push_back(it.key() + "=" + std::to_string(it.value().get<int64_t>()));
    }
  } else if (key == "precision") {
    return Choice(v, key, EnumNames<Precision>(), &spec->plan_flags.precision);
  } else if (key == "optimizer") {
    return Choice(v, key, EnumNames<Optimizer>(), &spec->plan_flags.optimizer);
  } else if (key == "attention") {
    return Choice(v, key, EnumNames<Attention>(), &spec->plan_flags.attention);
  } else if (key == "loss") {
    spec->plan_flags.loss_given = true;
    return Choice(v, key, EnumNames<Loss>(), &spec->plan_flags.loss);
  } else if (key == "step") {
    return Choice(v, key, EnumNames<StepKind>(), &spec->plan_flags.step);
  } else if (key == "allocator") {
    return Choice(v, key, EnumNames<AllocatorKind>(), &spec->plan_flags.allocator);
  } else if (key == "reserve") {
    if (!v.is_string()) {
      return Status::Error("'reserve' must be a size string like \"767MiB\"");
    }
    auto r = ParseSize(v.get<std::string>());
    if (!r.ok()) {
      return Status::Error("'reserve': " + r.message());
    }
    spec->plan_flags.reserve = v.get<std::string>();
  } else if (key == "checkpoint") {
    spec->plan_flags.checkpoint.clear();
    if (v.is_string()) {
      spec->plan_flags.checkpoint.push_back(v.get<std::string>());
    } else if (v.is_array()) {
      for (const auto& e : v) {
        if (!e.is_string()) {
          return Status::Error("'checkpoint' must list module names");
        }
        spec->plan_flags.checkpoint.push_back(e.get<std::string>());
      }
    } else {
      return Status::Error("'checkpoint' must be a module name or a list of them");
    }
  } else if (key == "budget") {
    if (v.is_number_integer() && v.get<int64_t>() >= 0) {
      spec->budget = v.get<int64_t>();
      spec->budget_text = std::to_string(spec->budget);
    } else if (v.is_string()) {
      auto r = ParseSize(v.get<std::string>());
      if (!r.ok()) {
        return Status::Error("'budget': " + r.message());
      }
      spec->budget = r.value();
      spec->budget_text = v.get<std::string>();
    } else {
      return Status::Error("'budget' must be a size like \"40GiB\" or a byte count");
    }
    device->clear();
  } else if (key == "device") {
    if (!v.is_string()) {
      return Status::Error("'device' must be a device name string");
    }
    *device = v.get<std::string>();
    spec->budget = -1;
  } else if (key == "margin") {
    if (!v.is_number() || v.get<double>() < 0 || v.get<double>() >= 100) {
      return Status::Error("'margin' must be a percent in [0, 100), got " + Show(v));
    }
    *margin = v.get<double>();
    *has_margin = true;
  } else {
    return Status::Error("unknown key '" + key + "'");
  }
  return Status();
}

}  // namespace

Result<std::vector<CheckSpec>> ParseCheckConfig(const std::string& text, const std::string& path,
                                                std::string* metric) {
  auto parsed = ParseJsonDocument(text, path);
  if (!parsed.ok()) {
    return parsed.status();
  }
  const nlohmann::json& doc = parsed.value();
  nlohmann::json checks, defaults = nlohmann::json::object();
  if (doc.is_array()) {
    checks = doc;
  } else if (doc.is_object()) {
    for (auto it = doc.begin(); it != doc.end(); ++it) {
      if (it.key() == "checks") {
        checks = it.value();
      } else if (it.key() == "defaults") {
        defaults = it.value();
      } else if (it.key() == "metric") {
        if (!it.value().is_string() || !ParseMetric(it.value().get<std::string>()).ok()) {
          return Status::Error(path + ": 'metric' must be allocated, reserved or device");
        }
        *metric = it.value().get<std::string>();
      } else if (it.key() == "version") {
        if (!it.value().is_number_integer() || it.value().get<int>() != 1) {
          return Status::Error(path + ": 'version' must be 1");
        }
      } else {
        return Status::Error(path + ": unknown key '" + it.key() + "'");
      }
    }
    if (!defaults.is_object()) {
      return Status::Error(path + ": 'defaults' must be an object");
    }
  } else {
    return Status::Error(path + ": expected an object with 'checks' or a list of checks");
  }
  if (!checks.is_array() || checks.empty()) {
    return Status::Error(path + ": 'checks' must be a non-empty list");
  }
  std::vector<CheckSpec> specs;
  std::string dev0;
  double margin0 = kDefaultMarginPercent;
  bool has_margin0 = false;
  CheckSpec base;
  for (auto it = defaults.begin(); it != defaults.end(); ++it) {
    if (it.key() == "name" || it.key() == "model" || !kCheckKeys.count(it.key())) {
      return Status::Error(path + ": defaults: unknown key '" + it.key() + "'");
    }
    Status s = ApplyKey(it.key(), it.value(), &base, &dev0, &margin0, &has_margin0);
    if (!s.ok()) {
      return Status::Error(path + ": defaults: " + s.message());
    }
  }
  for (size_t i = 0; i < checks.size(); ++i) {
    const std::string where = path + ": checks[" + std::to_string(i) + "]";
    if (!checks[i].is_object()) {
      return Status::Error(where + ": expected an object");
    }
    CheckSpec spec = base;
    std::string device = dev0;
    double margin = margin0;
    bool has_margin = has_margin0;
    for (auto it = checks[i].begin(); it != checks[i].end(); ++it) {
      Status s = ApplyKey(it.key(), it.value(), &spec, &device, &margin, &has_margin);
      if (!s.ok()) {
        return Status::Error(where + ": " + s.message());
      }
    }
    if (spec.model.empty()) {
      return Status::Error(where + ": missing 'model'");
    }
    if (!device.empty()) {
      auto b = DeviceBudget(device, margin);
      if (!b.ok()) {
        return Status::Error(where + ": " + b.message());
      }
      spec.budget = b->first;
      spec.budget_text = b->second;
    } else if (has_margin && spec.budget >= 0 && checks[i].contains("margin")) {
      return Status::Error(where + ": 'margin' needs 'device'");
    }
    spec.where = where;
    spec.model_path = spec.model[0] == '/' ? spec.model : Dirname(path) + spec.model;
    spec.file = path;
    specs.push_back(spec);
  }
  return specs;
}

}  // namespace memplan
