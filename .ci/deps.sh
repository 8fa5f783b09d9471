#!/usr/bin/env bash
# Installs what memplan needs on Debian (as root): the toolchain, the ONNX
# protobuf schema, CLI11, nlohmann/json, GoogleTest; clang and strace for the
# fuzzer and the robustness tests. The CUDA Toolkit is optional (gpu_probe is
# built when /usr/local/cuda is there).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends cmake ninja-build g++ python3 libonnx-dev \
  libprotobuf-dev protobuf-compiler libcli11-dev nlohmann-json3-dev libgtest-dev clang strace \
  >/dev/null
