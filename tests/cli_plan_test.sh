#!/bin/bash
# End to end: `memplan inspect` and `memplan plan` on the calibration models:
# parameter counts, the JSON contract, and exit codes/messages on bad input.
# Usage: cli_plan_test.sh MEMPLAN_BINARY MODELS_DIR
set -u
BIN=$1
MODELS=$2
source "$(dirname "$0")/test_lib.sh"
# one_error NAME TEXT: stderr is exactly one line, an error containing TEXT.
one_error() {
  local name=$1 text=$2
  local lines
  lines=$(wc -l <"$T/err")
  if [ "$lines" = 1 ] && grep -q '^memplan: error: ' "$T/err" && grep -qF -- "$text" "$T/err"; then
    pass "$name: one error line naming $text"
  else
    fail "$name: want one 'memplan: error:' line containing '$text', got $lines line(s):"
    sed 's/^/  | /' "$T/err" | head -5
  fi
}

# ---------------------------------------------------------------- inspect

# count MODEL WANT: inspect --batch 2 --format json reports WANT parameters.
count() {
  local model=$1 want=$2
  expect 0 "inspect $model" "$BIN" inspect "$MODELS/$model.onnx" --batch 2 --format json
  local got
  got=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["parameters"]["count"])' \
    "$T/out" 2>&1)
  if [ "$got" = "$want" ]; then pass "$model parameters $want"; else
    fail "$model parameters: got $got, want $want"
  fi
}
count resnet50_train 25557032
count bert_base_train 109483778
count gpt2_train 124439808  # the tied LM head counted once

# The JSON carries the symbols, the bound shapes and per-tensor lists.
expect 0 "inspect gpt2 json" "$BIN" inspect "$MODELS/gpt2_train.onnx" --batch 2 --format json
python3 - "$T/out" <<'PY' && pass "inspect json contract" || fail "inspect json contract"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["batch_symbol"] == "batch", d["batch_symbol"]
assert "batch" in d["symbols"], d["symbols"]
p = d["parameters"]
assert p["bytes"] == 4 * p["count"], p  # fp32 export
names = [t["name"] for t in d["parameter_tensors"]]
assert len(names) == len(set(names)), "a parameter tensor listed twice"
assert sum(1 for t in d["parameter_tensors"]) > 100, len(names)
inp = d["inputs"][0]
assert inp["shape"][0] == 2, inp  # --batch 2 bound
assert inp["declared"][0] == "batch", inp
assert isinstance(d["tensors"], list) and len(d["tensors"]) > 100
PY

# The table names the batch symbol and, unbound, says how to bind it.
expect 0 "inspect table" "$BIN" inspect "$MODELS/resnet50_train.onnx"
if grep -q "symbols: batch (batch)" "$T/out"; then pass "table names the batch symbol"; else
  fail "table names the batch symbol: $(grep symbols "$T/out")"
fi
grep -q "input  float32 \[batch, 3, 224, 224\]" "$T/out" && pass "unbound input shape" ||
  fail "unbound input shape: $(sed -n '/^inputs/,/^outputs/p' "$T/out")"
grep -q "bind every symbol with --batch" "$T/out" && pass "bind hint" || fail "bind hint"
grep -q "^parameters  25,557,032 " "$T/out" && pass "table parameter count" ||
  fail "table parameter count: $(grep '^parameters' "$T/out")"
expect 0 "inspect table bound" "$BIN" inspect "$MODELS/resnet50_train.onnx" --batch 3
grep -q "input  float32 \[3, 3, 224, 224\]" "$T/out" && pass "bound input shape" ||
  fail "bound input shape"
if grep -q "bind every symbol" "$T/out"; then fail "bound table still asks to bind"; else
  pass "bound table has no bind hint"
fi

# ---------------------------------------------------------------- plan

R18=$MODELS/resnet18_train.onnx
# check_plan FILE MODE: the JSON contract of `plan --format json`.
check_plan() {
  python3 - "$1" "$2" "$R18" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
mode, model = sys.argv[2], sys.argv[3]
assert d["model"] == model, d["model"]
c = d["config"]
assert c["mode"] == mode and c["batch"] == 2, c
for k in ("precision", "attention", "allocator", "context_bytes"):
    assert k in c, k
p = d["peak"]
a, r, dev = p["allocated_bytes"], p["reserved_bytes"], p["device_bytes"]
assert all(isinstance(x, int) for x in (a, r, dev)), p
assert 0 < a <= r <= dev, (a, r, dev)
assert dev == r + c["context_bytes"], (dev, r, c["context_bytes"])
assert p["lower_bound_bytes"] <= a, p
assert isinstance(p["at"]["node"], str) and p["at"]["node"], p["at"]
assert p["at"]["phase"] in ("forward", "backward", "optimizer"), p["at"]
cats = {"parameters", "gradients", "optimizer_state", "saved_activations", "transients",
        "workspaces"}
b = d["breakdown"]
assert set(b) == cats, sorted(b)
assert sum(b.values()) == a, (sum(b.values()), a)
assert d["parameters"]["count"] == 11689512, d["parameters"]
assert b["parameters"] >= d["parameters"]["bytes"], (b["parameters"], d["parameters"])
if mode == "train":
    for k in ("optimizer", "loss", "step", "checkpoint"):
        assert k in c, k
    for s in ("first_step", "steady"):
        assert d[s]["allocated_bytes"] <= d[s]["reserved_bytes"] <= d[s]["device_bytes"], d[s]
    assert d["steady"]["allocated_bytes"] == a  # the default step is steady
    assert b["gradients"] > 0 and b["optimizer_state"] > 0, b  # adamw at its step
    assert p["at"]["phase"] == "optimizer", p["at"]
    assert d["flops"]["backward"] > d["flops"]["forward"] > 0, d["flops"]
else:
    assert "first_step" not in d and "steady" not in d
    assert b["gradients"] == 0 and b["optimizer_state"] == 0, b
    assert p["at"]["phase"] == "forward", p["at"]
    assert d["flops"]["backward"] == 0 and d["flops"]["forward"] > 0, d["flops"]
PY
}

expect 0 "plan inference" "$BIN" plan "$R18" --batch 2 --mode inference --format json
cp "$T/out" "$T/inf.json"
check_plan "$T/inf.json" inference && pass "plan inference json" || fail "plan inference json"
expect 0 "plan train" "$BIN" plan "$R18" --batch 2 --mode train --format json
cp "$T/out" "$T/train.json"
check_plan "$T/train.json" train && pass "plan train json" || fail "plan train json"

# Training needs more than inference; amp and --step first are accepted.
python3 - "$T/inf.json" "$T/train.json" <<'PY' && pass "train > inference" || fail "train > inference"
import json, sys
i, t = (json.load(open(f)) for f in sys.argv[1:3])
assert t["peak"]["allocated_bytes"] > i["peak"]["allocated_bytes"], (t["peak"], i["peak"])
PY
expect 0 "plan first step" "$BIN" plan "$R18" --batch 2 --step first --format json
python3 - "$T/out" "$T/train.json" <<'PY' && pass "--step first" || fail "--step first"
import json, sys
f, s = (json.load(open(x)) for x in sys.argv[1:3])
assert f["config"]["step"] == "first", f["config"]
assert f["peak"]["allocated_bytes"] == f["first_step"]["allocated_bytes"]
assert f["first_step"] == s["first_step"] and f["steady"] == s["steady"]
PY
expect 0 "plan reserve" "$BIN" plan "$R18" --batch 2 --reserve 1GiB --format json
python3 - "$T/out" <<'PY' && pass "--reserve 1GiB" || fail "--reserve 1GiB"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["config"]["context_bytes"] == 2**30, d["config"]
assert d["peak"]["device_bytes"] == d["peak"]["reserved_bytes"] + 2**30, d["peak"]
PY
expect 0 "plan table" "$BIN" plan "$R18" --batch 2
# The peak's op is named with the module that runs it (dynamo exports record module scopes):
# resnet18 b8 peaks in backward inside layer4.
"$BIN" plan "$R18" --batch 8 >"$T/b8" 2>&1
grep -qE "peak at [^ ]+ in module layer4[A-Za-z0-9_.]* \(backward\)" "$T/b8" &&
  pass "peak at names the module" || fail "peak at names the module"
for want in "peak allocated" "peak reserved" "device total" "peak at " "optimizer_state" \
  "parameters 11,689,512"; do
  grep -qF "$want" "$T/out" && pass "table has '$want'" || fail "table has '$want'"
done
expect 0 "plan --dim binds the batch" "$BIN" plan "$R18" --dim batch=2 --format json
python3 - "$T/out" "$T/train.json" <<'PY' && pass "--dim batch=2" || fail "--dim batch=2"
import json, sys
a, b = (json.load(open(x)) for x in sys.argv[1:3])
assert a["peak"] == b["peak"], (a["peak"], b["peak"])
PY

# ---------------------------------------------------------------- bad input

expect 2 "missing file" "$BIN" plan "$T/nope.onnx" --batch 2
one_error "missing file" "$T/nope.onnx"
expect 2 "missing file (inspect)" "$BIN" inspect "$T/nope.onnx"
one_error "missing file (inspect)" "$T/nope.onnx"
printf 'this is not a model\n' >"$T/text.onnx"
expect 2 "not a model" "$BIN" plan "$T/text.onnx" --batch 2
one_error "not a model" "$T/text.onnx"
expect 2 "not a model (inspect)" "$BIN" inspect "$T/text.onnx"
one_error "not a model (inspect)" "$T/text.onnx"
# A gzipped model plans as the model; damaged gzip data is one error, exit 2.
gzip -c "$R18" >"$T/r18.onnx.gz"
expect 0 "plan of the model" "$BIN" plan "$R18" --batch 2 --format json
cp "$T/out" "$T/plain.json"
expect 0 "plan of the gzipped model" "$BIN" plan "$T/r18.onnx.gz" --batch 2 --format json
python3 - "$T/plain.json" "$T/out" <<'PY' && pass "gzipped model: same peak" ||
import json, sys
a, b = (json.load(open(x)) for x in sys.argv[1:3])
assert a["peak"] == b["peak"] and a["peak"]["allocated_bytes"] > 0, (a["peak"], b["peak"])
PY
  fail "gzipped model: the plan differs"
head -c 2000 "$T/r18.onnx.gz" >"$T/cut.onnx.gz"
expect 2 "truncated gzip" "$BIN" plan "$T/cut.onnx.gz" --batch 2
one_error "truncated gzip" "$T/cut.onnx.gz: not a valid ONNX model once decompressed"
printf '\x1f\x8b\x00garbage' >"$T/bad.onnx.gz"
expect 2 "corrupt gzip (inspect)" "$BIN" inspect "$T/bad.onnx.gz"
one_error "corrupt gzip (inspect)" "$T/bad.onnx.gz: gzip data is truncated or corrupt"
expect 2 "--batch 0" "$BIN" plan "$R18" --batch 0
one_error "--batch 0" "--batch"
one_error "--batch 0 names the model" "$R18"
expect 2 "--batch -3 (inspect)" "$BIN" inspect "$R18" --batch -3
one_error "--batch -3 (inspect)" "--batch"
expect 2 "--dim foo" "$BIN" plan "$R18" --batch 2 --dim foo
one_error "--dim foo" "--dim 'foo'"
one_error "--dim foo names the model" "$R18"
expect 2 "--dim batch=x" "$BIN" plan "$R18" --dim batch=x
one_error "--dim batch=x" "'x' is not a decimal integer"
expect 2 "unbound batch" "$BIN" plan "$R18"
one_error "unbound batch" "$R18"
grep -q -- "--batch N" "$T/err" && pass "unbound batch says --batch N" ||
  fail "unbound batch says --batch N: $(cat "$T/err")"
expect 2 "unbound batch in inference" "$BIN" plan "$R18" --mode inference
one_error "unbound batch in inference" "$R18"
expect 2 "bad reserve" "$BIN" plan "$R18" --batch 2 --reserve 12XB
one_error "bad reserve" "--reserve"
# Nothing goes to stdout on error.
expect 2 "no stdout on error" "$BIN" plan "$T/nope.onnx" --batch 2 --format json
if [ -s "$T/out" ]; then fail "stdout on error: $(head -c 200 "$T/out")"; else
  pass "stdout empty on error"
fi

# The heap reserved up front for huge pages (main.cc) is sized within an
# address-space limit: under ulimit -v a plan still runs, with the same answer.
# Not under sanitizers: their shadow memory alone needs terabytes of address space.
if [ -n "${MEMPLAN_CORPUS_SANITIZED:-}" ]; then
  pass "plan under ulimit -v: not checked under sanitizers (shadow memory)"
else
  expect 0 "plan" "$BIN" plan "$R18" --batch 2 --format json
  cp "$T/out" "$T/unlimited.json"
  expect 0 "plan under ulimit -v 300000" bash -c 'ulimit -v 300000 && exec "$@"' _ \
    "$BIN" plan "$R18" --batch 2 --format json
  cmp -s "$T/out" "$T/unlimited.json" && pass "same plan under ulimit -v" ||
    fail "plan under ulimit -v differs from the unlimited one"
fi

finish
