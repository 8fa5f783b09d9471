#!/bin/bash
# PyTorch at the batch `memplan advise --device h200` picked (GPU machine, repo
# root): each line of $1 is "MODEL PRECISION BATCH" (bench/families.py models);
# one fresh process each, one at a time (each fills the GPU). Prints one JSON
# line per run (bench/families.py measure, or an "oom" error) to $OUT/fit.jsonl.
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
while read -r model prec batch; do
  [ -z "$model" ] && continue
  timeout 240 python3 bench/families.py measure "$model" train "$batch" "$prec" \
    >> "$OUT/fit.jsonl" 2>> "$OUT/fit.err"
  echo "$model $prec b$batch exit $?: $(tail -1 "$OUT/fit.jsonl" | cut -c1-160)"
done < "$1"
