// The CUDA build: device facts and the replay of a plan on a real GPU.
//
// Everything we take from the device is owned by an RAII guard, so every
// return path (errors and Ctrl-C included) frees it; the device is reset last.

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <csignal>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gpu_probe/gpu_library.h"
#include "gpu_probe/gpu_probe.h"
#include "gpu_probe/kernels.h"
#include "gpu_probe/replay.h"

namespace memplan {

namespace {

Status CudaError(const char* what, cudaError_t e) {
  return Status::Error(std::string(what) + ": " + cudaGetErrorString(e));
}

Status CublasError(const char* what, cublasStatus_t s) {
  return Status::Error(std::string(what) + ": cuBLAS status " + std::to_string(s));
}

Status CudnnError(const char* what, cudnnStatus_t s) {
  return Status::Error(std::string(what) + ": " + cudnnGetErrorString(s));
}

#define MP_CUDA(expr)                                       \
  do {                                                      \
    cudaError_t mp_e = (expr);                              \
    if (mp_e != cudaSuccess) return CudaError(#expr, mp_e); \
  } while (0)

#define MP_CUDNN(expr)                                                \
  do {                                                                \
    cudnnStatus_t mp_s = (expr);                                      \
    if (mp_s != CUDNN_STATUS_SUCCESS) return CudnnError(#expr, mp_s); \
  } while (0)

/// cudaMalloc'd memory, freed on destruction.
class DeviceMem {
 public:
  DeviceMem() = default;
  DeviceMem(const DeviceMem&) = delete;
  DeviceMem& operator=(const DeviceMem&) = delete;
  ~DeviceMem() {
    if (p_ != nullptr) {
      cudaFree(p_);
    }
  }
  /// cudaMalloc; a failure leaves this empty (the error is returned, and a
  /// cudaErrorMemoryAllocation is cleared so later calls still work).
  cudaError_t Allocate(int64_t bytes) {
    cudaError_t e = cudaMalloc(&p_, static_cast<size_t>(bytes));
    if (e != cudaSuccess) {
      p_ = nullptr;
      cudaGetLastError();
      return e;
    }
    bytes_ = bytes;
    return cudaSuccess;
  }
  char* get() const { return static_cast<char*>(p_); }
  int64_t bytes() const { return bytes_; }

 private:
  void* p_ = nullptr;
  int64_t bytes_ = 0;
};

/// Resets the device when the scope ends (declared first, destroyed last).
class DeviceResetGuard {
 public:
  explicit DeviceResetGuard(bool active) : active_(active) {}
  ~DeviceResetGuard() {
    if (active_) {
      cudaDeviceSynchronize();
      cudaDeviceReset();
    }
  }

 private:
  bool active_;
};

struct StreamGuard {
  cudaStream_t s = nullptr;
  ~StreamGuard() {
    if (s != nullptr) {
      cudaStreamDestroy(s);
    }
  }
};
struct CublasGuard {
  cublasHandle_t h = nullptr;
  ~CublasGuard() {
    if (h != nullptr) {
      cublasDestroy(h);
    }
  }
};
struct CudnnGuard {
  cudnnHandle_t h = nullptr;
  ~CudnnGuard() {
    if (h != nullptr) {
      cudnnDestroy(h);
    }
  }
};
struct EventGuard {
  cudaEvent_t e = nullptr;
  ~EventGuard() {
    if (e != nullptr) {
      cudaEventDestroy(e);
    }
  }
};

volatile std::sig_atomic_t g_interrupted = 0;
extern "C" void OnSigint(int) { g_interrupted = 1; }

/// Routes SIGINT to a flag for the scope's lifetime.
class SigintGuard {
 public:
  SigintGuard() {
    g_interrupted = 0;
    struct sigaction sa = {};
    sa.sa_handler = OnSigint;
    sigemptyset(&sa.sa_mask);
    installed_ = sigaction(SIGINT, &sa, &old_) == 0;
  }
  ~SigintGuard() {
    if (installed_) {
      sigaction(SIGINT, &old_, nullptr);
    }
  }

 private:
  struct sigaction old_ = {};
  bool installed_ = false;
};

/// Device memory in use (total - free).
Result<int64_t> UsedBytes(int64_t* free_out = nullptr, int64_t* total_out = nullptr) {
  size_t free_b = 0, total_b = 0;
  MP_CUDA(cudaMemGetInfo(&free_b, &total_b));
  if (free_out != nullptr) {
    *free_out = static_cast<int64_t>(free_b);
  }
  if (total_out != nullptr) {
    *total_out = static_cast<int64_t>(total_b);
  }
  return static_cast<int64_t>(total_b - free_b);
}

Status NoDevice(cudaError_t e) {
  return Status::Error(std::string("no CUDA device found (") + cudaGetErrorString(e) + ")");
}

Status CheckDevices(int* count) {
  cudaError_t e = cudaGetDeviceCount(count);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return NoDevice(e);
  }
  if (*count == 0) {
    return NoDevice(cudaErrorNoDevice);
  }
  return Status();
}

cudaDataType_t CudaType(DType t) {
  switch (t) {
    case DType::kBFloat16:
      return CUDA_R_16BF;
    case DType::kFloat16:
      return CUDA_R_16F;
    default:
      return CUDA_R_32F;
  }
}

cudnnDataType_t CudnnType(DType t) {
  switch (t) {
    case DType::kBFloat16:
      return CUDNN_DATA_BFLOAT16;
    case DType::kFloat16:
      return CUDNN_DATA_HALF;
    default:
      return CUDNN_DATA_FLOAT;
  }
}

ElemType ElemOf(DType t) {
  switch (t) {
    case DType::kBFloat16:
      return ElemType::kBF16;
    case DType::kFloat16:
      return ElemType::kF16;
    default:
      return ElemType::kF32;
  }
}

const char* FwdAlgoName(cudnnConvolutionFwdAlgo_t a) {
  static const char* const kNames[] = {
      "IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT", "FFT", "FFT_TILING",
      "WINOGRAD",      "WINOGRAD_NONFUSED"};
  const int i = static_cast<int>(a);
  return i >= 0 && i < 8 ? kNames[i] : "?";
}
const char* BwdDataAlgoName(cudnnConvolutionBwdDataAlgo_t a) {
  static const char* const kNames[] = {"ALGO_0",     "ALGO_1",   "FFT",
                                       "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"};
  const int i = static_cast<int>(a);
  return i >= 0 && i < 6 ? kNames[i] : "?";
}
const char* BwdFilterAlgoName(cudnnConvolutionBwdFilterAlgo_t a) {
  static const char* const kNames[] = {
      "ALGO_0", "ALGO_1", "FFT", "ALGO_3", "WINOGRAD", "WINOGRAD_NONFUSED", "FFT_TILING"};
  const int i = static_cast<int>(a);
  return i >= 0 && i < 7 ? kNames[i] : "?";
}

/// State of one validation run.
struct Replay {
  const ValidationRequest* req = nullptr;
  ValidationReport* report = nullptr;
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  cudnnHandle_t cudnn = nullptr;
  std::vector<std::unique_ptr<DeviceMem>> segments;  // Index = simulated segment.
  std::unique_ptr<DeviceMem> cublas_workspace;
  int64_t extra_live = 0;  // Bytes on top of the segments (workspaces, operands).
  uint32_t seed = 1;

  Status Sample() {
    Result<int64_t> used = UsedBytes();
    if (!used.ok()) {
      return used.status();
    }
    report->measured_device_peak = std::max(report->measured_device_peak, used.value());
    return Status();
  }
  void AddExtra(int64_t b) {
    extra_live += b;
    report->extra_bytes_peak = std::max(report->extra_bytes_peak, extra_live);
  }

  /// A buffer on top of the plan, if the margin allows; nullptr-free result
  /// with ok status and empty buffer means "does not fit".
  Status AllocateOnTop(int64_t bytes, DeviceMem* out, bool* fitted) {
    *fitted = false;
    int64_t free_b = 0;
    Result<int64_t> used = UsedBytes(&free_b);
    if (!used.ok()) {
      return used.status();
    }
    if (!MarginAllows(free_b, req->safety_margin_bytes, bytes)) {
      return Status();
    }
    cudaError_t e = out->Allocate(std::max<int64_t>(bytes, 1));
    if (e == cudaErrorMemoryAllocation) {
      return Status();
    }
    if (e != cudaSuccess) {
      return CudaError("cudaMalloc (on top)", e);
    }
    *fitted = true;
    return Status();
  }

  /// Times `launch` (warm-up once, then timing_runs runs): median in ms.
  template <typename F>
  Result<double> TimeMedian(F launch) {
    Status s = launch();
    if (!s.ok()) {
      return s;
    }
    MP_CUDA(cudaStreamSynchronize(stream));
    EventGuard start, stop;
    MP_CUDA(cudaEventCreate(&start.e));
    MP_CUDA(cudaEventCreate(&stop.e));
    std::vector<float> times;
    const int runs = std::max(1, req->timing_runs);
    for (int r = 0; r < runs; ++r) {
      MP_CUDA(cudaEventRecord(start.e, stream));
      s = launch();
      if (!s.ok()) {
        return s;
      }
      MP_CUDA(cudaEventRecord(stop.e, stream));
      MP_CUDA(cudaEventSynchronize(stop.e));
      float ms = 0;
      MP_CUDA(cudaEventElapsedTime(&ms, start.e, stop.e));
      times.push_back(ms);
    }
    std::sort(times.begin(), times.end());
    return static_cast<double>(times[times.size() / 2]);
  }

  Status RunKernel(const KernelShape& shape);
  Status RunGemm(const KernelShape& shape, DType t, const std::vector<char*>& ops,
                 const std::vector<int64_t>& ob);
  Status RunConv(const KernelShape& shape, DType t, const std::vector<char*>& ops,
                 const std::vector<int64_t>& ob);
};

KernelResult MakeResult(const KernelShape& shape, const char* pass, double ms, int64_t flops,
                        int64_t traffic) {
  KernelResult r;
  r.shape = shape;
  r.pass = pass;
  r.ms = ms;
  if (ms > 0) {
    r.tflops = static_cast<double>(flops) / (ms * 1e-3) / 1e12;
    r.gbs = static_cast<double>(traffic) / (ms * 1e-3) / 1e9;
  }
  return r;
}

Status Replay::RunKernel(const KernelShape& shape) {
  const DType t = KernelDType(shape, req->compute_dtype);
  Result<std::vector<int64_t>> ob = KernelOperandBytes(shape, t);
  if (!ob.ok()) {
    return ob.status();
  }
  // Operands inside the segments created so far; the rest on top.
  std::vector<int64_t> seg_bytes;
  for (const auto& s : segments) {
    seg_bytes.push_back(s ? s->bytes() : 0);
  }
  std::vector<OperandSlot> slots = CarveOperands(seg_bytes, ob.value());
  std::vector<std::unique_ptr<DeviceMem>> on_top;
  std::vector<char*> ops;
  int64_t top_bytes = 0;
  for (size_t i = 0; i < slots.size(); ++i) {
    if (slots[i].segment >= 0) {
      ops.push_back(segments[slots[i].segment]->get() + slots[i].offset);
      continue;
    }
    on_top.push_back(std::make_unique<DeviceMem>());
    bool fitted = false;
    Status s = AllocateOnTop(ob.value()[i], on_top.back().get(), &fitted);
    if (!s.ok()) {
      return s;
    }
    if (!fitted) {
      KernelResult r = MakeResult(shape, "skipped", 0, 0, 0);
      r.algo = "skipped: operands do not fit in the plan's segments nor on top of them";
      report->kernels.push_back(r);
      extra_live -= top_bytes;
      return Status();
    }
    MP_CUDA(LaunchFill(on_top.back()->get(), ob.value()[i], seed++, stream));
    top_bytes += ob.value()[i];
    AddExtra(ob.value()[i]);
    ops.push_back(on_top.back()->get());
  }
  Status s;
  switch (shape.kind) {
    case KernelShape::kGemm:
      s = RunGemm(shape, t, ops, ob.value());
      break;
    case KernelShape::kConv:
      s = RunConv(shape, t, ops, ob.value());
      break;
    case KernelShape::kElementwise: {
      const int64_t numel = shape.dims[0];
      Status sampled = Sample();
      if (!sampled.ok()) {
        return sampled;
      }
      Result<double> ms = TimeMedian([&]() -> Status {
        MP_CUDA(LaunchRowNorm(ops[0], ops[1], numel, ElemOf(t), stream));
        return Status();
      });
      if (!ms.ok()) {
        return ms.status();
      }
      KernelResult r = MakeResult(shape, "elementwise", ms.value(), KernelFlops(shape).value(),
                                  KernelTrafficBytes(shape, "elementwise", ob.value()));
      r.algo = "memplan row-norm (1024-element rows)";
      report->kernels.push_back(r);
      break;
    }
  }
  if (!s.ok()) {
    return s;
  }
  s = Sample();
  extra_live -= top_bytes;
  return s;
}

Status Replay::RunGemm(const KernelShape& shape, DType t, const std::vector<char*>& ops,
                       const std::vector<int64_t>& ob) {
  const int64_t m = shape.dims[0], n = shape.dims[1], k = shape.dims[2];
  const int64_t batch = shape.dims.size() > 3 ? shape.dims[3] : 1;
  const int64_t kMaxInt = 0x7fffffff;
  if (m > kMaxInt || n > kMaxInt || k > kMaxInt || batch > kMaxInt) {
    KernelResult r = MakeResult(shape, "gemm", 0, 0, 0);
    r.algo = "skipped: a GEMM dimension exceeds cuBLAS's int range";
    report->kernels.push_back(r);
    return Status();
  }
  if (!cublas_workspace && req->cublas_workspace_bytes > 0) {
    auto ws = std::make_unique<DeviceMem>();
    bool fitted = false;
    Status s = AllocateOnTop(req->cublas_workspace_bytes, ws.get(), &fitted);
    if (!s.ok()) {
      return s;
    }
    if (fitted) {
      cublasStatus_t cs = cublasSetWorkspace(cublas, ws->get(), ws->bytes());
      if (cs != CUBLAS_STATUS_SUCCESS) {
        return CublasError("cublasSetWorkspace", cs);
      }
      AddExtra(ws->bytes());
      cublas_workspace = std::move(ws);
    }
  }
  Status sampled = Sample();
  if (!sampled.ok()) {
    return sampled;
  }
  const cudaDataType_t ct = CudaType(t);
  const float alpha = 1.0f, beta = 0.0f;
  auto launch = [&]() -> Status {
    // Column-major C[m x n] = A[m x k] * B[k x n], fp32 accumulation.
    cublasStatus_t cs = cublasGemmStridedBatchedEx(
        cublas, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(m), static_cast<int>(n),
        static_cast<int>(k), &alpha, ops[0], ct, static_cast<int>(m), m * k, ops[1], ct,
        static_cast<int>(k), k * n, &beta, ops[2], ct, static_cast<int>(m), m * n,
        static_cast<int>(batch), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (cs != CUBLAS_STATUS_SUCCESS) {
      return CublasError("cublasGemmStridedBatchedEx", cs);
    }
    return Status();
  };
  Result<double> ms = TimeMedian(launch);
  if (!ms.ok()) {
    return ms.status();
  }
  KernelResult r = MakeResult(shape, "gemm", ms.value(), KernelFlops(shape).value(),
                              KernelTrafficBytes(shape, "gemm", ob));
  r.workspace_bytes = cublas_workspace ? cublas_workspace->bytes() : 0;
  r.algo = std::string("cublasGemmStridedBatchedEx ") + DTypeName(t) + " COMPUTE_32F";
  report->kernels.push_back(r);
  return Status();
}

struct CudnnDescs {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  ~CudnnDescs() {
    if (x != nullptr) {
      cudnnDestroyTensorDescriptor(x);
    }
    if (y != nullptr) {
      cudnnDestroyTensorDescriptor(y);
    }
    if (w != nullptr) {
      cudnnDestroyFilterDescriptor(w);
    }
    if (conv != nullptr) {
      cudnnDestroyConvolutionDescriptor(conv);
    }
  }
};

Status Replay::RunConv(const KernelShape& shape, DType t, const std::vector<char*>& ops,
                       const std::vector<int64_t>& ob) {
  const auto& d = shape.dims;
  int64_t ho = 0, wo = 0;
  ConvOutputHw(shape, &ho, &wo);
  const int stride = static_cast<int>(d.size() > 7 ? d[7] : 1);
  const int pad = static_cast<int>(d.size() > 8 ? d[8] : 0);
  for (int64_t b : ob) {
    if (b / KernelElementBytes(t) > 0x7fffffff) {
      KernelResult r = MakeResult(shape, "skipped", 0, 0, 0);
      r.algo = "skipped: a conv tensor exceeds cuDNN's 2^31 elements";
      report->kernels.push_back(r);
      return Status();
    }
  }
  const cudnnDataType_t dt = CudnnType(t);
  CudnnDescs desc;
  MP_CUDNN(cudnnCreateTensorDescriptor(&desc.x));
  MP_CUDNN(cudnnCreateTensorDescriptor(&desc.y));
  MP_CUDNN(cudnnCreateFilterDescriptor(&desc.w));
  MP_CUDNN(cudnnCreateConvolutionDescriptor(&desc.conv));
  MP_CUDNN(cudnnSetTensor4dDescriptor(desc.x, CUDNN_TENSOR_NCHW, dt, static_cast<int>(d[0]),
                                      static_cast<int>(d[1]), static_cast<int>(d[2]),
                                      static_cast<int>(d[3])));
  MP_CUDNN(cudnnSetFilter4dDescriptor(desc.w, dt, CUDNN_TENSOR_NCHW, static_cast<int>(d[4]),
                                      static_cast<int>(d[1]), static_cast<int>(d[5]),
                                      static_cast<int>(d[6])));
  MP_CUDNN(cudnnSetConvolution2dDescriptor(desc.conv, pad, pad, stride, stride, 1, 1,
                                           CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  // fp32: cuDNN's default math allows TF32, as PyTorch's cudnn.allow_tf32 does.
  MP_CUDNN(cudnnSetConvolutionMathType(
      desc.conv, t == DType::kFloat ? CUDNN_DEFAULT_MATH : CUDNN_TENSOR_OP_MATH));
  int on = 0, oc = 0, oh = 0, ow = 0;
  MP_CUDNN(cudnnGetConvolution2dForwardOutputDim(desc.conv, desc.x, desc.w, &on, &oc, &oh, &ow));
  if (oh != ho || ow != wo) {
    return Status::Error("kernel '" + shape.node + "': cuDNN output " + std::to_string(oh) + "x" +
                         std::to_string(ow) + ", expected " + std::to_string(ho) + "x" +
                         std::to_string(wo));
  }
  MP_CUDNN(cudnnSetTensor4dDescriptor(desc.y, CUDNN_TENSOR_NCHW, dt, on, oc, oh, ow));
  const int64_t flops = KernelFlops(shape).value();
  const float alpha = 1.0f, beta = 0.0f;
  char* x = ops[0];
  char* w = ops[1];
  char* y = ops[2];  // Also dy.
  char* dx = ops[3];
  char* dw = ops[4];

  // Runs one pass: the heuristics' first algorithm whose workspace fits.
  auto run_pass = [&](const char* pass, int count, auto get_algos, auto get_ws, auto name,
                      auto exec) -> Status {
    std::vector<int> algos;
    std::string last_error = "no algorithm's workspace fits";
    get_algos(count, &algos);
    if (algos.empty()) {
      last_error = "cuDNN's heuristics offer no algorithm";
    }
    for (int a : algos) {
      size_t ws_bytes = 0;
      if (!get_ws(a, &ws_bytes)) {
        continue;
      }
      DeviceMem ws;
      bool fitted = true;
      if (ws_bytes > 0) {
        Status s = AllocateOnTop(static_cast<int64_t>(ws_bytes), &ws, &fitted);
        if (!s.ok()) {
          return s;
        }
      }
      if (!fitted) {
        continue;
      }
      AddExtra(static_cast<int64_t>(ws_bytes));
      Status sampled = Sample();
      if (!sampled.ok()) {
        return sampled;
      }
      Result<double> ms = TimeMedian([&]() { return exec(a, ws.get(), ws_bytes); });
      extra_live -= static_cast<int64_t>(ws_bytes);
      if (!ms.ok()) {  // Offered but refused at run time: try the next one.
        last_error = ms.message();
        continue;
      }
      KernelResult r =
          MakeResult(shape, pass, ms.value(), flops, KernelTrafficBytes(shape, pass, ob));
      r.workspace_bytes = static_cast<int64_t>(ws_bytes);
      r.algo = name(a);
      report->kernels.push_back(r);
      WorkspaceCheck wc;
      wc.node = shape.node;
      wc.pass = pass;
      wc.cudnn_bytes = static_cast<int64_t>(ws_bytes);
      report->workspaces.push_back(wc);
      return Status();
    }
    KernelResult r = MakeResult(shape, pass, 0, 0, 0);
    r.algo = "skipped: " + last_error;
    report->kernels.push_back(r);
    return Status();
  };

  Status s = run_pass(
      "conv_fwd", CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
      [&](int count, std::vector<int>* out) {
        std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(count);
        int got = 0;
        if (cudnnGetConvolutionForwardAlgorithm_v7(cudnn, desc.x, desc.w, desc.conv, desc.y, count,
                                                   &got, perf.data()) != CUDNN_STATUS_SUCCESS) {
          return;
        }
        for (int i = 0; i < got; ++i) {
          if (perf[i].status == CUDNN_STATUS_SUCCESS) {
            out->push_back(perf[i].algo);
          }
        }
      },
      [&](int a, size_t* ws) {
        return cudnnGetConvolutionForwardWorkspaceSize(cudnn, desc.x, desc.w, desc.conv, desc.y,
                                                       static_cast<cudnnConvolutionFwdAlgo_t>(a),
                                                       ws) == CUDNN_STATUS_SUCCESS;
      },
      [](int a) {
        return std::string("cudnn fwd ") + FwdAlgoName(static_cast<cudnnConvolutionFwdAlgo_t>(a));
      },
      [&](int a, void* ws, size_t ws_bytes) -> Status {
        MP_CUDNN(cudnnConvolutionForward(cudnn, &alpha, desc.x, x, desc.w, w, desc.conv,
                                         static_cast<cudnnConvolutionFwdAlgo_t>(a), ws, ws_bytes,
                                         &beta, desc.y, y));
        return Status();
      });
  if (!s.ok()) {
    return s;
  }

  s = run_pass(
      "conv_bwd_data", CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
      [&](int count, std::vector<int>* out) {
        std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perf(count);
        int got = 0;
        if (cudnnGetConvolutionBackwardDataAlgorithm_v7(cudnn, desc.w, desc.y, desc.conv, desc.x,
                                                        count, &got,
                                                        perf.data()) != CUDNN_STATUS_SUCCESS) {
          return;
        }
        for (int i = 0; i < got; ++i) {
          if (perf[i].status == CUDNN_STATUS_SUCCESS) {
            out->push_back(perf[i].algo);
          }
        }
      },
      [&](int a, size_t* ws) {
        return cudnnGetConvolutionBackwardDataWorkspaceSize(
                   cudnn, desc.w, desc.y, desc.conv, desc.x,
                   static_cast<cudnnConvolutionBwdDataAlgo_t>(a), ws) == CUDNN_STATUS_SUCCESS;
      },
      [](int a) {
        return std::string("cudnn bwd_data ") +
               BwdDataAlgoName(static_cast<cudnnConvolutionBwdDataAlgo_t>(a));
      },
      [&](int a, void* ws, size_t ws_bytes) -> Status {
        MP_CUDNN(cudnnConvolutionBackwardData(cudnn, &alpha, desc.w, w, desc.y, y, desc.conv,
                                              static_cast<cudnnConvolutionBwdDataAlgo_t>(a), ws,
                                              ws_bytes, &beta, desc.x, dx));
        return Status();
      });
  if (!s.ok()) {
    return s;
  }

  return run_pass(
      "conv_bwd_filter", CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
      [&](int count, std::vector<int>* out) {
        std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> perf(count);
        int got = 0;
        if (cudnnGetConvolutionBackwardFilterAlgorithm_v7(cudnn, desc.x, desc.y, desc.conv, desc.w,
                                                          count, &got,
                                                          perf.data()) != CUDNN_STATUS_SUCCESS) {
          return;
        }
        for (int i = 0; i < got; ++i) {
          if (perf[i].status == CUDNN_STATUS_SUCCESS) {
            out->push_back(perf[i].algo);
          }
        }
      },
      [&](int a, size_t* ws) {
        return cudnnGetConvolutionBackwardFilterWorkspaceSize(
                   cudnn, desc.x, desc.y, desc.conv, desc.w,
                   static_cast<cudnnConvolutionBwdFilterAlgo_t>(a), ws) == CUDNN_STATUS_SUCCESS;
      },
      [](int a) {
        return std::string("cudnn bwd_filter ") +
               BwdFilterAlgoName(static_cast<cudnnConvolutionBwdFilterAlgo_t>(a));
      },
      [&](int a, void* ws, size_t ws_bytes) -> Status {
        MP_CUDNN(cudnnConvolutionBackwardFilter(cudnn, &alpha, desc.x, x, desc.y, y, desc.conv,
                                                static_cast<cudnnConvolutionBwdFilterAlgo_t>(a), ws,
                                                ws_bytes, &beta, desc.w, dw));
        return Status();
      });
}

double BandwidthGbs(int device) {
  int clock_khz = 0, bus_bits = 0;
  if (cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, device) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return 2.0 * clock_khz * 1e3 * (bus_bits / 8.0) / 1e9;
}

/// Context + handles on `device`, measured step by step; handles stay open.
Status OpenDevice(int device, DeviceInfo* info, CublasGuard* cublas, CudnnGuard* cudnn) {
  MP_CUDA(cudaSetDevice(device));
  MP_CUDA(cudaFree(nullptr));  // Creates the primary context.
  int64_t free_b = 0, total_b = 0;
  Result<int64_t> used0 = UsedBytes(&free_b, &total_b);
  if (!used0.ok()) {
    return used0.status();
  }
  cublasStatus_t cs = cublasCreate(&cublas->h);
  if (cs != CUBLAS_STATUS_SUCCESS) {
    return CublasError("cublasCreate", cs);
  }
  Result<int64_t> used1 = UsedBytes();
  if (!used1.ok()) {
    return used1.status();
  }
  MP_CUDNN(cudnnCreate(&cudnn->h));
  Result<int64_t> used2 = UsedBytes(&free_b, &total_b);
  if (!used2.ok()) {
    return used2.status();
  }
  info->index = device;
  info->total_bytes = total_b;
  info->free_bytes = free_b;
  info->runtime_bytes = used0.value();
  info->cublas_bytes = used1.value() - used0.value();
  info->cudnn_bytes = used2.value() - used1.value();
  info->context_bytes = used2.value();
  return Status();
}

Status DescribeDevice(int device, DeviceInfo* info) {
  cudaDeviceProp prop;
  MP_CUDA(cudaGetDeviceProperties(&prop, device));
  info->name = prop.name;
  info->cc_major = prop.major;
  info->cc_minor = prop.minor;
  info->sm_count = prop.multiProcessorCount;
  info->mem_bandwidth_gbs = BandwidthGbs(device);
  return Status();
}

}  // namespace

namespace gpu_impl {

Result<std::vector<DeviceInfo>> ProbeDevices() {
  int count = 0;
  Status s = CheckDevices(&count);
  if (!s.ok()) {
    return s;
  }
  std::vector<DeviceInfo> out;
  for (int i = 0; i < count; ++i) {
    DeviceResetGuard reset(true);
    DeviceInfo info;
    {
      CublasGuard cublas;
      CudnnGuard cudnn;
      s = OpenDevice(i, &info, &cublas, &cudnn);
      if (!s.ok()) {
        return s;
      }
    }
    s = DescribeDevice(i, &info);
    if (!s.ok()) {
      return s;
    }
    out.push_back(info);
  }
  return out;
}

Result<ValidationReport> ValidateOnGpu(const ValidationRequest& req) {
  // Everything that can be checked without the GPU comes first.
  for (const KernelShape& k : req.kernels) {
    Result<std::vector<int64_t>> ob = KernelOperandBytes(k, KernelDType(k, req.compute_dtype));
    if (!ob.ok()) {
      return ob.status();
    }
  }
  AllocatorConfig config = req.allocator;
  config.device_limit = 0;  // The real GPU is the limit.
  Result<SimResult> sim = SimulateCachingAllocator(req.events, config);
  if (!sim.ok()) {
    return sim.status();
  }
  Result<std::vector<ReplayStep>> steps =
      BuildReplaySchedule(req.events, sim.value(), req.kernel_event, req.kernels.size());
  if (!steps.ok()) {
    return steps.status();
  }
  const std::vector<int> selected = SelectKernels(req.kernels, req.max_kernels);

  int count = 0;
  Status s = CheckDevices(&count);
  if (!s.ok()) {
    return s;
  }
  if (req.device < 0 || req.device >= count) {
    return Status::Error("device " + std::to_string(req.device) + " does not exist (" +
                         std::to_string(count) + " found)");
  }

  ValidationReport report;
  report.predicted_allocated = req.predicted_allocated;
  report.predicted_reserved = req.predicted_reserved;
  report.predicted_device = req.predicted_device;
  report.simulated_allocated_peak = sim->peak_allocated;
  report.simulated_reserved_peak = sim->peak_reserved;

  // Declaration order = reverse destruction order: memory, then handles, then
  // the stream, then the device reset.
  DeviceResetGuard reset(true);
  StreamGuard stream;
  CublasGuard cublas;
  CudnnGuard cudnn;
  DeviceInfo info;
  s = OpenDevice(req.device, &info, &cublas, &cudnn);
  if (!s.ok()) {
    return s;
  }
  report.context_bytes = info.context_bytes;
  report.measured_device_peak = info.context_bytes;
  if (req.measured_context && req.predicted_reserved > 0) {
    report.predicted_device = req.predicted_reserved + info.context_bytes;
  }
  s = RefuseBeyondDevice(sim->peak_reserved, info.free_bytes, req.safety_margin_bytes, req.device);
  if (!s.ok()) {
    return s;
  }
  MP_CUDA(cudaStreamCreateWithFlags(&stream.s, cudaStreamNonBlocking));
  cublasStatus_t cs = cublasSetStream(cublas.h, stream.s);
  if (cs != CUBLAS_STATUS_SUCCESS) {
    return CublasError("cublasSetStream", cs);
  }
  MP_CUDNN(cudnnSetStream(cudnn.h, stream.s));

  Replay rp;
  rp.req = &req;
  rp.report = &report;
  rp.stream = stream.s;
  rp.cublas = cublas.h;
  rp.cudnn = cudnn.h;
  rp.segments.resize(sim->segment_bytes.size());

  SigintGuard sigint;
  int64_t reserved = 0, allocated = 0;
  std::vector<bool> ran(req.kernels.size(), false);
  for (const ReplayStep& step : steps.value()) {
    if (g_interrupted) {
      return Status::Error("validation interrupted (SIGINT) at event " +
                           std::to_string(step.event) + "; GPU memory freed");
    }
    switch (step.kind) {
      case ReplayStep::kSegment: {
        int64_t free_b = 0;
        Result<int64_t> used = UsedBytes(&free_b);
        if (!used.ok()) {
          return used.status();
        }
        auto seg = std::make_unique<DeviceMem>();
        cudaError_t e = cudaErrorMemoryAllocation;
        if (MarginAllows(free_b, req.safety_margin_bytes, step.bytes)) {
          e = seg->Allocate(step.bytes);
        }
        if (e == cudaErrorMemoryAllocation) {
          report.fits = false;
          report.oom_at_event = static_cast<int64_t>(step.event);
          report.message = "segment of " + std::to_string(step.bytes) + " bytes, " +
                           std::to_string(free_b) + " free, margin " +
                           std::to_string(req.safety_margin_bytes);
          break;
        }
        if (e != cudaSuccess) {
          return CudaError("cudaMalloc (segment)", e);
        }
        MP_CUDA(LaunchFill(seg->get(), step.bytes, rp.seed++, stream.s));
        rp.segments[step.segment] = std::move(seg);
        reserved += step.bytes;
        report.measured_reserved_peak = std::max(report.measured_reserved_peak, reserved);
        s = rp.Sample();
        if (!s.ok()) {
          return s;
        }
        break;
      }
      case ReplayStep::kAlloc:
        MP_CUDA(LaunchFill(rp.segments[step.segment]->get() + step.offset, step.bytes, rp.seed++,
                           stream.s));
        allocated += step.bytes;
        report.measured_allocated_peak = std::max(report.measured_allocated_peak, allocated);
        break;
      case ReplayStep::kFree:
        allocated -= step.bytes;
        break;
      case ReplayStep::kKernel: {
        const int rep = selected[step.kernel];
        if (rep < 0 || ran[rep]) {
          break;
        }
        ran[rep] = true;
        s = rp.RunKernel(req.kernels[rep]);
        if (!s.ok()) {
          return s;
        }
        break;
      }
    }
    if (!report.fits) {
      break;
    }
  }
  MP_CUDA(cudaStreamSynchronize(stream.s));
  s = rp.Sample();
  if (!s.ok()) {
    return s;
  }
  FinishReport(req.tolerance, &report);
  return report;
}

}  // namespace gpu_impl

}  // namespace memplan
