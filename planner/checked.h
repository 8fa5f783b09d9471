#ifndef MEMPLAN_PLANNER_CHECKED_H_
#define MEMPLAN_PLANNER_CHECKED_H_

#include <cstdint>
#include <initializer_list>
#include <vector>

namespace memplan {

/// a*b into *out; false on int64 overflow (or a negative factor).
inline bool CheckedMul(int64_t a, int64_t b, int64_t* out) {
  if (a < 0 || b < 0) {
    return false;
  }
  return !__builtin_mul_overflow(a, b, out);
}

/// a+b into *out; false on int64 overflow.
inline bool CheckedAdd(int64_t a, int64_t b, int64_t* out) {
  return !__builtin_add_overflow(a, b, out);
}

/// a+b, saturating at INT64_MAX (for FLOP counts, which may be astronomical).
inline int64_t SatAdd(int64_t a, int64_t b) {
  int64_t out = 0;
  return __builtin_add_overflow(a, b, &out) ? INT64_MAX : out;
}

/// a*b for non-negative factors, saturating at INT64_MAX; 0 when a factor
/// is 0 or negative (an unknown dim counts nothing).
inline int64_t SatMulNonNeg(int64_t a, int64_t b) {
  if (a <= 0 || b <= 0) return 0;
  int64_t out = 0;
  return __builtin_mul_overflow(a, b, &out) ? INT64_MAX : out;
}

/// Product of non-negative factors, saturating at INT64_MAX.
inline int64_t SatProduct(std::initializer_list<int64_t> factors) {
  int64_t out = 1;
  for (int64_t f : factors) out = SatMulNonNeg(out, f);
  return out;
}

/// Product of dims, saturating at INT64_MAX (0 with a zero or negative dim).
inline int64_t SatNumel(const std::vector<int64_t>& dims) {
  int64_t out = 1;
  for (int64_t d : dims) out = SatMulNonNeg(out, d);
  return out;
}

/// Product of dims into *out; false on overflow or a negative dim.
inline bool CheckedNumel(const std::vector<int64_t>& dims, int64_t* out) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (!CheckedMul(n, d, &n)) {
      return false;
    }
  }
  *out = n;
  return true;
}

}  // namespace memplan

#endif  // MEMPLAN_PLANNER_CHECKED_H_
