#!/bin/bash
# The snippet `memplan advise --world-size 8 --device a100-80gb --strategy fsdp` printed for
# llama_1b (bench/results/snippets/), run as printed with torchrun on the GPUs
# this machine has (3 steps); output in $OUT/snippet_run.jsonl.
OUT=${OUT:-/tmp/out}
N=${N:-$(nvidia-smi -L | wc -l)}
timeout 500 torchrun --nproc_per_node="$N" bench/snippet_run.py llama_1b \
  bench/results/snippets/llama_1b_fsdp8_a100.py 3 > "$OUT/snippet_run.jsonl" 2> "$OUT/snippet_run.err"
echo "rc=$?"; cat "$OUT/snippet_run.jsonl"; grep -v Warning "$OUT/snippet_run.err" | tail -5
