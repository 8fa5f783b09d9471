#ifndef MEMPLAN_PLANNER_CHECKED_H_
#define MEMPLAN_PLANNER_CHECKED_H_

#include <cstdint>
#include <vector>

namespace memplan {

/// a*b into *out; false on int64 overflow (or a negative factor).
inline bool CheckedMul(int64_t a, int64_t b, int64_t* out) {
  if (a < 0 || b < 0) return false;
  return !__builtin_mul_overflow(a, b, out);
}

/// a+b into *out; false on int64 overflow.
inline bool CheckedAdd(int64_t a, int64_t b, int64_t* out) {
  return !__builtin_add_overflow(a, b, out);
}

/// Product of dims into *out; false on overflow or a negative dim.
inline bool CheckedNumel(const std::vector<int64_t>& dims, int64_t* out) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (!CheckedMul(n, d, &n)) return false;
  }
  *out = n;
  return true;
}

}  // namespace memplan

#endif  // MEMPLAN_PLANNER_CHECKED_H_
