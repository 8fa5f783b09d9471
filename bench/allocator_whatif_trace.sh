#!/bin/bash
# Allocator traces of bench/allocator_whatif.py's protocol (default allocator),
# steps 1-3 and the "epoch_end" empty_cache(), for the configurations whose
# allocator advice missed the measurements: each run writes
# $OUT/whatif_traces/NAME_BATCH_PRECISION.json.gz (events and the segments
# empty_cache() kept, with the live blocks that pin them) and its JSON line to
# allocator_whatif_trace.jsonl. Three processes at a time (about a minute).
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT/whatif_traces"
printf '%s\n' "resnet50 128 amp_bf16" "gpt2 16 amp_bf16" "wav2vec2_cls 512 amp_bf16" |
  xargs -P 3 -L 1 sh -c 'WHATIF_TRACE="'"$OUT"'/whatif_traces/$0_$1_$2.json" \
    timeout 150 python3 bench/allocator_whatif.py "$0" "$1" "$2" default' \
  >> "$OUT/whatif_traces/allocator_whatif_trace.jsonl" 2>> "$OUT/whatif_traces/trace.err"
gzip "$OUT"/whatif_traces/*.json
ls -la "$OUT/whatif_traces"; tail -3 "$OUT/whatif_traces/trace.err"
