#!/bin/bash
# Families session on the GPU machine (repo root): train-mode exports of every
# model in bench/families.py (CPU, in parallel) and fresh-process measurements
# (6 processes at a time on the one GPU: each process has its own caching
# allocator, so its peaks are its own). Everything goes to $OUT.
OUT=${OUT:-/tmp/out}
JOBS=${JOBS:-6}
LIST=${LIST:-list}   # list-check: the check models (other sizes)
MODELS=${MODELS:-$(python3 bench/families.py $LIST | cut -d' ' -f1)}
FAM=${FAM:-fam}
mkdir -p "$OUT/$FAM"
for m in $MODELS; do
  timeout 300 python3 bench/families.py export "$m" "$OUT/$FAM" >> "$OUT/$FAM/export.jsonl" \
    2> "$OUT/$FAM/$m.export.err" &
done
cfgs=$(mktemp)
for m in $MODELS; do
  line=$(python3 bench/families.py $LIST | grep "^$m ")
  train=$(echo "$line" | cut -d'|' -f1 | cut -d' ' -f2-)
  infer=$(echo "$line" | cut -d'|' -f2)
  for b in $train; do
    for p in ${PRECISIONS:-fp32 amp_bf16 bf16}; do echo "$m train $b $p"; done
  done
  for b in $infer; do echo "$m infer $b fp32"; done
done > "$cfgs"
wc -l < "$cfgs"
xargs -P "$JOBS" -L 1 sh -c 'timeout 150 python3 bench/families.py measure "$0" "$1" "$2" "$3"' \
  < "$cfgs" >> "$OUT/$FAM/measure.jsonl" 2>> "$OUT/$FAM/measure.err"
wait
wc -l "$OUT/$FAM/measure.jsonl" "$OUT/$FAM/export.jsonl"
grep -c error "$OUT/$FAM/measure.jsonl"; grep -h error "$OUT/$FAM/measure.jsonl" | cut -c1-300 | head
tail -5 "$OUT/$FAM/measure.err"; cat "$OUT/$FAM/export.jsonl" | cut -c1-300
for f in "$OUT"/$FAM/*.export.err; do [ -s "$f" ] && { echo "== $f"; tail -3 "$f"; }; done
ls -la "$OUT/$FAM"
tar -C "$OUT" -czf "$OUT/$FAM.tgz" "$FAM" && rm -rf "$OUT/$FAM"
