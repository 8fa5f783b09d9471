#!/usr/bin/env bash
# Writes what `memplan advise` answers for every model under models/ with a
# few flag sets, in the table and JSON formats, one file per run (stdout,
# then stderr, then the exit status), so that two builds can be compared
# with `diff -r`: speed work on the advisor must not change its answers.
# The JSON "plans" counts (how many plans the search made) are blanked: the
# search may get the same answers from fewer plans.
#
# usage: bench/advise_outputs.sh MEMPLAN OUT_DIR [MODELS_DIR]
set -eu
memplan=$1
out=$2
here=$(cd "$(dirname "$0")" && pwd)
models=${3:-$here/../models}
mkdir -p "$out"

flag_sets=(
  "--device h200"
  "--device rtx-4090"
  "--device h100-sxm --precision fp32,amp_bf16"
  "--device a100-40gb --checkpoint none"
  "--device rtx-4090 --global-batch 256"
  "--device h200 --world-size 2 --strategy ddp"
  "--device h200 --world-size 4 --strategy fsdp"
)
for m in "$models"/*.onnx; do
  name=$(basename "$m" .onnx)
  for k in "${!flag_sets[@]}"; do
    flags=${flag_sets[$k]}
    for fmt in table json; do
      f="$out/$name.$k.$fmt"
      # shellcheck disable=SC2086
      { "$memplan" advise "$m" $flags --format $fmt 2>&1; echo "exit $?"; } |
        sed -e 's/"plans": *[0-9]*/"plans": N/g' >"$f" || true
      echo "$flags" >"$out/flags.$k"
    done
  done
done
