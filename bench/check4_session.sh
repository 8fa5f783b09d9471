#!/bin/bash
# The fourth held-out round on the GPU machine (repo root), in one call:
# exports and fresh-process measurements of the `_d` models (fp32, amp_bf16,
# amp_fp16, bf16); beside them PyTorch at batches `advise` gave above the
# last measured point of a curve ($ABOVE: "MODEL PRECISION BATCH" lines) and
# the wide 1x1 weight-gradient grid; then, where $MEMPLAN runs there, PyTorch
# alone on the GPU at the batch `memplan advise --precision amp_bf16
# --checkpoint none` picks for this GPU, one model at a time, while time is
# left ($DEADLINE seconds from the start). Everything goes to $OUT.
OUT=${OUT:-/tmp/out}
DEADLINE=${DEADLINE:-520}
start=$(date +%s)
left() { echo $((DEADLINE - ($(date +%s) - start))); }
mkdir -p "$OUT"
python3 bench/cudnn_1x1_wgrad.py "$OUT/cudnn_1x1_wgrad_wide.jsonl" wide \
  2> "$OUT/wgrad_wide.err" &
if [ -n "$ABOVE" ]; then
  while read -r model prec batch; do
    [ -n "$model" ] && echo "$model train $batch $prec"
  done < "$ABOVE" | xargs -P 2 -L 1 sh -c \
    'timeout 150 python3 bench/families.py measure "$0" "$1" "$2" "$3"' \
    > "$OUT/above.jsonl" 2> "$OUT/above.err" &
fi
LIST=list-check4 PRECISIONS="fp32 amp_bf16 amp_fp16 bf16" FAM=check4 JOBS=${JOBS:-4} \
  OUT="$OUT" bash bench/families_session.sh > "$OUT/check4_session.log" 2>&1
wait
echo "measured, $(left) s left"
[ -n "$MEMPLAN" ] || exit 0
case "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" in
  *H200*) dev=h200 ;;
  *H100*) dev=h100-sxm ;;
  *) exit 0 ;;
esac
x=$(mktemp -d)
tar -C "$x" -xzf "$OUT/check4.tgz"
for m in $(python3 bench/families.py list-check4 | cut -d' ' -f1); do
  [ "$(left)" -gt 60 ] || break
  loss=cross_entropy
  case $m in unet_ldm*) loss=mse ;; esac
  b=$($MEMPLAN advise "$x/check4/${m}_train.onnx" --device "$dev" --precision amp_bf16 \
        --checkpoint none --loss "$loss" --format json 2>> "$OUT/advise.err" |
      python3 -c "import json,sys; print(json.load(sys.stdin)['recommendation']['batch'])")
  [ -n "$b" ] || continue
  echo "$m amp_bf16 $b $dev" >> "$OUT/advised.txt"
  timeout $(( $(left) > 150 ? 150 : $(left) )) python3 bench/families.py measure "$m" train "$b" \
    amp_bf16 >> "$OUT/advise_fit.jsonl" 2>> "$OUT/advise_fit.err"
  echo "$m b$b exit $?: $(tail -1 "$OUT/advise_fit.jsonl" | cut -c1-200)"
done
