#include "planner/ops/op_util.h"

#include <algorithm>

#include "planner/checked.h"

namespace memplan {

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

int64_t Numel(const std::vector<int64_t>& shape) {
  int64_t n = 0;
  return CheckedNumel(shape, &n) ? n : -1;
}

bool NormalizeAxis(int64_t axis, int64_t rank, int64_t* out) {
  if (rank < 0 || axis < -rank || axis >= rank) return false;
  *out = axis < 0 ? axis + rank : axis;
  return true;
}

bool NormalizeAxes(const std::vector<int64_t>& axes, int64_t rank, bool unique,
                   std::vector<int64_t>* out) {
  std::vector<int64_t> r;
  r.reserve(axes.size());
  for (int64_t a : axes) {
    int64_t n = 0;
    if (!NormalizeAxis(a, rank, &n)) return false;
    r.push_back(n);
  }
  if (unique) {  // Sorted copy: O(n log n) however many axes.
    std::vector<int64_t> sorted = r;
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) return false;
  }
  *out = std::move(r);
  return true;
}

bool BroadcastShapes(const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                     std::vector<int64_t>* out) {
  const size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> r(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da == db || db == 1) {
      r[i] = da;
    } else if (da == 1) {
      r[i] = db;
    } else {
      return false;
    }
  }
  *out = std::move(r);
  return true;
}

std::vector<int64_t> Strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * shape[i + 1];
  return s;
}

int64_t BroadcastIndex(const std::vector<int64_t>& idx, const std::vector<int64_t>& shape) {
  const size_t off = idx.size() - shape.size();
  int64_t flat = 0;
  for (size_t i = 0; i < shape.size(); ++i) {
    const int64_t d = shape[i];
    flat = flat * d + (d == 1 ? 0 : idx[off + i]);
  }
  return flat;
}

bool NextIndex(std::vector<int64_t>* idx, const std::vector<int64_t>& shape) {
  for (int i = static_cast<int>(shape.size()) - 1; i >= 0; --i) {
    if (++(*idx)[i] < shape[i]) return true;
    (*idx)[i] = 0;
  }
  return false;
}

Status CheckInputs(const ShapeContext& ctx, int min_in, int max_in) {
  const int n = ctx.num_inputs();
  if (n < min_in || (max_in >= 0 && n > max_in)) {
    std::string want = std::to_string(min_in);
    if (max_in != min_in) {
      want = max_in < 0 ? "at least " + want : want + ".." + std::to_string(max_in);
    }
    return ctx.Error("expects " + want + " inputs, got " + std::to_string(n));
  }
  for (int i = 0; i < min_in; ++i) {
    if (!ctx.HasInput(i)) return ctx.Error("input " + std::to_string(i) + " is missing");
    const Tensor& t = ctx.Input(i);
    if (!t.shape_known && !t.is_sequence) {
      return ctx.Error("input '" + t.name + "' has no known shape");
    }
  }
  for (int i = min_in; i < n; ++i) {
    if (ctx.HasInput(i) && !ctx.Input(i).shape_known && !ctx.Input(i).is_sequence) {
      return ctx.Error("input '" + ctx.Input(i).name + "' has no known shape");
    }
  }
  return Status();
}

bool HasInputValues(const ShapeContext& ctx, int i) {
  if (!ctx.HasInput(i)) return false;
  const Tensor& t = ctx.Input(i);
  return t.has_values && t.shape_known && static_cast<int64_t>(t.values.size()) == Numel(t.shape);
}

Status IntsFromAttrOrInput(const ShapeContext& ctx, const std::string& attr, int input,
                           const std::string& what, std::vector<int64_t>* out, bool* found) {
  *found = false;
  if (!attr.empty() && ctx.node().Has(attr)) {
    *out = ctx.node().GetInts(attr);
    *found = true;
    return Status();
  }
  if (input >= 0 && ctx.HasInput(input)) {
    if (!HasInputValues(ctx, input)) {
      return ctx.Error("cannot infer: " + what + " (input '" + ctx.Input(input).name +
                       "') is not a constant or computable from shapes");
    }
    *out = ctx.Input(input).values;
    *found = true;
  }
  return Status();
}

bool InputScalarInt(const ShapeContext& ctx, int i, int64_t* out) {
  if (!HasInputValues(ctx, i) || ctx.Input(i).values.size() != 1) return false;
  *out = ctx.Input(i).values[0];
  return true;
}

bool InputConstantFloat(const ShapeContext& ctx, int i, double* out) {
  if (!ctx.HasInput(i)) return false;
  const Graph& g = ctx.graph();
  int id = ctx.node().inputs[i];
  // Follow Cast/CastLike/Identity back to a constant (a few steps at most).
  for (int step = 0; step < 8 && id >= 0; ++step) {
    const Tensor& t = g.tensors[id];
    if (t.has_values && !t.values.empty()) {
      *out = static_cast<double>(t.values[0]);
      return true;
    }
    if (t.producer < 0 || t.producer >= static_cast<int>(g.nodes.size())) return false;
    const Node& p = g.nodes[t.producer];
    if (p.op_type == "Constant") {
      auto it = p.attrs.find("value");
      if (it != p.attrs.end()) {
        if (!it->second.t_fvalues.empty()) {
          *out = it->second.t_fvalues[0];
          return true;
        }
        if (it->second.t_has_values && !it->second.t_values.empty()) {
          *out = static_cast<double>(it->second.t_values[0]);
          return true;
        }
        return false;
      }
      it = p.attrs.find("value_float");
      if (it != p.attrs.end()) {
        *out = it->second.f;
        return true;
      }
      it = p.attrs.find("value_int");
      if (it != p.attrs.end()) {
        *out = static_cast<double>(it->second.i);
        return true;
      }
      return false;
    }
    if (p.op_type != "Cast" && p.op_type != "CastLike" && p.op_type != "Identity") return false;
    id = p.inputs.empty() ? -1 : p.inputs[0];
  }
  return false;
}

void SaveInput(int i, std::vector<Saved>* out) {
  Saved s;
  s.kind = Saved::kInput;
  s.index = i;
  out->push_back(s);
}

void SaveOutput(int i, std::vector<Saved>* out) {
  Saved s;
  s.kind = Saved::kOutput;
  s.index = i;
  out->push_back(s);
}

bool InputRequiresGrad(const SaveContext& ctx, int i) {
  return i >= 0 && i < static_cast<int>(ctx.input_requires_grad.size()) &&
         ctx.input_requires_grad[i];
}

}  // namespace memplan
