#!/bin/bash
# Held-out models on the GPU machine (repo root): exports (CPU, in parallel)
# and fresh-process measurements (GPU, one at a time). Output in $OUT.
OUT=${OUT:-/tmp/out}
MODELS=${MODELS:-"resnet34 efficientnet_b0 convnext_tiny densenet121 swin_t"}
mkdir -p "$OUT/holdout"
for m in $MODELS; do
  timeout 400 python3 bench/holdout.py export "$m" "$OUT/holdout" >> "$OUT/holdout_export.jsonl" \
    2> "$OUT/holdout/$m.export.err" &
done
for m in $MODELS; do
  for cfg in "train 8 fp32" "train 32 fp32" "train 8 amp_bf16" "train 32 amp_bf16" \
             "infer 8 fp32" "infer 32 fp32"; do
    timeout 120 python3 bench/holdout.py measure "$m" $cfg >> "$OUT/holdout.jsonl" \
      2>> "$OUT/holdout_measure.err"
  done
done
wait
wc -l "$OUT/holdout.jsonl" "$OUT/holdout_export.jsonl"; ls -la "$OUT/holdout"; tail -3 "$OUT/holdout_measure.err"
