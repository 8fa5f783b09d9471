#!/bin/bash
# Data-parallel GPT-2 on one GPU (torchrun --nproc_per_node=1): DDP and FSDP2,
# fp32 and amp_bf16, batch 8 per rank, each in a fresh process (about 2
# minutes of GPU time in all). Rows go to $OUT/dist/dist_check_x1.jsonl; when
# a built memplan is at build/memplan, its per-rank predictions for the same
# configurations go beside them (dist_check_x1_plan.txt) to compare.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT/dist"
ROWS="$OUT/dist/dist_check_x1.jsonl"
: > "$ROWS"
for strategy in ddp fsdp; do
  for precision in fp32 amp_bf16; do
    port=$((29500 + RANDOM % 1000))
    timeout 240 torchrun --nproc_per_node=1 --master_port=$port bench/dist_check.py \
      "$strategy" "$precision" 8 >> "$ROWS" 2>> "$OUT/dist/dist_check_x1.err" ||
      echo "{\"kind\": \"dist_check\", \"strategy\": \"$strategy\", \"precision\": \"$precision\", \"failed\": true}" >> "$ROWS"
  done
done
if [ -x build/memplan ]; then
  for strategy in ddp fsdp; do
    for precision in fp32 amp_bf16; do
      echo "== $strategy $precision x1" >> "$OUT/dist/dist_check_x1_plan.txt"
      build/memplan plan models/gpt2_train.onnx --batch 8 --precision "$precision" \
        --world-size 1 --strategy "$strategy" >> "$OUT/dist/dist_check_x1_plan.txt" 2>&1
    done
  done
fi
cat "$ROWS"
