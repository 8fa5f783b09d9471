#include "planner/kernels.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "planner/checked.h"
#include "planner/op_registry.h"

namespace memplan {

namespace {

/// A convolution's stride and padding along its first spatial dim, from the
/// node's attributes (auto_pad SAME_*: the padding that keeps
/// ceil(input / stride); VALID: none).
void ConvStridePad(const Node& n, int64_t in, int64_t kernel, int64_t* stride, int64_t* pad) {
  const std::vector<int64_t> strides = n.GetInts("strides");
  const std::vector<int64_t> pads = n.GetInts("pads");
  const std::vector<int64_t> dilations = n.GetInts("dilations");
  *stride = strides.empty() ? 1 : std::max<int64_t>(1, strides[0]);
  const int64_t dilation = dilations.empty() ? 1 : std::max<int64_t>(1, dilations[0]);
  const std::string auto_pad = n.GetString("auto_pad", "NOTSET");
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    const int64_t out = (in + *stride - 1) / *stride;
    const int64_t total =
        std::max<int64_t>(0, (out - 1) * *stride + (kernel - 1) * dilation + 1 - in);
    *pad = total / 2;
  } else if (auto_pad == "VALID") {
    *pad = 0;
  } else {
    *pad = pads.empty() ? 0 : std::max<int64_t>(0, pads[0]);
  }
}

}  // namespace

void KernelsOf(const Graph& g, const Schedule& s, std::vector<KernelShape>* out) {
  KernelShape best_gemm;
  KernelShape best_conv;
  int64_t gemm_flops = -1;
  int64_t conv_flops = -1;
  int64_t big_elem = 0;
  KernelShape elem;
  for (const ExecOp& op : s.ops) {
    const ValidationKernel kind = op.def ? op.def->kernel : ValidationKernel::kNone;
    if (kind == ValidationKernel::kGemm && op.in.size() >= 2 && op.in[0] >= 0 && op.in[1] >= 0 &&
        !op.out.empty() && op.out[0] >= 0 && op.flops > gemm_flops) {
      const Val& a = s.vals[op.in[0]];
      const Val& o = s.vals[op.out[0]];
      if (a.shape.empty() || o.shape.empty()) continue;
      const int64_t k = a.shape.back();
      const int64_t n = o.shape.back();
      int64_t m = 1;
      for (size_t i = 0; i + 1 < o.shape.size(); ++i) m *= o.shape[i];
      gemm_flops = op.flops;
      best_gemm.kind = KernelShape::kGemm;
      best_gemm.dims = {m, n, k, 1};
      best_gemm.dtype = o.dtype;
      best_gemm.node = op.label;
    }
    if (kind == ValidationKernel::kConv && op.in.size() >= 2 && op.in[0] >= 0 && op.in[1] >= 0 &&
        op.flops > conv_flops && !op.out.empty() && op.out[0] >= 0) {
      const Val& x = s.vals[op.in[0]];
      const Val& w = s.vals[op.in[1]];
      const Val& o = s.vals[op.out[0]];
      if (x.shape.size() != 4 || w.shape.size() != 4 || o.shape.size() != 4) continue;
      int64_t stride = 1, pad = 0;
      if (op.node >= 0) ConvStridePad(g.nodes[op.node], x.shape[2], w.shape[2], &stride, &pad);
      conv_flops = op.flops;
      best_conv.kind = KernelShape::kConv;
      best_conv.dims = {x.shape[0], x.shape[1], x.shape[2], x.shape[3], w.shape[0],
                        w.shape[2], w.shape[3], stride,     pad};
      best_conv.dtype = o.dtype;
      best_conv.node = op.label;
    }
    for (int v : op.out) {
      if (v >= 0 && s.vals[v].bytes > big_elem && IsFloat(s.vals[v].dtype)) {
        big_elem = s.vals[v].bytes;
        int64_t n = 1;
        for (int64_t d : s.vals[v].shape) n *= d;
        elem.kind = KernelShape::kElementwise;
        elem.dims = {n};
        elem.dtype = s.vals[v].dtype;
        elem.node = op.label;
      }
    }
  }
  if (gemm_flops >= 0) out->push_back(best_gemm);
  if (conv_flops >= 0) out->push_back(best_conv);
  if (big_elem > 0) out->push_back(elem);
}

void KernelLimitsOf(const Schedule& s, Plan* plan) {
  for (const ExecOp& op : s.ops) {
    const OpDef* def = op.node >= 0 ? FindOp("", op.op_type) : nullptr;
    const bool int32 = def != nullptr && def->int32_indexing;
    for (const std::vector<int>* vs : {&op.in, &op.out}) {
      for (int v : *vs) {
        if (v < 0 || !IsFloat(s.vals[v].dtype)) continue;
        int64_t n = 0;
        if (!CheckedNumel(s.vals[v].shape, &n)) n = INT64_MAX;
        KernelLimit k{n, op.label, op.op_type, int32};
        if (n > plan->largest_tensor.elements) plan->largest_tensor = k;
        if (int32 && n >= kInt32IndexElements && n > plan->int32_overflow.elements) {
          plan->int32_overflow = k;
        }
      }
    }
  }
  if (plan->int32_overflow.elements > 0) {
    const KernelLimit& k = plan->int32_overflow;
    plan->warnings.push_back("node '" + k.node + "' (" + k.op_type + "): a tensor of " +
                             std::to_string(k.elements) +
                             " elements, over PyTorch's 32-bit indexing limit of 2^31 - 1 in "
                             "this op's CUDA kernel: PyTorch fails (an error or an illegal "
                             "memory access); use a smaller batch");
  } else if (plan->largest_tensor.elements >= kInt32IndexElements) {
    const KernelLimit& k = plan->largest_tensor;
    plan->warnings.push_back("node '" + k.node + "' (" + k.op_type + "): a tensor of " +
                             std::to_string(k.elements) +
                             " elements (2^31 or more): PyTorch CUDA kernels that index in 32 "
                             "bits fail there; this op's kernel is not known to");
  }
}

}  // namespace memplan
