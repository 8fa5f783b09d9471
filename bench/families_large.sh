#!/bin/bash
# Large-batch amp rows on the GPU machine (repo root): where advise's H200
# batches ran out of memory, the same models at batches just below and above
# the point where their largest tensor passes 2^31 elements, with allocator
# traces, then one advised batch alone on the GPU (its OOM message in full).
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT/large"
printf '%s\n' "qwen_bigvocab train 12 amp_bf16" "qwen_bigvocab train 16 amp_bf16" \
  "qwen_bigvocab train 16 fp32" "wav2vec2_cls train 1024 amp_bf16" "wav2vec2_cls train 1400 amp_bf16" |
  xargs -P 3 -L 1 sh -c 'timeout 200 python3 bench/families.py measure "$0" "$1" "$2" "$3"' \
  >> "$OUT/large/measure.jsonl" 2>> "$OUT/large/measure.err"
printf '%s\n' "qwen_bigvocab train 16 amp_bf16" "wav2vec2_cls train 1400 amp_bf16" |
  xargs -P 2 -L 1 sh -c 'timeout 200 python3 bench/families.py trace "$0" "$1" "$2" "$3" \
    "'"$OUT"'/large/$0_$1_$2_$3.json" >> "'"$OUT"'/large/measure.jsonl" 2>> "'"$OUT"'/large/trace.err"'
# ALONE=0 leaves it out (another job shares the GPU: its OOM depends on free memory).
if [ "${ALONE:-1}" = 1 ]; then
  timeout 200 python3 bench/families.py measure qwen_bigvocab train 61 amp_bf16 \
    >> "$OUT/large/measure.jsonl" 2>> "$OUT/large/measure.err"
fi
gzip "$OUT"/large/*.json
cut -c1-1500 "$OUT/large/measure.jsonl"; tail -3 "$OUT/large/measure.err" "$OUT/large/trace.err"
