#!/usr/bin/env bash
# `memplan plan --compare TRACE` and `check --trace TRACE` end to end: the plan's per-phase and
# per-module figures, the comparison sorted by the largest difference, the timeline overlay,
# and bad trace files (one error line, exit 2).
# Usage: cli_compare_test.sh MEMPLAN MODELS_DIR TRACES_DIR
BIN=$1
MODELS=$2
TRACES=$3
. "$(dirname "$0")/test_lib.sh"
R18="$MODELS/resnet18_train.onnx"

# The plan JSON has per-phase peaks whose largest is the step's, and per-module peaks.
expect 0 "plan json" "$BIN" plan "$R18" --batch 8 --format json
cp "$T/out" "$T/r18.json"
python3 - "$T/r18.json" <<'PY' && pass "plan json phases and modules" || fail "plan json phases and modules"
import json, sys
d = json.load(open(sys.argv[1]))
for k in ("first_step", "steady"):
    ph = d[k]["phases"]
    assert sorted(ph) == ["backward", "forward", "optimizer"], ph
    assert max(v["allocated_bytes"] for v in ph.values()) == d[k]["allocated_bytes"], k
names = [m["module"] for m in d["modules"]]
assert "layer1.0" in names and "layer4.1.conv2" in names and "fc" in names, names[:5]
for m in d["modules"]:
    assert 0 < m["forward_allocated_bytes"] <= d["steady"]["phases"]["forward"]["allocated_bytes"], m
    assert 0 < m["backward_allocated_bytes"] <= d["steady"]["phases"]["backward"]["allocated_bytes"], m
PY

# A run equal to the plan but for two modules: they come first, with their differences.
python3 "$TRACES/synth_trace.py" "$T/r18.json" "$T/run.json" layer3.1:backward_rise:50331648 \
  layer2.0:forward_kept:-25165824
expect 0 "compare table" "$BIN" plan "$R18" --batch 8 --compare "$T/run.json" --compare-rows 3
grep -A3 "modules: 67 of 67 planned" "$T/out" > "$T/rows"
sed -n 2p "$T/rows" | grep -q "layer3.1 .*backward rise .*+48.0 MiB" && pass "largest difference first" ||
  fail "largest difference first: $(sed -n 2p "$T/rows")"
sed -n 3p "$T/rows" | grep -q "layer2.0 .*forward kept .*-24.0 MiB" && pass "second largest" ||
  fail "second largest: $(sed -n 3p "$T/rows")"
grep -q "steady step  *allocated .* +0 B" "$T/out" && pass "steps equal" || fail "steps equal"
grep -q "more rows (--compare-rows 0 shows all)" "$T/out" && pass "rows limited" || fail "rows limited"
expect 0 "compare json" "$BIN" plan "$R18" --batch 8 --compare "$T/run.json" --format json
python3 - "$T/out" <<'PY' && pass "compare json" || fail "compare json"
import json, sys
c = json.load(open(sys.argv[1]))["compare"]
m = c["modules"]
assert (m[0]["name"], m[0]["phase"], m[0]["metric"], m[0]["diff_bytes"]) == ("layer3.1", "backward", "rise", 50331648), m[0]
assert (m[1]["name"], m[1]["phase"], m[1]["metric"], m[1]["diff_bytes"]) == ("layer2.0", "forward", "kept", -25165824), m[1]
assert len(m) == 3 * 67, len(m)
assert all(r["diff_bytes"] == 0 for r in m[2:]), m[2]
assert c["modules_matched"] == c["modules_planned"] == 67 and c["run_step"] == 2, c
assert len(c["phases"]) == 6 and all(r["diff_bytes"] == 0 for r in c["phases"])
PY

# The timeline draws the run over the plan.
expect 0 "compare timeline" "$BIN" plan "$R18" --batch 8 --compare "$T/run.json" --timeline "$T/t.svg"
grep -q 'id="measured-allocated"' "$T/t.svg" && grep -q "run allocated" "$T/t.svg" &&
  pass "timeline overlay" || fail "timeline overlay"
expect 0 "plain timeline" "$BIN" plan "$R18" --batch 8 --timeline "$T/p.svg"
grep -q 'measured' "$T/p.svg" && fail "no overlay without --compare" || pass "no overlay without --compare"

# A run recorded on the unwrapped model ("transformer.h.0" for the export's "m.transformer.h.0").
G2="$MODELS/gpt2_train.onnx"
expect 0 "gpt2 plan json" "$BIN" plan "$G2" --batch 1 --precision amp_bf16 --format json
cp "$T/out" "$T/g2.json"
python3 "$TRACES/synth_trace.py" "$T/g2.json" "$T/g2run.json" --drop-prefix transformer.h.7:backward_rise:104857600
expect 0 "gpt2 compare" "$BIN" plan "$G2" --batch 1 --precision amp_bf16 --compare "$T/g2run.json" --format json
python3 - "$T/out" <<'PY' && pass "prefix stripped" || fail "prefix stripped"
import json, sys
c = json.load(open(sys.argv[1]))["compare"]
assert c["stripped_components"] == 1 and c["modules_matched"] == c["modules_planned"] - 1, c
assert (c["modules"][0]["name"], c["modules"][0]["diff_bytes"]) == ("transformer.h.7", 104857600)
PY

# A trace as the monitor writes it (a fake run: no module of this model).
expect 0 "monitor trace" "$BIN" plan "$R18" --batch 8 --compare "$TRACES/fake_monitor_leak.json"
grep -q "modules: 0 of 67 planned found in the run (8 measured)" "$T/out" && grep -q "1 leak" "$T/out" &&
  pass "monitor trace read" || fail "monitor trace read"

# Bad trace files: one line, the file named, exit 2.
bad() {  # bad NAME CONTENT EXPECTED-MESSAGE-PART
  printf '%s' "$2" >"$T/bad.json"
  expect 2 "bad trace: $1" "$BIN" plan "$R18" --batch 8 --compare "$T/bad.json"
  if [ "$(wc -l <"$T/err")" = 1 ] && grep -q "^memplan: error: $T/bad.json: .*$3" "$T/err"; then
    pass "bad trace message: $1"
  else
    fail "bad trace message: $1: $(cat "$T/err")"
  fi
}
bad "not json" '{"schema": ' "not JSON"
bad "empty file" '' "not JSON"
bad "array" '[1, 2]' "not a memplan trace"
bad "schema" '{"schema": "other", "version": 1, "steps": []}' "schema: expected"
bad "version" '{"schema": "memplan-trace", "version": 2, "steps": [{}]}' "version: this memplan reads trace version 1, got 2"
bad "no steps" '{"schema": "memplan-trace", "version": 1, "steps": []}' "steps: expected a non-empty list"
bad "negative" '{"schema": "memplan-trace", "version": 1, "steps": [{"peak_allocated": -1, "peak_reserved": 0}]}' "steps\[0\]: peak_allocated: expected a byte count"
bad "huge" '{"schema": "memplan-trace", "version": 1, "steps": [{"peak_allocated": 18446744073709551615, "peak_reserved": 0}]}' "peak_allocated: expected a byte count"
bad "missing peak" '{"schema": "memplan-trace", "version": 1, "steps": [{"peak_reserved": 0}]}' "peak_allocated: missing"
bad "phase" '{"schema": "memplan-trace", "version": 1, "steps": [{"peak_allocated": 1, "peak_reserved": 1, "phases": {"sideways": {}}}]}' "phases: sideways: unknown phase"
bad "module" '{"schema": "memplan-trace", "version": 1, "steps": [{"peak_allocated": 1, "peak_reserved": 1, "modules": {"fc": {"forward": "x"}}}]}' "modules: fc: forward: expected a byte count"
bad "module figure" '{"schema": "memplan-trace", "version": 1, "steps": [{"peak_allocated": 1, "peak_reserved": 1, "modules": {"fc": {"sideways": 1}}}]}' "modules: fc: sideways: unknown figure"
bad "sample" '{"schema": "memplan-trace", "version": 1, "steps": [{"peak_allocated": 1, "peak_reserved": 1, "samples": [[0, "forward", 1]]}]}' "samples\[0\]: expected \[seconds"
bad "columns" '{"schema": "memplan-trace", "version": 1, "sample_columns": ["a"], "steps": [{"peak_allocated": 1, "peak_reserved": 1}]}' "sample_columns"
bad "deep" "$(python3 -c 'print("[" * 100000 + "]" * 100000)')" "nested deeper than 64 levels"
expect 2 "missing trace" "$BIN" plan "$R18" --batch 8 --compare "$T/nope.json"
grep -q "^memplan: error: $T/nope.json: cannot open the trace file" "$T/err" && pass "missing trace message" ||
  fail "missing trace message: $(cat "$T/err")"
expect 2 "directory trace" "$BIN" plan "$R18" --batch 8 --compare "$T"
grep -q "^memplan: error: $T: cannot" "$T/err" && pass "directory trace message" ||
  fail "directory trace message: $(cat "$T/err")"
expect 2 "compare with md" "$BIN" plan "$R18" --batch 8 --compare "$T/run.json" --format md
grep -q "^memplan: error: --compare: works with --format table or json" "$T/err" &&
  pass "compare format message" || fail "compare format message: $(cat "$T/err")"

# check --trace gates the recorded run, not the plan: the synthetic run equals the plan, so the
# same budget decides the same way; the fake monitor's run (128 MiB reserved) fits a budget the
# plan does not.
expect 1 "check plan over" "$BIN" check "$R18" --batch 8 --budget 1300MiB
expect 1 "check run over" "$BIN" check "$R18" --batch 8 --budget 1300MiB --trace "$T/run.json"
grep -q "(run $T/run.json)" "$T/out" && grep -Eq "measured in $T/run.json \(planned [0-9.]+ GiB\)" "$T/out" &&
  pass "check names the run" || fail "check names the run: $(cat "$T/out")"
expect 0 "check run fits" "$BIN" check "$R18" --batch 8 --budget 1300MiB --metric reserved \
  --trace "$TRACES/fake_monitor_leak.json" --format json
python3 - "$T/out" <<'PY' && pass "check run json" || fail "check run json"
import json, sys
c = json.load(open(sys.argv[1]))
case = c["checks"][0] if "checks" in c else c["cases"][0]
assert case["value_bytes"] == 134217728 and case["measured_from"].endswith("fake_monitor_leak.json"), case
PY
expect 2 "check bad trace" "$BIN" check "$R18" --batch 8 --budget 1GiB --trace "$T/bad.json"
grep -q "^memplan: error: $T/bad.json: " "$T/err" && pass "check bad trace message" ||
  fail "check bad trace message: $(cat "$T/err")"

finish
