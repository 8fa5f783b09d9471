#include "planner/schedule.h"

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>
#include <utility>

#include "planner/attention.h"
#include "planner/checked.h"
#include "planner/fusion.h"
#include "planner/layout.h"
#include "planner/module_calls.h"
#include "planner/op_registry.h"
#include "planner/ops/op_names.h"
#include "planner/ops/op_util.h"
#include "planner/params.h"
#include "planner/python_locals.h"
#include "planner/reduce_kernel.h"
#include "planner/rnn.h"
#include "planner/sdpa.h"
#include "planner/shape_inference.h"

namespace memplan {

std::vector<int64_t> ContiguousStrides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  int64_t acc = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    s[i] = acc;
    acc *= std::max<int64_t>(shape[i], 1);
  }
  return s;
}

bool IsContiguous(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides) {
  for (int64_t d : shape) {
    if (d == 0) return true;  // Empty tensors are contiguous whatever their strides.
  }
  int64_t expected = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] == 1) continue;
    if (shape[i] == 0) return true;
    if (strides[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

std::vector<int64_t> ChannelsLastStrides(const std::vector<int64_t>& shape) {
  if (shape.size() != 4 && shape.size() != 5) return ContiguousStrides(shape);
  std::vector<int64_t> s(shape.size(), 1);
  int64_t acc = std::max<int64_t>(shape[1], 1);  // C innermost
  for (size_t i = shape.size(); i-- > 2;) {
    s[i] = acc;
    acc *= std::max<int64_t>(shape[i], 1);
  }
  s[0] = acc;
  return s;
}

bool IsChannelsLast(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides) {
  if ((shape.size() != 4 && shape.size() != 5) || strides.size() != shape.size()) return false;
  if (IsContiguous(shape, strides)) return false;
  const std::vector<int64_t> want = ChannelsLastStrides(shape);
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] != 1 && strides[i] != want[i]) return false;  // (empty: contiguous above)
  }
  return true;
}

bool ViewStrides(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides,
                 const std::vector<int64_t>& new_shape, std::vector<int64_t>* out) {
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  if (numel == 0) {
    *out = ContiguousStrides(new_shape);
    return true;
  }
  // Old dims without the size-1 ones, grouped into chunks that are laid out
  // contiguously among themselves; new dims must split/merge within chunks.
  std::vector<int64_t> s;
  std::vector<int64_t> t;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] != 1) {
      s.push_back(shape[i]);
      t.push_back(strides[i]);
    }
  }
  out->assign(new_shape.size(), 1);
  size_t nj = 0;
  size_t i = 0;
  while (i < s.size()) {
    size_t end = i;
    while (end + 1 < s.size() && t[end] == t[end + 1] * s[end + 1]) ++end;
    int64_t chunk = 1;
    for (size_t k = i; k <= end; ++k) chunk *= s[k];
    const int64_t base = t[end];
    std::vector<size_t> dims;
    int64_t acc = 1;
    while (acc < chunk) {
      if (nj >= new_shape.size()) return false;
      if (new_shape[nj] != 1) {
        acc *= new_shape[nj];
        dims.push_back(nj);
      }
      ++nj;
    }
    if (acc != chunk) return false;
    int64_t stride = base;
    for (size_t k = dims.size(); k-- > 0;) {
      (*out)[dims[k]] = stride;
      stride *= new_shape[dims[k]];
    }
    i = end + 1;
  }
  for (; nj < new_shape.size(); ++nj) {
    if (new_shape[nj] != 1) return false;
  }
  // Size-1 dims: the stride of the next dim times its size (any works).
  for (size_t k = new_shape.size(); k-- > 0;) {
    if (new_shape[k] == 1) {
      (*out)[k] = k + 1 < new_shape.size() ? (*out)[k + 1] * new_shape[k + 1] : 1;
    }
  }
  return true;
}

namespace {

bool IsHalf(DType t) { return t == DType::kFloat16 || t == DType::kBFloat16; }

// Whether autocast's cached_cast (aten/src/ATen/autocast_mode.h) copies a
// tensor of dtype `have` to `to`: every floating tensor but a double whose
// dtype is not the target (float32, and the other half type: a cuDNN RNN's
// float16 output under bf16 autocast).
bool AutocastCopies(DType have, DType to) {
  return IsFloat(have) && have != to && have != DType::kDouble;
}

DType HalfType(Precision p) {
  return (p == Precision::kAmpFp16 || p == Precision::kFp16) ? DType::kFloat16 : DType::kBFloat16;
}

bool IsAmp(Precision p) { return p == Precision::kAmpBf16 || p == Precision::kAmpFp16; }
bool IsWholeCast(Precision p) { return p == Precision::kBf16 || p == Precision::kFp16; }

int64_t BytesOf(const std::vector<int64_t>& shape, DType dt) {
  int64_t n = 0;
  int64_t b = 0;
  if (!CheckedNumel(shape, &n) || !DTypeBytes(dt, n, &b)) return 0;
  return b;
}

// The builder: walks the graph in order and appends ops and vals.
// cuDNN in heuristic mode (PyTorch's default, cudnn.benchmark off) runs
// NCHW convolutions with NHWC tensor-core kernels: the engine copies the
// input, the weight and the output through a workspace that PyTorch takes
// from the caching allocator for the call, after the output. Measured per
// convolution on the H200 (bench/results/cudnn_workspace_h200.jsonl, and
// 522 shapes in cudnn_ws_grid_h200.jsonl): exact for bf16 (inputs and weights
// padded to 8 channels). For fp32 the heuristics pick, shape by shape, engines that
// copy all three (104 of 248 shapes) or the input and weight only (82): see
// Fp32ConvCopies.
// Depthwise convolutions have NCHW kernels and unstrided 1x1 ones mostly run
// as GEMMs on NCHW: no workspace (their weight gradient's split-K buffers, a
// few MiB, are left out; a 16-bit 1x1 forward over a small image copies, see
// UnitConvCopiesInForward). Backward takes one workspace of the same size for the
// input gradient, then one for the weight gradient that is larger by its
// split-K partial sums. That excess varies with the shape (0 to 240 MiB over
// 406 convolutions of the grid); its medians are 4.5 MiB (fp32) and 2.25 MiB
// (bf16): one global constant. Being larger, the second workspace often needs
// a new segment: that is most of what a CNN's backward adds to
// memory_reserved. 16-bit 1-D convolutions (Conv1d, run by cuDNN as 2-D with
// height 1) have no such excess: their weight gradient takes exactly the
// input gradient's workspace (wav2vec2's feature encoder: 18 of 18 strided
// convolutions at batches 4, 16 and 64, cudnn_ws_models_h200.jsonl).
constexpr int64_t kConvWeightGradExtraBytes = 4LL << 20;

/// MatMul as it runs inside scaled_dot_product_attention's math path, where
/// autocast is off: one definition for the whole run, since ExecOp::def
/// must outlive the schedule.
const OpDef* PassthroughMatMul() {
  static const OpDef def = [] {
    OpDef d = *FindOp("", op_names::kMatMul);
    d.autocast = Autocast::kPassthrough;
    return d;
  }();
  return &def;
}

// The weight gradient of an unstrided, ungrouped 1x1 convolution over more
// than one pixel, in 16 bits and in float32, as cuDNN's heuristics (PyTorch's
// default, benchmark off)
// run it: either an engine that splits the reduction over the images, one
// float32 [K, C] partial sum per image, then adds them (a workspace of
// N * K * C * 4 bytes), or one that copies the input and the output gradient
// (N * H * W * (C + K) * 2). Which one depends on the shape in a way cuDNN
// does not document. Measured over 941 bf16 2-D shapes on the H200 and the
// H100 (bench/results/cudnn_1x1_wgrad_h200.jsonl, cudnn_1x1_ws_h200.jsonl,
// cudnn_1x1_wgrad_wide_h100.jsonl; batches 4 to 128, 5x5 to 64x64 pixels):
// the split-K engine runs where its partials take at most 1.5 times the
// copies, and for inputs of at most 576 channels with K * C <= 2^19 also
// while they take at most 100 MiB or 4 times the copies; the copying one
// elsewhere. That puts 846 of the 941 within 2 MiB or 10 % (41 under, 54
// over), where "split-K exactly for those narrow inputs" put 571 (49 under,
// 321 over: the large batches copy). mobilenet_v2's last convolution (320
// to 1280 channels at 7x7) takes 100 MiB at batch 64 and 12.5 MiB at batch 8
// (traces in bench/results/traces/), resnet50's last (512 to 2048) copies,
// resnext_h's 512 -> 1024 at 11x11 copies at batch 96 (34.9 MiB in its
// bf16 H100 trace, 192 MiB of partials), DeepLabV3's ASPP projection (2048
// to 256 at 32x32, batch 12) takes its 24 MiB of partials. Over one pixel
// (squeeze-excitation) it takes none.
// float32 takes the same two engines (copies of N * H * W * (C + K) * 4
// bytes) by another boundary: over the 574 fp32 shapes of
// cudnn_1x1_ws_h200.jsonl 469 split, and splitting while the partials take
// at most 48 MiB or no more than the copies, copying past that, matches
// 511 within 2 MiB or 10 % (59 under, mostly copies that take 2-8 MiB more
// than x and y; 4 over). Inputs of 32 channels or fewer over 25088
// positions or more (N * H * W) copy below batch 64: mobilenet_v2's
// expansions (16 -> 96 at 112x112: 173.4 MiB at batch 32 in
// traces/mobilenet_v2_train_32_fp32.json.gz, none at batch 64 in
// traces/mobilenet_v2_train_64_fp32.json.gz), the grid's 24- and 32-channel
// rows at batches 8 and 32. A held-out grid (cudnn_1x1_check_h100.jsonl,
// 504 shapes measured after both rules were chosen): 226 of 252 bf16 and
// 217 of 252 fp32 shapes within 2 MiB or 10 %.
// resnext_h's 512 -> 1024 at 11x11 (batch 24 fp32, its H100 trace) takes
// the 48 MiB of partials.
int64_t UnitConvWeightGradBytes(const Val& x, const Val& w) {
  int64_t pixels = 1;
  for (size_t d = 2; d < x.shape.size(); ++d) pixels = SatMulNonNeg(pixels, x.shape[d]);
  if (pixels <= 1 || x.shape.size() < 2 || w.shape.size() < 2) return 0;
  const int64_t n = x.shape[0];
  const int64_t c = x.shape[1];
  const int64_t k = w.shape[0];
  int64_t elem = 0;
  DTypeBytes(x.dtype, 1, &elem);
  const int64_t split_k = SatMulNonNeg(SatMulNonNeg(SatMulNonNeg(n, k), c), 4);
  const int64_t copies = SatMulNonNeg(SatMulNonNeg(SatMulNonNeg(n, pixels), SatAdd(c, k)), elem);
  if (elem == 4) {
    constexpr int64_t kFp32SplitKFreeBytes = 48LL << 20;
    constexpr int64_t kFp32NarrowChannels = 32;
    constexpr int64_t kFp32NarrowCopyingPositions = 25088;
    constexpr int64_t kFp32NarrowSplitKBatch = 64;
    if (c <= kFp32NarrowChannels && n < kFp32NarrowSplitKBatch &&
        SatMulNonNeg(n, pixels) >= kFp32NarrowCopyingPositions) {
      return copies;
    }
    return split_k <= kFp32SplitKFreeBytes || split_k <= copies ? split_k : copies;
  }
  constexpr int64_t kSplitKMaxChannels = 576;
  constexpr int64_t kSplitKMaxWeights = 1LL << 19;
  constexpr int64_t kHalfNarrowSplitKBytes = 100LL << 20;
  if (SatMulNonNeg(split_k, 2) <= SatMulNonNeg(copies, 3)) return split_k;
  const bool narrow = c <= kSplitKMaxChannels && SatMulNonNeg(c, k) <= kSplitKMaxWeights;
  if (narrow && (split_k <= kHalfNarrowSplitKBytes || split_k <= SatMulNonNeg(copies, 4))) {
    return split_k;
  }
  return copies;
}

// The forward of an unstrided 1x1 convolution in 16 bits: cuDNN's
// heuristics run most as a GEMM on the NCHW tensors (no workspace), but over
// a small image (at most 7x7) with 256 channels or more on either side they
// pick an NHWC engine that copies the input and the output through a
// workspace (x + y bytes). Measured on the H200 over 574 bf16 shapes (26
// channel pairs of ResNet, ResNeXt, MobileNet and EfficientNet bottlenecks,
// 5x5 to 56x56, batches 8 to 128: bench/results/cudnn_1x1_ws_h200.jsonl):
// this rule matches 532 (no workspace at all: 477). Most of the other 42 are
// larger images at batch 128 with wide channel pairs, which copy too; those
// are not planned (the copy there shows no rule in the channels or batch).
// resnext_n's stage-4 1x1 convolutions (5x5) copy, as planned.
bool UnitConvCopiesInForward(const Val& x, const Val& w) {
  if (x.shape.size() != 4 || w.shape.empty()) return false;
  constexpr int64_t kMaxCopyingPixels = 49;
  constexpr int64_t kMinCopyingChannels = 256;
  const int64_t pixels = SatMulNonNeg(x.shape[2], x.shape[3]);
  return pixels > 1 && pixels <= kMaxCopyingPixels &&
         std::max(x.shape[1], w.shape[0]) >= kMinCopyingChannels;
}

// A convolution whose input is channels-last runs cuDNN's NHWC kernels on
// it as it is: nothing is copied but the weight, which
// cudnn_conv_suggest_memory_format makes channels-last for the call (a
// 1x1 weight is both already), in forward and for the input gradient.
// Measured on the H200 over 392 shapes, fp32 and bf16
// (bench/results/cudnn_channels_last_ws_h200.jsonl):
// - dense: forward and input gradient take the weight's size (a few take a
//   few MiB more); the weight gradient takes split-K partial sums of 0 to 40
//   MiB, planned as the global kConvWeightGradExtraBytes.
// - depthwise: forward and input gradient take nothing. The 16-bit weight
//   gradient takes 8 float32 partial weight gradients per image, channels
//   rounded up to 32 (8 * N * ceil32(C) * kh * kw * 4 bytes: 230 of 230
//   shapes exact above 392 output positions, none at 392). The float32 one
//   takes nothing for 3x3 kernels (at most 1.05 MiB) or from 256 channels;
//   for larger kernels, once the output has more than 6272 positions (1568
//   from 128 channels), 8.1 to 10.9 times the input, planned at
//   kh * kw / 4.5 times it (the 10.9), and nothing below.
// The segformer_n trace (b8 amp_bf16) shows the 1x1 decoder convolution of
// a channels-last concatenation taking 1.1 MiB for its weight gradient where
// the NCHW rule gives 60 MiB; convnext_n's (b32 fp32) the 7x7 depthwise
// weight gradients taking 36.8 to 110.4 MiB.
void ChannelsLastConvWorkspaces(const Val& x, const Val& w, const Val& y, int64_t groups,
                                ExecOp* op) {
  int64_t elem = 0;
  DTypeBytes(x.dtype, 1, &elem);
  int64_t kernel_area = 1;
  for (size_t d = 2; d < w.shape.size(); ++d) kernel_area = SatMulNonNeg(kernel_area, w.shape[d]);
  int64_t positions = y.shape.empty() ? 0 : y.shape[0];
  for (size_t d = 2; d < y.shape.size(); ++d) positions = SatMulNonNeg(positions, y.shape[d]);
  const int64_t channels = x.shape[1];
  if (groups > 1 && groups == channels) {  // depthwise
    if (!w.requires_grad) return;
    // The measured boundaries of cuDNN's choices (see above).
    constexpr int64_t kHalfMaxPositionsWithout = 392;
    constexpr int64_t kHalfPartialsPerImage = 8;
    constexpr int64_t kFp32MaxKernelAreaWithout = 9;  // 3x3
    constexpr int64_t kFp32MinChannelsWithout = 256;
    constexpr int64_t kFp32WideChannels = 128;  // from here the lower boundary
    constexpr int64_t kFp32MaxPositionsWithout = 6272;
    constexpr int64_t kFp32WideMaxPositionsWithout = 1568;
    constexpr double kFp32KernelAreaPerInput = 4.5;  // kh * kw / 4.5 x the input
    if (elem == 2) {
      if (positions <= kHalfMaxPositionsWithout) return;
      const int64_t c32 = SatMulNonNeg((channels + 31) / 32, 32);
      op->bwd_weight_workspace = SatMulNonNeg(
          SatMulNonNeg(SatMulNonNeg(kHalfPartialsPerImage * 4, x.shape[0]), c32), kernel_area);
    } else if (elem == 4 && kernel_area > kFp32MaxKernelAreaWithout &&
               channels < kFp32MinChannelsWithout) {
      const int64_t without =
          channels >= kFp32WideChannels ? kFp32WideMaxPositionsWithout : kFp32MaxPositionsWithout;
      if (positions <= without) return;
      op->bwd_weight_workspace =
          static_cast<int64_t>(static_cast<double>(BytesOf(x.shape, x.dtype)) *
                               static_cast<double>(kernel_area) / kFp32KernelAreaPerInput);
    }
    return;
  }
  const int64_t weight_copy = kernel_area > 1 ? w.bytes : 0;
  op->fwd_workspace = weight_copy;
  if (x.requires_grad) op->bwd_workspace = weight_copy;
  if (w.requires_grad) op->bwd_weight_workspace = kConvWeightGradExtraBytes;
}

// 16-bit NHWC convolution kernels take channels in multiples of 8: the
// copies of an input and a weight with other channel counts are padded.
constexpr int64_t kHalfConvChannelMultiple = 8;

// `bytes` of a tensor with `channels` channels, the channels padded to a
// multiple of `multiple`.
int64_t ChannelPaddedBytes(int64_t bytes, int64_t channels, int64_t multiple) {
  if (channels <= 0) return bytes;
  return SatMulNonNeg(bytes / channels, (channels + multiple - 1) / multiple * multiple);
}

// The staging buffer of a bias gradient: the incoming [rows, cols] gradient
// of `dt` summed over its rows (ColumnSumStagingBytes; float accumulators,
// double for double).
int64_t BiasGradStagingBytes(int64_t rows, int64_t cols, DType dt) {
  int64_t elem = 0;
  if (!DTypeBytes(dt, 1, &elem)) return 0;
  return ColumnSumStagingBytes(rows, cols, elem, dt == DType::kDouble ? 8 : 4);
}

// Whether the addmm of product `op` (its bias 1-D) goes through cuBLASLt:
// every dim of both matrices above 1 (Blas.cpp, isInputCompliesAddmmCudaLt;
// the rows are the product of the input's leading dims, as addmm sees them).
bool LtRunsAddmm(const std::vector<Val>& vals, const ExecOp& op) {
  if (op.in.size() < 2 || op.in[0] < 0 || op.in[1] < 0 || op.out.empty() || op.out[0] < 0) {
    return false;
  }
  const std::vector<int64_t>& a = vals[op.in[0]].shape;
  const std::vector<int64_t>& y = vals[op.out[0]].shape;
  if (a.size() < 2 || y.empty()) return false;
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < a.size(); ++d) rows = SatMulNonNeg(rows, a[d]);
  return rows > 1 && a.back() > 1 && y.back() > 1;
}

// Whether Gemm `op` has a bias C broadcast over the product's rows (a 1-D
// [N] or [1, N] C, as exporters write nn.Linear and transformers' Conv1D,
// whose addmm it is), over two rows or more.
bool GemmRowBias(const std::vector<Val>& vals, const ExecOp& op) {
  if (op.in.size() < 3 || op.in[2] < 0 || op.out.empty() || op.out[0] < 0) return false;
  const Val& c = vals[op.in[2]];
  const Val& y = vals[op.out[0]];
  if (y.shape.size() != 2) return false;
  const bool row_bias = (c.shape.size() == 1 && c.shape[0] == y.shape[1]) ||
                        (c.shape.size() == 2 && c.shape[0] == 1 && c.shape[1] == y.shape[1]);
  return row_bias && y.shape[0] >= 2;
}

// Gemm's row bias (GemmRowBias): autograd's addmm formula hands C the
// incoming [M, N] gradient itself (beta 1), and the engine sums it to C's
// shape (validate_outputs, at::sum_to: sum over dim 0), a column sum that may
// stage its partial sums in a global buffer (ColumnSumStagingBytes).
void GemmBiasSumStaging(const std::vector<Val>& vals, ExecOp* op) {
  if (!GemmRowBias(vals, *op) || op->grad_in.size() < 3 || !op->grad_in[2]) return;
  const Val& y = vals[op->out[0]];
  op->bias_sum_staging_bytes = BiasGradStagingBytes(y.shape[0], y.shape[1], y.dtype);
}

// Every value is 1 (a convolution's strides or dilations; none given: 1).
bool AllOnes(const std::vector<int64_t>& values) {
  return std::all_of(values.begin(), values.end(), [](int64_t v) { return v == 1; });
}

// A 16-bit 3-D convolution over an RGB clip (fewer than 8 channels, which
// NDHWC kernels would pad) with a kernel more than one frame deep runs
// without copying anything in forward: 72 of 72 such stems measured on the
// H200 (bench/results/cudnn_3d_ws_h200.jsonl: 3x7x7 with stride 1x2x2 and
// 3x3x3, 32 and 64 filters, 8 and 16 frames of 56 to 160 pixels, batches 2
// to 24; and r3d_n's stem in its traces at batches 4 and 24). A 1x7x7 stem
// copies x, w and y from batch 8 on (24 of 24 there), as the rule below says.
// Its weight gradient still copies (x padded, w, y, and a few MiB).
bool Conv3dStemRunsWithoutCopies(const Val& x, const Val& w) {
  return x.shape.size() == 5 && w.shape.size() == 5 && x.shape[1] < kHalfConvChannelMultiple &&
         w.shape[2] > 1;
}

// The float32 partial weight gradients of a 16-bit 3x3x3 convolution of a
// clip (stride 1, ungrouped, as many filters as input channels, 8 or more):
// cuDNN's engine splits the reduction over the N*T*H*W positions into S
// slices, each summing into a [K, C, 3, 3, 3] float32 buffer, S the largest
// power of two with at most one slice per 8192 positions and S * K <= 256
// (64 filters: up to 4 slices, 128: 2). Measured on the H200 over the 182
// such bf16 shapes of bench/results/cudnn_3d_ws_h200.jsonl (64 to 512
// channels, 2 to 16 frames of 7 to 56 pixels, batches 2 to 24): 46 of the 47
// with two slices or more take x, dy, w and these buffers to 0.3 MiB (the
// global kConvWeightGradExtraBytes: 22 within 1 MiB); r3d_n's bf16 trace at
// batch 24 takes 1.69 MiB at 64 channels and 3.5 at 128 (3.375 here). With
// fewer slices the engines vary (nothing more in 118 of 135 shapes; 1.5 to
// 16 MiB in 17, r3d_n's 256-channel ones at batch 24 among them: 6.25), so the global
// constant stays, as it does for other pairs and strides (not measured).
// Returns S, or 0 where the rule does not apply.
int64_t Conv3dHalfWeightGradSlices(const Node& n, const Val& x, const Val& w, int64_t elem,
                                   int64_t groups) {
  constexpr int64_t kPositionsPerSlice = 8192;
  constexpr int64_t kSlicedFilters = 256;
  if (elem != 2 || groups != 1 || x.shape.size() != 5 || w.shape.size() != 5 ||
      x.shape[1] < kHalfConvChannelMultiple || w.shape[0] != x.shape[1] || w.shape[2] != 3 ||
      w.shape[3] != 3 || w.shape[4] != 3 || !AllOnes(n.GetInts("strides")) ||
      !AllOnes(n.GetInts("dilations"))) {
    return 0;
  }
  const int64_t filters = w.shape[0];
  const int64_t positions =
      SatMulNonNeg(SatMulNonNeg(x.shape[0], x.shape[2]), SatMulNonNeg(x.shape[3], x.shape[4]));
  int64_t slices = 1;
  while (slices * 2 * kPositionsPerSlice <= positions && slices * 2 * filters <= kSlicedFilters) {
    slices *= 2;
  }
  return slices < 2 ? 0 : slices;
}

// A patch embedding: a 2-D convolution of an RGB image (fewer than 8
// channels) whose kernel is its stride, unpadded (the stems of ViT, CLIP,
// MLP-Mixer, Swin). cuDNN's heuristics run it with other copies than the
// general rule below; measured on the H200 over 600 shapes (patches 4 to 32,
// images 128 to 384, 96 to 768 filters, batches 1 to 256, fp32 with TF32
// and bf16; bench/cudnn_patch_ws.py, bench/results/cudnn_patch_ws_h200.jsonl):
// - fp32 forward: nothing below batch 64; from there the input and the
//   weight copied with channels padded to 4 and the output (x * 4/3 + w * 4/3
//   + y to 16 bytes for 16x16 patches of 192 filters and more): 202 of the
//   300 within 1 MiB or 10 % (the general rule: 29).
// - fp32 weight gradient: the same copies at every batch, and for 14x14 to
//   16x16 patches of 384 or 512 filters, from batch 96 where the GEMM sums
//   over 24576 rows (images x patches) or more, float32 partial weight
//   gradients summed after it (split-K): 120 of the channel-padded weight for
//   384 filters, 7 for 512 (a 180 MiB block for ViT-S/16's stem, clip_n's
//   fp32 trace at batch 192); 226 of 300 (without the partials 215, the
//   general rule 90). The bound on rows is the eighth held-out round's: a
//   batch bound alone planned the partials for mixer_h (144 patches of 16
//   pixels, batch 128: 18432 rows), which PyTorch ran without (+9.5 %
//   reserved), as the measured 196-patch shapes at batch 96 (18816 rows).
// - 16-bit forward: the padded copies of the general rule where the
//   convolution has 512 filters or more or patches of 32 pixels or more,
//   nothing otherwise: 271 of 300 (the general rule: 130). The 16-bit weight
//   gradient keeps the general rule (145 of 300; no simple rule does better).
// clip_n's and vit_b_16's stems in their traces agree (fp32: no forward
// copies at batch 32, the copies at 64 and 192; clip_n's 384 filters take
// the partials in the weight gradient at 192: one 383.6 MiB block).
bool IsPatchEmbedding(const Node& n, const Val& x, const Val& w) {
  if (x.shape.size() != 4 || w.shape.size() != 4 || x.shape[1] >= kHalfConvChannelMultiple) {
    return false;
  }
  if (n.GetInt("group", 1) != 1) return false;
  const std::vector<int64_t> strides = n.GetInts("strides");
  if (strides.size() != 2 || strides[0] != w.shape[2] || strides[1] != w.shape[3]) return false;
  if (w.shape[2] < 2 || w.shape[3] < 2) return false;
  for (int64_t p : n.GetInts("pads")) {
    if (p != 0) return false;
  }
  return AllOnes(n.GetInts("dilations"));
}

// The measured boundaries of the patch embedding's engines (see above).
constexpr int64_t kFp32PatchCopyMinBatch = 64;
constexpr int64_t kFp32ConvChannelMultiple = 4;
constexpr int64_t kHalfPatchCopyMinFilters = 512;
constexpr int64_t kHalfPatchCopyMinPatch = 32;
constexpr int64_t kFp32PatchSplitKMinBatch = 96;
constexpr int64_t kFp32PatchSplitKMinRows = 24576;
constexpr int64_t kFp32PatchSplitKMinPatch = 14;
constexpr int64_t kFp32PatchSplitKMaxPatch = 16;

// The fp32 patch embedding's split-K partial weight gradients (see above):
// how many channel-padded weights they take, by filter count.
int64_t Fp32PatchSplitKBytes(const Val& x, const Val& w, int64_t padded_w_bytes) {
  struct Partials {
    int64_t filters;
    int64_t weights;
  };
  constexpr Partials kMeasured[] = {{384, 120}, {512, 7}};
  const int64_t patch = std::max(w.shape[2], w.shape[3]);
  if (x.shape[0] < kFp32PatchSplitKMinBatch || patch < kFp32PatchSplitKMinPatch ||
      patch > kFp32PatchSplitKMaxPatch) {
    return 0;
  }
  const int64_t rows =
      SatMulNonNeg(x.shape[0], SatMulNonNeg(x.shape[2] / w.shape[2], x.shape[3] / w.shape[3]));
  if (rows < kFp32PatchSplitKMinRows) return 0;
  for (const Partials& p : kMeasured) {
    if (w.shape[0] == p.filters) return SatMulNonNeg(p.weights, padded_w_bytes);
  }
  return 0;
}

void PatchEmbeddingWorkspaces(const Val& x, const Val& w, const Val& y, int64_t elem, ExecOp* op) {
  const int64_t x_bytes = BytesOf(x.shape, x.dtype);
  const int64_t multiple = elem == 4 ? kFp32ConvChannelMultiple : kHalfConvChannelMultiple;
  const int64_t padded_w = ChannelPaddedBytes(w.bytes, w.shape[1], multiple);
  const int64_t copies =
      SatAdd(SatAdd(ChannelPaddedBytes(x_bytes, x.shape[1], multiple), padded_w), y.bytes);
  if (elem == 4) {
    op->fwd_workspace = x.shape[0] >= kFp32PatchCopyMinBatch ? copies : 0;
    if (w.requires_grad) {
      op->bwd_weight_workspace = SatAdd(copies, Fp32PatchSplitKBytes(x, w, padded_w));
    }
  } else {
    const bool copying = w.shape[0] >= kHalfPatchCopyMinFilters ||
                         std::max(w.shape[2], w.shape[3]) >= kHalfPatchCopyMinPatch;
    op->fwd_workspace = copying ? copies : 0;
    if (w.requires_grad) op->bwd_weight_workspace = SatAdd(copies, kConvWeightGradExtraBytes);
  }
  // An input gradient (an image that needs one; not measured): the same copies.
  if (x.requires_grad) op->bwd_workspace = copies;
}

// The weight gradient of an atrous (widely dilated) fp32 3x3 convolution of
// many channels, DeepLab's ASPP branch: cuDNN's heuristics run an engine that
// sums one float32 partial weight gradient per 128 output positions of an
// image, on top of the x, w and y copies. Measured on the H200
// (bench/cudnn_dilated_ws.py, bench/results/cudnn_dilated_ws_h200.jsonl):
// 36 of 36 shapes exact to 1 MiB where the dilation is 12 or more, the input
// has 1024 channels or more and the output 32x32 or 48x48 positions (batches
// 2 to 16, dilations 12, 24, 36, 256 filters); deeplab_r50_c's ASPP at batch
// 12 takes its 270 MiB (its trace). Dilations 1 to 4 keep the split-K
// constant (every shape of the grid within 8.3 MiB of it), as do 16-bit ones
// (no excess). Outside the measured range (16x16 outputs take 5 to 7
// partials; 256 and 512 channels pick by batch) the general rule stays.
int64_t AtrousWeightGradPartials(const Node& n, const Val& x, const Val& w, const Val& y,
                                 int64_t elem, int64_t groups) {
  constexpr int64_t kMinDilation = 12;
  constexpr int64_t kMinChannels = 1024;
  constexpr int64_t kMinPositions = 1024;
  constexpr int64_t kPositionsPerPartial = 128;
  if (elem != 4 || groups != 1 || x.shape.size() != 4 || w.shape.size() != 4 ||
      y.shape.size() != 4 || w.shape[2] != 3 || w.shape[3] != 3 || x.shape[1] < kMinChannels) {
    return 0;
  }
  const std::vector<int64_t> dilations = n.GetInts("dilations");
  if (dilations.size() != 2 || dilations[0] < kMinDilation || dilations[1] < kMinDilation) {
    return 0;
  }
  if (!AllOnes(n.GetInts("strides"))) return 0;
  const int64_t positions = SatMulNonNeg(y.shape[2], y.shape[3]);
  if (positions < kMinPositions) return 0;
  return positions / kPositionsPerPartial;
}

void ConvWorkspaces(const Node& n, const std::vector<Val>& vals, Fp32ConvCopies fp32, ExecOp* op,
                    bool* fp32_conv) {
  if (op->in.size() < 2 || op->in[0] < 0 || op->in[1] < 0 || op->out.empty() || op->out[0] < 0) {
    return;
  }
  const Val& x = vals[op->in[0]];
  const Val& w = vals[op->in[1]];
  const Val& y = vals[op->out[0]];
  if (x.shape.size() < 3 || w.shape.size() < 3) return;
  const int64_t channels = x.shape[1];
  const int64_t groups = n.GetInt("group", 1);
  // Measured for 2-D convolutions of 32 channels or more; a channels-last
  // 3-D one, or one of fewer channels (an image permuted from [N, H, W, 3],
  // which 16-bit NHWC kernels would pad), keeps the NCHW rule below: its
  // copies bound what the engine takes.
  constexpr int64_t kMinMeasuredChannelsLastChannels = 32;
  if (x.shape.size() == 4 && channels >= kMinMeasuredChannelsLastChannels &&
      IsChannelsLast(x.shape, x.strides)) {
    ChannelsLastConvWorkspaces(x, w, y, groups, op);
    return;
  }
  if (groups > 1 && groups == channels) return;  // depthwise
  bool unit = true;
  for (size_t d = 2; d < w.shape.size(); ++d) unit = unit && w.shape[d] == 1;
  unit = unit && AllOnes(n.GetInts("strides"));
  for (int64_t p : n.GetInts("pads")) unit = unit && p == 0;
  int64_t elem = 0;
  DTypeBytes(x.dtype, 1, &elem);
  // A strided fp32 1-D convolution past the stem (Conv1d, [N, C, L] with C of
  // 8 or more, ungrouped: wav2vec2's feature encoder) copies all three where
  // cuDNN's heuristics decide: x, w and y (or 6.5-7.5 MiB more) in 14 of its
  // 18 shapes of cudnn_ws_models_h200.jsonl (batches 4, 16, 64), the input
  // and weight only in the other 4, whose outputs are 1.6 MiB or less;
  // wav2vec2_ln_c's trace at batch 32 has x, w and y in each.
  bool strided = false;
  for (int64_t st : n.GetInts("strides")) strided = strided || st > 1;
  const bool conv1d_body =
      x.shape.size() == 3 && channels >= kHalfConvChannelMultiple && groups == 1 && strided;
  const bool input_only = elem == 4 && fp32 == Fp32ConvCopies::kInputOnly && !conv1d_body;
  if (elem == 4) *fp32_conv = true;
  if (unit) {
    if (elem == 2 && groups == 1 && UnitConvCopiesInForward(x, w)) {
      op->fwd_workspace = SatAdd(BytesOf(x.shape, x.dtype), y.bytes);
    }
    if (input_only && groups != 1 && w.requires_grad) {
      op->bwd_weight_workspace = SatAdd(SatAdd(BytesOf(x.shape, x.dtype), y.bytes), w.bytes);
    }
    if ((elem == 2 || elem == 4) && groups == 1 && w.requires_grad) {
      op->bwd_weight_workspace = UnitConvWeightGradBytes(x, w);
    }
    return;
  }
  if ((elem == 2 || elem == 4) && IsPatchEmbedding(n, x, w)) {
    PatchEmbeddingWorkspaces(x, w, y, elem, op);
    return;
  }
  // x may be a view (a transposed input the kernel copies): its dense size.
  int64_t in_bytes = BytesOf(x.shape, x.dtype);
  int64_t w_bytes = w.bytes;
  if (elem == 2 && channels > 0 && channels % kHalfConvChannelMultiple != 0) {
    in_bytes = ChannelPaddedBytes(in_bytes, channels, kHalfConvChannelMultiple);
    // The weight's copy is padded alike ([K, 8, ...] for [K, 3, ...]): the
    // 3-channel forwards of cudnn_ws_grid_h200.jsonl that copy take
    // K * 5 * R * S * 2 bytes (+16) more than x padded, w and y; mixer_n's
    // 16x16 patch embedding likewise (its trace at batch 160, amp_bf16).
    const int64_t wc = w.shape[1];
    if (wc > 0 && wc % kHalfConvChannelMultiple != 0) {
      w_bytes = ChannelPaddedBytes(w.bytes, wc, kHalfConvChannelMultiple);
    }
  }
  const int64_t ws = SatAdd(SatAdd(in_bytes, w_bytes), y.bytes);
  op->fwd_workspace = input_only ? SatAdd(in_bytes, w_bytes) : ws;
  if (elem == 2 && Conv3dStemRunsWithoutCopies(x, w)) op->fwd_workspace = 0;
  if (x.requires_grad) op->bwd_workspace = ws;
  if (w.requires_grad) {
    const bool half_1d = elem == 2 && x.shape.size() == 3;
    // Float32 partial weight gradients, where a rule counts them.
    int64_t partials = AtrousWeightGradPartials(n, x, w, y, elem, groups);
    if (partials == 0) partials = Conv3dHalfWeightGradSlices(n, x, w, elem, groups);
    const int64_t partial_bytes = SatMulNonNeg(SatNumel(w.shape), 4);
    op->bwd_weight_workspace = partials > 0 ? SatAdd(ws, SatMulNonNeg(partials, partial_bytes))
                               : half_1d    ? ws
                                            : SatAdd(ws, kConvWeightGradExtraBytes);
  }
}

// native_group_norm on CUDA (aten/src/ATen/native/cuda/group_norm_kernel.cu),
// each tensor an allocation of its own. Forward: Y, then mean and rstd of
// [N, G] in the input's dtype (the op's outputs: saved for backward, else
// dropped when it returns), float32 copies of them for 16-bit inputs, and
// with weight or bias, over more than one position, the per-channel scale
// and shift a, b of [N, C] in the accumulation type (float32 for 16-bit
// inputs); the kernel frees them last first. Backward, after dX, dgamma and
// dbeta: ds and db of [N, C] (over more than one position), then for dX c2
// and c3 of [N, G] and, with a weight, c1 of [N, C]; c3, c2, c1 go when dX
// is made, db and ds at the end. wav2vec2_cls's first GroupNorm at batch 512
// (amp_bf16 trace in bench/results/traces/whatif/: 512 channels and groups)
// allocates mean, rstd, a and b as four 1 MiB blocks, which PyTorch's caching
// allocator takes from its small pool.
void GroupNormWorkspaces(const Val& x, int64_t groups, bool affine, ExecOp* op) {
  op->fwd_workspace = 0;
  op->bwd_workspace = 0;
  op->fwd_kernel_temp_bytes.clear();
  op->bwd_kernel_temp_bytes.clear();
  if (x.shape.size() < 2 || groups < 1) return;
  const int64_t n = x.shape[0];
  const int64_t c = x.shape[1];
  int64_t positions = 1;
  for (size_t d = 2; d < x.shape.size(); ++d) positions = SatMulNonNeg(positions, x.shape[d]);
  int64_t elem = 0;
  DTypeBytes(x.dtype, 1, &elem);
  const bool half = IsHalf(x.dtype);
  const int64_t acc = half ? 4 : elem;
  const int64_t per_channel = SatMulNonNeg(SatMulNonNeg(n, c), acc);
  const int64_t per_group = SatMulNonNeg(SatMulNonNeg(n, groups), acc);
  const int64_t stat = SatMulNonNeg(SatMulNonNeg(n, groups), elem);
  const bool stats_saved = std::any_of(op->saved.begin(), op->saved.end(),
                                       [](const SavedRef& r) { return r.what == "mean"; });
  std::vector<int64_t>& fwd = op->fwd_kernel_temp_bytes;
  if (!stats_saved) fwd = {stat, stat};
  if (half) fwd.insert(fwd.end(), {per_group, per_group});
  if (affine && positions > 1) fwd.insert(fwd.end(), {per_channel, per_channel});
  const bool dx = !op->grad_in.empty() && op->grad_in[0];
  bool dparams = false;
  for (size_t i = 1; i < op->grad_in.size(); ++i) dparams = dparams || op->grad_in[i];
  if (!dx && !dparams) return;
  std::vector<int64_t>& bwd = op->bwd_kernel_temp_bytes;
  if (positions > 1) bwd = {per_channel, per_channel};
  if (dx) bwd.insert(bwd.end(), {per_group, per_group});
  if (dx && affine && positions > 1) bwd.push_back(per_channel);
}

class Builder {
 public:
  Builder(const Graph& g, const PlanOptions& o, const ScheduleAnalysis& a)
      : g_(g), o_(o), a_(a), skipped_nodes_(g.nodes.size(), 0) {}

  Result<Schedule> Build();

 private:
  int NewVal(Val v) {
    s_.vals.push_back(std::move(v));
    return static_cast<int>(s_.vals.size()) - 1;
  }
  int Root(int v) const {
    while (s_.vals[v].base >= 0) v = s_.vals[v].base;
    return v;
  }
  /// What a Cast to `target` writes in this run: the target as it is
  /// under autocast (the model's own casts stay), else in the run's dtype
  /// (a float cast of a half-precision model is a half one).
  DType CastRunDtype(DType target) const { return IsAmp(o_.precision) ? target : RunDtype(target); }
  DType RunDtype(DType graph_dtype) const {
    if (IsWholeCast(o_.precision) && IsFloat(graph_dtype)) return HalfType(o_.precision);
    return graph_dtype;
  }
  void InitVals(const std::vector<InitRole>& roles);
  /// Sets ExecOp::stack_leader on the Slices of each `aten.unbind` call.
  void MarkUnbindStacks();
  /// bitsandbytes' dequantization of a quantized weight `v` before its
  /// matmul: a weight-sized tensor in the compute dtype, freed after it.
  int Dequantize(int v, const std::string& label);
  /// LLM.int8's matmul of `a` by the int8 `weight`: what it keeps and needs.
  void AddInt8Matmul(int a, int weight, ExecOp* op) const;
  /// PEFT lora.Linear around layer `l`, whose base output is made.
  void AppendLora(const LinearLayer& l);
  void AddNode(int ni);
  void ProcessNode(int ni);
  bool IsLinearBias(int ni, std::vector<int>& in) const;
  void AddBiasAdd(int ni, const std::vector<int>& in);
  void SkipUnusedFeeders(std::set<int> tensors, const std::set<int>& needed);
  int CastVal(int v, DType to, bool weight_cache, const std::string& why);
  int ContiguousCopy(int v, const std::string& label);
  void AddViewOp(int ni, const OpDef& def, std::vector<int> in);
  void AddComputeOp(int ni, const OpDef* def, std::vector<int> in);
  /// Appends a compute op: node ni (or -1 for synthetic ops, whose outputs
  /// are already made and whose saved tensors are given).
  void AddCompute(const std::string& op_type, const std::string& label, int ni, const OpDef* def,
                  std::vector<int> in, const std::vector<int>& outs,
                  const std::vector<SavedRef>* explicit_saves, int64_t flops);
  void AppendAttention(const AttentionRegion& r, const std::string& label);
  void AddGroupNorm(const FusedRegion& r, int ni, const OpDef* def);
  void AddWeightNorm(const FusedRegion& r, int ni, const OpDef* def);
  void AppendRnn(const RnnRegion& r, const std::string& label);
  /// The dtype a Softmax node's softmax(x, dim, dtype) call writes (the
  /// target of the Cast that call became, taken as it is: an explicit
  /// float32 stays float32 in a half-precision run); kUndefined otherwise.
  DType SoftmaxCallDtype(int ni) const;
  int Synthetic(const std::string& name, const std::vector<int64_t>& shape, DType dt,
                const std::vector<int64_t>& strides, int base);
  bool ComputeViewOutput(const Node& n, const OpDef& def, int in_val, int out_tensor,
                         Val* out) const;
  bool MatMulNeedsCopy(int v, int rank_other) const;
  /// Output 0 is channels-last, by the op's OpDef::channels_last rule.
  bool ChannelsLastOutput(const OpDef* def, const std::vector<int>& in) const;
  /// The strides of a TensorIterator op's output where its operands make it
  /// a permuted layout other than channels-last.
  bool PermutedElementwiseLayout(const OpDef* def, const std::vector<int>& in,
                                 const std::vector<int64_t>& out_shape,
                                 std::vector<int64_t>* strides) const;

  const Graph& g_;
  const PlanOptions& o_;
  const ScheduleAnalysis& a_;
  Schedule s_;
  std::vector<int> val_of_;                        // graph tensor -> current val
  std::unordered_map<int, int> weight_cache_;      // param val -> cast val
  std::vector<char> skipped_nodes_;                // per node: no op of its own
  std::map<int, const AttentionRegion*> regions_;  // a_'s, keyed by the last node
  std::map<int, const RnnRegion*> rnn_regions_;    // a_'s, keyed by the last layer
  std::map<int, const FusedRegion*> fused_;        // a_'s, keyed by the last node
  std::map<int, int> rms_fp32_copy_;               // RMSNorm input -> its fp32 copy
  FineTuneSetup ft_;
  std::map<int, LinearLayer> lora_at_;  // keyed by the layer's end node
  std::map<int, int> dequant_of_;       // dequantized val -> quantized weight
};

void Builder::InitVals(const std::vector<InitRole>& roles) {
  s_.vals.resize(g_.tensors.size());
  val_of_.resize(g_.tensors.size());
  for (size_t i = 0; i < g_.tensors.size(); ++i) {
    const Tensor& t = g_.tensors[i];
    Val& v = s_.vals[i];
    v.name = t.name;
    v.shape = t.shape;
    v.strides = ContiguousStrides(t.shape);
    v.dtype = RunDtype(t.dtype);
    v.bytes = BytesOf(t.shape, v.dtype);
    val_of_[i] = static_cast<int>(i);
    if (t.kind == TensorKind::kInitializer) {
      if (roles[i] == InitRole::kParameter) {
        v.is_param = true;
        v.trainable_param = !ft_.frozen[i];
        v.requires_grad = o_.mode == Mode::kTrain && v.trainable_param;
        if (ft_.quantized[i] && t.shape.size() == 2) {
          const QuantizedWeight q = QuantizedWeightBytes(o_.weights, t.shape[0], t.shape[1]);
          v.bytes = q.data_bytes;
          s_.quantized[static_cast<int>(i)] = q;
        }
      } else {
        v.is_buffer = true;
      }
    }
  }
  for (int id : g_.initializers) {
    if (s_.vals[id].is_param) {
      s_.params.push_back(id);
      int64_t n = 0;
      CheckedNumel(g_.tensors[id].shape, &n);
      (ft_.frozen[id] ? s_.frozen_count : s_.parameter_count) += n;
    } else if (IsFloat(g_.tensors[id].dtype) && s_.vals[id].bytes > 0) {
      s_.buffers.push_back(id);
    }
  }
  for (int id : g_.inputs) s_.inputs.push_back(id);
  if (!g_.outputs.empty()) s_.logits = g_.outputs[0];
}

int Builder::CastVal(int v, DType to, bool weight_cache, const std::string& why) {
  const int root = Root(v);
  if (weight_cache) {
    auto it = weight_cache_.find(root);
    if (it == weight_cache_.end()) {
      Val c = s_.vals[root];
      c.name = s_.vals[root].name + ":" + DTypeName(to);
      c.dtype = to;
      c.bytes = BytesOf(c.shape, to);
      c.base = -1;
      c.is_param = false;
      c.strides = ContiguousStrides(c.shape);
      const int cv = NewVal(c);
      ExecOp op;
      op.label = "autocast(" + s_.vals[root].name + ")";
      op.op_type = op_names::kCast;
      op.in = {root};
      op.out = {cv};
      op.grad_in = {s_.vals[root].requires_grad};
      op.hold_to_forward_end = true;
      op.flops = 0;
      s_.ops.push_back(op);
      it = weight_cache_.emplace(root, cv).first;
    }
    if (root == v) return it->second;
    // Re-apply the view (e.g. a transposed weight) to the cached copy.
    Val view = s_.vals[v];
    view.name = s_.vals[v].name + ":" + DTypeName(to);
    view.dtype = to;
    view.base = it->second;
    view.is_param = false;
    view.bytes = 0;
    const int vv = NewVal(view);
    ExecOp op;
    op.label = view.name;
    op.op_type = "View";
    op.view = true;
    op.grad_is_view = true;
    op.in = {it->second};
    op.out = {vv};
    op.grad_in = {s_.vals[it->second].requires_grad};
    op.grad_kind = GradKind::kAlias;
    s_.ops.push_back(op);
    return vv;
  }
  Val c = s_.vals[v];
  c.name = s_.vals[v].name + ":" + DTypeName(to);
  c.dtype = to;
  c.bytes = BytesOf(c.shape, to);
  c.base = -1;
  c.is_param = false;
  c.is_buffer = false;
  // .to() keeps the layout of a dense input (memory_format=preserve).
  c.strides = ElementwiseOutputStrides(c.shape, {{s_.vals[v].shape, s_.vals[v].strides}});
  const int cv = NewVal(c);
  ExecOp op;
  op.label = why;
  op.op_type = op_names::kCast;
  op.in = {v};
  op.out = {cv};
  op.grad_in = {s_.vals[v].requires_grad};
  op.flops = 0;
  s_.ops.push_back(std::move(op));
  return cv;
}

int Builder::ContiguousCopy(int v, const std::string& label) {
  Val c = s_.vals[v];
  c.name = s_.vals[v].name + ":contiguous";
  c.base = -1;
  c.is_param = false;
  c.is_buffer = false;
  c.strides = ContiguousStrides(c.shape);
  c.bytes = BytesOf(c.shape, c.dtype);
  const int cv = NewVal(c);
  ExecOp op;
  op.label = label;
  op.op_type = "Contiguous";
  op.in = {v};
  op.out = {cv};
  op.grad_in = {s_.vals[v].requires_grad};
  op.grad_kind = GradKind::kAlias;
  s_.ops.push_back(std::move(op));
  return cv;
}

// Strides of a view op's output; false when PyTorch would copy instead.
bool Builder::ComputeViewOutput(const Node& n, const OpDef& def, int in_val, int out_tensor,
                                Val* out) const {
  const Val& in = s_.vals[in_val];
  const std::vector<int64_t>& new_shape = g_.tensors[out_tensor].shape;
  out->strides = ContiguousStrides(new_shape);
  if (def.view == ViewRule::kSame) {
    out->strides = in.strides;
    return true;
  }
  if (def.view == ViewRule::kTranspose) {
    std::vector<int64_t> perm = n.GetInts("perm");
    const size_t r = in.shape.size();
    if (perm.empty()) {
      for (size_t i = 0; i < r; ++i) perm.push_back(static_cast<int64_t>(r - 1 - i));
    }
    if (perm.size() != r) return false;
    for (size_t i = 0; i < r; ++i) {
      if (perm[i] < 0 || perm[i] >= static_cast<int64_t>(r)) return false;
      out->strides[i] = in.strides[perm[i]];
    }
    return true;
  }
  if (def.view == ViewRule::kExpand) {
    const size_t r = new_shape.size();
    const size_t off = r - in.shape.size();
    for (size_t i = 0; i < r; ++i) {
      if (i < off) {
        out->strides[i] = 0;
      } else {
        out->strides[i] = (in.shape[i - off] == 1 && new_shape[i] != 1) ? 0 : in.strides[i - off];
      }
    }
    return true;
  }
  if (def.view == ViewRule::kSlice || def.view == ViewRule::kSplit ||
      def.view == ViewRule::kSequence) {
    // Same strides.
    if (in.shape.size() != new_shape.size()) return false;
    out->strides = in.strides;
    if (def.view == ViewRule::kSlice) {
      // x[a:b:step] multiplies the stride of each sliced axis by its step.
      const Tensor* axes =
          n.inputs.size() > 3 && n.inputs[3] >= 0 ? &g_.tensors[n.inputs[3]] : nullptr;
      const Tensor* steps =
          n.inputs.size() > 4 && n.inputs[4] >= 0 ? &g_.tensors[n.inputs[4]] : nullptr;
      if (steps && !steps->has_values) return false;
      if (steps) {
        const int64_t r = static_cast<int64_t>(in.shape.size());
        for (size_t i = 0; i < steps->values.size(); ++i) {
          int64_t axis = static_cast<int64_t>(i);
          if (axes) {
            if (!axes->has_values || i >= axes->values.size()) return false;
            axis = axes->values[i];
          }
          if (axis < 0) axis += r;
          if (axis < 0 || axis >= r) return false;
          out->strides[axis] *= steps->values[i];
        }
      }
    }
    return true;
  }
  // Reshape, Flatten, Squeeze, Unsqueeze: a view when the strides allow.
  return ViewStrides(in.shape, in.strides, new_shape, &out->strides);
}

void Builder::AddViewOp(int ni, const OpDef& def, std::vector<int> in) {
  const Node& n = g_.nodes[ni];
  const int src = in[0];
  ExecOp op;
  op.label = n.Label(ni);
  op.op_type = n.op_type;
  op.node = ni;
  op.in = in;
  op.def = &def;
  op.view = true;
  op.grad_kind = def.grad == GradKind::kGather ? GradKind::kGather : GradKind::kAlias;
  op.grad_is_view = def.view == ViewRule::kReshape || def.view == ViewRule::kTranspose;
  bool copy = false;
  for (size_t k = 0; k < n.outputs.size(); ++k) {
    const int t = n.outputs[k];
    if (t < 0 || (def.view_outputs >= 0 && k >= static_cast<size_t>(def.view_outputs))) continue;
    Val& v = s_.vals[t];
    v.dtype = s_.vals[src].dtype;
    v.requires_grad = s_.vals[src].requires_grad;
    if (def.view == ViewRule::kSequence) {
      v.strides = s_.vals[src].strides;
      if (v.strides.size() != v.shape.size()) v.strides = ContiguousStrides(v.shape);
    } else if (!ComputeViewOutput(n, def, src, t, &v)) {
      copy = true;
      v.strides = ContiguousStrides(v.shape);
    }
    v.base = copy ? -1 : src;
    v.bytes = BytesOf(v.shape, v.dtype);
    op.out.push_back(t);
  }
  if (copy) {
    // PyTorch's reshape of a non-viewable tensor copies.
    op.view = false;
    op.op_type = n.op_type + "(copy)";
    op.grad_kind = GradKind::kAlias;
  }
  op.grad_in.assign(in.size(), false);
  op.grad_in[0] = s_.vals[src].requires_grad;
  s_.ops.push_back(std::move(op));
}

bool Builder::ChannelsLastOutput(const OpDef* def, const std::vector<int>& in) const {
  if (def == nullptr || in.empty() || in[0] < 0) return false;
  auto channels_last = [&](int v) { return IsChannelsLast(s_.vals[v].shape, s_.vals[v].strides); };
  switch (def->channels_last) {
    case ChannelsLastRule::kNever:
      return false;
    case ChannelsLastRule::kKeepsInput0:
      return channels_last(in[0]);
    case ChannelsLastRule::kAllInputs:
      return std::all_of(in.begin(), in.end(), [&](int v) { return v < 0 || channels_last(v); });
  }
  return false;
}

// A TensorIterator op writes its output in its operands' layout
// (ElementwiseOutputStrides): dims are ordered by the first full-size operand
// that tells them apart, broadcast operands (a scalar, a bias) vote on
// nothing. Planned so where that order is a permutation other than
// channels-last (a transposed view): the steps of a GELU that the
// TorchScript exporter decomposes into Div, Erf, Add and Mul, run on
// wav2vec2's `hidden_states.transpose(-2, -1)` after its feature encoder's
// LayerNorm, keep that layout, and the convolution after them copies its
// input (H200 trace of wav2vec2_ln_c b32 fp32, events 117 and 2312-2314).
// A residual add whose first operand is transposed stays transposed whatever
// the second: MLP-Mixer's `x + channel_mlp(ln2(x))` keeps the patch
// embedding's transposed layout in every block, and each LayerNorm copies it
// inside the call (H200 trace of mixer_n b160 amp_bf16: three 61.2 MiB
// blocks per LayerNorm, the float32 cast, the copy and the output).
// Channels-last operands keep the channels-last rule (ChannelsLastOutput).
bool Builder::PermutedElementwiseLayout(const OpDef* def, const std::vector<int>& in,
                                        const std::vector<int64_t>& out_shape,
                                        std::vector<int64_t>* strides) const {
  if (def == nullptr || !def->tensor_iterator) return false;
  std::vector<StridedOperand> full;
  for (int v : in) {
    if (v < 0) continue;
    const Val& x = s_.vals[v];
    if (x.shape != out_shape) continue;  // broadcast (or a scalar)
    if (x.strides.size() != x.shape.size()) return false;
    full.push_back({x.shape, x.strides});
  }
  if (full.empty()) return false;
  std::vector<int64_t> out = ElementwiseOutputStrides(out_shape, full);
  if (IsContiguous(out_shape, out) || IsChannelsLast(out_shape, out)) return false;
  for (const StridedOperand& x : full) {
    if (IsChannelsLast(out_shape, x.strides)) return false;
  }
  *strides = std::move(out);
  return true;
}

bool Builder::MatMulNeedsCopy(int v, int rank_other) const {
  const Val& x = s_.vals[v];
  const size_t r = x.shape.size();
  if (r <= 1) return false;
  auto last_two_ok = [&](const std::vector<int64_t>& sh, const std::vector<int64_t>& st) {
    const size_t k = sh.size();
    return (st[k - 1] == 1 || sh[k - 1] == 1) || (st[k - 2] == 1 || sh[k - 2] == 1);
  };
  if (r == 2) return !last_two_ok(x.shape, x.strides);
  // N-d: folded to 2-d (against a 2-d operand) or 3-d batches.
  std::vector<int64_t> folded;
  std::vector<int64_t> st;
  if (rank_other <= 2) {
    int64_t rows = 1;
    for (size_t i = 0; i + 1 < r; ++i) rows *= x.shape[i];
    folded = {rows, x.shape[r - 1]};
  } else {
    int64_t b = 1;
    for (size_t i = 0; i + 2 < r; ++i) b *= x.shape[i];
    folded = {b, x.shape[r - 2], x.shape[r - 1]};
  }
  if (!ViewStrides(x.shape, x.strides, folded, &st)) return true;
  return !last_two_ok(folded, st);
}

void Builder::AddComputeOp(int ni, const OpDef* def, std::vector<int> in) {
  const Node& n = g_.nodes[ni];
  if (IsWholeCast(o_.precision)) {
    // RMSNorm as Hugging Face writes it (LlamaRMSNorm, T5LayerNorm, ...)
    // computes the mean square in fp32 (`hidden_states.to(torch.float32)`,
    // a no-op the fp32 export drops) and casts back before the weight.
    if (a_.rms_norms.mean_square_pows.count(ni) && !in.empty() && in[0] >= 0 &&
        IsHalf(s_.vals[in[0]].dtype)) {
      const int x = in[0];
      in[0] = CastVal(x, DType::kFloat, false, "to_float(" + n.Label(ni) + ")");
      rms_fp32_copy_[x] = in[0];
    }
    // x * rsqrt(...) reads that fp32 copy too (one tensor, which both keep
    // for backward), not the half-precision x; unless the copy was made
    // inline for the square alone (T5LayerNorm): then the mul keeps the half
    // x and its product is fp32 by type promotion.
    if (a_.rms_norms.normalize_muls.count(ni) && !a_.rms_norms.half_input_muls.count(ni)) {
      for (int& x : in) {
        auto it = x >= 0 ? rms_fp32_copy_.find(x) : rms_fp32_copy_.end();
        if (it != rms_fp32_copy_.end()) x = it->second;
      }
    }
    if (a_.rms_norms.weight_muls.count(ni)) {
      for (int& x : in) {
        if (x >= 0 && s_.vals[x].dtype == DType::kFloat && !s_.vals[Root(x)].is_param) {
          x = CastVal(x, HalfType(o_.precision), false, "to_input_dtype(" + n.Label(ni) + ")");
        }
      }
    }
  }
  AddCompute(n.op_type, n.Label(ni), ni, def, std::move(in), n.outputs, nullptr, -1);
}

void Builder::AddCompute(const std::string& op_type, const std::string& label, int ni,
                         const OpDef* def, std::vector<int> in, const std::vector<int>& outs,
                         const std::vector<SavedRef>* explicit_saves, int64_t flops) {
  const bool amp = IsAmp(o_.precision);
  const DType half = HalfType(o_.precision);
  // Inside a module that turns autocast off, ops run as without it.
  const bool autocast_off = ni >= 0 && g_.nodes[ni].autocast_disabled;
  const Autocast ac = def && !autocast_off ? def->autocast : Autocast::kPassthrough;
  // Quantized weights are dequantized for the matmul (bitsandbytes'
  // MatMul4Bit); an int8 weight enters LLM.int8's int8 matmul as it is.
  std::vector<int> dequantized;
  std::vector<bool> int8_weight(in.size(), false);
  for (size_t i = 0; i < in.size(); ++i) {
    int& v = in[i];
    if (v >= 0 && !s_.quantized.empty() && s_.quantized.count(Root(v))) {
      if (o_.weights == WeightFormat::kInt8) {
        int8_weight[i] = true;
        continue;
      }
      v = Dequantize(v, label);
      dequantized.push_back(v);
    }
  }
  // The casts autocast's wrapper made for this call: its argument list holds
  // them until the op returns, after a contiguous copy the op made of one
  // (the H100 trace of lstm_lm_g amp_bf16: the head's bfloat16 copy of the
  // LSTM's float16 output dies after the product and its workspace).
  std::vector<bool> autocast_cast(in.size(), false);
  // Autocast input casts, last argument first: autocast's wrapper expands
  // cached_cast(args)... inside the call to the op (WrapFunction_,
  // aten/src/ATen/autocast_mode.h), and GCC evaluates call arguments right to
  // left (H200 traces: a linear's bias copy, then the weight's, then the
  // input's). The first argument's copy, made last, has the highest autograd
  // sequence number: its backward runs first (the reverse of this order).
  if (amp && (ac == Autocast::kLowPrecision || ac == Autocast::kFp32)) {
    for (size_t i = in.size(); i-- > 0;) {
      if (in[i] < 0 || int8_weight[i] || !IsFloat(s_.vals[in[i]].dtype)) continue;
      const DType have = s_.vals[in[i]].dtype;
      if (ac == Autocast::kLowPrecision && AutocastCopies(have, half)) {
        // cached_cast (aten/src/ATen/autocast_mode.cpp) caches the copy of a
        // leaf that requires grad only: a frozen weight is cast at each use;
        // under torch.no_grad() a trained one still has requires_grad set.
        const Val& root = s_.vals[Root(in[i])];
        const bool weight = root.is_param && root.trainable_param;
        in[i] = CastVal(in[i], half, weight, "autocast(" + label + ")");
        autocast_cast[i] = !weight;
      } else if (ac == Autocast::kFp32 && IsHalf(have)) {
        in[i] = CastVal(in[i], DType::kFloat, false, "autocast(" + label + ")");
        autocast_cast[i] = true;
      }
    }
  }
  // Copies PyTorch makes for inputs it needs contiguous.
  int64_t in_kernel_copy = 0;
  std::vector<int> held_casts;
  const bool addmm_input = def && def->matmul_operands && !in.empty() && in[0] >= 0 &&
                           (s_.vals[in[0]].shape.size() == 2 ||
                            IsContiguous(s_.vals[in[0]].shape, s_.vals[in[0]].strides));
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] < 0) continue;
    const Val& v = s_.vals[in[i]];
    // Ops that PyTorch runs on contiguous memory call .contiguous().
    bool need = def && def->contiguous_input0 && i == 0 && !IsContiguous(v.shape, v.strides) &&
                !(def->channels_last == ChannelsLastRule::kKeepsInput0 &&
                  IsChannelsLast(v.shape, v.strides));
    if (def && def->matmul_operands && i < 2) {
      const int other = in[1 - i];
      const int rank_other = other >= 0 ? static_cast<int>(s_.vals[other].shape.size()) : 2;
      need = MatMulNeedsCopy(in[i], rank_other);
    }
    if (need && !int8_weight[i]) {
      if (i == 0 && def->contiguous_in_kernel) {
        in_kernel_copy = BytesOf(v.shape, v.dtype);
      } else {
        if (autocast_cast[i]) held_casts.push_back(in[i]);
        in[i] = ContiguousCopy(in[i], "contiguous(" + label + ")");
      }
    }
  }
  ExecOp op;
  op.fwd_temp_bytes = in_kernel_copy;
  op.label = label;
  op.op_type = op_type;
  op.node = ni;
  op.def = def;
  op.in = in;
  op.uses_cublas = def && def->uses_cublas;
  op.addmm_input = addmm_input;
  // Output dtypes as they run: elementwise ops promote among their
  // (non-scalar) float inputs; others follow their data input.
  const OutputDType out_dtype = def ? def->output_dtype : OutputDType::kFollowInput;
  const bool promoting = out_dtype == OutputDType::kPromote;
  DType promoted = DType::kUndefined;
  bool any_ranked = false;
  for (int v : in) {
    if (v >= 0 && !s_.vals[v].shape.empty()) any_ranked = true;
  }
  for (size_t i = 0; i < in.size(); ++i) {
    const int v = in[i];
    if (v < 0 || !IsFloat(s_.vals[v].dtype)) continue;
    if (!promoting && promoted != DType::kUndefined) break;
    if (promoting && any_ranked && s_.vals[v].shape.empty()) continue;
    const DType d = s_.vals[v].dtype;
    if (promoted == DType::kUndefined || (d == DType::kFloat && IsHalf(promoted)) ||
        d == DType::kDouble) {
      promoted = d;
    } else if (IsHalf(d) && IsHalf(promoted) && d != promoted) {
      promoted = DType::kFloat;  // float16 with bfloat16 promotes to float32
    }
  }
  // An input read for its dtype alone neither gets a gradient nor passes
  // requires_grad on (CastLike's target_type).
  const uint32_t dtype_only = def ? def->dtype_only_inputs : 0;
  auto grad_input = [&](size_t i) { return i >= 32 || ((dtype_only >> i) & 1u) == 0; };
  bool any_grad = false;
  for (size_t i = 0; i < in.size(); ++i) {
    any_grad = any_grad || (grad_input(i) && in[i] >= 0 && s_.vals[in[i]].requires_grad);
  }
  const bool differentiable = def ? def->differentiable : false;
  const DType softmax_dtype = SoftmaxCallDtype(ni);
  for (size_t k = 0; k < outs.size(); ++k) {
    const int t = outs[k];
    if (t < 0) {
      op.out.push_back(-1);
      continue;
    }
    Val& v = s_.vals[t];
    const DType gdt = t < static_cast<int>(g_.tensors.size()) ? g_.tensors[t].dtype : v.dtype;
    if (k == 0 && softmax_dtype != DType::kUndefined) {
      v.dtype = softmax_dtype;
    } else if (IsFloat(gdt)) {
      if (out_dtype == OutputDType::kCastTarget) {
        v.dtype = CastRunDtype(gdt);
      } else if (out_dtype == OutputDType::kLikeInput1 && in.size() > 1 && in[1] >= 0) {
        v.dtype = s_.vals[in[1]].dtype;
      } else if (amp && ac == Autocast::kLowPrecision) {
        v.dtype = half;
      } else if (amp && (ac == Autocast::kFp32 || ac == Autocast::kFp32Output)) {
        v.dtype = DType::kFloat;
      } else if (promoted != DType::kUndefined) {
        v.dtype = promoted;
      } else {
        v.dtype = RunDtype(gdt);
      }
    }
    v.strides = ContiguousStrides(v.shape);
    if (k == 0 && ChannelsLastOutput(def, in)) v.strides = ChannelsLastStrides(v.shape);
    if (def && def->output_like_input0 && !in.empty() && in[0] >= 0) {
      // empty_like(input): dropout of a batch-first RNN output stays
      // transposed (H200 trace lstm_lm_b bf16 b16: the head's linear copies it).
      v.strides =
          ElementwiseOutputStrides(v.shape, {{s_.vals[in[0]].shape, s_.vals[in[0]].strides}});
    }
    if (std::vector<int64_t> shared;
        k == 0 && PermutedElementwiseLayout(def, in, v.shape, &shared)) {
      v.strides = std::move(shared);
    }
    v.bytes = BytesOf(v.shape, v.dtype);
    v.requires_grad = differentiable && any_grad && IsFloat(v.dtype);
    // Auxiliary outputs nobody reads are in-place updates (BatchNorm running
    // statistics) or the saved tensors themselves (mask, mean, indices).
    if (k > 0 && ni >= 0) {
      bool used = false;
      for (int c : g_.tensors[t].consumers) used = used || !skipped_nodes_[c];
      for (int o : g_.outputs) used = used || o == t;
      if (!used) v.phantom = true;
    }
    op.out.push_back(t);
  }
  // What backward keeps.
  if (o_.mode == Mode::kTrain && explicit_saves && any_grad) {
    op.saved = *explicit_saves;
  } else if (o_.mode == Mode::kTrain && ni >= 0 && def && def->saves && any_grad) {
    SaveContext ctx;
    ctx.graph = &g_;
    ctx.node = &g_.nodes[ni];
    for (int v : in) {
      ctx.input_requires_grad.push_back(v >= 0 && s_.vals[v].requires_grad);
      ctx.input_dtype.push_back(v >= 0 ? s_.vals[v].dtype : DType::kUndefined);
    }
    for (int v : op.out) ctx.output_dtype.push_back(v >= 0 ? s_.vals[v].dtype : DType::kUndefined);
    std::vector<Saved> saved;
    def->saves(ctx, &saved);
    for (const Saved& sv : saved) {
      SavedRef r;
      if (sv.kind == Saved::kInput && sv.index < static_cast<int>(in.size())) {
        r.val = in[sv.index];
      } else if (sv.kind == Saved::kOutput && sv.index < static_cast<int>(op.out.size())) {
        r.val = op.out[sv.index];
      } else if (sv.kind == Saved::kExtra) {
        r.bytes = BytesOf(sv.shape, sv.dtype);
        r.what = sv.what;
      }
      if (r.val >= 0 || r.bytes > 0) op.saved.push_back(r);
      if (sv.kind == Saved::kInput && sv.index == 0) op.bwd_input_copy_bytes = in_kernel_copy;
    }
  }
  op.grad_in.assign(in.size(), false);
  if (differentiable) {
    for (size_t i = 0; i < in.size(); ++i) {
      op.grad_in[i] = grad_input(i) && in[i] >= 0 && s_.vals[in[i]].requires_grad &&
                      IsFloat(s_.vals[in[i]].dtype);
    }
  }
  if (def && def->alias != Alias::kView) op.grad_kind = def->grad;
  if (def && def->softmax_grad_product && !op.grad_in.empty() && op.grad_in[0] && !op.out.empty() &&
      op.out[0] >= 0) {
    // OpDef::softmax_grad_product: `grad * output`, whatever the rows.
    op.bwd_workspace = SatAdd(op.bwd_workspace, s_.vals[op.out[0]].bytes);
  }
  // OpDef::same_shape_grad_passes: no broadcast, no cast, the gradient is
  // handed on as it comes.
  if (def && def->same_shape_grad_passes && !op.out.empty() && op.out[0] >= 0) {
    const Val& y = s_.vals[op.out[0]];
    bool same = !op.in.empty();
    for (int x : op.in) {
      same = same && x >= 0 && s_.vals[x].shape == y.shape && s_.vals[x].dtype == y.dtype;
    }
    if (same) op.grad_kind = GradKind::kAlias;
  }
  const InPlaceUse inplace =
      def && !(ni >= 0 && g_.nodes[ni].runs_out_of_place) ? def->inplace : InPlaceUse::kNever;
  if (inplace != InPlaceUse::kNever && !op.in.empty() && op.in[0] >= 0 && !op.out.empty() &&
      op.out[0] >= 0) {
    const Val& a = s_.vals[op.in[0]];
    const Val& y = s_.vals[op.out[0]];
    op.inplace_candidate = a.dtype == y.dtype && a.shape == y.shape;
    // In-place code is a CNN habit (torchvision: ReLU(inplace=True) and
    // `out += identity`); transformers (GELU, residual `x + y`) have neither.
    if (op.inplace_candidate && inplace == InPlaceUse::kActivation) {
      s_.inplace_activations = true;
    }
  }
  // CUDA max pooling (2-D, 3-D) always computes its int64 indices; without
  // autograd they are dropped right after the kernel.
  if (def && def->makes_indices && op.saved.empty() && !op.out.empty() && op.out[0] >= 0 &&
      s_.vals[op.out[0]].shape.size() >= 4) {
    op.fwd_workspace = BytesOf(s_.vals[op.out[0]].shape, DType::kInt64);
  }
  if (ni >= 0 && def && def->cudnn_conv) {
    ConvWorkspaces(g_.nodes[ni], s_.vals, o_.fp32_conv, &op, &s_.fp32_convs);
    // cudnn_convolution_backward (aten/src/ATen/native/cudnn/ConvShared.cpp)
    // runs the data pass, the input's gradient and then its workspace, before
    // the weight pass, the weight's gradient and then its workspace. The
    // bias's gradient, which PyTorch sums after both, is planned with the
    // input's: a few KiB, in the small pool, beside the large blocks.
    if (op.bwd_workspace > 0 && op.in.size() >= 2) {
      op.grad_in_weight_pass.assign(op.in.size(), false);
      op.grad_in_weight_pass[1] = true;
    }
  }
  if (op_type == op_names::kGemm) {
    GemmBiasSumStaging(s_.vals, &op);
    const bool beta_one = ni < 0 || g_.nodes[ni].GetFloat("beta", 1.0F) == 1.0F;
    op.lt_bias = beta_one && GemmRowBias(s_.vals, op) && LtRunsAddmm(s_.vals, op);
  }
  if (ni >= 0 && def && def->group_norm_workspaces &&
      def == FindOp(g_.nodes[ni].domain, g_.nodes[ni].op_type) && !op.in.empty() && op.in[0] >= 0) {
    GroupNormWorkspaces(s_.vals[op.in[0]], g_.nodes[ni].GetInt("num_groups", 1), true, &op);
  }
  op.flops = flops >= 0 ? flops : (ni >= 0 && def && def->flops ? def->flops(g_, g_.nodes[ni]) : 0);
  if (flops < 0 && (ni < 0 || !def || !def->flops)) {
    for (int v : op.out) {
      if (v >= 0) {
        int64_t numel = 0;
        if (CheckedNumel(s_.vals[v].shape, &numel)) op.flops = SatAdd(op.flops, numel);
      }
    }
  }
  for (size_t wi = 0; wi < int8_weight.size() && wi < 2; ++wi) {
    if (!int8_weight[wi] || in[1 - wi] < 0 || op.out.empty() || op.out[0] < 0) continue;
    AddInt8Matmul(in[1 - wi], op.in[wi], &op);
  }
  if (!dequantized.empty()) {
    // MatMul4Bit keeps the packed weight, not the dequantized one, and
    // dequantizes it again for grad_A (bitsandbytes autograd/_functions.py).
    int64_t again = 0;
    for (int d : dequantized) {
      again = SatAdd(again, s_.vals[d].bytes);
      again = SatAdd(again, s_.quantized[dequant_of_[d]].dequant_scratch_bytes);
      std::vector<SavedRef> kept;
      for (const SavedRef& r : op.saved) {
        if (r.val != d) kept.push_back(r);
      }
      op.saved = kept;
    }
    bool grad = false;
    for (bool gi : op.grad_in) grad = grad || gi;
    if (grad) op.bwd_workspace = SatAdd(op.bwd_workspace, again);
  }
  for (int c : held_casts) {
    s_.vals[c].held_until = std::max(s_.vals[c].held_until, static_cast<int>(s_.ops.size()));
  }
  s_.ops.push_back(std::move(op));
}

// MatMul followed by Add of a 1-D parameter is how exporters write a linear
// layer with bias; PyTorch runs it as one addmm: the bias joins the product
// in place, in the product's dtype (autocast casts the bias too).
bool Builder::IsLinearBias(int ni, std::vector<int>& in) const {
  const Node& n = g_.nodes[ni];
  const OpDef* def = FindOp(n.domain, n.op_type);
  if (!def || !def->is_add || in.size() != 2 || in[0] < 0 || in[1] < 0) return false;
  for (int k = 0; k < 2; ++k) {
    const int prod = in[k];
    const int bias = in[1 - k];
    const Val& b = s_.vals[Root(bias)];
    if (!b.is_param || s_.vals[bias].shape.size() != 1) continue;
    const int t = n.inputs[k];
    const int p = g_.tensors[t].producer;
    const OpDef* producer = p >= 0 ? FindOp(g_.nodes[p].domain, g_.nodes[p].op_type) : nullptr;
    if (!producer || !producer->matmul_operands) continue;
    if (g_.tensors[t].consumers.size() != 1 || s_.vals[prod].base >= 0) continue;
    if (s_.vals[prod].shape.empty() || s_.vals[prod].shape.back() != s_.vals[bias].shape[0]) {
      continue;
    }
    if (k == 1) std::swap(in[0], in[1]);
    return true;
  }
  return false;
}

void Builder::AddBiasAdd(int ni, const std::vector<int>& in) {
  const Node& n = g_.nodes[ni];
  ExecOp op;
  op.label = n.Label(ni);
  op.op_type = "BiasAdd";
  op.node = ni;
  op.in = in;
  op.view = true;
  op.grad_kind = GradKind::kBiasAdd;
  const int t = n.outputs[0];
  Val& v = s_.vals[t];
  v.dtype = s_.vals[in[0]].dtype;
  v.base = in[0];
  v.strides = s_.vals[in[0]].strides;
  v.bytes = 0;
  v.requires_grad = s_.vals[in[0]].requires_grad || s_.vals[in[1]].requires_grad;
  op.out = {t};
  op.grad_in = {s_.vals[in[0]].requires_grad, s_.vals[in[1]].requires_grad};
  int64_t numel = 0;
  CheckedNumel(v.shape, &numel);
  op.flops = numel;
  // A product on 2-D or contiguous input runs with its bias as one addmm,
  // whose backward makes the bias gradient after the product's.
  for (size_t j = s_.ops.size(); j-- > 0;) {
    ExecOp& p = s_.ops[j];
    if (p.out.empty() || p.out[0] != in[0]) continue;
    if (p.def && p.def->matmul_operands && p.addmm_input) {
      op.bias_grad_by_op = static_cast<int>(j);
      p.lt_bias = LtRunsAddmm(s_.vals, p);
    }
    break;
  }
  // The bias gradient: addmm's grad summed over the rows (sum(0)), through
  // the reduction's staging buffer when it splits the rows across blocks.
  const int64_t cols = s_.vals[in[1]].shape.empty() ? 0 : s_.vals[in[1]].shape[0];
  if (op.grad_in[1] && cols > 0 && numel > 0) {
    op.bwd_workspace = BiasGradStagingBytes(numel / cols, cols, v.dtype);
  }
  s_.ops.push_back(std::move(op));
}

void Builder::AddNode(int ni) {
  const Node& n = g_.nodes[ni];
  // Shape arithmetic and constants never reach the GPU.
  bool all_values = true;
  bool any_output = false;
  for (int t : n.outputs) {
    if (t < 0) continue;
    any_output = true;
    if (!g_.tensors[t].has_values) all_values = false;
  }
  const OpDef* def = FindOp(n.domain, n.op_type);
  if (!any_output || all_values || (def && def->host_only)) {
    skipped_nodes_[ni] = 1;
    return;
  }
  std::vector<int> in;
  for (int t : n.inputs) in.push_back(t >= 0 ? val_of_[t] : -1);
  if (IsLinearBias(ni, in)) {
    AddBiasAdd(ni, in);
    return;
  }
  bool view = def && def->alias == Alias::kView && !in.empty() && in[0] >= 0;
  // Dropout in eval mode returns its input itself (and makes no mask), and
  // so does one of probability 0 in training: F.dropout(x, 0.0, True) takes
  // _dropout_impl, which returns its input when p == 0
  // (aten/src/ATen/native/Dropout.cpp; the fused kernel needs 0 < p < 1).
  if (def && def->eval_identity && (o_.mode == Mode::kInference || DropoutRatio(g_, n) == 0.0) &&
      !in.empty() && in[0] >= 0) {
    const bool mask_read =
        n.outputs.size() > 1 && n.outputs[1] >= 0 && !g_.tensors[n.outputs[1]].consumers.empty();
    view = !mask_read;
  }
  // The Cast of a softmax(x, dim, dtype) call: the softmax wrote that dtype
  // already (SoftmaxCallDtype), so it is the softmax's output itself; in a
  // half-precision run it is the model's cast back to its dtype
  // (`.to(query.dtype)` in transformers' eager attention), which the float
  // export could not record.
  if (!view && n.softmax_dtype_call >= 0 && def && def->output_dtype == OutputDType::kCastTarget &&
      !in.empty() && in[0] >= 0 && !n.outputs.empty() && n.outputs[0] >= 0) {
    if (s_.vals[in[0]].dtype == CastRunDtype(g_.tensors[n.outputs[0]].dtype)) {
      AddViewOp(ni, *FindOp("", op_names::kIdentity), in);
      return;
    }
  }
  if (view) {
    AddViewOp(ni, *def, in);
  } else {
    AddComputeOp(ni, def, in);
  }
}

DType Builder::SoftmaxCallDtype(int ni) const {
  if (ni < 0) return DType::kUndefined;
  const Node& n = g_.nodes[ni];
  if (n.softmax_dtype_call < 0 || n.op_type != op_names::kSoftmax || n.outputs.empty() ||
      n.outputs[0] < 0) {
    return DType::kUndefined;
  }
  for (int c : g_.tensors[n.outputs[0]].consumers) {
    const Node& cast = g_.nodes[c];
    const OpDef* def = FindOp(cast.domain, cast.op_type);
    if (cast.softmax_dtype_call != n.softmax_dtype_call || !def ||
        def->output_dtype != OutputDType::kCastTarget || cast.outputs.empty() ||
        cast.outputs[0] < 0) {
      continue;
    }
    const DType dt = g_.tensors[cast.outputs[0]].dtype;
    if (IsFloat(dt)) return dt;
  }
  return DType::kUndefined;
}

int Builder::Synthetic(const std::string& name, const std::vector<int64_t>& shape, DType dt,
                       const std::vector<int64_t>& strides, int base) {
  Val v;
  v.name = name;
  v.shape = shape;
  v.dtype = dt;
  v.strides = strides.empty() ? ContiguousStrides(shape) : strides;
  v.base = base;
  v.bytes = base >= 0 ? 0 : BytesOf(shape, dt);
  return NewVal(v);
}

// Replaces an exported attention block by what PyTorch runs: the
// scaled_dot_product_attention kernel it selects (sdpa.h) with what that
// kernel allocates and keeps, or, with --attention eager, the model's own
// matmul-softmax-matmul.
void Builder::AppendAttention(const AttentionRegion& r, const std::string& label) {
  const bool fused = o_.attention == Attention::kFused;
  // A mask made of shapes and constants only is the causal pattern an HF
  // model passes as is_causal=True (no mask tensor); with no mask it passes
  // k and v un-repeated with enable_gqa=True (transformers'
  // integrations/sdpa_attention.py: use_gqa_in_sdpa).
  const bool causal = fused && r.causal_mask;
  // One of shapes and constants without a position comparison is passed as
  // no mask at all (AttentionRegion::full_mask).
  const bool no_mask = causal || (fused && r.full_mask);
  const bool gqa = no_mask && r.k_kv >= 0;
  int q = val_of_[r.q];
  int k = val_of_[gqa ? r.k_kv : r.k];
  int v = val_of_[gqa ? r.v_kv : r.v];
  // The bias alone where the model skips an all-true padding mask.
  const int mask_tensor = fused && r.bias_mask >= 0 ? r.bias_mask : r.mask;
  int mask = r.mask >= 0 && !no_mask ? val_of_[mask_tensor] : -1;
  int autocast_mask = -1;  // autocast's half copy of a float mask
  const int out = r.out;
  const bool amp = IsAmp(o_.precision);
  const DType half = HalfType(o_.precision);
  // Autocast runs attention in half precision.
  const DType dt = amp && s_.vals[q].dtype == DType::kFloat ? half : s_.vals[q].dtype;
  const Val& qv = s_.vals[q];
  const std::vector<int64_t> qshape = qv.shape;
  const size_t rank = qshape.size();
  const int64_t sq = qshape[rank - 2];
  const int64_t d = qshape[rank - 1];
  const std::vector<int64_t> kshape = s_.vals[k].shape;
  const bool k_transposed = r.k_transposed && !gqa;
  const int64_t sk = k_transposed ? kshape.back() : kshape[kshape.size() - 2];
  int64_t bh = 1;
  for (size_t i = 0; i + 2 < rank; ++i) bh *= qshape[i];
  const std::vector<int64_t>& oshape = g_.tensors[out].shape;
  const int64_t dv = oshape.back();
  const bool train = o_.mode == Mode::kTrain;
  const bool grad =
      train && (s_.vals[q].requires_grad || s_.vals[k].requires_grad || s_.vals[v].requires_grad);
  {
    Val& ov = s_.vals[out];
    ov.dtype = dt;
    ov.requires_grad = grad;
    ov.bytes = BytesOf(oshape, dt);
    ov.base = -1;
  }
  SdpaCall call;
  call.dtype = dt;
  call.heads = rank == 4 ? qshape[1] : 1;
  call.kv_heads = rank == 4 && kshape.size() == 4 ? kshape[1] : call.heads;
  call.head_dim = d;
  call.value_head_dim = dv;
  call.q_len = sq;
  call.kv_len = sk;
  if (causal) {
    call.mask = SdpaMask::kCausal;
  } else if (mask >= 0) {
    const Val& m = s_.vals[mask];
    call.mask = m.dtype == DType::kBool ? SdpaMask::kBool : SdpaMask::kFloat;
    call.mask_requires_grad = m.requires_grad && train;
    const std::vector<int64_t> st = RuntimeStrides(g_, mask_tensor);
    call.mask_last_dim_contiguous = st.empty() || st.back() == 1 || m.shape.back() == 1;
  }
  call.dropout = train ? r.dropout : 0.0;
  call.requires_grad = grad;
  const SdpaKernel kernel = fused ? SelectSdpaKernel(call) : SdpaKernel::kMath;
  if (fused && kernel == SdpaKernel::kMath) {
    // The math kernel's matmuls copy operands whose layout does not fold
    // into batches: q, k and v as PyTorch lays them out (a head split of a
    // projection is a transposed view, and elementwise ops keep it).
    const int tensors[3] = {r.q, gqa ? r.k_kv : r.k, gqa ? r.v_kv : r.v};
    int* vals[3] = {&q, &k, &v};
    for (int i = 0; i < 3; ++i) {
      const int x = *vals[i];
      if (x != val_of_[tensors[i]] || s_.vals[x].base >= 0) continue;
      const std::vector<int64_t> st = RuntimeStrides(g_, tensors[i]);
      if (st == s_.vals[x].strides || st.size() != s_.vals[x].shape.size()) continue;
      const int view =
          Synthetic(s_.vals[x].name + ":layout", s_.vals[x].shape, s_.vals[x].dtype, st, x);
      s_.vals[view].requires_grad = s_.vals[x].requires_grad;
      ExecOp op;
      op.label = label + "/layout";
      op.op_type = "View";
      op.view = true;
      op.grad_is_view = true;
      op.in = {x};
      op.out = {view};
      op.grad_in = {s_.vals[x].requires_grad};
      op.grad_kind = GradKind::kAlias;
      s_.ops.push_back(op);
      *vals[i] = view;
    }
  }
  if (amp) {
    // Last argument first, as AddCompute's casts: a float mask (T5's
    // position bias) is an argument too, cast before v, k and q and kept
    // until the call returns (H200 probe, bench/results/copy_probe_h200.txt).
    if (fused && mask >= 0 && s_.vals[mask].dtype == DType::kFloat) {
      mask = CastVal(mask, half, false, "autocast(" + label + ")");
      autocast_mask = mask;
    }
    for (int* x : {&v, &k, &q}) {
      if (s_.vals[*x].dtype == DType::kFloat)
        *x = CastVal(*x, half, false, "autocast(" + label + ")");
    }
  }
  if (fused && kernel != SdpaKernel::kMath) {
    // Flash / memory-efficient / cuDNN kernels write [B, S, H, D] and return
    // it transposed to [B, H, S, D]; they keep q, k, v, out and an fp32
    // logsumexp for backward.
    Val& ov = s_.vals[out];
    ov.strides = ContiguousStrides(oshape);
    if (oshape.size() == 4) {
      const int64_t h = oshape[1];
      ov.strides = {sq * h * dv, dv, h * dv, 1};
    }
    const bool mem_eff = kernel == SdpaKernel::kMemEfficient;
    ExecOp op;
    op.label = label + "/" + SdpaKernelName(kernel);
    op.op_type = "ScaledDotProductAttention";
    op.in = {q, k, v, mask};
    op.out = {out};
    // The memory-efficient kernel computes the gradient of a mask that
    // requires grad (mem_eff/kernel_backward.h: grad_bias).
    op.grad_in = {s_.vals[q].requires_grad, s_.vals[k].requires_grad, s_.vals[v].requires_grad,
                  mem_eff && call.mask_requires_grad};
    if (grad) {
      for (int x : {q, k, v, out, mask}) {
        if (x >= 0) op.saved.push_back(SavedRef{x, 0, ""});
      }
      // The memory-efficient kernel pads its logsumexp rows to 32
      // (aten/src/ATen/native/transformers/cuda/attention.cu).
      const int64_t lse_len = mem_eff ? (sq + 31) / 32 * 32 : sq;
      op.saved.push_back(SavedRef{-1, BytesOf({bh, lse_len}, DType::kFloat), "logsumexp"});
      // Backward accumulates dq in fp32 and keeps fp32 row sums.
      op.bwd_workspace = BytesOf({bh, sq, d}, DType::kFloat) + BytesOf({bh, sq}, DType::kFloat);
      if (call.kv_heads != call.heads) {
        // Flash with GQA computes dk and dv per query head, then sums them
        // to the key/value heads (measured: +2 MiB at B=1, 32/4 heads,
        // S=2048, D=64, bf16; sdpa_probe_h200.jsonl).
        op.bwd_workspace += 2 * BytesOf({bh, sk, d}, dt);
      }
      if (op.grad_in[3]) {
        // grad_bias has the broadcast shape [B, H, Sq, Sk] (last dim padded
        // to 16); autograd then sums it to the mask's own shape.
        const int64_t full = BytesOf({bh, sq, (sk + 15) / 16 * 16}, s_.vals[mask].dtype);
        if (full > s_.vals[mask].bytes) op.bwd_workspace += full;
      }
    }
    op.flops = SatProduct({4, bh, sq, sk, d});
    s_.ops.push_back(op);
    return;
  }
  // The math kernel (aten/src/ATen/native/transformers/attention.cpp,
  // _scaled_dot_product_attention_math), or the model's eager code: ops
  // autograd records one by one.
  const bool math = fused;
  const size_t first_op = s_.ops.size();
  std::vector<int> locals;  // C++ locals of the math kernel: freed when it returns
  // Autocast's copy of the mask is freed when the call returns.
  if (math && autocast_mask >= 0) locals.push_back(autocast_mask);
  const std::vector<SavedRef> none;
  DType f = dt;
  if (math && IsHalf(dt)) {
    // Half inputs are computed in fp32 (allow_fp16_bf16_reduction_math_sdp
    // is off by default); .to() keeps each input's layout.
    f = DType::kFloat;
    for (int* x : {&q, &k, &v}) {
      *x = CastVal(*x, f, false, label + "/to_float");
      locals.push_back(*x);
    }
  }
  auto elementwise = [&](int x, const std::string& suffix) {
    const Val& xv = s_.vals[x];
    const int y = Synthetic(label + "/" + suffix, xv.shape, f,
                            ElementwiseOutputStrides(xv.shape, {{xv.shape, xv.strides}}), -1);
    AddCompute(op_names::kMul, label + "/" + suffix, -1, FindOp("", op_names::kMul), {x, -1}, {y},
               &none, SatProduct({1, static_cast<int64_t>(s_.vals[y].bytes)}));
    return y;
  };
  if (math) {
    // q and k are each scaled by sqrt(scale) before the product.
    q = elementwise(q, "scale_q");
    locals.push_back(q);
  }
  int causal_mask = -1;
  if (math && causal) {
    // ones(L, S, bool).tril() -> a float mask of -inf above the diagonal
    // (_scaled_dot_product_attention_math, convert_boolean_attn_mask): the
    // ones, then the tril, the ones go, then the float mask (a `where` of
    // the tril), the tril goes (H200 trace of qwen_bigvocab_e b1 fp32: 4,
    // 4, -4, 16, -4 MiB at 2048 positions, the last three in one 20 MiB
    // segment).
    causal_mask = Synthetic(label + "/causal_mask", {sq, sk}, f, {}, -1);
    ExecOp op;
    op.label = label + "/causal_mask";
    op.op_type = "CausalMask";
    op.out = {causal_mask};
    op.fwd_temp_source_bytes = BytesOf({sq, sk}, DType::kBool);
    op.fwd_temp_bytes = BytesOf({sq, sk}, DType::kBool);
    s_.ops.push_back(op);
    locals.push_back(causal_mask);
  }
  if (math && call.kv_heads != call.heads) {
    // enable_gqa: k and v repeat_interleave'd to the query heads.
    for (int* x : {&k, &v}) {
      std::vector<int64_t> shape = s_.vals[*x].shape;
      shape[1] = call.heads;
      const int y = Synthetic(s_.vals[*x].name + ".repeat", shape, f, {}, -1);
      AddCompute("RepeatInterleave", label + "/repeat_kv", -1, FindOp("", op_names::kTile),
                 {*x, -1}, {y}, &none, SatProduct({1, static_cast<int64_t>(s_.vals[y].bytes)}));
      *x = y;
      locals.push_back(y);
    }
  }
  int kt = k;
  if (!k_transposed) {
    std::vector<int64_t> shape = s_.vals[k].shape;
    std::vector<int64_t> strides = s_.vals[k].strides;
    std::swap(shape[shape.size() - 1], shape[shape.size() - 2]);
    std::swap(strides[strides.size() - 1], strides[strides.size() - 2]);
    kt = Synthetic(s_.vals[k].name + ".T", shape, s_.vals[k].dtype, strides, k);
    s_.vals[kt].requires_grad = s_.vals[k].requires_grad;
    ExecOp op;
    op.label = label + "/transpose";
    op.op_type = op_names::kTranspose;
    op.view = true;
    op.grad_is_view = true;
    op.in = {k};
    op.out = {kt};
    op.grad_in = {s_.vals[k].requires_grad};
    op.grad_kind = GradKind::kAlias;
    s_.ops.push_back(op);
  }
  if (math) kt = elementwise(kt, "scale_k");
  std::vector<int64_t> sshape(qshape.begin(), qshape.end() - 1);
  sshape.push_back(sk);
  // Inside the SDPA op autocast is off (autocast_mode.cpp casts its inputs
  // and calls it with the Autocast key excluded).
  const OpDef* matmul = math ? PassthroughMatMul() : FindOp("", op_names::kMatMul);
  auto make = [&](const std::string& suffix, DType t) {
    return Synthetic(label + "/" + suffix, sshape, t, {}, -1);
  };
  const int64_t s2 = SatProduct({bh, sq, sk});
  int scores = make("scores", f);
  AddCompute(op_names::kMatMul, label + "/scores", -1, matmul, {q, kt}, {scores}, nullptr,
             SatProduct({2, s2, d}));
  if (math) {
    // matmul(q, k.transpose(-2, -1) * scale): the scaled k is a temporary
    // of that call's arguments, freed when the matmul returns.
    const int scores_op = static_cast<int>(s_.ops.size()) - 1;
    s_.vals[kt].held_until = std::max(s_.vals[kt].held_until, scores_op);
  }
  // The saved operands are the (possibly copied) inputs of that matmul.
  {
    ExecOp& mm = s_.ops.back();
    std::vector<SavedRef> mm_saves = {{mm.in[0], 0, ""}, {mm.in[1], 0, ""}};
    mm.saved = train ? mm_saves : std::vector<SavedRef>{};
  }
  int cur = scores;
  if (!math) {
    const int scaled = make("scaled", s_.vals[cur].dtype);
    AddCompute(op_names::kDiv, label + "/scale", -1, FindOp("", op_names::kDiv), {cur, -1},
               {scaled}, &none, s2);
    cur = scaled;
  }
  const int add_mask = math ? (causal_mask >= 0 ? causal_mask : mask) : mask;
  if (add_mask >= 0 && math) {
    // attn.add_(mask): in place; a mask that requires grad gets the
    // scores' gradient summed to its shape.
    const int masked = Synthetic(label + "/masked", sshape, f, s_.vals[cur].strides, cur);
    ExecOp op;
    op.label = label + "/mask";
    op.op_type = "BiasAdd";
    op.view = true;
    op.in = {cur, add_mask};
    op.out = {masked};
    op.grad_kind = GradKind::kBiasAdd;
    op.grad_in = {s_.vals[cur].requires_grad, add_mask == mask && call.mask_requires_grad};
    s_.vals[masked].requires_grad = s_.vals[cur].requires_grad || op.grad_in[1];
    op.flops = s2;
    s_.ops.push_back(op);
    cur = masked;
  } else if (add_mask >= 0) {
    const int masked = make("masked", s_.vals[cur].dtype);
    AddCompute(op_names::kAdd, label + "/mask", -1, FindOp("", op_names::kAdd), {cur, add_mask},
               {masked}, &none, s2);
    cur = masked;
  }
  // Autocast's softmax writes fp32 from half input.
  const int probs = make("probs", amp ? DType::kFloat : f);
  std::vector<SavedRef> soft_saves = {{probs, 0, ""}};
  AddCompute(op_names::kSoftmax, label + "/softmax", -1, FindOp("", op_names::kSoftmax), {cur},
             {probs}, &soft_saves, SatMulNonNeg(5, s2));
  if (math) {
    // _safe_softmax: rows that are all -inf give 0; it compares the scores
    // with -inf (a bool of their size) and reduces that per row.
    s_.ops.back().fwd_workspace = BytesOf(sshape, DType::kBool);
  }
  cur = probs;
  if (call.dropout > 0.0 || (!math && r.dropout > 0.0)) {
    const int dropped = make("dropout", s_.vals[cur].dtype);
    std::vector<SavedRef> drop_saves = {{-1, BytesOf(sshape, DType::kBool), "mask"}};
    AddCompute(op_names::kDropout, label + "/dropout", -1, FindOp("", op_names::kDropout), {cur},
               {dropped}, &drop_saves, s2);
    cur = dropped;
  }
  if (amp && !math && s_.vals[cur].dtype == DType::kFloat) {
    cur = CastVal(cur, half, false, "autocast(" + label + "/context)");
  }
  auto append_cast = [&](const std::string& suffix, int from, int to, bool grad_from) {
    ExecOp op;
    op.label = label + "/" + suffix;
    op.op_type = op_names::kCast;
    op.in = {from};
    op.out = {to};
    op.grad_in = {grad_from};
    s_.ops.push_back(op);
  };
  int ctx = out;
  if (math && f != dt) {
    ctx = Synthetic(label + "/context", oshape, f, {}, -1);
    s_.vals[ctx].requires_grad = grad;
    // The kernel returns make_tuple(matmul(attn, v).to(dtype), attn.to(dtype));
    // GCC evaluates those arguments right to left, so the (discarded)
    // probabilities in the input dtype come first and live until the call
    // returns (H200: bench/results/copy_probe_h200.txt, and t5_encdec_c's
    // trace at b4: 8 MiB before the context's copy of v and its product).
    const int probs_half = Synthetic(label + "/probs_to_input_dtype", sshape, dt, {}, -1);
    append_cast("probs_to_input_dtype", cur, probs_half, false);
    locals.push_back(probs_half);
  }
  AddCompute(op_names::kMatMul, label + "/context", -1, matmul, {cur, v}, {ctx}, nullptr,
             SatProduct({2, bh, sq, sk, dv}));
  {
    ExecOp& mm2 = s_.ops.back();
    std::vector<SavedRef> mm2_saves = {{mm2.in[0], 0, ""}, {mm2.in[1], 0, ""}};
    mm2.saved = train ? mm2_saves : std::vector<SavedRef>{};
  }
  if (ctx != out) append_cast("to_input_dtype", ctx, out, grad);  // the output's .to(dtype)
  s_.vals[out].strides = ContiguousStrides(oshape);
  s_.vals[out].requires_grad = grad;
  const int last = static_cast<int>(s_.ops.size()) - 1;
  for (int x : locals) s_.vals[x].held_until = std::max(s_.vals[x].held_until, last);
  (void)first_op;
}

// One cuDNN call for a whole nn.LSTM / nn.GRU / nn.RNN module, as
// aten/src/ATen/native/cudnn/RNN.cpp runs it (_cudnn_rnn and
// _cudnn_rnn_backward; what autograd keeps: tools/autograd/derivatives.yaml,
// _cudnn_rnn: input, weights, hx, cx, output, the weight buffer, reserve).
// Forward (_cudnn_rnn's order): a contiguous seq-major copy of the input
// when it is batch-first, the output y ([T, B, dirs*H] in memory), hy (and
// cy), the workspace, the reserve space (training), then the workspace and
// the copy are freed; the first training call with dropout also creates the
// cached dropout states.
// Under autocast the call runs in float16 whatever autocast's dtype
// (cuDNN's AutocastRNN.cpp casts the input, the states and all weights, into
// one new flat buffer kept for backward, to at::kHalf). Backward, in
// _cudnn_rnn_backward's order: zeros for dhy/dcy; data: copies of x and of
// dy when batch-first, dx, dhx/dcx and a workspace; weights: another copy
// of x, one flat dw for all weights and a workspace.
void Builder::AppendRnn(const RnnRegion& r, const std::string& label) {
  const Node& first = g_.nodes[r.layers.front()];
  const bool amp = IsAmp(o_.precision);
  const bool train = o_.mode == Mode::kTrain;
  // Under autocast the call runs in float16 whatever autocast's dtype:
  // AutocastRNN.cpp (_cudnn_rnn_cast_reflatten) casts the weights, the input
  // and the states to at::kHalf. Under amp_bf16 the output is float16, and
  // the next autocast op casts it again (RnnRunsInFloat16UnderAutocast).
  const DType half = amp ? DType::kFloat16 : HalfType(o_.precision);
  int x = val_of_[r.input];
  const bool layout0 = first.GetInt("layout", 0) == 0;
  // The seq-major input cuDNN reads: a copy unless x already is one (a cast
  // keeps the strides of what it casts).
  std::vector<int64_t> seq_shape = s_.vals[x].shape;
  std::vector<int64_t> seq_strides = s_.vals[x].strides;
  if (!layout0 && seq_shape.size() == 3) {
    std::swap(seq_shape[0], seq_shape[1]);
    std::swap(seq_strides[0], seq_strides[1]);
  }
  const bool x_contiguous = IsContiguous(seq_shape, seq_strides);
  // Under autocast the input is cast after the weights: AutocastRNN.cpp
  // copies the weights into a flat half buffer first, then passes
  // cached_cast(input) to _cudnn_rnn (an H200 trace of lstm_tagger
  // amp_bf16: the 3.8 MiB flat weights, then the 4.5 MiB input).
  const bool cast_input = amp && AutocastCopies(s_.vals[x].dtype, half);
  const std::vector<int64_t> xshape = s_.vals[x].shape;
  RnnCall c;
  c.mode = first.op_type;
  c.layers = static_cast<int64_t>(r.layers.size());
  const int rt = first.inputs[2];
  const std::vector<int64_t>& rshape = g_.tensors[rt].shape;
  if (xshape.size() != 3 || rshape.size() != 3) {
    // Shapes were checked by inference; keep going without the call's facts.
    return;
  }
  c.seq = layout0 ? xshape[0] : xshape[1];
  c.batch = layout0 ? xshape[1] : xshape[0];
  c.input = xshape[2];
  c.dirs = rshape[0];
  c.hidden = rshape[2];
  c.dtype = cast_input ? half : s_.vals[x].dtype;
  c.dropout = r.dropout;
  int64_t elem = 0;
  DTypeBytes(c.dtype, 1, &elem);
  // Weights: the parameters themselves, or one flat low-precision copy.
  std::vector<int> weights;
  bool weights_grad = false;
  for (int t : r.weights) {
    weights.push_back(val_of_[t]);
    weights_grad = weights_grad || s_.vals[val_of_[t]].requires_grad;
  }
  // bf16 weights are never flattened into one buffer: nn.RNNBase's
  // flatten_parameters returns early unless torch.backends.cudnn.is_acceptable
  // (half, float, double only), so every call copies them into a new flat
  // buffer, kept for backward ("RNN module weights are not part of single
  // contiguous chunk of memory", RNN.cpp; the 22,548,480 B copy of a bf16
  // gru_seqfirst call in an H200 allocator trace).
  const bool bf16_copy = !amp && !weights.empty() && s_.vals[weights[0]].dtype == DType::kBFloat16;
  if (!weights.empty()) {
    std::vector<int> group;
    for (int w : weights) {
      if (s_.vals[w].is_param && s_.vals[w].base < 0 && !s_.quantized.count(w)) group.push_back(w);
    }
    if (group.size() == weights.size()) s_.flattened_rnn_weights.push_back(group);
  }
  // The op that runs first for this call: _cudnn_impl (RNN.cpp) makes the
  // cached dropout states before it dispatches to _cudnn_rnn, so before
  // AutocastRNN.cpp's casts (the H100 trace of lstm_lm_g amp_bf16 b12: the
  // 6.2 MiB states, then the 17.8 MiB flat float16 weights).
  int first_op = -1;
  if (amp || bf16_copy) {
    const DType from = amp ? DType::kFloat : DType::kBFloat16;
    const DType to = amp ? half : DType::kBFloat16;
    int64_t numel = 0;
    for (int w : weights) {
      int64_t n = 0;
      if (s_.vals[w].dtype == from && CheckedNumel(s_.vals[w].shape, &n)) {
        numel = SatAdd(numel, n);
      }
    }
    if (numel > 0) {
      const int flat = Synthetic(label + "/flat_weight:" + DTypeName(to), {numel}, to, {}, -1);
      s_.vals[flat].requires_grad = weights_grad;
      s_.vals[flat].param_copy = bf16_copy;
      ExecOp cast;
      cast.label = amp ? "autocast(" + label + " weights)" : "flat copy(" + label + " weights)";
      // The copy's backward hands each weight its view of the flat gradient
      // (same dtype: nothing is cast back).
      if (bf16_copy) cast.grad_kind = GradKind::kAlias;
      // _cudnn_rnn copies unflattened weights after allocating y, hy and
      // cy; AutocastRNN.cpp casts them before the call.
      cast.outputs_made_by_next = bf16_copy;
      cast.op_type = op_names::kCast;
      cast.in = weights;
      // Under autocast each weight has a cast of its own into the buffer;
      // their backward functions run newest first, so the float32 weight
      // gradients come last layer first (the H100 trace of lstm_lm_g
      // amp_bf16 b12: five 6.2 MiB gradients, then the first layer's 4.4 MiB
      // input weight).
      if (amp) std::reverse(cast.in.begin(), cast.in.end());
      cast.out = {flat};
      for (int w : cast.in) cast.grad_in.push_back(s_.vals[w].requires_grad);
      if (amp) first_op = static_cast<int>(s_.ops.size());
      s_.ops.push_back(cast);
      weights = {flat};
    }
  }
  if (cast_input) x = CastVal(x, half, false, "autocast(" + label + ")");
  std::vector<int> in = {x};
  in.insert(in.end(), weights.begin(), weights.end());
  for (int t : r.states) in.push_back(val_of_[t]);
  bool any_grad = false;
  for (int v : in) any_grad = any_grad || s_.vals[v].requires_grad;
  any_grad = any_grad && train;
  // Y as PyTorch lays it out: seq-major [T, B, dirs * H], viewed as the
  // ONNX [T, dirs, B, H] (layout 0) or [B, T, dirs, H] (layout 1).
  const int64_t row = SatMulNonNeg(c.dirs, c.hidden);
  const std::vector<int64_t> yshape = layout0
                                          ? std::vector<int64_t>{c.seq, c.dirs, c.batch, c.hidden}
                                          : std::vector<int64_t>{c.batch, c.seq, c.dirs, c.hidden};
  const std::vector<int64_t> ystrides = layout0
                                            ? std::vector<int64_t>{c.batch * row, c.hidden, row, 1}
                                            : std::vector<int64_t>{row, c.batch * row, c.hidden, 1};
  int y = r.output;
  if (y < 0) y = Synthetic(label + "/y", yshape, c.dtype, ystrides, -1);
  Val& yv = s_.vals[y];
  yv.shape = yshape;
  yv.strides = ystrides;
  yv.dtype = c.dtype;
  yv.base = -1;
  yv.bytes = BytesOf(yshape, c.dtype);
  yv.requires_grad = any_grad;
  std::vector<int> outs = {y};
  int64_t state_bytes = 0;
  for (int t : r.state_outputs) {
    Val& sv = s_.vals[t];
    sv.dtype = c.dtype;
    sv.strides = ContiguousStrides(sv.shape);
    sv.bytes = BytesOf(sv.shape, c.dtype);
    sv.base = -1;
    sv.requires_grad = any_grad;
    state_bytes = SatAdd(state_bytes, sv.bytes);
    outs.push_back(t);
  }
  ExecOp op;
  op.label = label;
  op.op_type = c.mode;
  op.in = in;
  op.out = outs;
  // hy (and cy): [layers * dirs, B, H] each; the graph reads some of them.
  const int64_t hy = SatProduct({c.layers, c.dirs, c.batch, c.hidden, elem});
  const int64_t hy_all = c.mode == op_names::kLSTM ? SatMulNonNeg(2, hy) : hy;
  const int64_t hy_unread = std::max<int64_t>(0, hy_all - state_bytes);
  const int64_t x_copy = x_contiguous ? 0 : BytesOf(xshape, c.dtype);
  // _cudnn_rnn: x = input.contiguous() first, then y, hy, cy, the
  // workspace and the reserve; the copy dies at the call's end.
  op.fwd_temp_bytes = x_copy;
  const int states = c.mode == op_names::kLSTM ? 2 : 1;
  if (hy_unread == hy_all) {
    op.fwd_late_temp_bytes.assign(states, hy);
  } else if (hy_unread > 0) {
    op.fwd_late_temp_bytes = {hy_unread};
  }
  const RnnWorkspace fwd_ws = RnnForwardWorkspace(c, train);
  op.fwd_workspace = fwd_ws.bytes;
  op.rnn_workspace_fitted = !fwd_ws.derived;
  if (any_grad) {
    op.saved_in_kernel = true;
    for (int v : in) op.saved.push_back(SavedRef{v, 0, ""});
    op.saved.push_back(SavedRef{y, 0, ""});
    op.saved.push_back(SavedRef{-1, RnnReserveBytes(c), "reserve"});
    if (c.dropout) {
      (first_op >= 0 ? s_.ops[first_op] : op).process_state_bytes = RnnDropoutStateBytes();
    }
    // dy arrives batch-first like x left (a copy), dhy/dcy are zeros, dhx/
    // dcx are made whether needed or not.
    const int64_t dy_copy = x_copy > 0 ? yv.bytes : 0;
    const RnnWorkspace bwd_ws = RnnBackwardWorkspace(c);
    const int64_t ws = bwd_ws.bytes;
    op.rnn_workspace_fitted = op.rnn_workspace_fitted || !bwd_ws.derived;
    // cuDNN sizes the training workspace of both backward calls alike
    // (cudnnGetRNNTempSpaceSizes for the backward algorithm): the forward's
    // bytes when both run the standard algorithm, as the probe's backward
    // allocations show.
    op.bwd_workspace = ws;
    if (weights_grad) op.bwd_weight_workspace = ws;
    // _cudnn_rnn_backward's order: zeros_like(hx) (and cx) for dhy (dcy);
    // _cudnn_rnn_backward_input: x.contiguous(), dy.contiguous(), dx, dhx,
    // dcx, the workspace, then dy and x die; _cudnn_rnn_backward_weight:
    // x.contiguous() again, dw, its workspace; the zeros die at the end,
    // then whatever dx/dhx/dcx autograd does not need.
    op.bwd_zero_bytes.assign(states, hy);
    op.bwd_copy_bytes = {x_copy, dy_copy};
    op.grad_in0_transposed = !layout0;
    // dx is computed whether x needs it or not (it mutates the reserve).
    if (!s_.vals[x].requires_grad) op.bwd_temp_bytes.push_back(BytesOf(xshape, c.dtype));
    for (int i = 0; i < states; ++i) op.bwd_temp_bytes.push_back(hy);
    if (weights_grad) op.bwd_weight_copy_bytes = x_copy;
  }
  op.grad_in.assign(in.size(), false);
  op.grad_in_weight_pass.assign(in.size(), false);
  for (size_t i = 0; i < in.size(); ++i) {
    op.grad_in[i] = any_grad && s_.vals[in[i]].requires_grad;
    op.grad_in_weight_pass[i] = i >= 1 && i <= weights.size();
  }
  op.flat_weight_grads = true;
  const OpDef* def = FindOp("", c.mode);
  for (int li : r.layers) {
    if (def && def->flops) op.flops = SatAdd(op.flops, def->flops(g_, g_.nodes[li]));
  }
  s_.ops.push_back(std::move(op));
}

// MatMul8bitLt (bitsandbytes autograd/_functions.py) keeps its input A for
// backward whenever A or the weight needs a gradient, never the weight, and
// allocates the workspaces of Int8MatmulWorkspaces.
void Builder::AddInt8Matmul(int a, int weight, ExecOp* op) const {
  const Val& av = s_.vals[a];
  const Val& out = s_.vals[op->out[0]];
  if (av.shape.empty() || out.shape.empty()) return;
  int64_t a_numel = 0;
  int64_t elem = 0;
  if (!CheckedNumel(av.shape, &a_numel) || !DTypeBytes(av.dtype, 1, &elem)) return;
  const Int8MatmulBytes b = Int8MatmulWorkspaces(a_numel, av.shape.back(), out.shape.back(),
                                                 av.dtype == DType::kFloat16, elem, out.bytes);
  op->fwd_workspace = SatAdd(op->fwd_workspace, b.forward_workspace);
  std::vector<SavedRef> kept;
  bool has_a = false;
  for (const SavedRef& r : op->saved) {
    if (r.val == weight) continue;
    has_a = has_a || r.val == a;
    kept.push_back(r);
  }
  if (av.requires_grad && !has_a) {
    SavedRef r;
    r.val = a;
    kept.push_back(r);
  }
  op->saved = kept;
  if (av.requires_grad) op->bwd_workspace = SatAdd(op->bwd_workspace, b.backward_workspace);
}

int Builder::Dequantize(int v, const std::string& label) {
  const int root = Root(v);
  const QuantizedWeight& q = s_.quantized[root];
  const Val& w = s_.vals[v];
  Val d;
  d.name = s_.vals[root].name + ":dequantized";
  d.shape = w.shape;
  d.strides = w.strides.size() == w.shape.size() ? w.strides : ContiguousStrides(w.shape);
  // bitsandbytes dequantizes to the input's dtype (Linear4bit's compute
  // dtype); under autocast the half type.
  d.dtype = IsAmp(o_.precision) ? HalfType(o_.precision) : RunDtype(g_.tensors[root].dtype);
  d.bytes = BytesOf(d.shape, d.dtype);
  const int dv = NewVal(d);
  dequant_of_[dv] = root;
  ExecOp op;
  op.label = "dequantize(" + s_.vals[root].name + ") for " + label;
  op.op_type = "dequantize";
  op.in = {v};
  op.out = {dv};
  op.grad_in = {false};
  op.fwd_workspace = q.dequant_scratch_bytes;
  int64_t numel = 0;
  CheckedNumel(d.shape, &numel);
  op.flops = numel;
  s_.ops.push_back(op);
  return dv;
}

// PEFT's lora.Linear.forward (src/peft/tuners/lora/layer.py), one adapter,
// not merged: result = base_layer(x); x = x.to(lora_A.weight.dtype);
// result = result + lora_B(lora_A(dropout(x))) * scaling;
// result.to(the base result's dtype). The adapters are fp32 whatever the
// base's dtype (cast_adapter_dtype, autocast_adapter_dtype=True), A is
// [r, in], B [out, r]. Autograd keeps the dropout mask, lora_A's input
// (for A's gradient) and lora_B's input (for B's); the scalar multiply and
// the add keep nothing (derivatives.yaml: mul.Scalar, add.Tensor).
void Builder::AppendLora(const LinearLayer& l) {
  const Node& mm = g_.nodes[l.matmul];
  const Node& end = g_.nodes[l.end_node];
  if (mm.inputs.empty() || mm.inputs[0] < 0 || end.outputs.empty() || end.outputs[0] < 0) return;
  const int y_t = end.outputs[0];
  const int base = val_of_[y_t];
  int cur = val_of_[mm.inputs[0]];
  const std::vector<int64_t> xs = s_.vals[cur].shape;
  if (xs.empty() || s_.vals[base].shape.empty()) return;
  const int64_t r = o_.lora.r;
  auto param = [&](const std::string& name, std::vector<int64_t> shape) {
    Val p;
    p.name = l.module + "." + name;
    p.shape = std::move(shape);
    p.dtype = DType::kFloat;
    p.strides = ContiguousStrides(p.shape);
    p.bytes = BytesOf(p.shape, p.dtype);
    p.is_param = true;
    p.requires_grad = true;
    const int id = NewVal(p);
    s_.params.push_back(id);
    int64_t n = 0;
    CheckedNumel(s_.vals[id].shape, &n);
    s_.parameter_count += n;
    s_.lora_count += n;
    return id;
  };
  // Stored as the matmul reads them (A^T: [in, r], B^T: [r, out]).
  const int a_w = param("lora_A.default.weight", {l.in_features, r});
  const int b_w = param("lora_B.default.weight", {r, l.out_features});
  const std::string label = l.module + "/lora";
  int64_t rows = 1;
  for (size_t k = 0; k + 1 < xs.size(); ++k) rows = SatMulNonNeg(rows, xs[k]);
  if (s_.vals[cur].dtype != DType::kFloat) {
    cur = CastVal(cur, DType::kFloat, false, label + "/cast_input");
  }
  if (o_.lora.dropout > 0) {
    const int d = Synthetic(label + "/dropout", xs, DType::kFloat, {}, -1);
    int64_t numel = 0;
    CheckedNumel(xs, &numel);
    std::vector<SavedRef> mask = {{-1, BytesOf(xs, DType::kBool), "mask"}};
    AddCompute(op_names::kDropout, label + "/dropout", -1, FindOp("", op_names::kDropout), {cur},
               {d}, &mask, numel);
    cur = d;
  }
  const bool train = o_.mode == Mode::kTrain;
  auto linear = [&](int x, int w, int64_t out_features, const std::string& name) {
    std::vector<int64_t> shape = s_.vals[x].shape;
    shape.back() = out_features;
    const int y = Synthetic(label + "/" + name, shape, DType::kFloat, {}, -1);
    const int64_t k = s_.vals[x].shape.back();
    AddCompute(op_names::kMatMul, label + "/" + name, -1, FindOp("", op_names::kMatMul), {x, w},
               {y}, nullptr, SatProduct({2, rows, k, out_features}));
    // mm keeps self when mat2 requires grad, mat2 when self does
    // (derivatives.yaml: mm).
    ExecOp& op = s_.ops.back();
    op.saved.clear();
    if (train && s_.vals[op.in[1]].requires_grad) op.saved.push_back({op.in[0], 0, ""});
    if (train && s_.vals[op.in[0]].requires_grad) op.saved.push_back({op.in[1], 0, ""});
    return y;
  };
  const int a = linear(cur, a_w, r, "lora_A");
  const int b = linear(a, b_w, l.out_features, "lora_B");
  int64_t out_numel = 0;
  CheckedNumel(s_.vals[b].shape, &out_numel);
  const int scaled = Synthetic(label + "/scaling", s_.vals[b].shape, s_.vals[b].dtype, {}, -1);
  AddCompute(op_names::kMul, label + "/scaling", -1, FindOp("", op_names::kMul), {b, -1}, {scaled},
             nullptr, out_numel);
  const int sum = Synthetic(label + "/add", s_.vals[base].shape, s_.vals[base].dtype, {}, -1);
  AddCompute(op_names::kAdd, label + "/add", -1, FindOp("", op_names::kAdd), {base, scaled}, {sum},
             nullptr, out_numel);
  int result = sum;
  if (s_.vals[sum].dtype != s_.vals[base].dtype) {
    result = CastVal(sum, s_.vals[base].dtype, false, label + "/to_result_dtype");
  }
  val_of_[y_t] = result;
}

Result<Schedule> Builder::Build() {
  const std::vector<InitRole>& roles = a_.roles;
  Result<FineTuneSetup> ft = ResolveFineTune(g_, roles, a_.linears, o_);
  if (!ft.ok()) return ft.status();
  ft_ = std::move(ft.value());
  for (const LinearLayer& l : ft_.lora) lora_at_[l.end_node] = l;
  InitVals(roles);
  const Result<std::vector<int>>& order = a_.order;
  if (!order.ok()) return order.status();
  std::set<int> dropped;  // tensors the run-time SDPA call does not get
  std::set<int> needed;   // ... and those it gets in their place
  for (const AttentionRegion& r : a_.attention) {
    for (int ni : r.nodes) skipped_nodes_[ni] = 1;
    if (o_.attention == Attention::kFused && (r.causal_mask || r.full_mask)) {
      dropped.insert(r.mask);
      if (r.k_kv >= 0) {
        dropped.insert({r.k, r.v});
        needed.insert({r.k_kv, r.v_kv});
      }
    }
    if (o_.attention == Attention::kFused && r.bias_mask >= 0) {
      dropped.insert(r.mask);
      needed.insert(r.bias_mask);
    }
    regions_[r.last_node] = &r;
  }
  for (const RnnRegion& r : a_.rnn) {
    for (int ni : r.nodes) skipped_nodes_[ni] = 1;
    const int last = r.layers.back();
    rnn_regions_[last] = &r;
  }
  SkipUnusedFeeders(dropped, needed);
  for (const FusedRegion& r : a_.fused) {
    for (int ni : r.nodes) skipped_nodes_[ni] = 1;
    fused_[r.last_node] = &r;
  }
  // About one op per node (casts and copies add a few): reserved, so that a
  // large graph's ops are not held twice while the vector grows.
  s_.ops.reserve(s_.ops.size() + g_.nodes.size() + 64);
  for (int ni : order.value()) {
    const size_t first_op = s_.ops.size();
    ProcessNode(ni);
    auto lora = lora_at_.find(ni);
    if (lora != lora_at_.end()) AppendLora(lora->second);
    for (size_t k = first_op; k < s_.ops.size(); ++k) s_.ops[k].scope_node = ni;
  }
  MarkUnbindStacks();
  MarkCheckpointSegments(g_, o_, &s_);
  return std::move(s_);
}

// torch.onnx writes `x.unbind(d)` as one Slice (and Squeeze) per output,
// whose backwards would each make an x-sized zero tensor holding one
// gradient, summed. PyTorch runs one UnbindBackward instead
// (tools/autograd/derivatives.yaml: unbind_backward, an at::stack of the
// outputs' gradients), once all of them have arrived: one x-sized tensor,
// then the gradients it stacked are released (clip_n's qkv.unbind(0) in its
// H200 trace, clip_n_train_192_fp32: stack, then the three frees).
void Builder::MarkUnbindStacks() {
  std::map<std::pair<int, int>, std::vector<size_t>> calls;  // (call, input) -> ops
  for (size_t k = 0; k < s_.ops.size(); ++k) {
    const ExecOp& op = s_.ops[k];
    if (op.node < 0 || op.grad_kind != GradKind::kGather || op.in.empty() || op.in[0] < 0) {
      continue;
    }
    const int call = g_.nodes[op.node].unbind_call;
    if (call >= 0) calls[{call, op.in[0]}].push_back(k);
  }
  for (const auto& [key, ops] : calls) {
    if (ops.size() < 2) continue;
    for (size_t k : ops) s_.ops[k].stack_leader = static_cast<int>(ops.front());
  }
}

// Nodes whose outputs only the skipped nodes read (shape reads aside) do not
// run: the causal mask and the head repeat of an HF export when the model
// passes is_causal and enable_gqa instead.
void Builder::SkipUnusedFeeders(std::set<int> tensors, const std::set<int>& needed) {
  for (bool changed = true; changed;) {
    changed = false;
    for (auto it = tensors.begin(); it != tensors.end();) {
      const int p = g_.tensors[*it].producer;
      if (p < 0 || skipped_nodes_[p]) {
        it = tensors.erase(it);
        continue;
      }
      bool unused = true;
      for (int out : g_.nodes[p].outputs) {
        if (out < 0) continue;
        // What the SDPA call reads instead (the un-repeated keys and values)
        // runs, although only skipped nodes read it in the graph.
        if (needed.count(out)) unused = false;
        for (int o : g_.outputs) unused = unused && o != out;
        for (int c : g_.tensors[out].consumers) {
          if (skipped_nodes_[c]) continue;
          bool shape_only = true;
          for (int co : g_.nodes[c].outputs) {
            shape_only = shape_only && (co < 0 || g_.tensors[co].has_values);
          }
          unused = unused && shape_only;
        }
      }
      if (!unused) {
        ++it;
        continue;
      }
      skipped_nodes_[p] = 1;
      it = tensors.erase(it);
      for (int in : g_.nodes[p].inputs) {
        if (in >= 0) tensors.insert(in);
      }
      changed = true;
    }
  }
}

}  // namespace

void MarkCheckpointSegments(const Graph& g, const PlanOptions& options, Schedule* s) {
  // Overlapping patterns (layer1 and layer1.0): the outermost module that
  // matches wins, as a checkpoint around layer1 recomputes layer1.0 too;
  // so the order of the patterns does not matter.
  const std::vector<std::string>& segments = options.checkpoint_segments;
  auto segment_of = [&](const std::string& scope) {
    int best = -1;
    for (size_t i = 0; i < segments.size(); ++i) {
      const std::string& m = segments[i];
      const bool match =
          scope == m ||
          (scope.size() > m.size() && scope.compare(0, m.size(), m) == 0 && scope[m.size()] == '.');
      if (match && (best < 0 || m.size() < segments[best].size())) best = static_cast<int>(i);
    }
    return best;
  };
  int last_node = -1, last_segment = -1;
  for (ExecOp& op : s->ops) {
    if (options.mode != Mode::kTrain || op.scope_node < 0) {
      op.segment = -1;
      continue;
    }
    if (op.scope_node != last_node) {
      last_node = op.scope_node;
      last_segment = segment_of(g.nodes[last_node].scope);
    }
    op.segment = last_segment;
  }
}

namespace {

// One native_group_norm for an exported decomposition (see fusion.h). It
// runs in float32 under autocast (autocast_mode.h, AT_FORALL_FP32) and keeps
// its input, the weight, and mean and rstd of [N, G] in the input's dtype
// (tools/autograd/derivatives.yaml, native_group_norm).
void Builder::AddGroupNorm(const FusedRegion& r, int ni, const OpDef* def) {
  const std::string label = g_.nodes[ni].Label(ni);
  int x = val_of_[r.input];
  if (IsAmp(o_.precision) && IsHalf(s_.vals[x].dtype)) {
    x = CastVal(x, DType::kFloat, false, "autocast(" + label + ")");
  }
  std::vector<int> in = {x};
  if (r.weight >= 0) {
    in.push_back(val_of_[r.weight]);
    in.push_back(val_of_[r.bias]);
  }
  const Val& xv = s_.vals[x];
  std::vector<SavedRef> saves = {{x, 0, ""}};
  if (r.weight >= 0) saves.push_back({in[1], 0, ""});
  const std::vector<int64_t> stats = {xv.shape.empty() ? 0 : xv.shape[0], r.groups};
  saves.push_back({-1, BytesOf(stats, xv.dtype), "mean"});
  saves.push_back({-1, BytesOf(stats, xv.dtype), "rstd"});
  int64_t numel = 0;
  CheckedNumel(xv.shape, &numel);
  AddCompute(r.op_type, label, ni, def, in, {r.output}, &saves, SatMulNonNeg(8, numel));
  GroupNormWorkspaces(xv, r.groups, r.weight >= 0, &s_.ops.back());
}

// torch._weight_norm as one kernel (FusedRegion): w of v's shape; backward
// keeps v and g (parameters) and the float32 norms, of g's size
// (aten/src/ATen/native/cuda/WeightNorm.cu; the amp_bf16 trace of
// wav2vec2_ln_c b32, events 234-235: w 3.1 MiB, the norms 512 bytes).
void Builder::AddWeightNorm(const FusedRegion& r, int ni, const OpDef* def) {
  const int v = val_of_[r.input];
  const int gain = val_of_[r.weight];
  const std::vector<SavedRef> saves = {
      {v, 0, ""}, {gain, 0, ""}, {-1, BytesOf(s_.vals[gain].shape, DType::kFloat), "norms"}};
  int64_t numel = 0;
  CheckedNumel(s_.vals[v].shape, &numel);
  AddCompute(r.op_type, g_.nodes[ni].Label(ni), ni, def, {v, gain}, {r.output}, &saves,
             SatMulNonNeg(3, numel));
}

void Builder::ProcessNode(int ni) {
  {
    auto fit = fused_.find(ni);
    if (fit != fused_.end()) {
      const FusedRegion& r = *fit->second;
      const OpDef* def = FindOp("", r.op_type);
      if (def && def->group_norm_workspaces) {
        AddGroupNorm(r, ni, def);
        return;
      }
      if (r.op_type == op_names::kWeightNorm) {
        AddWeightNorm(r, ni, def);
        return;
      }
      AddCompute(r.op_type, g_.nodes[ni].Label(ni), ni, def, {val_of_[r.input]}, {r.output},
                 nullptr, -1);
      if (o_.mode == Mode::kTrain && s_.vals[val_of_[r.input]].requires_grad) {
        s_.ops.back().saved = {SavedRef{s_.ops.back().in[0], 0, ""}};
      }
      return;
    }
    auto rit = rnn_regions_.find(ni);
    if (rit != rnn_regions_.end()) {
      AppendRnn(*rit->second, g_.nodes[ni].Label(ni));
      return;
    }
    auto it = regions_.find(ni);
    if (it != regions_.end()) {
      AppendAttention(*it->second, g_.nodes[ni].Label(ni));
      ++s_.attention_regions;
      return;
    }
    if (skipped_nodes_[ni]) return;
    AddNode(ni);
  }
}

}  // namespace

ScheduleAnalysis AnalyzeForSchedule(const Graph& g) {
  ScheduleAnalysis a;
  a.roles = ClassifyInitializers(g);
  a.linears = FindLinearLayers(g, a.roles);
  a.order = TopologicalOrder(g);
  ReanalyzeRegions(g, &a);
  return a;
}

void ReanalyzeRegions(const Graph& g, ScheduleAnalysis* a) {
  a->attention = FindAttentionRegions(g);
  a->rnn = FindRnnRegions(g);
  a->fused = FindFusedRegions(g);
  a->rms_norms = FindRmsNormOps(g);
}

Result<Schedule> BuildSchedule(const Graph& g, const PlanOptions& options,
                               const ScheduleAnalysis& a) {
  Builder b(g, options, a);
  Result<Schedule> s = b.Build();
  if (s.ok()) {
    MarkModuleArguments(g, &s.value());
    MarkPythonLocals(g, &s.value());
  }
  return s;
}

Result<Schedule> BuildSchedule(const Graph& g, const PlanOptions& options) {
  return BuildSchedule(g, options, AnalyzeForSchedule(g));
}

}  // namespace memplan
