#!/usr/bin/env bash
# End-to-end robustness test: every case of tests/corpus/expected.txt, then
# truncations of models/resnet18.onnx at many offsets, through the real
# memplan binary, each under a timeout.
#
# usage: corpus_test.sh MEMPLAN CORPUS_DIR MODELS_DIR
set -u

memplan=$1
corpus=$2
models=$3
limit=${MEMPLAN_CORPUS_TIMEOUT:-60}  # seconds per run; sanitizer builds are slower
# Peak memory of each run (not under sanitizers, whose shadow memory counts):
# at most MEMPLAN_CORPUS_MAX_RSS_MB (2 GiB).
max_rss_kb=$((${MEMPLAN_CORPUS_MAX_RSS_MB:-2048} * 1024))
measure=""
if [ -z "${MEMPLAN_CORPUS_SANITIZED:-}" ] && [ -x /usr/bin/time ]; then measure=1; fi
slowest_s=0
slowest=""

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
runs=0

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# Large cases are stored gzipped.
for gz in "$corpus"/*.onnx.gz "$corpus"/round3/*.onnx.gz; do
  [ -e "$gz" ] || continue
  gunzip -c "$gz" >"$tmp/$(basename "$gz" .gz)"
done

# External-data locations in the corpus point at this FIFO: opening it
# would block, so a run that tries to read weights hangs and times out.
fifo=/tmp/memplan_corpus_fifo
if [ ! -e "$fifo" ]; then mkfifo "$fifo" 2>/dev/null || true; fi

# run EXPECTED_EXIT SUBSTRING ARGS...: runs memplan, checks the outcome.
run() {
  local want=$1 sub=$2
  shift 2
  runs=$((runs + 1))
  local what="memplan $*"
  local start=$SECONDS
  if [ -n "$measure" ]; then
    timeout "$limit" /usr/bin/time -f %M -o "$tmp/rss" "$memplan" "$@" >"$tmp/out" 2>"$tmp/err"
  else
    timeout "$limit" "$memplan" "$@" >"$tmp/out" 2>"$tmp/err"
  fi
  local rc=$?
  if [ "$rc" -eq 124 ]; then
    fail "$what: timed out after ${limit}s (hang?)"
    return
  fi
  if [ -n "$measure" ] && [ -s "$tmp/rss" ]; then
    local rss
    rss=$(tail -1 "$tmp/rss")
    if [ "$rss" -gt "$max_rss_kb" ]; then
      fail "$what: peak RSS ${rss} KiB is over $((max_rss_kb / 1024)) MiB"
    fi
    [ $((SECONDS - start)) -gt "$slowest_s" ] && slowest_s=$((SECONDS - start)) && slowest="$what"
  fi
  if [ "$rc" -ge 128 ]; then
    fail "$what: killed by signal $((rc - 128)) (crash)"
    sed 's/^/    /' "$tmp/err" | head -20
    return
  fi
  if [ "$rc" -ne "$want" ]; then
    fail "$what: exit $rc, expected $want"
    sed 's/^/    /' "$tmp/err" | head -5
    return
  fi
  if [ "$want" -eq 0 ]; then
    if grep -q 'error' "$tmp/err"; then fail "$what: exit 0 but stderr has an error"; fi
    # No wrapped-around number: JSON output has no negative values.
    if grep -qE '": -[0-9]' "$tmp/out"; then
      fail "$what: negative number in the output: $(grep -m1 -E '": -[0-9]' "$tmp/out")"
    fi
    if [ -n "$sub" ] && ! grep -qF -- "$sub" "$tmp/out" "$tmp/err"; then
      fail "$what: output lacks '$sub'"
    fi
    return
  fi
  local lines
  lines=$(wc -l <"$tmp/err")
  local line
  line=$(head -1 "$tmp/err")
  if [ "$lines" -ne 1 ]; then
    fail "$what: $lines stderr lines, expected 1"
    sed 's/^/    /' "$tmp/err" | head -5
    return
  fi
  case "$line" in
    "memplan: error: "*) ;;
    *) fail "$what: stderr is not 'memplan: error: ...': $line" ;;
  esac
  # The message names a file of the command line (the model, a budget
  # file, a baseline or an output), or the flag that is wrong.
  local arg named=0 files=0
  for arg in "$@"; do
    case "$arg" in
      */*)
        files=$((files + 1))
        [[ "$line" == *"$(basename "$arg")"* ]] && named=1
        ;;
      --*) [[ "$line" == "memplan: error: $arg"* || "$line" == "memplan: error: "[a-z]*": $arg"* ]] &&
        named=1 ;;
    esac
  done
  if [ "$files" -gt 0 ] && [ "$named" -eq 0 ]; then
    fail "$what: message does not name the file: $line"
  fi
  if [ -n "$sub" ] && [[ "$line" != *"$sub"* ]]; then
    fail "$what: message lacks '$sub': $line"
  fi
}

# run_manifest FILE: runs every entry of FILE.
run_manifest() {
  local entry want args sub
  while IFS= read -r entry || [ -n "$entry" ]; do
    case "$entry" in '' | '#'*) continue ;; esac
    want=$(echo "$entry" | cut -d'|' -f1 | tr -d ' ')
    args=$(echo "$entry" | cut -d'|' -f2 | sed 's/^ *//; s/ *$//')
    sub=$(echo "$entry" | cut -d'|' -f3- | sed 's/^ //')
    args=${args//@c/$corpus}
    args=${args//@m/$models}
    args=${args//@t/$tmp}
    args=${args//@f/$fifo}
    args=${args//@T/$(basename "$tmp")}
    # shellcheck disable=SC2086  # arguments are space-separated, no quoting
    run "$want" "$sub" $args
  done <"$1"
}

# Outputs that name an input must leave it alone: the victim is checked
# after the manifest.
cp "$corpus/unsorted_valid.onnx" "$tmp/victim.onnx"
cp "$corpus/budget_valid.json" "$tmp/victim.json"
cp "$corpus/unsorted_valid.onnx" "$tmp/unsorted_valid.onnx"
# Other names of the victims (round 3): links, a baseline and a trace to
# overwrite, FIFOs and directories where outputs go.
ln "$tmp/victim.onnx" "$tmp/victim_hardlink.svg"
ln -s "$tmp/victim.onnx" "$tmp/victim_symlink.json"
ln "$tmp/unsorted_valid.onnx" "$tmp/victim_model_hardlink.json"
"$memplan" check "$corpus/unsorted_valid.onnx" --batch 2 --budget 1GiB --format json \
  >"$tmp/baseline.json" 2>/dev/null
cp "$tmp/baseline.json" "$tmp/baseline.orig"
cp "$corpus/../traces/fake_monitor_leak.json" "$tmp/trace.json"
mkfifo "$tmp/fifo.json" "$tmp/fifo.svg"
mkdir "$tmp/dir.json" "$tmp/dir.svg"
ln -s /dev/null "$tmp/devnull_link.json"
printf '{"checks": [{"model": "%s", "batch": 2, "budget": "1GiB"}]}' "$fifo" \
  >"$tmp/config_fifo_model.json"

# 1. The manifest.
run_manifest "$corpus/expected.txt"
cmp -s "$corpus/unsorted_valid.onnx" "$tmp/victim.onnx" || fail "an output overwrote the model"
cmp -s "$corpus/budget_valid.json" "$tmp/victim.json" || fail "an output overwrote the budget file"
cmp -s "$tmp/baseline.orig" "$tmp/baseline.json" || fail "an output overwrote the baseline"
cmp -s "$corpus/../traces/fake_monitor_leak.json" "$tmp/trace.json" || fail "an output overwrote the trace"
cmp -s "$corpus/unsorted_valid.onnx" "$tmp/unsorted_valid.onnx" || fail "an output overwrote a config's model"
[ -p "$tmp/fifo.json" ] && [ -d "$tmp/dir.json" ] || fail "an output replaced a FIFO or a directory"

# Generated markup stays well-formed with markup in names (round 3), and
# GitHub annotations are one workflow command each.
if command -v python3 >/dev/null; then
  m3="$corpus/round3/markup_printable_name_valid.onnx"
  for fmt in junit html; do
    "$memplan" plan --batch 2 --mode inference "$m3" --format "$fmt" >"$tmp/markup.$fmt" 2>/dev/null
  done
  runs=$((runs + 3))
  for f in "$tmp/markup.junit" "$tmp/markup.svg"; do
    python3 -c 'import sys, xml.dom.minidom as m; m.parse(sys.argv[1])' "$f" 2>"$tmp/err" ||
      fail "$(basename "$f"): not well-formed XML: $(tail -1 "$tmp/err")"
  done
  grep -q '<svg onload' "$tmp/markup.html" && fail "markup.html: a node name reached the HTML raw"
fi
# A file name with a newline and an escape sequence (a file in a pull
# request) must not forge lines in headers or messages.
runs=$((runs + 1))
evil="$tmp/$(printf 'ok\nmemplan: error: forged\033[2J').onnx"
cp "$corpus/unsorted_valid.onnx" "$evil"
timeout "$limit" "$memplan" plan --batch 2 "$evil" >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ "$rc" -ne 2 ] || [ "$(wc -l <"$tmp/err")" -ne 1 ] || grep -q $'\033' "$tmp/err" "$tmp/out" ||
  ! grep -q 'forged\\x1b\[2J.onnx: this argument holds a control character' "$tmp/err"; then
  fail "a file name with a newline and ESC: exit $rc: $(head -3 "$tmp/err" "$tmp/out" | cat -v)"
fi
# Markup in a file name (and a node name in backticks) stays text in plan's Markdown.
runs=$((runs + 1))
marked="$tmp/m<img src=x onerror=alert(1)>\`q\`.onnx"
cp "$corpus/unsorted_valid.onnx" "$marked"
"$memplan" plan --batch 2 "$marked" --format md >"$tmp/out" 2>/dev/null
"$memplan" plan --batch 2 --mode inference "$corpus/markup_in_node_name.onnx" --format md >>"$tmp/out" \
  2>/dev/null
if grep -q '[^\\]<\(img\|script\)' "$tmp/out" || ! grep -qF '/m\<img src=x onerror=alert(1)>\`q\`.onnx' "$tmp/out"; then
  fail "plan --format md: markup from a file or node name reached the Markdown raw"
fi
runs=$((runs + 1))
GITHUB_ACTIONS=true "$memplan" check "$corpus/round3/annotation_printable_name_valid.onnx" \
  --batch 2 --budget 1KiB --mode inference >"$tmp/out" 2>&1
if [ "$(grep -c '^::' "$tmp/out")" -ne 1 ] || grep -q '^::error::forged' "$tmp/out"; then
  fail "a node name forged a GitHub workflow command: $(grep '^::' "$tmp/out" | head -3)"
fi
ls "$tmp" | grep -q '\.tmp\.' && fail "a temporary output file was left behind"

# Overlapping --checkpoint patterns: the order does not change the plan.
peak_of() {
  timeout "$limit" "$memplan" plan --batch 8192 --format json "$corpus/checkpoint_overlap_valid.onnx" \
    "$@" | grep -m1 '"allocated_bytes"'
}
runs=$((runs + 2))
a=$(peak_of --checkpoint layer1 --checkpoint layer1.0 --checkpoint layer2.1)
b=$(peak_of --checkpoint layer2.1 --checkpoint layer1.0 --checkpoint layer1)
c=$(peak_of --checkpoint layer1 --checkpoint layer2.1)
none=$(peak_of)
if [ -z "$a" ] || [ "$a" != "$b" ] || [ "$a" != "$c" ] || [ "$a" = "$none" ]; then
  fail "--checkpoint order changes the plan: '$a' vs '$b' vs '$c' (none: '$none')"
fi

# Known failures (bugs reported, not fixed yet): reported, not counted.
if [ -f "$corpus/known_failures.txt" ]; then
  before=$failures
  run_manifest "$corpus/known_failures.txt" | sed 's/^FAIL: /KNOWN FAILURE (still failing): /'
  failures=$before
fi

# Files over protobuf's limit (INT_MAX bytes) are refused before reading:
# sparse files, so they cost no disk.
for size in 2147483648 3221225472; do
  if truncate -s "$size" "$tmp/huge_$size.onnx" 2>/dev/null; then
    run 2 "huge_$size.onnx: file is larger than 2147483647 bytes" inspect "$tmp/huge_$size.onnx"
    rm -f "$tmp/huge_$size.onnx"
  fi
done

# 2. Truncations of a real model: a clean error, or exit 0 where the cut
#    leaves a complete model (a cut between top-level fields).
src="$models/resnet18.onnx"
size=$(stat -c %s "$src")
offsets="$(seq 1 48) $(seq 49 997 "$size") $(seq $((size - 40)) $((size - 1)))"
for off in $offsets; do
  cut="$tmp/resnet18_cut_$off.onnx"
  head -c "$off" "$src" >"$cut"
  for cmd in inspect plan; do
    extra=()
    [ "$cmd" = plan ] && extra=(--batch 2)
    runs=$((runs + 1))
    timeout "$limit" "$memplan" "$cmd" "${extra[@]}" "$cut" >/dev/null 2>"$tmp/err"
    rc=$?
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 2 ]; then
      fail "memplan $cmd of resnet18 cut at $off bytes: exit $rc"
      head -5 "$tmp/err"
    elif [ "$rc" -eq 2 ]; then
      if [ "$(wc -l <"$tmp/err")" -ne 1 ] ||
        ! grep -q "^memplan: error: $cut: " "$tmp/err"; then
        fail "memplan $cmd of resnet18 cut at $off bytes: bad message: $(head -3 "$tmp/err")"
      fi
    fi
  done
  rm -f "$cut"
done

# 3. External data is never opened: strace the runs when strace works here.
if command -v strace >/dev/null && strace -o /dev/null true 2>/dev/null; then
  for case in external_absolute_path external_dotdot_path external_missing_file \
    resnet18_hostile_external; do
    runs=$((runs + 1))
    strace -f -e trace=%file -o "$tmp/trace" \
      timeout "$limit" "$memplan" plan --batch 2 "$corpus/$case.onnx" >/dev/null 2>&1
    if grep -E 'memplan_corpus_fifo|does/not/exist|\.onnx\.data' "$tmp/trace" | grep -v '^[0-9]* execve'; then
      fail "$case: memplan touched an external-data path (see above)"
    fi
  done
else
  echo "note: strace unavailable; external data checked through the FIFO only"
fi

[ -n "$slowest" ] && echo "slowest run: ${slowest_s}s: $slowest"
echo "corpus_test: $runs runs, $failures failures"
[ "$failures" -eq 0 ]
