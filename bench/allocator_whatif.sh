#!/bin/bash
# Allocator what-ifs on the GPU machine (repo root): each model trained in fresh
# processes under the default allocator, expandable_segments:True and two
# max_split_size_mb values, with empty_cache() between epochs and after an
# evaluation pass (bench/allocator_whatif.py says the protocol). Four processes
# at a time (each has its own caching allocator; together they stay under
# 120 GB). Writes $OUT/whatif/allocator_whatif.jsonl.
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT/whatif"
runs() {
  for m in "wav2vec2_cls 512 amp_bf16" "qwen_bigvocab 12 amp_bf16" "gpt2 16 amp_bf16" \
           "resnet50 128 amp_bf16"; do
    echo "$m default -"
    echo "$m expandable expandable_segments:True"
    echo "$m split128 max_split_size_mb:128"
    echo "$m split512 max_split_size_mb:512"
  done
}
runs | xargs -P 4 -L 1 sh -c \
  'if [ "$4" != - ]; then export PYTORCH_CUDA_ALLOC_CONF="$4"; fi
   timeout 150 python3 bench/allocator_whatif.py "$0" "$1" "$2" "$3"' \
  >> "$OUT/whatif/allocator_whatif.jsonl" 2>> "$OUT/whatif/allocator_whatif.err"
python3 - "$OUT/whatif/allocator_whatif.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    p = {x["phase"]: x for x in r["phases"]}
    s = p.get("step3", {})
    e = p.get("empty_cache_epoch_end", {})
    print(r["model"], r["batch"], r["precision"], r["config"], "step3 alloc/res GB",
          round(s.get("max_allocated", 0) / 1e9, 2), round(s.get("max_reserved", 0) / 1e9, 2),
          "empty_cache frees GB", round((e.get("reserved_before", 0) - e.get("reserved", 0)) / 1e9, 2),
          r.get("error", "")[:80])
PY
tail -5 "$OUT/whatif/allocator_whatif.err"
