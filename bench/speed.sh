#!/usr/bin/env bash
# Speed and memory of memplan against the cost of reading the same file.
#
# For MatMul+Add+Relu chains of 1 k, 10 k, 100 k and 1 M nodes (written by
# bench/make_chain.py) it runs, under /usr/bin/time (median of RUNS runs; CPU
# time = user + sys, peak RSS = max over the runs):
#   read     python3 -c 'import onnx; onnx.load(F, load_external_data=False)'
#   inspect  memplan inspect F --batch 8 --max-nodes N
#   plan     memplan plan F --batch 8 --max-nodes N   (train, fp32, AdamW)
# and, on three exports of models/ (qwen_bigvocab_train, llama_1b_train,
# gpt2_train; each run repeats the command 10, 3 and 3 times, the figures are
# per command):
#   plan     memplan plan M --batch 8
#   advise   memplan advise M --device h100-sxm  (every precision and placement:
#            the default search and threads, then --threads 1, then
#            --search full --threads 1)
# advise's ratios to one plan are of wall time (what the user waits, with the
# candidates searched in threads) and of CPU time (what it costs; other work
# on a shared machine enters the wall times more).
#
# usage: bench/speed.sh [MEMPLAN] [RUNS] [PART]
#   (default build/memplan, 3, all; PART chains or advise runs one half)
set -eu
memplan=${1:-build/memplan}
runs=${2:-3}
part=${3:-all}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# measure NAME CMD...: prints "NAME cpu_s wall_s rss_mib" (medians, max RSS).
measure() {
  local name=$1
  shift
  local i
  : >"$tmp/runs"
  for ((i = 0; i < runs; i++)); do
    /usr/bin/time -f "%U %S %e %M" -o "$tmp/t" "$@" >/dev/null 2>"$tmp/err" ||
      { echo "failed: $*" >&2; cat "$tmp/err" >&2; exit 1; }
    tail -1 "$tmp/t" >>"$tmp/runs"
  done
  local mid=$(((runs + 1) / 2))
  local cpu wall rss
  cpu=$(awk '{printf "%.3f\n", $1 + $2}' "$tmp/runs" | sort -n | sed -n "${mid}p")
  wall=$(awk '{print $3}' "$tmp/runs" | sort -n | sed -n "${mid}p")
  rss=$(awk '{print $4}' "$tmp/runs" | sort -n | tail -1)
  echo "$name $cpu $wall $((rss / 1024))"
}

if [ "$part" != advise ]; then
  echo "| nodes | read (onnx) | inspect | plan (train) | inspect / read | plan / read | plan RSS |"
  echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
  for n in 1000 10000 100000 1000000; do
    f="$tmp/chain_$n.onnx"
    python3 "$here/make_chain.py" "$n" "$f"
    r=$(measure read python3 -c 'import onnx, sys; onnx.load(sys.argv[1], load_external_data=False)' "$f")
    # The 1 M chain is over the default node limit (500,000): raised for it.
    i=$(measure inspect "$memplan" inspect "$f" --batch 8 --max-nodes "$n")
    p=$(measure plan "$memplan" plan "$f" --batch 8 --max-nodes "$n")
    echo "$r $i $p" | awk -v n="$n" '{
      printf "| %d | %.2f s, %d MiB | %.2f s, %d MiB | %.2f s, %d MiB | %.2f | %.2f | %d MiB |\n",
        n, $2, $4, $6, $8, $10, $12, $6 / $2, $10 / $2, $12}'
    rm -f "$f"
  done
  echo "(CPU seconds, user + sys, medians of $runs runs.)"
fi
[ "$part" = chains ] && exit 0
# One plan takes 10 to 60 ms, near the resolution of /usr/bin/time: each of
# these runs repeats its command $reps times, and the figures are per command.
# advise runs its default search (replay) with its default threads (one per
# core), then on one thread (the CPU it costs without the second core), then
# the full search on one thread (every probe planned, the search before it).
loop='n=$1; shift; for ((k = 0; k < n; k++)); do "$@" >/dev/null || exit 1; done'
echo
echo "| model | one plan, CPU / wall | advise, CPU / wall | advise / plan, wall | advise / plan, CPU | --threads 1, CPU | --search full --threads 1, CPU |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"
for spec in qwen_bigvocab_train:10 llama_1b_train:3 gpt2_train:3; do
  name=${spec%%:*}
  reps=${spec##*:}
  m="$here/../models/$name.onnx"
  p=$(measure plan bash -c "$loop" _ "$reps" "$memplan" plan "$m" --batch 8)
  a=$(measure advise bash -c "$loop" _ "$reps" "$memplan" advise "$m" --device h100-sxm)
  o=$(measure one bash -c "$loop" _ "$reps" "$memplan" advise "$m" --device h100-sxm --threads 1)
  f=$(measure full bash -c "$loop" _ "$reps" "$memplan" advise "$m" --device h100-sxm \
    --threads 1 --search full)
  echo "$p $a $o $f" | awk -v r="$reps" -v n="$name" '{
    printf "| %s (%d repeats per run) | %.3f / %.3f s | %.3f / %.3f s | %.2fx | %.2fx | %.2fx | %.2fx |\n",
      n, r, $2 / r, $3 / r, $6 / r, $7 / r, $7 / $3, $6 / $2, $10 / $2, $14 / $2}'
done
echo "(CPU seconds, user + sys, and wall seconds: medians of $runs runs; load average $(cut -d' ' -f1-3 /proc/loadavg) at the end.)"
