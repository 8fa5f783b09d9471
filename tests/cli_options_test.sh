#!/bin/bash
# End to end: option values come from one table per option (unknown values
# are errors listing the known ones, on the command line and in a budget
# file), and every share is a percentage (advise/check --margin, validate
# --tolerance: 5 = 5 %).
# Usage: cli_options_test.sh MEMPLAN_BINARY MODELS_DIR
set -u
BIN=$1
MODELS=$2
source "$(dirname "$0")/test_lib.sh"
M=$(cd "$MODELS" && pwd)/resnet18_train.onnx
# one_error NAME TEXT: stderr has exactly one `memplan: error:` line, the
# first, and it contains TEXT (a command-line parse error adds a usage line,
# and "did you mean" where a flag is close).
one_error() {
  local name=$1 text=$2
  if [ "$(grep -c '^memplan: error:' "$T/err")" = 1 ] && head -1 "$T/err" | grep -q '^memplan: error:' &&
     head -1 "$T/err" | grep -qF -- "$text"; then
    pass "$name: one line naming '$text'"
  else
    fail "$name: want one line containing '$text', got:"
    sed 's/^/  | /' "$T/err" | head -5
  fi
}

# ------------------------------------------------------------ option tables
expect 2 "plan --precision fp8" "$BIN" plan "$M" --batch 2 --precision fp8
one_error "plan --precision fp8" "fp32,amp_bf16,amp_fp16,bf16,fp16"
expect 2 "advise --attention flash" "$BIN" advise "$M" --budget 8GiB --attention flash
one_error "advise --attention flash" "fused,eager"
expect 2 "advise --precision fp8" "$BIN" advise "$M" --budget 8GiB --precision fp32,fp8
one_error "advise --precision fp8" "--precision: unknown precision 'fp8' (fp32, amp_bf16"
for v in eager fused; do
  expect 0 "advise --attention $v" "$BIN" advise "$M" --budget 8GiB --attention $v \
    --precision fp32 --checkpoint none --format json
done
cat >"$T/budgets.json" <<JSON
{"checks": [{"model": "$M", "batch": 2, "budget": "8GiB", "loss": "hinge"}]}
JSON
expect 2 "check config loss hinge" "$BIN" check --config "$T/budgets.json"
one_error "check config loss hinge" "'loss': 'hinge' is not one of cross_entropy, mse, none"
cat >"$T/budgets.json" <<JSON
{"checks": [{"model": "$M", "batch": 2, "budget": "8GiB", "allocator": "expandable",
             "step": "first", "mode": "train", "optimizer": "momentum"}]}
JSON
expect 0 "check config with table values" "$BIN" check --config "$T/budgets.json" --format json
got=$(python3 -c 'import json,sys; c=json.load(open(sys.argv[1]))["checks"][0]["plan"]["config"]
print(c["optimizer"], c["step"], c["allocator"])' "$T/out" 2>&1)
if [ "$got" = "momentum first expandable" ]; then pass "check config values reach the plan"; else
  fail "check config values: got '$got'"
fi

# -------------------------------------------------------------- percentages
# advise --margin: 5 and 5% are the same; 50 keeps half the budget free.
"$BIN" advise "$M" --budget 8GiB --precision fp32 --checkpoint none --margin 5 --format json \
  >"$T/m5" 2>/dev/null
"$BIN" advise "$M" --budget 8GiB --precision fp32 --checkpoint none --margin 5% --format json \
  >"$T/m5p" 2>/dev/null
"$BIN" advise "$M" --budget 8GiB --precision fp32 --checkpoint none --margin 50 --format json \
  >"$T/m50" 2>/dev/null
got=$(python3 - "$T/m5" "$T/m5p" "$T/m50" <<'PY' 2>&1
import json, sys
a, b, c = (json.load(open(f)) for f in sys.argv[1:])
a, b, c = a["budget"], b["budget"], c["budget"]
print(a["margin"], a == b, c["margin"], c["usable_bytes"] * 2 == c["budget_bytes"])
PY
)
if [ "$got" = "0.05 True 0.5 True" ]; then pass "advise --margin is percent (5 = 5% = 0.05)"; else
  fail "advise --margin: got '$got'"
fi
expect 2 "advise --margin 120" "$BIN" advise "$M" --budget 8GiB --margin 120
one_error "advise --margin 120" "--margin '120': expected a percentage in [0, 100), e.g. 5 or 5%"
expect 2 "check --margin 120" "$BIN" check "$M" --batch 2 --device h100 --margin 120
one_error "check --margin 120" "margin must be a percent in [0, 100)"
expect 2 "validate --tolerance 120" "$BIN" validate "$M" --batch 2 --tolerance 120
one_error "validate --tolerance 120" \
  "--tolerance '120': expected a percentage in [0, 100), e.g. 5 or 5%"
expect 2 "validate --tolerance 0.05x" "$BIN" validate "$M" --batch 2 --tolerance 0.05x
one_error "validate --tolerance 0.05x" "--tolerance '0.05x': expected a percentage"
# --model-load applies to whole-model casts only: refused, never ignored.
expect 2 "plan --model-load with fp32" "$BIN" plan "$M" --batch 2 --model-load cast
one_error "plan --model-load with fp32" "--model-load cast: applies to --precision bf16 or fp16"
expect 2 "advise --model-load without bf16/fp16" "$BIN" advise "$M" --budget 8GiB --model-load direct
one_error "advise --model-load without bf16/fp16" "--model-load direct: applies to --precision bf16"
expect 2 "plan --model-load bogus" "$BIN" plan "$M" --batch 2 --precision bf16 --model-load bogus
one_error "plan --model-load bogus" "--model-load"
kept=$("$BIN" plan "$MODELS/qwen_bigvocab_b_train.onnx" --batch 2 --step first --precision bf16 --model-load cast --format json 2>/dev/null |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["peak"]["reserved_bytes"])')
emptied=$("$BIN" plan "$MODELS/qwen_bigvocab_b_train.onnx" --batch 2 --step first --precision bf16 --model-load cast-empty-cache --format json 2>/dev/null |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["peak"]["reserved_bytes"])')
if [ -n "$kept" ] && [ -n "$emptied" ] && [ "$kept" -gt "$emptied" ]; then
  pass "plan --model-load cast keeps the fp32 copies reserved ($kept > $emptied)"
else
  fail "plan --model-load: cast $kept, cast-empty-cache $emptied"
fi
# ------------------------------------------------------------ --max-nodes
# The node limit on every command that reads a model: below the model's node
# count, one line naming the file, the limit and the flag; at it, a result.
expect 0 "inspect (node count)" "$BIN" inspect "$M"
N=$(grep -oE '^  [0-9]+ nodes' "$T/out" | grep -oE '[0-9]+')
if [ -n "$N" ] && [ "$N" -gt 1 ]; then pass "node count $N"; else fail "no node count in inspect"; fi
LOW=$((N - 1))
over="resnet18_train.onnx: more than $LOW nodes (the node limit; --max-nodes N raises it)"
cat >"$T/nodes.json" <<JSON
{"checks": [{"model": "$M", "batch": 2, "budget": "8GiB"}]}
JSON
for cmd in "plan $M --batch 2" "inspect $M" "check $M --batch 2 --budget 8GiB" \
  "check --config $T/nodes.json" "validate $M --batch 2" \
  "advise $M --budget 8GiB --precision fp32 --checkpoint none" \
  "sweep $M --dim batch=1..2" "compare $M $M --precision fp32 --budget 8GiB" "estimate $M --batch 2"; do
  # shellcheck disable=SC2086  # the command's words
  expect 2 "$cmd --max-nodes $LOW" "$BIN" $cmd --max-nodes "$LOW"
  one_error "$cmd --max-nodes $LOW" "$over"
done
for cmd in "plan $M --batch 2" "inspect $M" "check $M --batch 2 --budget 8GiB" \
  "check --config $T/nodes.json" "advise $M --budget 8GiB --precision fp32 --checkpoint none" \
  "sweep $M --dim batch=1..2" "compare $M $M --precision fp32 --budget 8GiB" "estimate $M --batch 2"; do
  for n in "$N" 1000000; do
    # shellcheck disable=SC2086
    expect 0 "$cmd --max-nodes $n" "$BIN" $cmd --max-nodes "$n"
  done
done
# The default (500,000) is the limit without the flag: the same plan as at N.
expect 0 "plan --max-nodes N json" "$BIN" plan "$M" --batch 2 --max-nodes "$N" --format json
cp "$T/out" "$T/at_n.json"
expect 0 "plan default json" "$BIN" plan "$M" --batch 2 --format json
if cmp -s "$T/out" "$T/at_n.json"; then pass "--max-nodes N plans as the default"; else
  fail "--max-nodes N changed the plan"
fi
# Bad values: exit 2, one line naming the flag.
for v in 0 -0 -5 abc 010 0x10 1e6 1.5 "" 99999999999999999999; do
  expect 2 "plan --max-nodes '$v'" "$BIN" plan "$M" --batch 2 --max-nodes "$v"
  one_error "plan --max-nodes '$v'" "--max-nodes"
done
expect 2 "inspect --max-nodes 0" "$BIN" inspect "$M" --max-nodes 0
one_error "inspect --max-nodes 0" "--max-nodes: '0' must be positive"

finish
