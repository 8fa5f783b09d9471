#!/bin/bash
# The fifth held-out round's second call on the GPU machine (repo root):
# allocator traces of the configurations the plan missed ($TRACES, one
# "NAME MODE BATCH PRECISION" per line, bench/families_trace.sh), then PyTorch
# alone on the GPU at the batches `memplan advise --device DEV --checkpoint
# none` gave for this GPU ($ADVISED: a file of "DEV MODEL PRECISION BATCH"
# lines, DEV h100-sxm or h200, planned on the CPU machine from this round's
# exports), one at a time while time is left ($DEADLINE seconds from the
# start). Everything goes to $OUT.
OUT=${OUT:-/tmp/out}
DEADLINE=${DEADLINE:-540}
start=$(date +%s)
left() { echo $((DEADLINE - ($(date +%s) - start))); }
mkdir -p "$OUT"
[ -n "$TRACES" ] && TRACES="$TRACES" OUT="$OUT" bash bench/families_trace.sh > "$OUT/trace.log" 2>&1
echo "traced, $(left) s left"
[ -n "$ADVISED" ] || exit 0
case "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" in
  *H200*) dev=h200 ;;
  *H100*) dev=h100-sxm ;;
  *) exit 0 ;;
esac
grep "^$dev " "$ADVISED" | while read -r _ m p b; do
  [ "$(left)" -gt 40 ] || break
  timeout $(( $(left) > 150 ? 150 : $(left) )) python3 bench/families.py measure "$m" train "$b" \
    "$p" >> "$OUT/advise_fit.jsonl" 2>> "$OUT/advise_fit.err"
  echo "$dev $m $p b$b exit $?: $(tail -1 "$OUT/advise_fit.jsonl" | cut -c1-160)"
done
