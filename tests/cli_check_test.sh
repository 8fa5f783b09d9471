#!/bin/bash
# End to end: `memplan check` exit codes, reports, budget files and baselines.
# Usage: cli_check_test.sh MEMPLAN_BINARY MODELS_DIR
set -u
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
MODELS=$(cd "$2" && pwd)
source "$(dirname "$0")/test_lib.sh"
json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }

R18=$MODELS/resnet18_train.onnx
FLAGS=(--batch 2 --precision amp_bf16)

# The threshold comes from the model's own prediction.
"$BIN" plan "$R18" "${FLAGS[@]}" --format json >"$T/plan.json" || fail "plan --format json"
PEAK=$(json "$T/plan.json" 'd["peak"]["device_bytes"]')
ALLOC=$(json "$T/plan.json" 'd["peak"]["allocated_bytes"]')
echo "resnet18 b2 device peak: $PEAK bytes"

expect 0 "budget above the peak" "$BIN" check "$R18" "${FLAGS[@]}" --budget $((PEAK + 1))
expect 0 "budget equal to the peak" "$BIN" check "$R18" "${FLAGS[@]}" --budget "$PEAK"
expect 1 "budget below the peak" "$BIN" check "$R18" "${FLAGS[@]}" --budget $((PEAK - 1))
grep -q "OVER BUDGET" "$T/out" || fail "table says OVER BUDGET"
expect 0 "--metric allocated" "$BIN" check "$R18" "${FLAGS[@]}" --budget "$ALLOC" --metric allocated
expect 1 "--metric allocated below" "$BIN" check "$R18" "${FLAGS[@]}" --budget $((ALLOC - 1)) \
  --metric allocated

# Bad input: exit 2 and one error line.
expect 2 "missing model file" "$BIN" check "$T/nope.onnx" --budget 10GiB
expect 2 "bad size" "$BIN" check "$R18" "${FLAGS[@]}" --budget 12XB
grep -q "^memplan: error: --budget: '12XB': unknown unit" "$T/err" || fail "bad size message"
expect 2 "no budget" "$BIN" check "$R18" "${FLAGS[@]}"
expect 2 "missing config" "$BIN" check --config "$T/none.json"
cat >"$T/badkey.json" <<JSON
{"checks": [{"model": "$R18", "batch": 2, "batchsize": 4, "budget": "10GiB"}]}
JSON
expect 2 "unknown config key" "$BIN" check --config "$T/badkey.json"
if [ "$(wc -l <"$T/err")" = 1 ] && grep -q "badkey.json: checks\[0\]: unknown key 'batchsize'" "$T/err"
then pass "unknown key message"; else fail "unknown key message: $(cat "$T/err")"; fi
printf '{"checks": [\n  {"model": "x.onnx",}\n]}\n' >"$T/syntax.json"
expect 2 "invalid JSON" "$BIN" check --config "$T/syntax.json"
grep -q "syntax.json:2:" "$T/err" || fail "invalid JSON names the line: $(cat "$T/err")"
# A number past the range of a double (found by the fuzzer: it used to abort).
printf '{"checks": [\n  {"model": "x.onnx", "budget": 18446744E77709551615}\n]}\n' >"$T/overflow.json"
expect 2 "number overflow in config" "$BIN" check --config "$T/overflow.json"
if [ "$(wc -l <"$T/err")" = 1 ] && grep -q "overflow.json:2:.*: invalid JSON: number overflow" "$T/err"
then pass "number overflow message"; else fail "number overflow message: $(cat "$T/err")"; fi
cat >"$T/badsize.json" <<JSON
{"checks": [{"model": "$R18", "batch": 2, "budget": "12XB"}]}
JSON
expect 2 "bad size in config" "$BIN" check --config "$T/badsize.json"

# Device budgets: the preset's memory minus a margin.
expect 0 "--device h100 --margin 10" "$BIN" check "$R18" "${FLAGS[@]}" --device h100 --margin 10
expect 2 "unknown device" "$BIN" check "$R18" "${FLAGS[@]}" --device nosuchgpu
expect 2 "--margin without --device" "$BIN" check "$R18" "${FLAGS[@]}" --budget 1GiB --margin 5
cat >"$T/dev.json" <<JSON
{"checks": [{"model": "$R18", "batch": 2, "precision": "amp_bf16", "device": "h100", "margin": 10},
            {"model": "$R18", "batch": 2, "precision": "fp32", "device": "t4", "margin": 99},
            {"model": "$R18", "batch": 2, "precision": "fp32", "device": "l4", "name": "l4"}]}
JSON
expect 1 "device budgets in a config" "$BIN" check --config "$T/dev.json" --format json
python3 - "$T/out" <<'PY' && pass "device budget bytes" || fail "device budget bytes"
import json, sys
d = json.load(open(sys.argv[1]))
a, b, c = d["checks"]
# What an H100 offers (nvidia-smi: 81559 MiB), not 80 GiB; the margin as given.
assert a["budget_bytes"] == int(81559 * 2**20 * 0.9), a["budget_bytes"]
# No margin given: advise's default, 5 % of the L4's 23034 MiB.
assert c["budget_bytes"] == int(23034 * 2**20 * 0.95), c["budget_bytes"]
assert a["status"] == "pass" and b["status"] == "over_budget", (a["status"], b["status"])
PY

# JUnit: valid XML with the failing case.
expect 1 "junit format" "$BIN" check "$R18" "${FLAGS[@]}" --budget $((PEAK - 1)) --format junit
cp "$T/out" "$T/junit.xml"
python3 - "$T/junit.xml" <<'PY' && pass "junit is valid XML with the failure" || fail "junit"
import sys, xml.etree.ElementTree as E
root = E.parse(sys.argv[1]).getroot()
cases = root.findall(".//testcase")
assert len(cases) == 1, cases
f = cases[0].find("failure")
assert f is not None and "exceeds the budget" in f.get("message"), f
PY

# Markdown has a table.
expect 0 "md format" "$BIN" check "$R18" "${FLAGS[@]}" --budget 100GiB --format md
grep -q '^| configuration | allocated | reserved | device | budget | headroom | status |$' "$T/out" \
  && grep -q '^| --- |' "$T/out" && grep -q 'pass |$' "$T/out" \
  && pass "markdown table" || fail "markdown table"

# GitHub annotations only under GITHUB_ACTIONS=true.
expect 1 "annotations" env GITHUB_ACTIONS=true "$BIN" check "$R18" "${FLAGS[@]}" --budget 1MiB
grep -q "^::error file=.*resnet18_train.onnx,title=memplan%3A over_budget::" "$T/err" \
  && pass "annotation line" || fail "annotation line: $(cat "$T/err")"
expect 1 "no annotations outside Actions" env -u GITHUB_ACTIONS "$BIN" check "$R18" "${FLAGS[@]}" \
  --budget 1MiB
grep -q "^::" "$T/err" && fail "annotation without GITHUB_ACTIONS" || pass "silent stderr"

# A budget file with three models, relative paths, defaults, every report.
mkdir -p "$T/conf"
for m in resnet18_train mobilenet_v2_train_ts bert_base_train; do
  ln -s "$MODELS/$m.onnx" "$T/conf/$m.onnx"
done
cat >"$T/conf/budgets.json" <<'JSON'
{
  "version": 1,
  "metric": "device",
  "defaults": {"precision": "amp_bf16", "optimizer": "adamw"},
  "checks": [
    {"model": "resnet18_train.onnx", "batch": 2, "budget": "40GiB"},
    {"name": "mobilenet small", "model": "mobilenet_v2_train_ts.onnx", "batch": 2,
     "budget": "40GiB"},
    {"model": "bert_base_train.onnx", "dims": {"batch": 1}, "precision": "fp32",
     "optimizer": "sgd", "budget": "1MiB"}
  ]
}
JSON
expect 1 "config with three models" "$BIN" check --config "$T/conf/budgets.json" --format json \
  --report "$T/r.xml" --report "$T/r.md" --report "$T/r.html" --timeline "$T/r.svg"
cp "$T/out" "$T/run1.json"
python3 - "$T/run1.json" "$T/r.xml" "$T/r.svg" <<'PY' && pass "config reports" || fail "config reports"
import json, sys, xml.etree.ElementTree as E
d = json.load(open(sys.argv[1]))
assert [c["status"] for c in d["checks"]] == ["pass", "pass", "over_budget"], d["summary"]
assert d["checks"][1]["name"] == "mobilenet small"
assert d["ok"] is False and d["summary"]["total"] == 3
root = E.parse(sys.argv[2]).getroot()
assert len(root.findall(".//testcase")) == 3
assert len(root.findall(".//failure")) == 1
E.parse(sys.argv[3])
PY
grep -qxF '### bert\_base\_train.onnx' "$T/r.md" || fail "md per model"
grep -q "<svg" "$T/r.html" || fail "html has the svg"

# Baseline: same run passes; a smaller baseline (a "previous" run) is a regression.
cat >"$T/conf/ok.json" <<'JSON'
{"checks": [{"model": "resnet18_train.onnx", "batch": 2, "precision": "amp_bf16",
             "budget": "40GiB"}]}
JSON
expect 0 "baseline run" "$BIN" check --config "$T/conf/ok.json" --format json
cp "$T/out" "$T/base.json"
expect 0 "no change vs baseline" "$BIN" check --config "$T/conf/ok.json" --baseline "$T/base.json"
python3 - "$T/base.json" "$T/shrunk.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
p = d["checks"][0]["plan"]["peak"]
p["device_bytes"] = int(p["device_bytes"] / 1.10)  # the old run was 10 % smaller
json.dump(d, open(sys.argv[2], "w"))
PY
expect 1 "regression over baseline" "$BIN" check --config "$T/conf/ok.json" \
  --baseline "$T/shrunk.json" --max-increase 5
grep -q "REGRESSION" "$T/out" || fail "table says REGRESSION"
expect 0 "growth within --max-increase" "$BIN" check --config "$T/conf/ok.json" \
  --baseline "$T/shrunk.json" --max-increase 15
echo '{"checks": 3}' >"$T/badbase.json"
expect 2 "bad baseline" "$BIN" check --config "$T/conf/ok.json" --baseline "$T/badbase.json"

# plan: the new formats and the timeline.
expect 0 "plan --format md" "$BIN" plan "$R18" "${FLAGS[@]}" --format md
grep -q '^| allocated |' "$T/out" || fail "plan md table"
expect 0 "plan --timeline" "$BIN" plan "$R18" "${FLAGS[@]}" --timeline "$T/p.svg"
python3 -c 'import sys, xml.etree.ElementTree as E; E.parse(sys.argv[1])' "$T/p.svg" \
  && grep -q "saved_activations" "$T/p.svg" && pass "plan svg" || fail "plan svg"

finish
