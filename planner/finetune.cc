#include "planner/finetune.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "planner/checked.h"
#include "planner/op_registry.h"
#include "planner/text.h"

namespace memplan {
namespace {

const OpDef* DefOf(const Node& n) { return FindOp(n.domain, n.op_type); }

// An initializer's dims: inferred, else as declared (inspect binds nothing).
std::vector<int64_t> DimsOf(const Tensor& t) {
  if (!t.shape.empty() || t.declared.empty()) return t.shape;
  std::vector<int64_t> d;
  for (const Dim& x : t.declared) d.push_back(x.known() ? x.value : 0);
  return d;
}

// The single producer chain of `t` through views and casts (Reshape, Cast,
// Identity...): the tensor a layer's output reaches the graph output as.
int ThroughViews(const Graph& g, int t) {
  for (int guard = 0; guard < 64 && t >= 0; ++guard) {
    const int p = g.tensors[t].producer;
    if (p < 0) break;
    const Node& n = g.nodes[p];
    const OpDef* def = DefOf(n);
    if (!def || !def->passes_weight || n.inputs.empty()) break;
    t = n.inputs[0];
  }
  return t;
}

std::string ModuleOf(const std::string& weight_name) {
  const std::string suffix = ".weight";
  if (weight_name.size() > suffix.size() &&
      weight_name.compare(weight_name.size() - suffix.size(), suffix.size(), suffix) == 0) {
    return weight_name.substr(0, weight_name.size() - suffix.size());
  }
  return weight_name;
}

// PEFT's target matching: the module name is the target or ends in "." + it.
bool TargetMatches(const std::string& module, const std::string& target) {
  if (module == target) return true;
  const std::string tail = "." + target;
  return module.size() > tail.size() &&
         module.compare(module.size() - tail.size(), tail.size(), tail) == 0;
}

// A module path (or its dotted suffix, or a parameter's full name) that
// `name` lies in.
bool UnderModule(const std::string& name, const std::string& path) {
  if (path.empty()) return false;
  if (name == path) return true;
  if (name.compare(0, path.size() + 1, path + ".") == 0) return true;
  return name.find("." + path + ".") != std::string::npos ||
         (name.size() > path.size() + 1 &&
          name.compare(name.size() - path.size() - 1, path.size() + 1, "." + path) == 0);
}

// The parameters each pattern of `flag` matches, in `hit`; an error for one
// that matches none.
Status MatchPatterns(const Graph& g, const std::vector<int>& params,
                     const std::vector<std::string>& patterns, const std::string& flag,
                     std::vector<bool>* hit) {
  for (const std::string& p : patterns) {
    bool any = false;
    for (int id : params) {
      if (UnderModule(g.tensors[id].name, p)) {
        (*hit)[id] = true;
        any = true;
      }
    }
    if (any) continue;
    std::regex re;
    try {
      re = std::regex(p, std::regex::ECMAScript);
    } catch (const std::regex_error&) {
      return Status::Error(g.source + ": " + flag + ": '" + p +
                           "' is neither a module path nor a valid regex");
    }
    for (int id : params) {
      if (std::regex_search(g.tensors[id].name, re)) {
        (*hit)[id] = true;
        any = true;
      }
    }
    if (!any) {
      const std::string example = params.empty() ? "" : " (e.g. " + g.tensors[params[0]].name + ")";
      return Status::Error(g.source + ": " + flag + ": '" + p + "' matches no parameter" + example);
    }
  }
  return Status();
}

}  // namespace

std::vector<LinearLayer> FindLinearLayers(const Graph& g, const std::vector<InitRole>& roles) {
  std::vector<LinearLayer> out;
  const int logits = g.outputs.empty() ? -1 : ThroughViews(g, g.outputs[0]);
  for (int ni = 0; ni < static_cast<int>(g.nodes.size()); ++ni) {
    const Node& n = g.nodes[ni];
    const OpDef* def = DefOf(n);
    if (!n.domain.empty() || !def || !def->matmul_operands || n.inputs.size() < 2) continue;
    int w = n.inputs[1];
    if (w < 0) continue;
    bool transposed = false;
    const int p = g.tensors[w].producer;
    if (p >= 0) {
      const Node& t = g.nodes[p];
      const OpDef* tdef = DefOf(t);
      if (!tdef || tdef->alias != Alias::kView || tdef->view != ViewRule::kTranspose ||
          t.inputs.empty() || t.inputs[0] < 0) {
        continue;
      }
      w = t.inputs[0];
      transposed = true;
    } else if (n.GetInt("transB", 0) != 0) {
      transposed = true;
    }
    const Tensor& wt = g.tensors[w];
    const std::vector<int64_t> ws = DimsOf(wt);
    if (wt.kind != TensorKind::kInitializer || roles[w] != InitRole::kParameter || ws.size() != 2) {
      continue;
    }
    LinearLayer l;
    l.matmul = ni;
    l.weight = w;
    l.module = ModuleOf(wt.name);
    l.out_features = transposed ? ws[0] : ws[1];
    l.in_features = transposed ? ws[1] : ws[0];
    l.end_node = ni;
    // A bias Add of a 1-D parameter right after (one addmm in PyTorch).
    const int y = n.outputs.empty() ? -1 : n.outputs[0];
    if (y >= 0 && g.tensors[y].consumers.size() == 1) {
      const Node& a = g.nodes[g.tensors[y].consumers[0]];
      const OpDef* adef = DefOf(a);
      if (adef && adef->is_add && a.inputs.size() == 2) {
        const int b = a.inputs[0] == y ? a.inputs[1] : a.inputs[0];
        if (b >= 0 && g.tensors[b].kind == TensorKind::kInitializer &&
            roles[b] == InitRole::kParameter && DimsOf(g.tensors[b]).size() == 1) {
          l.end_node = g.tensors[y].consumers[0];
        }
      }
    }
    const Node& end = g.nodes[l.end_node];
    l.head = !end.outputs.empty() && end.outputs[0] >= 0 && end.outputs[0] == logits;
    out.push_back(l);
  }
  return out;
}

Result<FineTuneSetup> ResolveFineTune(const Graph& g, const std::vector<InitRole>& roles,
                                      const PlanOptions& o) {
  return ResolveFineTune(g, roles, FindLinearLayers(g, roles), o);
}

Result<FineTuneSetup> ResolveFineTune(const Graph& g, const std::vector<InitRole>& roles,
                                      const std::vector<LinearLayer>& linears,
                                      const PlanOptions& o) {
  FineTuneSetup s;
  s.frozen.assign(g.tensors.size(), false);
  s.quantized.assign(g.tensors.size(), false);
  std::vector<int> params;
  for (int id : g.initializers) {
    if (roles[id] == InitRole::kParameter) params.push_back(id);
  }
  const bool train = o.mode == Mode::kTrain;
  if (!train && (!o.freeze.empty() || !o.train_only.empty() || o.lora.r != 0)) {
    return Status::Error(g.source + ": " +
                         std::string(!o.freeze.empty()       ? "--freeze"
                                     : !o.train_only.empty() ? "--train-only"
                                                             : "--lora") +
                         ": fine-tuning options need --mode train");
  }
  std::vector<bool> hit(g.tensors.size(), false);
  if (!o.train_only.empty()) {
    Status st = MatchPatterns(g, params, o.train_only, "--train-only", &hit);
    if (!st.ok()) return st;
    for (int id : params) s.frozen[id] = !hit[id];
  }
  if (!o.freeze.empty()) {
    std::vector<bool> fz(g.tensors.size(), false);
    Status st = MatchPatterns(g, params, o.freeze, "--freeze", &fz);
    if (!st.ok()) return st;
    for (int id : params) s.frozen[id] = s.frozen[id] || fz[id];
  }
  if (o.lora.r != 0) {
    if (o.lora.r < 1) return Status::Error(g.source + ": --lora: r must be at least 1");
    if (o.lora.targets.empty())
      return Status::Error(g.source + ": --lora: targets= names no module");
    // The base is frozen; --train-only keeps its parameters trained too
    // (PEFT's modules_to_save).
    for (int id : params) s.frozen[id] = o.train_only.empty() || !hit[id];
    for (const std::string& t : o.lora.targets) {
      bool any = false;
      for (const LinearLayer& l : linears) {
        if (TargetMatches(l.module, t)) any = true;
      }
      if (!any) {
        const std::string example = linears.empty() ? " (the model has no Linear layer)"
                                                    : " (e.g. " + linears[0].module + ")";
        return Status::Error(g.source + ": --lora: target '" + t + "' matches no Linear layer" +
                             example);
      }
    }
    for (const LinearLayer& l : linears) {
      for (const std::string& t : o.lora.targets) {
        if (TargetMatches(l.module, t)) {
          s.lora.push_back(l);
          break;
        }
      }
    }
  }
  if (o.weights != WeightFormat::kNative) {
    bool any = false;
    for (const LinearLayer& l : linears) {
      if (l.head || !(s.frozen[l.weight] || !train)) continue;
      s.quantized[l.weight] = true;
      any = true;
    }
    if (!any) {
      return Status::Error(g.source + ": --weights " + EnumName(o.weights) +
                           ": no frozen Linear weight to quantize (freeze the base with --lora, "
                           "--freeze or --train-only, or plan --mode inference)");
    }
  }
  return s;
}

QuantizedWeight QuantizedWeightBytes(WeightFormat f, int64_t rows, int64_t cols) {
  QuantizedWeight q;
  const int64_t n = SatMulNonNeg(rows, cols);
  const int64_t blocks = (n + 63) / 64;
  switch (f) {
    case WeightFormat::kNative:
      break;
    case WeightFormat::kNf4:
      q.data_bytes = (n + 1) / 2;
      q.state_bytes = {blocks, SatMulNonNeg(4, (blocks + 255) / 256), 4, 16 * 4, 256 * 4};
      // dequantize_blockwise(absmax) + offset: two fp32 [blocks] tensors.
      q.dequant_scratch_bytes = SatMulNonNeg(8, blocks);
      break;
    case WeightFormat::kInt4:
      q.data_bytes = (n + 1) / 2;
      q.state_bytes = {SatMulNonNeg(4, blocks), 16 * 4};
      break;
    case WeightFormat::kInt8:
      q.data_bytes = n;
      q.state_bytes = {SatMulNonNeg(4, rows)};
      break;
    case WeightFormat::kFp8:
      q.data_bytes = n;
      q.state_bytes = {4};
      break;
  }
  return q;
}

// bitsandbytes 0.50, autograd/_functions.py MatMul8bitLt and
// backends/cuda/ops.py: forward quantizes A.to(float16) row-wise
// (int8_vectorwise_quant: CA int8, SCA fp32 per row; the fp16 temporary is
// freed when the call returns), int8_linear_matmul writes an int32 [rows, out]
// product and int8_mm_dequant the output from it; backward computes grad_A as
// grad_output @ (CB.to(A.dtype) * SCB / 127). The outlier columns of a
// threshold > 0 (LLM.int8's decomposition) depend on the data and are not
// planned.
Int8MatmulBytes Int8MatmulWorkspaces(int64_t a_numel, int64_t in_features, int64_t out_features,
                                     bool a_is_fp16, int64_t a_elem_bytes, int64_t out_bytes) {
  Int8MatmulBytes b;
  if (in_features <= 0 || out_features <= 0 || a_numel <= 0) return b;
  const int64_t rows = a_numel / in_features;
  const int64_t ca = SatAdd(a_numel, SatMulNonNeg(4, rows));
  const int64_t a16 = a_is_fp16 ? 0 : SatMulNonNeg(2, a_numel);
  const int64_t product = SatProduct({rows, out_features, 4});
  // The output exists only in the second phase; the simulator places the
  // workspace beside it.
  b.forward_workspace = SatAdd(ca, std::max(SatAdd(a16, -out_bytes), product));
  b.backward_workspace =
      SatAdd(SatProduct({in_features, out_features, a_elem_bytes}), SatMulNonNeg(4, out_features));
  return b;
}

int64_t ParameterBytesAs(const Graph& g, const std::vector<InitRole>& roles, WeightFormat f,
                         int64_t other_elem_bytes) {
  std::vector<bool> linear(g.tensors.size(), false);
  if (f != WeightFormat::kNative) {
    for (const LinearLayer& l : FindLinearLayers(g, roles)) {
      if (!l.head) linear[l.weight] = true;
    }
  }
  int64_t total = 0;
  for (int id : g.initializers) {
    if (roles[id] != InitRole::kParameter) continue;
    const std::vector<int64_t> dims = DimsOf(g.tensors[id]);
    int64_t n = 0;
    if (!CheckedNumel(dims, &n)) continue;
    if (linear[id]) {
      const QuantizedWeight q = QuantizedWeightBytes(f, dims[0], dims[1]);
      total = SatAdd(total, q.data_bytes);
      for (int64_t b : q.state_bytes) total = SatAdd(total, b);
    } else {
      total = SatAdd(total, SatMulNonNeg(n, other_elem_bytes));
    }
  }
  return total;
}

Result<LoraOptions> ParseLora(const std::string& spec) {
  LoraOptions l;
  l.r = -1;
  std::vector<std::string> items = SplitList(spec);
  bool in_targets = false;
  std::vector<std::string> targets;
  std::vector<std::string> seen;  // Keys given so far: a second one would silently win.
  for (const std::string& item : items) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos) {
      if (!in_targets) return Status::Error("--lora: '" + item + "' is not KEY=VALUE");
      targets.push_back(item);
      continue;
    }
    const std::string key = item.substr(0, eq);
    const std::string val = item.substr(eq + 1);
    in_targets = false;
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) {
      return Status::Error("--lora: '" + key + "' is given twice");
    }
    seen.push_back(key);
    // Decimal text only (strtod also reads "inf", "nan" and hex floats).
    const bool decimal = val.find_first_not_of("0123456789.eE+-") == std::string::npos;
    char* end = nullptr;
    if (key == "r") {
      const long long r = std::strtoll(val.c_str(), &end, 10);
      if (val.empty() || *end != '\0' || r < 1 || r > (1 << 20)) {
        return Status::Error("--lora: r='" + val + "' is not a positive integer");
      }
      l.r = r;
    } else if (key == "alpha") {
      l.alpha = std::strtod(val.c_str(), &end);
      if (val.empty() || !decimal || *end != '\0' || !(l.alpha > 0) || !std::isfinite(l.alpha)) {
        return Status::Error("--lora: alpha='" + val + "' is not a positive number");
      }
    } else if (key == "dropout") {
      l.dropout = std::strtod(val.c_str(), &end);
      if (val.empty() || !decimal || *end != '\0' || !(l.dropout >= 0 && l.dropout < 1)) {
        return Status::Error("--lora: dropout='" + val + "' is not in [0, 1)");
      }
    } else if (key == "targets") {
      if (val.empty())
        return Status::Error("--lora: targets= names no module (e.g. targets=q_proj,v_proj)");
      in_targets = true;
      targets.push_back(val);
    } else {
      return Status::Error("--lora: unknown key '" + key + "' (r, alpha, dropout, targets)");
    }
  }
  if (l.r < 0) return Status::Error("--lora: r=R is required (e.g. --lora r=16)");
  if (!targets.empty()) l.targets = targets;
  return l;
}

}  // namespace memplan
