#!/bin/bash
# bf16 training of family models under the three ways the weights reach the
# GPU (memplan's --model-load: cast, cast-empty-cache, direct), 6 fresh
# processes at a time on the one GPU; rows to $OUT/model_load_h200.jsonl.
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
CFGS=${CFGS:-"qwen_bigvocab_b 2
qwen_bigvocab_b 8
wav2vec2_cls 16
wav2vec2_cls_b 32
llama_gqa_b 4
unet_ldm_b 24
lstm_lm 32
deeplab_mnv3 16"}
printf '%s\n' "$CFGS" | while read -r m b; do
  for load in cast cast-empty-cache direct; do echo "$load $m $b"; done
done | xargs -P 6 -L 1 sh -c 'FAMILIES_LOAD=$0 timeout 150 python3 bench/families.py measure "$1" train "$2" bf16' \
  >> "$OUT/model_load_h200.jsonl" 2>> "$OUT/model_load.err"
wc -l "$OUT/model_load_h200.jsonl"; grep -c error "$OUT/model_load_h200.jsonl"; tail -3 "$OUT/model_load.err"
