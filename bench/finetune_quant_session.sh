#!/bin/bash
# Quantized-base fine-tuning and weight-only inference on the GPU machine (repo
# root): bitsandbytes LLM.int8 and FP4 bases under LoRA, NF4 / FP4 / int8
# weight-only inference, one fresh process each (bench/finetune.py measure), 3
# at a time. bitsandbytes travels unpacked in .bnb (PYTHONPATH). Output in $OUT.
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT/ftq"
export PYTHONPATH=$PWD/.bnb${PYTHONPATH:+:$PYTHONPATH}
cat > "$OUT/ftq/cfgs" <<'CFG'
llama_1b 1 bf16 int8lora:16:q_proj,v_proj
llama_1b 4 bf16 int8lora:16:q_proj,v_proj
llama_1b 4 bf16 int8lora:16:q_proj,v_proj:0
llama_1b 4 bf16 int4lora:16:q_proj,v_proj
llama_gqa 4 bf16 int8lora:16:q_proj,v_proj
llama_gqa 4 bf16 int4lora:16:q_proj,v_proj
qwen_bigvocab 2 bf16 int8lora:16:q_proj,v_proj
llama_1b 8 bf16 infer:native
llama_1b 8 bf16 infer:nf4
llama_1b 8 bf16 infer:int4
llama_1b 8 bf16 infer:int8
llama_gqa 8 bf16 infer:native
llama_gqa 8 bf16 infer:nf4
llama_gqa 8 bf16 infer:int8
CFG
xargs -d '\n' -P 3 -n 1 sh -c 'set -f; set -- $0; timeout 200 python3 bench/finetune.py measure "$@"' \
  < "$OUT/ftq/cfgs" > "$OUT/ftq/measure.jsonl" 2> "$OUT/ftq/measure.err"
cut -c1-300 "$OUT/ftq/measure.jsonl"
grep -v Warning "$OUT/ftq/measure.err" | tail -5
cp "$OUT/ftq/measure.jsonl" "$OUT/finetune_quant_h200.jsonl"
