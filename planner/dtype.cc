#include "planner/dtype.h"

#include "planner/checked.h"

namespace memplan {

bool IsKnownDType(int32_t code) { return code >= 1 && code <= 23; }

int DTypeBits(DType t) {
  switch (t) {
    case DType::kBool:
    case DType::kUint8:
    case DType::kInt8:
    case DType::kFloat8E4M3FN:
    case DType::kFloat8E4M3FNUZ:
    case DType::kFloat8E5M2:
    case DType::kFloat8E5M2FNUZ:
      return 8;
    case DType::kUint16:
    case DType::kInt16:
    case DType::kFloat16:
    case DType::kBFloat16:
      return 16;
    case DType::kFloat:
    case DType::kInt32:
    case DType::kUint32:
      return 32;
    case DType::kDouble:
    case DType::kInt64:
    case DType::kUint64:
    case DType::kComplex64:
      return 64;
    case DType::kComplex128:
      return 128;
    case DType::kUint4:
    case DType::kInt4:
    case DType::kFloat4E2M1:
      return 4;
    case DType::kString:
    case DType::kUndefined:
      return 0;
  }
  return 0;
}

bool IsFloat(DType t) {
  switch (t) {
    case DType::kFloat:
    case DType::kFloat16:
    case DType::kBFloat16:
    case DType::kDouble:
    case DType::kFloat8E4M3FN:
    case DType::kFloat8E4M3FNUZ:
    case DType::kFloat8E5M2:
    case DType::kFloat8E5M2FNUZ:
    case DType::kFloat4E2M1:
      return true;
    default:
      return false;
  }
}

bool IsIntegral(DType t) {
  switch (t) {
    case DType::kBool:
    case DType::kUint8:
    case DType::kInt8:
    case DType::kUint16:
    case DType::kInt16:
    case DType::kInt32:
    case DType::kUint32:
    case DType::kInt64:
    case DType::kUint64:
    case DType::kUint4:
    case DType::kInt4:
      return true;
    default:
      return false;
  }
}

std::string DTypeName(DType t) {
  switch (t) {
    case DType::kUndefined:
      return "undefined";
    case DType::kFloat:
      return "float32";
    case DType::kUint8:
      return "uint8";
    case DType::kInt8:
      return "int8";
    case DType::kUint16:
      return "uint16";
    case DType::kInt16:
      return "int16";
    case DType::kInt32:
      return "int32";
    case DType::kInt64:
      return "int64";
    case DType::kString:
      return "string";
    case DType::kBool:
      return "bool";
    case DType::kFloat16:
      return "float16";
    case DType::kDouble:
      return "float64";
    case DType::kUint32:
      return "uint32";
    case DType::kUint64:
      return "uint64";
    case DType::kComplex64:
      return "complex64";
    case DType::kComplex128:
      return "complex128";
    case DType::kBFloat16:
      return "bfloat16";
    case DType::kFloat8E4M3FN:
      return "float8e4m3fn";
    case DType::kFloat8E4M3FNUZ:
      return "float8e4m3fnuz";
    case DType::kFloat8E5M2:
      return "float8e5m2";
    case DType::kFloat8E5M2FNUZ:
      return "float8e5m2fnuz";
    case DType::kUint4:
      return "uint4";
    case DType::kInt4:
      return "int4";
    case DType::kFloat4E2M1:
      return "float4e2m1";
  }
  return "unknown";
}

bool DTypeBytes(DType t, int64_t numel, int64_t* bytes) {
  int64_t bits = 0;
  if (!CheckedMul(numel, DTypeBits(t), &bits)) return false;
  *bytes = bits / 8 + (bits % 8 != 0 ? 1 : 0);
  return true;
}

}  // namespace memplan
