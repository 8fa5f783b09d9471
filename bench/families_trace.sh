#!/bin/bash
# Allocator traces of the family models (bench/families.py trace), 4 at a time
# on the one GPU, gzipped into $OUT/famtraces.tgz.
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT/famtraces"
# TRACES: one "NAME MODE BATCH PRECISION" per line instead of the default list.
{ if [ -n "$TRACES" ]; then printf '%s\n' "$TRACES"; else printf '%s\n' "lstm_lm train 8 fp32" "lstm_lm train 8 amp_bf16" "gru_seqfirst train 8 fp32" \
  "unet_ldm train 8 fp32" "unet_ldm train 32 amp_bf16" "t5_encdec train 4 bf16" \
  "t5_encdec train 4 amp_bf16" "llama_gqa train 4 fp32" "llama_gqa infer 8 fp32" \
  "llama_gqa train 4 amp_bf16" "wav2vec2_cls train 16 fp32" "deeplab_mnv3 train 16 amp_bf16"; fi; } |
  xargs -P 4 -L 1 sh -c 'timeout 200 python3 bench/families.py trace "$0" "$1" "$2" "$3" \
    "'"$OUT"'/famtraces/$0_$1_$2_$3.json" > /dev/null 2>> "'"$OUT"'/famtraces/trace.err"'
gzip "$OUT"/famtraces/*.json
ls -la "$OUT/famtraces"; tail -3 "$OUT/famtraces/trace.err"
tar -C "$OUT" -cf "$OUT/famtraces.tar" famtraces && rm -rf "$OUT/famtraces"
