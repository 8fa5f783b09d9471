#!/usr/bin/env bash
# Short libFuzzer run over import + shape inference + planning (CI).
# Installs nothing: needs clang (Debian's `clang` package) and the usual
# build dependencies. Builds into build-fuzz/ and fuzzes for
# ${FUZZ_SECONDS:-60} seconds from the corpus and the small shipped models.
# FUZZ_EXTRA_ARGS adds libFuzzer flags (e.g. "-fork=1 -ignore_crashes=1"
# to keep going after a crash in a long run).
# A crash leaves its input in build-fuzz/artifacts/ and fails the script;
# minimize it (fuzz_import -minimize_crash=1 FILE), fix the bug, and keep
# the minimized input in tests/corpus/regressions/.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${FUZZ_SECONDS:-60}
jobs=${FUZZ_BUILD_JOBS:-2}
build=build-fuzz

cmake -S . -B "$build" -G Ninja -DMEMPLAN_WITH_CUDA=OFF -DMEMPLAN_FUZZ=ON \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ >/dev/null
cmake --build "$build" -j"$jobs" --target fuzz_import

# Seeds: the corpus, past crashes, small real models. The working corpus
# dir collects what the fuzzer finds; the seed dirs are only read.
mkdir -p "$build/fuzz-corpus" "$build/artifacts" "$build/seeds"
cp tests/corpus/*.onnx tests/corpus/*.json "$build/seeds/"
[ -d tests/corpus/regressions ] && cp tests/corpus/regressions/* "$build/seeds/"
for m in resnet18 mobilenet_v2_train_ts resnet50_train_ts bert_base_train_ts; do
  cp "models/$m.onnx" "$build/seeds/"
done

# In CI the run is reproducible: a fixed seed and a fixed number of runs
# (FUZZ_SEED, FUZZ_RUNS), so a red build is a real crash that replays;
# elsewhere it explores from a random seed for $seconds.
repro=()
if [ "${CI:-}" = "true" ]; then
  repro=(-seed="${FUZZ_SEED:-1}" -runs="${FUZZ_RUNS:-20000}")
  seconds=${FUZZ_SECONDS:-900}  # a cap only: the run ends after FUZZ_RUNS
fi
"$build/tests/fuzz_import" "$build/fuzz-corpus" "$build/seeds" \
  -dict=tests/corpus/onnx.dict -max_len=400000 -rss_limit_mb=4096 -timeout=30 \
  -max_total_time="$seconds" -print_final_stats=1 "${repro[@]}" \
  -artifact_prefix="$build/artifacts/" ${FUZZ_EXTRA_ARGS:-}
