#!/bin/bash
# The end-of-session GPU run (GPU machine, repo root), everything into $OUT:
#  1. the gpu-labelled C++ tests, `memplan probe`, `memplan validate` at the batch
#     advise picks for gpt2 on an H200, and a plan far beyond the device (refused
#     up front), with the CUDA build of memplan and libmemplan_gpu.so in $1 and
#     their non-CUDA shared libraries in $1/lib (the GPU machine has no protobuf);
#  2. PyTorch at the batches `memplan advise --device h200` picked for the family
#     models (bench/advise_fit.sh with the list in $2).
C=${1:-gpucarry}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
cudnn=$(python3 -c 'import nvidia.cudnn, os; print(os.path.dirname(nvidia.cudnn.__file__))')/lib
cublas=$(python3 -c 'import nvidia.cublas, os; print(os.path.dirname(nvidia.cublas.__file__))')/lib
export LD_LIBRARY_PATH=$C/lib:$cudnn:$cublas:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
"$C/gpu_probe_gpu_test" > "$OUT/gpu_test.log" 2>&1; echo "gpu tests exit $?"; tail -3 "$OUT/gpu_test.log"
"$C/memplan" probe > "$OUT/probe.txt" 2>&1; echo "probe exit $?"; cat "$OUT/probe.txt"
"$C/memplan" validate models/gpt2_train.onnx --batch "${GPT2_BATCH:-178}" --precision amp_bf16 \
  > "$OUT/validate_gpt2_train.txt" 2>&1; echo "validate exit $?"; tail -12 "$OUT/validate_gpt2_train.txt"
"$C/memplan" validate models/gpt2_train.onnx --batch 600 --precision fp32 > "$OUT/validate_far.txt" 2>&1
echo "validate b600 exit $?"; cat "$OUT/validate_far.txt"
[ -n "$2" ] && OUT=$OUT bash bench/advise_fit.sh "$2"
