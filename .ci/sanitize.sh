#!/usr/bin/env bash
# The whole test suite (GPU tests excluded) under AddressSanitizer and
# UndefinedBehaviorSanitizer, in a Debug build of its own (build-asan/).
# Any sanitizer report fails the run: UBSan does not recover
# (-fno-sanitize-recover), ASan aborts on the first error.
set -euo pipefail
cd "$(dirname "$0")/.."

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export MEMPLAN_CORPUS_TIMEOUT=${MEMPLAN_CORPUS_TIMEOUT:-120}  # per run in corpus_test
export MEMPLAN_CORPUS_SANITIZED=1  # shadow memory: corpus_test does not check peak RSS

cmake -S . -B build-asan -G Ninja -DMEMPLAN_WITH_CUDA=OFF -DMEMPLAN_SANITIZE=ON \
  -DCMAKE_BUILD_TYPE=Debug
cmake --build build-asan -j"${SANITIZE_BUILD_JOBS:-2}"
ctest --test-dir build-asan -LE gpu --output-on-failure
