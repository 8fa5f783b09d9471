#!/bin/bash
# End to end: the warnings about the model that no plan shows reach plan,
# check and advise, in text (stderr, and advise's own output) and in JSON:
# the export's mode (train / eval / mixed / cannot tell) and the default
# loss on an output that is not class logits. The models are small exports
# as torch.onnx writes them (tests/ux_models/make_ux_models.py) and the
# shipped calibration exports.
# Usage: cli_warnings_test.sh MEMPLAN_BINARY UX_MODELS_DIR MODELS_DIR
set -u
BIN=$1
UX=$(cd "$2" && pwd)
MODELS=$3
source "$(dirname "$0")/test_lib.sh"
has() {
  if grep -qF -- "$3" "$2"; then pass "$1"; else
    fail "$1: no '$3' in:"
    sed 's/^/  | /' "$2" | head -8
  fi
}
lacks() {
  if grep -qF -- "$3" "$2"; then
    fail "$1: '$3' in:"
    sed 's/^/  | /' "$2" | head -8
  else pass "$1"; fi
}
# json NAME PYTHON-EXPR: the expression over d (stdout as JSON) is true.
json() {
  if python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if eval(sys.argv[2]) else 1)' \
    "$T/out" "$2"; then pass "$1"; else fail "$1: $2 is false"; fi
}
EVAL="exported in eval mode"
UNKNOWN="cannot tell whether the model was exported in train mode"
LOSS="the default loss (cross entropy on class logits) may not fit"

# ------------------------------------------------------------ the export's mode
for m in dynamo_train_bn dynamo_train_dropout dynamo_train_dropout_p0 ts_train_bn; do
  expect 0 "$m: plan" "$BIN" plan "$UX/$m.onnx" --batch 2 --format json
  json "$m: a train export has no warning" 'd["warnings"] == []'
  lacks "$m: nothing on stderr" "$T/err" "warning:"
done
for m in dynamo_eval_bn ts_eval_bn; do
  expect 0 "$m: plan" "$BIN" plan "$UX/$m.onnx" --batch 2
  has "$m: plan warns on stderr" "$T/err" "warning: $UX/$m.onnx: the model was $EVAL (1 "
  expect 0 "$m: plan json" "$BIN" plan "$UX/$m.onnx" --batch 2 --format json
  json "$m: the warning in plan JSON" "any('$EVAL' in w for w in d['warnings'])"
  expect 0 "$m: inference plans do not warn" "$BIN" plan "$UX/$m.onnx" --batch 2 --mode inference
  lacks "$m: no warning in inference" "$T/err" "warning:"
done
expect 0 "dynamo eval: the ATen op named" "$BIN" plan "$UX/dynamo_eval_bn.onnx" --batch 2
has "dynamo eval: the ATen op named" "$T/err" "aten._native_batch_norm_legit_no_training"
expect 0 "eval dropout: cannot tell" "$BIN" plan "$UX/dynamo_eval_dropout.onnx" --batch 2
has "eval-exported dropout: said plainly" "$T/err" "$UNKNOWN"
# The shipped eval exports without batch norm (the issue's vit_b_16, bert_base, gpt2).
for m in vit_b_16 bert_base gpt2; do
  expect 0 "$m (eval export): plan" "$BIN" plan "$MODELS/$m.onnx" --batch 1
  has "$m (eval export): cannot tell, said" "$T/err" "$UNKNOWN"
  expect 0 "$m (train export): plan" "$BIN" plan "$MODELS/${m}_train.onnx" --batch 1
  lacks "$m (train export): no mode warning" "$T/err" "train mode"
done
expect 0 "resnet18 (eval export)" "$BIN" plan "$MODELS/resnet18.onnx" --batch 1
has "resnet18 eval: 20 batch norms" "$T/err" "(20 batch norms with running statistics"
# TorchScript train export: SDPA dropout without training_mode is no eval evidence.
expect 0 "bert_base_train_ts" "$BIN" plan "$MODELS/bert_base_train_ts.onnx" --batch 1
lacks "bert_base_train_ts: a train export" "$T/err" "eval mode"

# check: text (stderr) and JSON (the plan of each check).
expect 0 "check of an eval export" "$BIN" check "$UX/dynamo_eval_bn.onnx" --batch 2 --budget 1GiB
has "check warns on stderr" "$T/err" "$EVAL"
expect 0 "check json" "$BIN" check "$UX/dynamo_eval_bn.onnx" --batch 2 --budget 1GiB --format json
json "the warning in check JSON" "any('$EVAL' in w for w in d['checks'][0]['plan']['warnings'])"

# advise: stderr, its own text and Markdown, and JSON.
expect 0 "advise of an eval export" "$BIN" advise "$UX/ts_eval_bn.onnx" --budget 1GiB --precision fp32
has "advise warns on stderr" "$T/err" "$EVAL"
has "advise's text has the warning" "$T/out" "warning: $UX/ts_eval_bn.onnx: the model was $EVAL"
expect 0 "advise md" "$BIN" advise "$UX/ts_eval_bn.onnx" --budget 1GiB --precision fp32 --format md
has "advise's Markdown has the warning" "$T/out" "> warning: "
expect 0 "advise json" "$BIN" advise "$UX/ts_eval_bn.onnx" --budget 1GiB --precision fp32 --format json
json "the warning in advise JSON" "any('$EVAL' in w for w in d['warnings'])"
expect 0 "advise of gpt2 (eval export)" "$BIN" advise "$MODELS/gpt2.onnx" --budget 24GiB --precision amp_bf16 --format json
json "advise of gpt2: cannot tell, said" "any('$UNKNOWN' in w for w in d['warnings'])"
expect 0 "advise of a train export" "$BIN" advise "$UX/ts_train_bn.onnx" --budget 1GiB --precision fp32 --format json
json "advise of a train export: no warning" 'd["warnings"] == []'

# sweep and compare plan training steps too.
expect 0 "sweep of an eval export" "$BIN" sweep "$UX/dynamo_eval_bn.onnx" --dim batch=1..4:1 --precision fp32 --budget 1GiB --format json
json "sweep JSON has the warning" "any('$EVAL' in w for w in d['warnings'])"
has "sweep warns on stderr" "$T/err" "$EVAL"
expect 0 "compare" "$BIN" compare "$UX/ts_train_bn.onnx" "$UX/loss_sigmoid.onnx" --budget 1GiB --batch 2 --precision fp32 --format json
json "compare: a train export has none" 'd["models"][0]["warnings"] == []'
json "compare: the loss warning per model" "any('$LOSS' in w for w in d['models'][1]['warnings'])"

# --no-warn export-mode leaves the export-mode class out (text and JSON), the
# plan unchanged, the loss warning still said; any other class is an error.
expect 0 "gpt2: plan" "$BIN" plan "$MODELS/gpt2.onnx" --batch 1 --format json
cp "$T/out" "$T/warned.json"
has "gpt2: cannot tell, without --no-warn" "$T/err" "$UNKNOWN"
expect 0 "gpt2: --no-warn export-mode" "$BIN" plan "$MODELS/gpt2.onnx" --batch 1 --format json \
  --no-warn export-mode
lacks "--no-warn export-mode: nothing on stderr" "$T/err" "$UNKNOWN"
json "--no-warn export-mode: not in JSON either" "not any('$UNKNOWN' in w for w in d['warnings'])"
if python3 -c 'import json,sys; a,b=(json.load(open(f))["peak"] for f in sys.argv[1:]); sys.exit(a != b)' \
  "$T/warned.json" "$T/out"; then pass "--no-warn changes no plan"; else fail "--no-warn changed the plan"; fi
expect 0 "--no-warn keeps the loss warning" "$BIN" plan "$UX/loss_sigmoid.onnx" --batch 2 \
  --no-warn export-mode
has "--no-warn: the loss warning stays" "$T/err" "$LOSS"
expect 0 "check with --no-warn" "$BIN" check "$UX/dynamo_eval_bn.onnx" --batch 2 \
  --budget 1GiB --no-warn export-mode
lacks "check --no-warn: no eval warning" "$T/err" "$EVAL"
expect 0 "advise --no-warn" "$BIN" advise "$MODELS/gpt2.onnx" --budget 24GiB --precision amp_bf16 \
  --no-warn export-mode --format json
json "advise --no-warn: none in JSON" "not any('$UNKNOWN' in w for w in d['warnings'])"
expect 2 "--no-warn of an unknown class" "$BIN" plan "$MODELS/gpt2.onnx" --batch 1 --no-warn loss
has "--no-warn: names the classes" "$T/err" "--no-warn: loss not in {export-mode}"

# inspect shows the mode and its evidence.
expect 0 "inspect: export mode" "$BIN" inspect "$MODELS/resnet18.onnx"
has "inspect: eval and its evidence" "$T/out" "export mode eval (20 batch norms with running statistics"
expect 0 "inspect json: export mode" "$BIN" inspect "$MODELS/gpt2_train.onnx" --format json
json "inspect json: train, with the dropout nodes" 'd["export_mode"]["mode"] == "train" and d["export_mode"]["train"][0].endswith("dropout nodes in training mode") and d["export_mode"]["eval"] == []'
expect 0 "inspect: cannot tell" "$BIN" inspect "$MODELS/vit_b_16.onnx"
has "inspect: cannot tell, said" "$T/out" "export mode unknown (no dropout, no batch norm: cannot be told)"

# ------------------------------------------------------------ the loss
for m in loss_image_to_image:"has the shape of input 'latent'" \
         loss_sigmoid:"comes from a Sigmoid node 'node_sigmoid'" \
         loss_one_score:"has a class dim of 1"; do
  name=${m%%:*}
  why=${m#*:}
  expect 0 "$name: plan" "$BIN" plan "$UX/$name.onnx" --batch 2
  has "$name: plan warns" "$T/err" "$LOSS: the first output"
  has "$name: the rule named" "$T/err" "$why"
  lacks "$name: no mode warning (a training dropout)" "$T/err" "train mode"
  has "$name: the header names the loss" "$T/out" "loss cross_entropy"
  expect 0 "$name: plan json" "$BIN" plan "$UX/$name.onnx" --batch 2 --format json
  json "$name: in plan JSON" "any('$LOSS' in w for w in d['warnings'])"
  expect 0 "$name: --loss cross_entropy silences it" "$BIN" plan "$UX/$name.onnx" --batch 2 --loss cross_entropy
  lacks "$name: silenced" "$T/err" "$LOSS"
  expect 0 "$name: --loss mse" "$BIN" plan "$UX/$name.onnx" --batch 2 --loss mse
  lacks "$name: mse, no warning" "$T/err" "warning:"
  expect 0 "$name: inference" "$BIN" plan "$UX/$name.onnx" --batch 2 --mode inference
  lacks "$name: inference has no loss" "$T/err" "warning:"
  expect 0 "$name: check json" "$BIN" check "$UX/$name.onnx" --batch 2 --budget 1GiB --format json
  json "$name: in check JSON" "any('$LOSS' in w for w in d['checks'][0]['plan']['warnings'])"
  has "$name: check warns on stderr" "$T/err" "$LOSS"
  expect 0 "$name: advise json" "$BIN" advise "$UX/$name.onnx" --budget 1GiB --precision fp32 --format json
  json "$name: in advise JSON" "any('$LOSS' in w for w in d['warnings'])"
  expect 0 "$name: advise --loss mse" "$BIN" advise "$UX/$name.onnx" --budget 1GiB --precision fp32 --loss mse --format json
  json "$name: advise --loss mse, none" "not any('$LOSS' in w for w in d['warnings'])"
done
# A budget file's "loss" is given as much as --loss.
cat >"$T/budget.json" <<JSON
{"checks": [{"model": "$UX/loss_sigmoid.onnx", "batch": 2, "budget": "1GiB", "loss": "mse"},
            {"model": "$UX/loss_one_score.onnx", "batch": 2, "budget": "1GiB"}]}
JSON
expect 0 "check --config" "$BIN" check --config "$T/budget.json" --format json
json "budget file loss: silenced there" "not any('$LOSS' in w for w in d['checks'][0]['plan']['warnings'])"
json "budget file without loss: warned" "any('$LOSS' in w for w in d['checks'][1]['plan']['warnings'])"
# The shipped latent-diffusion U-Net (the issue's [B, 4, 64, 64] regression output).
expect 0 "unet_ldm_train" "$BIN" plan "$MODELS/unet_ldm_train.onnx" --batch 1
has "unet_ldm_train: warned" "$T/err" "$LOSS: the first output 'output' [batch, 4, 32, 32] has the shape of input 'latent'"
# Class logits are not warned about: classifiers, language models, segmentation.
for m in resnet18_train gpt2_train lstm_tagger_train deeplab_mnv3_train wav2vec2_cls_train; do
  expect 0 "$m: plan" "$BIN" plan "$MODELS/$m.onnx" --batch 1
  lacks "$m: logits, no loss warning" "$T/err" "$LOSS"
done

finish
