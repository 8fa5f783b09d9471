#include "planner/op_registry.h"

#include <algorithm>
#include <utility>

#include "planner/text.h"

namespace memplan {
namespace {

std::string Key(const std::string& domain, const std::string& op) {
  const std::string d = (domain == "ai.onnx") ? "" : domain;
  return d + "::" + op;
}

const OpTable& Table() {
  static const OpTable* table = [] {
    auto* t = new OpTable();
    RegisterShapeOps(t);
    RegisterElementwiseOps(t);
    RegisterNnOps(t);
    AttachOpEvidence(t);
    return t;
  }();
  return *table;
}

}  // namespace

void ShapeContext::SetOutput(int i, DType dtype, std::vector<int64_t> shape) {
  if (!HasOutput(i)) return;
  Tensor& t = Output(i);
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.shape_known = true;
}

void ShapeContext::SetValues(int i, std::vector<int64_t> values) {
  if (!HasOutput(i)) return;
  Tensor& t = Output(i);
  t.values = std::move(values);
  t.has_values = true;
}

Status ShapeContext::Error(const std::string& what) const {
  const Node& n = node();
  std::string op = n.domain.empty() ? n.op_type : n.domain + "::" + n.op_type;
  return Status::Error(g_->source + ": node '" + n.Label(index_) + "' (" + op + "): " + what);
}

bool SaveContext::AnyInputRequiresGrad() const {
  return std::any_of(input_requires_grad.begin(), input_requires_grad.end(),
                     [](bool b) { return b; });
}

OpDef& OpTable::Add(const std::string& op_type, const OpDef& def) { return Add("", op_type, def); }

OpDef& OpTable::Add(const std::string& domain, const std::string& op_type, const OpDef& def) {
  OpDef& slot = entries_[Key(domain, op_type)];
  slot = def;
  if (domain.empty() || domain == "ai.onnx") IndexDefault(op_type, &slot);
  return slot;
}

namespace {

uint64_t Fnv1a(const std::string& s) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace

void OpTable::IndexDefault(const std::string& op_type, const OpDef* def) {
  if (2 * (default_count_ + 1) > default_domain_.size()) {
    std::vector<Slot> old = std::move(default_domain_);
    default_domain_.assign(std::max<size_t>(64, 2 * old.size()), Slot());
    default_count_ = 0;
    for (Slot& o : old) {
      if (!o.op_type.empty()) IndexDefault(o.op_type, o.def);
    }
  }
  const size_t mask = default_domain_.size() - 1;
  for (size_t i = Fnv1a(op_type) & mask;; i = (i + 1) & mask) {
    Slot& slot = default_domain_[i];
    if (slot.op_type.empty()) {
      slot.op_type = op_type;
      slot.def = def;
      ++default_count_;
      return;
    }
    if (slot.op_type == op_type) {
      slot.def = def;
      return;
    }
  }
}

OpDef* OpTable::Mutable(const std::string& op_type) {
  auto it = entries_.find(Key("", op_type));
  return it == entries_.end() ? nullptr : &it->second;
}

const OpDef* OpTable::Find(const std::string& domain, const std::string& op_type) const {
  if (domain.empty() || domain == "ai.onnx") {
    if (op_type.empty() || default_domain_.empty()) return nullptr;
    const size_t mask = default_domain_.size() - 1;
    for (size_t i = Fnv1a(op_type) & mask;; i = (i + 1) & mask) {
      const Slot& slot = default_domain_[i];
      if (slot.op_type.empty()) return nullptr;
      if (slot.op_type == op_type) return slot.def;
    }
  }
  // Key(domain, op_type) in a buffer kept per thread: a lookup allocates
  // nothing.
  thread_local std::string key;
  key.clear();
  if (domain != "ai.onnx") key += domain;
  key += "::";
  key += op_type;
  auto it = entries_.find(key);
  return it == entries_.end() ? nullptr : &it->second;
}

void OpTable::SetEvidence(const std::string& op_type, const Evidence& evidence) {
  auto it = entries_.find(Key("", op_type));
  if (it != entries_.end()) it->second.evidence = evidence;
}

const OpDef* FindOp(const std::string& domain, const std::string& op_type) {
  return Table().Find(domain, op_type);
}

const std::unordered_map<std::string, OpDef>& AllOps() { return Table().entries(); }

bool ModuleDisablesAutocast(const std::string& module_class) {
  return module_class.rfind("transformers.", 0) == 0 && EndsWith(module_class, "RotaryEmbedding");
}

}  // namespace memplan
