#!/bin/bash
# End to end: fine-tuning flags (--freeze, --train-only, --lora, --weights) on
# plan, check and advise; bad values are one error line and exit 2; the
# predictions stay within their bounds of the H200 measurements
# (bench/finetune_compare.py --check on bench/results/finetune_h200.jsonl).
# Usage: cli_finetune_test.sh MEMPLAN_BINARY MODELS_DIR REPO_ROOT
set -u
BIN=$1
MODELS=$(cd "$2" && pwd)
ROOT=$3
source "$(dirname "$0")/test_lib.sh"
L=$MODELS/llama_gqa_train.onnx
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

# ------------------------------------------------------------ bad flags
expect 2 "--freeze unknown module" "$BIN" plan "$L" --batch 2 --freeze encoder.block.0
one_error "--freeze unknown module" "--freeze: 'encoder.block.0' matches no parameter"
expect 2 "--train-only matching nothing" "$BIN" plan "$L" --batch 2 --train-only 'layers\.99\.'
one_error "--train-only matching nothing" "matches no parameter"
expect 2 "--freeze bad regex" "$BIN" plan "$L" --batch 2 --freeze 'layers[0'
one_error "--freeze bad regex" "neither a module path nor a valid regex"
expect 2 "--lora r=0" "$BIN" plan "$L" --batch 2 --lora r=0
one_error "--lora r=0" "--lora: r='0' is not a positive integer"
expect 2 "--lora unknown key" "$BIN" plan "$L" --batch 2 --lora r=4,rank=2
one_error "--lora unknown key" "unknown key 'rank'"
expect 2 "--lora target matching nothing" "$BIN" plan "$L" --batch 2 --lora r=4,targets=query
one_error "--lora target matching nothing" "target 'query' matches no Linear layer"
expect 2 "--weights nf4 without a frozen base" "$BIN" plan "$L" --batch 2 --weights nf4
one_error "--weights nf4 without a frozen base" "--weights nf4: no frozen Linear weight"
expect 2 "--weights int3" "$BIN" plan "$L" --batch 2 --weights int3
one_error "--weights int3" "native,int8,nf4,int4,fp8"
expect 2 "check --lora r=0" "$BIN" check "$L" --batch 2 --budget 8GiB --lora r=0
one_error "check --lora r=0" "--lora"
expect 2 "advise --freeze nothing" "$BIN" advise "$L" --budget 8GiB --freeze nosuch
one_error "advise --freeze nothing" "matches no parameter"

# ------------------------------------------------------------ what is planned
expect 0 "plan --lora --weights nf4" "$BIN" plan "$L" --batch 2 --precision bf16 \
  --lora r=16 --weights nf4 --format json
python3 - "$T/out" <<'PY' && pass "QLoRA plan: counts and nf4 bytes" || fail "QLoRA plan: counts and nf4 bytes"
import json, sys
p = json.load(open(sys.argv[1]))["parameters"]
# PEFT counts 212,992 LoRA parameters (r=16 on q_proj, v_proj) for this model
# (bench/results/finetune_h200.jsonl); nf4 packs the frozen Linear weights.
assert p["count"] == 212992 and p["lora_count"] == 212992, p
assert p["weights"] == "nf4" and 0 < p["quantized_bytes"] < p["bytes"], p
PY
# QLoRA of the 1.07 B model: torch.cuda.memory_allocated() after loading was
# 762,828,800 bytes on the H200 (NF4 Linear weights with double-quantized
# absmax, bf16 embeddings, norms and head, fp32 adapters); allocator rounding
# and 2 MiB that memplan does not place make the rest.
expect 0 "plan llama_1b QLoRA" "$BIN" plan "$MODELS/llama_1b_train.onnx" --batch 1 --precision bf16 \
  --lora r=16 --weights nf4 --format json
python3 - "$T/out" <<'PY' && pass "QLoRA weights within 1 % of 762,828,800 B" || fail "QLoRA weights within 1 %"
import json, sys
b = json.load(open(sys.argv[1]))["parameters"]["bytes"]
assert abs(b - 762828800) / 762828800 < 0.01, b
PY
expect 0 "check --train-only within budget" "$BIN" check "$L" --batch 2 --train-only lm_head --budget 80GiB
expect 0 "inspect weights per format" "$BIN" inspect "$L"
grep -q "nf4" "$T/out" && pass "inspect lists nf4 bytes" || fail "inspect lists nf4 bytes"
# Frozen parameters take no gradient and no optimizer state: freezing
# everything but the head lowers the peak.
full=$("$BIN" plan "$L" --batch 2 --format json | python3 -c 'import json,sys; print(json.load(sys.stdin)["peak"]["allocated_bytes"])')
head_only=$("$BIN" plan "$L" --batch 2 --train-only lm_head --format json | python3 -c 'import json,sys; print(json.load(sys.stdin)["peak"]["allocated_bytes"])')
[ "$head_only" -lt "$full" ] && pass "train-only lowers the peak ($head_only < $full)" ||
  fail "train-only lowers the peak ($head_only vs $full)"

# ------------------------------------------------------------ against the H200
compare_rows() {  # ROWS NAME: bench/finetune_compare.py --check on ROWS
  if python3 "$ROOT/bench/finetune_compare.py" "$BIN" "$MODELS" "$1" --check > "$T/cmp" 2>&1; then
    pass "finetune_compare --check on $2 (H200 rows within their bounds)"
  else
    fail "finetune_compare --check on $2:"
    tail -8 "$T/cmp" | sed 's/^/  | /'
  fi
}
compare_rows "$ROOT/bench/results/finetune_h200.jsonl" "the fine-tuning rows"
# int8 (LLM.int8) and int4 (FP4) bases under LoRA, weight-only inference.
compare_rows "$ROOT/bench/results/finetune_quant_h200.jsonl" "the quantized rows"
finish
