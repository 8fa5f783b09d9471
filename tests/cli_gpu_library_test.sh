#!/bin/bash
# End to end: the memplan executable links no GPU library; `probe`,
# `validate` and `advise --device auto` load libmemplan_gpu.so at run time and
# say in one line when it is absent or unloadable; the CPU commands run
# without it, in little memory.
# Usage: cli_gpu_library_test.sh MEMPLAN_BINARY GPU_BUILT(0|1) MODELS_DIR
set -u
BIN=$1
GPU_BUILT=$2
MODELS=$3
source "$(dirname "$0")/test_lib.sh"
GPU_LIBS='lib(cuda|cudart|cublas|cublasLt|cudnn[a-z_]*|nvrtc|nvJitLink)\.so'
# one_error NAME TEXT: stderr is exactly one line, an error containing TEXT.
one_error() {
  local name=$1 text=$2
  if [ "$(wc -l <"$T/err")" = 1 ] && grep -q '^memplan: error: ' "$T/err" &&
    grep -qF -- "$text" "$T/err"; then
    pass "$name: one error line naming '$text'"
  else
    fail "$name: want one 'memplan: error:' line containing '$text', got:"
    sed 's/^/  | /' "$T/err" | head -5
  fi
}

# ------------------------------------------------ what the executable links
ldd "$BIN" >"$T/ldd" 2>&1
if grep -Eq "$GPU_LIBS" "$T/ldd"; then
  fail "memplan links GPU libraries:"; grep -E "$GPU_LIBS" "$T/ldd" | sed 's/^/  | /'
else
  pass "ldd memplan: no CUDA, cuBLAS or cuDNN library"
fi
LIB=$(dirname "$BIN")/libmemplan_gpu.so
if [ "$GPU_BUILT" = 1 ]; then
  # The check above means something only if this build has the GPU part.
  if [ -f "$LIB" ] && ldd "$LIB" 2>&1 | grep -q 'libcublas\.so' &&
    ldd "$LIB" 2>&1 | grep -q 'libcudnn\.so'; then
    pass "libmemplan_gpu.so beside memplan links cuBLAS and cuDNN"
  else
    fail "CUDA build without $LIB linking cuBLAS and cuDNN"
  fi
fi

# ------------------------------------- the executable alone (no GPU library)
mkdir "$T/bin"
cp "$BIN" "$T/bin/memplan"
ALONE=$T/bin/memplan
expect 0 "plan without the GPU library" \
  "$ALONE" plan "$MODELS/resnet18.onnx" --batch 8 --mode inference
# Peak RSS of a resnet18 inference plan (the GPU libraries took ~210 MiB).
rss_kib=$(python3 - "$BIN" "$MODELS/resnet18.onnx" <<'PY'
import resource, subprocess, sys
subprocess.run([sys.argv[1], "plan", sys.argv[2], "--batch", "8", "--mode", "inference"],
               stdout=subprocess.DEVNULL, check=True)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
PY
)
if [ -n "${MEMPLAN_CORPUS_SANITIZED:-}" ]; then
  pass "resnet18 inference plan: RSS not checked under sanitizers (shadow memory)"
elif [ -n "$rss_kib" ] && [ "$rss_kib" -lt $((40 * 1024)) ]; then
  pass "resnet18 inference plan: peak RSS $rss_kib KiB < 40 MiB"
else
  fail "resnet18 inference plan: peak RSS '$rss_kib' KiB, want < 40 MiB"
fi

if [ "$GPU_BUILT" = 1 ]; then
  absent="GPU support is not installed: $T/bin/libmemplan_gpu.so not found"
else
  absent="memplan was built without CUDA"
fi
expect 3 "probe without the GPU library" "$ALONE" probe
one_error "probe without the GPU library" "$absent"
expect 3 "validate without the GPU library" \
  "$ALONE" validate "$MODELS/resnet18_train.onnx" --batch 2
one_error "validate without the GPU library" "$absent"
expect 3 "advise --device auto without the GPU library" \
  "$ALONE" advise "$MODELS/resnet18_train.onnx" --device auto
one_error "advise --device auto without the GPU library" "${absent#GPU support is }"

if [ "$GPU_BUILT" = 1 ]; then
  # A file that is no shared library.
  echo "not a library" >"$T/bogus.so"
  expect 3 "probe with a broken GPU library" env MEMPLAN_GPU_LIBRARY="$T/bogus.so" "$ALONE" probe
  one_error "probe with a broken GPU library" "cannot load the GPU library $T/bogus.so: "
  # The real library beside the executable: a GPU is used, or its absence named.
  "$BIN" probe >"$T/out" 2>"$T/err"
  got=$?
  if [ "$got" = 0 ] && grep -q '^device 0: ' "$T/out"; then
    pass "probe with the GPU library: found a device"
  elif [ "$got" = 3 ] && grep -q '^memplan: error: no CUDA device found (' "$T/err"; then
    pass "probe with the GPU library: no device, said so"
  else
    fail "probe with the GPU library: exit $got"; sed 's/^/  | /' "$T/err" | head -3
  fi
fi
finish
