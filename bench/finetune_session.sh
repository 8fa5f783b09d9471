#!/bin/bash
# Fine-tuning session on the GPU machine (repo root): the 1.1 B LLaMA-style
# export, then bench/finetune.py configurations, one fresh process each, 3 at a
# time. bitsandbytes travels unpacked in .bnb (PYTHONPATH). Output in $OUT.
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT/ft"
export PYTHONPATH=$PWD/.bnb${PYTHONPATH:+:$PYTHONPATH}
timeout 300 python3 bench/finetune.py export llama_1b "$OUT/ft" > "$OUT/ft/export.jsonl" \
  2> "$OUT/ft/export.err" &
cat > "$OUT/ft/cfgs" <<'CFG'
llama_1b 1 bf16 full
llama_1b 1 bf16 lora:16:q_proj,v_proj
llama_1b 4 bf16 lora:16:q_proj,v_proj
llama_1b 1 amp_bf16 lora:16:q_proj,v_proj
llama_1b 4 amp_bf16 lora:16:q_proj,v_proj
llama_1b 1 bf16 qlora:16:q_proj,v_proj
llama_1b 4 bf16 qlora:16:q_proj,v_proj
llama_1b 2 amp_bf16 train-only:lm_head|layers\.1[5-9]\.
llama_1b 2 bf16 freeze:embed_tokens|layers\.[0-9]\.
llama_gqa 4 amp_bf16 lora:8:q_proj,k_proj,v_proj,o_proj
llama_gqa 4 fp32 freeze:layers\.[01]\.
llama_gqa 4 bf16 qlora:16:q_proj,v_proj
t5_encdec 16 amp_bf16 lora:16:q,v
t5_encdec 16 amp_bf16 freeze:encoder
unet_ldm 32 amp_bf16 train-only:\.up\.
unet_ldm 32 fp32 freeze:\.down\.|\.inp\.
deeplab_mnv3 16 fp32 freeze:backbone
wav2vec2_cls 16 amp_bf16 freeze:feature_extractor
qwen_bigvocab 2 bf16 lora:16:q_proj,v_proj
CFG
xargs -d '\n' -P 3 -n 1 sh -c 'set -f; set -- $0; timeout 200 python3 bench/finetune.py measure "$@"' \
  < "$OUT/ft/cfgs" > "$OUT/ft/measure.jsonl" 2> "$OUT/ft/measure.err"
wait
cut -c1-260 "$OUT/ft/measure.jsonl"; grep '^{' "$OUT/ft/export.jsonl"; tail -3 "$OUT/ft/export.err"
grep -v Warning "$OUT/ft/measure.err" | tail -5
tar -C "$OUT" -czf "$OUT/ft.tgz" ft && rm -rf "$OUT/ft"
