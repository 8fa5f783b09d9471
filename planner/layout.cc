#include "planner/layout.h"

#include <set>
#include <utility>

#include "planner/op_registry.h"

namespace memplan {

std::vector<int64_t> ElementwiseOutputStrides(const std::vector<int64_t>& out_shape,
                                              const std::vector<StridedOperand>& inputs) {
  const int nd = static_cast<int>(out_shape.size());
  // Operand strides in TensorIterator order (index 0 = the last tensor dim),
  // 0 where the operand is broadcast.
  std::vector<std::vector<int64_t>> st;
  for (const StridedOperand& in : inputs) {
    const int r = static_cast<int>(in.shape.size());
    if (r > nd || in.strides.size() != in.shape.size()) continue;
    std::vector<int64_t> s(nd, 0);
    for (int d = 0; d < r; ++d) {
      const int od = nd - r + d;  // aligned output dim
      const bool broadcast = in.shape[d] == 1 && out_shape[od] != 1;
      s[nd - 1 - od] = broadcast ? 0 : in.strides[d];
    }
    st.push_back(std::move(s));
  }
  auto size_of = [&](int ti) { return out_shape[nd - 1 - ti]; };
  // 1: dim a goes outside dim b; -1: inside; 0: undecided.
  auto should_swap = [&](int a, int b) {
    for (const std::vector<int64_t>& s : st) {
      const int64_t s0 = s[a];
      const int64_t s1 = s[b];
      if (s0 == 0 || s1 == 0) continue;
      if (s0 < s1) return -1;
      if (s0 > s1) return 1;
      if (size_of(a) > size_of(b)) return 1;
    }
    return 0;
  };
  std::vector<int> perm(nd);
  for (int i = 0; i < nd; ++i) perm[i] = i;  // innermost first
  for (int i = 1; i < nd; ++i) {
    int dim1 = i;
    for (int dim0 = i - 1; dim0 >= 0; --dim0) {
      const int c = should_swap(perm[dim0], perm[dim1]);
      if (c > 0) {
        std::swap(perm[dim0], perm[dim1]);
        dim1 = dim0;
      } else if (c < 0) {
        break;
      }
    }
  }
  std::vector<int64_t> out(nd, 1);
  int64_t next = 1;
  for (int i = 0; i < nd; ++i) {
    const int td = nd - 1 - perm[i];
    out[td] = next;
    next *= out_shape[td] > 0 ? out_shape[td] : 1;
  }
  return out;
}

bool IsTensorIteratorOp(const std::string& op) {
  const OpDef* def = FindOp("", op);
  return def && def->tensor_iterator;
}

}  // namespace memplan
