#!/bin/bash
# One GPU session (run on the GPU machine from the repo root, with a CUDA
# build of memplan, libmemplan_gpu.so (beside memplan: probe and validate load
# it) and gpu_probe_gpu_test in $1, their non-CUDA shared libraries in $1/lib): the gpu-labelled tests, `memplan probe`, `validate` at
# the batch `advise` picks for an H200, the checkpoint placements advised for
# gpt2 and resnet50 measured under PyTorch.
# Everything goes to $OUT.
C=${1:-gpucarry}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
cudnn=$(python3 -c 'import nvidia.cudnn, os; print(os.path.dirname(nvidia.cudnn.__file__))')/lib
export LD_LIBRARY_PATH=$C/lib:$cudnn:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
"$C/gpu_probe_gpu_test" > "$OUT/gpu_test.log" 2>&1; tail -3 "$OUT/gpu_test.log"
"$C/memplan" probe | tee "$OUT/probe.txt"
# The batch `advise --device h200 --precision amp_bf16 --checkpoint none` picks:
# memplan validate, then PyTorch itself at that batch (does it fit? the peaks).
for mb in resnet50_train:2648 gpt2_train:178; do
  m=${mb%%:*}; b=${mb##*:}
  "$C/memplan" validate "models/$m.onnx" --batch "$b" --precision amp_bf16 --optimizer adamw \
    > "$OUT/validate_$m.txt" 2>&1
  echo "validate $m b$b exit $?"; tail -25 "$OUT/validate_$m.txt"
  python3 bench/ckpt_validate.py "${m%_train}" "$b" --precision amp_bf16 --checkpoint '[]' \
    >> "$OUT/fit.jsonl" 2>> "$OUT/ckpt.err"
done
grep -h summary "$OUT/fit.jsonl"
# Every placement `advise` offers for a 24 GiB (gpt2) and 12 GiB (resnet50)
# budget, each at the batch advised with it.
for p in none optimal sqrt all; do
  python3 bench/ckpt_validate.py gpt2 0 --precision amp_bf16 --advice "$C/gpt2_advice.json" \
    --placement $p >> "$OUT/ckpt.jsonl" 2>> "$OUT/ckpt.err"
  python3 bench/ckpt_validate.py resnet50 0 --precision amp_bf16 --advice "$C/r50_advice.json" \
    --placement $p >> "$OUT/ckpt.jsonl" 2>> "$OUT/ckpt.err"
done
grep -h summary "$OUT/ckpt.jsonl"; tail -3 "$OUT/ckpt.err"
