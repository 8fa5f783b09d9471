#include "planner/shape_inference.h"

#include <set>
#include <utility>

#include "planner/checked.h"
#include "planner/op_registry.h"

namespace memplan {
namespace {

std::string OpName(const Node& n) {
  return n.domain.empty() ? n.op_type : n.domain + "::" + n.op_type;
}

std::string NodeRef(const Graph& g, int i) {
  return "node '" + g.nodes[i].Label(i) + "' (" + OpName(g.nodes[i]) + ")";
}

std::string DimsString(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(dims[i]);
  }
  return s + "]";
}

std::string DeclaredString(const std::vector<Dim>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ", ";
    if (dims[i].known()) {
      s += std::to_string(dims[i].value);
    } else if (!dims[i].symbol.empty()) {
      s += dims[i].symbol;
    } else {
      s += "?";
    }
  }
  return s + "]";
}

/// Symbol values in force for one inference run.
struct Symbols {
  std::string batch_symbol;
  int64_t batch = -1;
  const std::map<std::string, int64_t>* dims = nullptr;

  /// The bound value of `sym`, or -1.
  int64_t Lookup(const std::string& sym) const {
    if (sym.empty()) return -1;
    auto it = dims->find(sym);
    if (it != dims->end()) return it->second;
    if (sym == batch_symbol && batch > 0) return batch;
    return -1;
  }
};

/// Declared dims with bound symbols substituted; false if any stays open.
bool ResolveDeclared(const std::vector<Dim>& declared, const Symbols& syms,
                     std::vector<int64_t>* out) {
  out->clear();
  for (const Dim& d : declared) {
    int64_t v = d.known() ? d.value : syms.Lookup(d.symbol);
    if (v < 0) return false;
    out->push_back(v);
  }
  return true;
}

/// numel and bytes of `t` fit int64; its bytes (a sequence: all elements)
/// into *bytes.
bool SizeFits(const Tensor& t, int64_t* bytes) {
  *bytes = 0;
  if (t.is_sequence) {
    for (const auto& s : t.seq_shapes) {
      int64_t n = 0, b = 0;
      if (!CheckedNumel(s, &n) || !DTypeBytes(t.dtype, n, &b) || !CheckedAdd(*bytes, b, bytes)) {
        return false;
      }
    }
    return true;
  }
  int64_t n = 0;
  return CheckedNumel(t.shape, &n) && DTypeBytes(t.dtype, n, bytes);
}

/// Where a checked tensor comes from, for the error message only (built when
/// a check fails, not once per tensor): the output of node `node`, a graph
/// output (kGraphOutput), or nothing to add (kNoPlace).
constexpr int kNoPlace = -1;
constexpr int kGraphOutput = -2;
std::string PlaceOf(const Graph& g, int node) {
  if (node == kGraphOutput) return " (graph output)";
  if (node < 0) return "";
  return " (output of node '" + g.nodes[node].Label(node) + "')";
}

/// Checks the size of `t` (after inference) against int64 and the limits.
Status CheckSize(const Graph& g, const Tensor& t, int place, int64_t* total) {
  int64_t bytes = 0;
  if (!SizeFits(t, &bytes)) {
    return Status::Error(g.source + ": tensor '" + t.name + "'" + PlaceOf(g, place) +
                         ": size overflows int64 (" + DimsString(t.shape) + " of " +
                         DTypeName(t.dtype) + ")");
  }
  if (bytes > kMaxTensorBytes) {
    return Status::Error(g.source + ": tensor '" + t.name + "'" + PlaceOf(g, place) + ": " +
                         DimsString(t.shape) + " of " + DTypeName(t.dtype) + " is " +
                         std::to_string(bytes) + " bytes, more than one allocation can be (2^50)");
  }
  if (!CheckedAdd(*total, bytes, total) || *total > kMaxTotalTensorBytes) {
    return Status::Error(g.source + ": tensor '" + t.name + "'" + PlaceOf(g, place) +
                         ": the model's tensors add up to more than 2^56 bytes");
  }
  return Status();
}

/// Checks an inferred tensor against its declared shape and dtype.
Status CheckDeclared(const Graph& g, const Tensor& t, DType declared_dtype, const Symbols& syms,
                     int place) {
  if (t.is_sequence) return Status();
  bool ok = true;
  if (t.has_declared) {
    if (t.declared.size() != t.shape.size()) {
      ok = false;
    } else {
      for (size_t k = 0; k < t.shape.size() && ok; ++k) {
        const Dim& d = t.declared[k];
        int64_t want = d.known() ? d.value : syms.Lookup(d.symbol);
        if (want >= 0 && want != t.shape[k]) ok = false;
      }
    }
  }
  if (!ok) {
    return Status::Error(g.source + ": tensor '" + t.name + "'" + PlaceOf(g, place) +
                         ": value_info says " + DeclaredString(t.declared) +
                         " but inference gives " + DimsString(t.shape));
  }
  if (declared_dtype != DType::kUndefined && t.dtype != DType::kUndefined &&
      declared_dtype != t.dtype) {
    return Status::Error(g.source + ": tensor '" + t.name + "'" + PlaceOf(g, place) +
                         ": value_info says " + DTypeName(declared_dtype) +
                         " but inference gives " + DTypeName(t.dtype));
  }
  return Status();
}

/// Concrete shape of a graph input from its declared dims and the bindings.
Status BindInput(const Graph& g, Tensor* t, const Symbols& syms) {
  const std::string where = g.source + ": input '" + t->name + "'";
  if (!t->has_declared) return Status::Error(where + ": no declared shape");
  t->shape.clear();
  for (size_t k = 0; k < t->declared.size(); ++k) {
    const Dim& d = t->declared[k];
    const std::string dim = "dim " + std::to_string(k);
    if (d.known()) {
      t->shape.push_back(d.value);
      continue;
    }
    if (d.symbol.empty()) {
      if (d.value < -1) {
        return Status::Error(where + ": " + dim + " is negative (" + std::to_string(d.value) + ")");
      }
      return Status::Error(where + ": " + dim + " is unknown (no size and no symbol)");
    }
    int64_t v = syms.Lookup(d.symbol);
    if (v < 0) {
      const bool is_batch = d.symbol == syms.batch_symbol;
      return Status::Error(where + ": " + dim + " is symbolic ('" + d.symbol + "'): bind it with " +
                           (is_batch ? std::string("--batch N") : "--dim " + d.symbol + "=N"));
    }
    t->shape.push_back(v);
  }
  t->shape_known = true;
  return Status();
}

}  // namespace

std::vector<std::string> InputSymbols(const Graph& g) {
  std::set<std::string> symbols;
  for (int id : g.inputs) {
    if (id < 0 || id >= static_cast<int>(g.tensors.size())) continue;
    for (const Dim& d : g.tensors[id].declared) {
      if (!d.known() && !d.symbol.empty()) symbols.insert(d.symbol);
    }
  }
  return {symbols.begin(), symbols.end()};
}

std::string BatchSymbol(const Graph& g) {
  for (const std::string& s : InputSymbols(g)) {
    if (s == "batch") return s;
  }
  if (g.inputs.empty()) return "";
  const int id = g.inputs[0];
  if (id < 0 || id >= static_cast<int>(g.tensors.size())) return "";
  const Tensor& t = g.tensors[id];
  if (!t.has_declared || t.declared.empty() || t.declared[0].known()) return "";
  return t.declared[0].symbol;
}

namespace {

std::string SymbolList(const std::vector<std::string>& symbols) {
  if (symbols.empty()) return "it has none: every dim is fixed";
  std::string s = "its symbols: ";
  for (size_t i = 0; i < symbols.size(); ++i) s += (i ? ", " : "") + symbols[i];
  return s;
}

}  // namespace

Result<std::map<std::string, int64_t>> ResolveBindings(const Graph& g, const ShapeBindings& b,
                                                       std::string* batch_symbol) {
  const std::vector<std::string> symbols = InputSymbols(g);
  std::set<std::string> declared(symbols.begin(), symbols.end());
  // Symbols only in value_info are bindable too (shape inference reads them).
  for (const Tensor& t : g.tensors) {
    for (const Dim& d : t.declared) {
      if (!d.known() && !d.symbol.empty()) declared.insert(d.symbol);
    }
  }
  for (const auto& kv : b.dims) {
    if (!declared.count(kv.first)) {
      return Status::Error(g.source + ": --dim " + kv.first + "=" + std::to_string(kv.second) +
                           ": the model has no symbol '" + kv.first + "' (" + SymbolList(symbols) +
                           ")");
    }
  }
  std::string batch = BatchSymbol(g);
  if (!b.batch_dim.empty()) {
    if (!declared.count(b.batch_dim)) {
      return Status::Error(g.source + ": --batch-dim " + b.batch_dim +
                           ": the model has no symbol '" + b.batch_dim + "' (" +
                           SymbolList(symbols) + ")");
    }
    batch = b.batch_dim;
  }
  *batch_symbol = batch;
  std::map<std::string, int64_t> values = b.dims;
  if (b.batch == -1) return values;
  if (batch.empty()) {
    std::string why = "--batch: the model has no batch symbol";
    if (!g.inputs.empty()) {
      const Tensor& first = g.tensors[g.inputs[0]];
      if (first.has_declared && !first.declared.empty() && first.declared[0].known()) {
        why = "input '" + first.name + "' has a fixed batch of " +
              std::to_string(first.declared[0].value) + "; export with a dynamic batch dim";
      } else if (!first.has_declared || first.declared.empty()) {
        why = "input '" + first.name + "' has no batch dim to bind --batch to";
      }
    }
    if (!symbols.empty()) {
      why += ", or name the batch symbol with --batch-dim (" + SymbolList(symbols) + ")";
    }
    return Status::Error(g.source + ": " + why);
  }
  auto it = values.find(batch);
  if (it != values.end() && it->second != b.batch) {
    return Status::Error(g.source + ": --batch " + std::to_string(b.batch) + " and --dim " + batch +
                         "=" + std::to_string(it->second) +
                         " bind the same symbol to different values");
  }
  values[batch] = b.batch;
  return values;
}

Result<std::vector<int>> TopologicalOrder(const Graph& g) {
  const int n = static_cast<int>(g.nodes.size());
  const int nt = static_cast<int>(g.tensors.size());
  std::vector<int> producer(nt, -1);
  std::vector<char> available(nt, 0);
  for (int id : g.inputs) {
    if (id >= 0 && id < nt) available[id] = 1;
  }
  for (int id : g.initializers) {
    if (id >= 0 && id < nt) available[id] = 1;
  }
  for (int i = 0; i < nt; ++i) {
    if (g.tensors[i].kind != TensorKind::kActivation) available[i] = 1;
  }
  for (int i = 0; i < n; ++i) {
    for (int out : g.nodes[i].outputs) {
      if (out < 0) continue;
      if (out >= nt) {
        return Status::Error(g.source + ": " + NodeRef(g, i) + ": output index out of range");
      }
      if (producer[out] >= 0) {
        return Status::Error(g.source + ": tensor '" + g.tensors[out].name +
                             "' is produced by both " + NodeRef(g, producer[out]) + " and " +
                             NodeRef(g, i));
      }
      if (available[out]) {
        return Status::Error(g.source + ": " + NodeRef(g, i) + ": output '" + g.tensors[out].name +
                             "' is also a graph input or initializer");
      }
      producer[out] = i;
    }
  }
  // Depth-first over producers, visiting roots in file order: a graph already
  // in topological file order comes out unchanged. O(nodes + edges).
  enum : char { kNew, kOnStack, kDone };
  std::vector<char> state(n, kNew);
  std::vector<int> order;
  order.reserve(n);
  std::vector<std::pair<int, size_t>> stack;  // node, next input to look at
  for (int root = 0; root < n; ++root) {
    if (state[root] != kNew) continue;
    stack.emplace_back(root, 0);
    state[root] = kOnStack;
    while (!stack.empty()) {
      const int v = stack.back().first;
      const std::vector<int>& ins = g.nodes[v].inputs;
      size_t& next = stack.back().second;
      bool pushed = false;
      while (next < ins.size()) {
        const int t = ins[next++];
        if (t < 0) continue;
        if (t >= nt) {
          return Status::Error(g.source + ": " + NodeRef(g, v) + ": input index out of range");
        }
        if (available[t]) continue;
        const int p = producer[t];
        if (p < 0) {
          return Status::Error(g.source + ": " + NodeRef(g, v) + ": input '" + g.tensors[t].name +
                               "' is not produced by any node, graph input or initializer");
        }
        if (state[p] == kDone) continue;
        if (state[p] == kOnStack) {
          return Status::Error(g.source + ": graph has a cycle through " + NodeRef(g, p) +
                               " (tensor '" + g.tensors[t].name + "')");
        }
        state[p] = kOnStack;
        stack.emplace_back(p, 0);
        pushed = true;
        break;
      }
      if (pushed) continue;
      state[v] = kDone;
      order.push_back(v);
      stack.pop_back();
    }
  }
  return order;
}

Status InferShapes(Graph* g, const ShapeBindings& b, std::vector<std::string>* warnings) {
  const int nt = static_cast<int>(g->tensors.size());
  // Bindings must be positive.
  if (b.batch != -1 && b.batch <= 0) {
    std::string who = g->inputs.empty() ? std::string("the model")
                                        : "input '" + g->tensors[g->inputs[0]].name + "'";
    return Status::Error(g->source + ": " + who + ": --batch must be positive, got " +
                         std::to_string(b.batch));
  }
  for (const auto& kv : b.dims) {
    if (kv.second <= 0) {
      std::string who = "symbol '" + kv.first + "'";
      for (int id : g->inputs) {
        for (const Dim& d : g->tensors[id].declared) {
          if (d.symbol == kv.first) {
            who = "input '" + g->tensors[id].name + "'";
            break;
          }
        }
      }
      return Status::Error(g->source + ": " + who + ": --dim " + kv.first +
                           " must be positive, got " + std::to_string(kv.second));
    }
  }
  std::string batch_symbol;
  auto resolved = ResolveBindings(*g, b, &batch_symbol);
  if (!resolved.ok()) return resolved.status();
  g->bound_symbols = resolved.value();
  g->batch_symbol = batch_symbol;
  Symbols syms;
  syms.batch_symbol = batch_symbol;
  syms.dims = &g->bound_symbols;

  g->Link();
  auto order = TopologicalOrder(*g);
  if (!order.ok()) return order.status();

  // Declared dtypes of activations, before inference overwrites them.
  std::vector<DType> declared_dtype(nt, DType::kUndefined);
  for (int i = 0; i < nt; ++i) {
    Tensor& t = g->tensors[i];
    if (t.kind != TensorKind::kActivation) continue;
    declared_dtype[i] = t.dtype;
    t.shape_known = false;
    t.shape.clear();
    t.has_values = false;
    t.values.clear();
    t.is_sequence = false;
    t.seq_shapes.clear();
  }

  // Graph inputs and initializers.
  int64_t total_bytes = 0;
  for (int i = 0; i < nt; ++i) {
    Tensor& t = g->tensors[i];
    if (t.kind == TensorKind::kActivation) continue;
    if (t.kind == TensorKind::kGraphInput) {
      Status s = BindInput(*g, &t, syms);
      if (!s.ok()) return s;
    } else {
      t.shape.clear();
      for (size_t k = 0; k < t.declared.size(); ++k) {
        const Dim& d = t.declared[k];
        if (!d.known()) {
          return Status::Error(g->source + ": initializer '" + t.name + "': dim " +
                               std::to_string(k) + " is not a fixed size");
        }
        t.shape.push_back(d.value);
      }
      t.shape_known = true;
      if (t.has_values) {
        int64_t n = 0;
        if (!CheckedNumel(t.shape, &n) || static_cast<int64_t>(t.values.size()) != n) {
          t.has_values = false;
          t.values.clear();
        }
      }
    }
    Status size_ok = CheckSize(*g, t, kNoPlace, &total_bytes);
    if (!size_ok.ok()) return size_ok;
  }

  for (int ni : order.value()) {
    Node& node = g->nodes[ni];
    const OpDef* def = FindOp(node.domain, node.op_type);
    if (def != nullptr && def->shape != nullptr) {
      ShapeContext ctx(g, ni);
      Status s = def->shape(ctx);
      if (!s.ok()) return s;
      for (size_t o = 0; o < node.outputs.size(); ++o) {
        const int id = node.outputs[o];
        if (id < 0) continue;
        const Tensor& t = g->tensors[id];
        if (!t.shape_known && !t.is_sequence) {
          return ctx.Error("shape function left output '" + t.name + "' unknown");
        }
      }
    } else {
      bool all_known = true;
      std::vector<std::vector<int64_t>> shapes(node.outputs.size());
      for (size_t o = 0; o < node.outputs.size() && all_known; ++o) {
        const int id = node.outputs[o];
        if (id < 0) continue;
        const Tensor& t = g->tensors[id];
        all_known = t.has_declared && declared_dtype[id] != DType::kUndefined &&
                    ResolveDeclared(t.declared, syms, &shapes[o]);
      }
      if (!all_known) {
        const std::string domain = node.domain.empty() ? "ai.onnx" : node.domain;
        return Status::Error(g->source + ": node '" + node.Label(ni) + "' (" + domain +
                             "::" + node.op_type + "): unsupported op (no shape function) in " +
                             "domain '" + domain + "'");
      }
      for (size_t o = 0; o < node.outputs.size(); ++o) {
        const int id = node.outputs[o];
        if (id < 0) continue;
        Tensor& t = g->tensors[id];
        t.dtype = declared_dtype[id];
        t.shape = shapes[o];
        t.shape_known = true;
      }
      if (warnings != nullptr) {
        warnings->push_back(g->source + ": " + NodeRef(*g, ni) +
                            ": no shape function; using the model's value_info");
      }
    }
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      const int id = node.outputs[o];
      if (id < 0) continue;
      Tensor& t = g->tensors[id];
      for (int64_t d : t.shape) {
        if (d < 0) {
          return Status::Error(g->source + ": tensor '" + t.name + "'" + PlaceOf(*g, ni) +
                               ": negative dim in " + DimsString(t.shape));
        }
      }
      if (t.is_sequence) {
        t.shape_known = true;
        t.shape = {0};  // The list itself owns no memory; see seq_shapes.
      }
      Status s = CheckDeclared(*g, t, declared_dtype[id], syms, ni);
      if (!s.ok()) return s;
      Status size_ok = CheckSize(*g, t, ni, &total_bytes);
      if (!size_ok.ok()) return size_ok;
      if (t.has_values) {
        int64_t n = 0;
        if (!CheckedNumel(t.shape, &n) || static_cast<int64_t>(t.values.size()) != n) {
          t.has_values = false;
          t.values.clear();
        }
      }
    }
  }

  for (int id : g->outputs) {
    if (id < 0 || id >= nt) continue;
    const Tensor& t = g->tensors[id];
    if (!t.shape_known) {
      return Status::Error(g->source + ": graph output '" + t.name +
                           "' is not produced by any node or input");
    }
    if (t.kind != TensorKind::kActivation) {
      Status s = CheckDeclared(*g, t, DType::kUndefined, syms, kGraphOutput);
      if (!s.ok()) return s;
    }
  }
  return Status();
}

}  // namespace memplan
