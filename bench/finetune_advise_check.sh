#!/bin/bash
# The acceptance run of fine-tuning advice: `memplan advise --lora r=16
# --weights nf4 --device rtx-4090` on the 1.07 B LLaMA-style export, then
# that batch trained with bench/finetune.py (QLoRA: bitsandbytes NF4 base,
# PEFT LoRA r=16 on q_proj,v_proj, bf16) under a 24 GiB cap
# (torch.cuda.set_per_process_memory_fraction(24 GiB / total)). Run from the
# repository root on the GPU machine; bitsandbytes unpacked in .bnb. Writes
# $OUT/finetune_advise.jsonl: the advice (when a memplan binary is at
# $MEMPLAN) and the measured row, whose `error` says OOM if it did not fit.
#   BATCH=N bench/finetune_advise_check.sh   # the batch, when no binary is at hand
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
MEMPLAN=${MEMPLAN:-build/memplan}
MODEL=${MODEL:-models/llama_1b_train.onnx}
export PYTHONPATH=$PWD/.bnb${PYTHONPATH:+:$PYTHONPATH}
res="$OUT/finetune_advise.jsonl"
: > "$res"
if [ -x "$MEMPLAN" ]; then
  "$MEMPLAN" advise "$MODEL" --lora r=16 --weights nf4 --device rtx-4090 --format json \
    > "$OUT/advise.json"
  python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['recommendation']; \
print(json.dumps(dict(advice=dict(batch=r['batch'], precision=r['precision'], \
allocated=r['peak']['allocated_bytes'], reserved=r['peak']['reserved_bytes']))))" \
    "$OUT/advise.json" >> "$res"
  BATCH=${BATCH:-$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['recommendation']['batch'])" "$OUT/advise.json")}
fi
: "${BATCH:?no memplan binary at $MEMPLAN: set BATCH to the advised batch}"
timeout 240 python3 bench/finetune.py measure llama_1b "$BATCH" bf16 qlora:16:q_proj,v_proj 24 \
  >> "$res" 2> "$OUT/finetune_advise.err"
cut -c1-400 "$res"
grep -v Warning "$OUT/finetune_advise.err" | tail -3
