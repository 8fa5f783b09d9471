#ifndef MEMPLAN_PLANNER_DTYPE_H_
#define MEMPLAN_PLANNER_DTYPE_H_

#include <cstdint>
#include <string>

namespace memplan {

/// Element types; the numbers are ONNX TensorProto.DataType codes.
enum class DType : int32_t {
  kUndefined = 0,
  kFloat = 1,
  kUint8 = 2,
  kInt8 = 3,
  kUint16 = 4,
  kInt16 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kString = 8,
  kBool = 9,
  kFloat16 = 10,
  kDouble = 11,
  kUint32 = 12,
  kUint64 = 13,
  kComplex64 = 14,
  kComplex128 = 15,
  kBFloat16 = 16,
  kFloat8E4M3FN = 17,
  kFloat8E4M3FNUZ = 18,
  kFloat8E5M2 = 19,
  kFloat8E5M2FNUZ = 20,
  kUint4 = 21,
  kInt4 = 22,
  kFloat4E2M1 = 23,
};

/// True for codes 1..23 except 0 (undefined).
bool IsKnownDType(int32_t code);
/// Bits per element (4 for int4/uint4/float4, 0 for string/undefined).
int DTypeBits(DType t);
/// True for floating-point types (fp8..fp64, not complex).
bool IsFloat(DType t);
/// True for integer and bool types.
bool IsIntegral(DType t);
/// Short lowercase name: "float32", "bfloat16", "int64", ...
std::string DTypeName(DType t);
/// Bytes of `numel` elements of `t`, rounded up; false on overflow.
bool DTypeBytes(DType t, int64_t numel, int64_t* bytes);

}  // namespace memplan

#endif  // MEMPLAN_PLANNER_DTYPE_H_
