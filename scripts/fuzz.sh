#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) and runs each for SECONDS (default
# 60; CI runs a short pass, pass more for a long run) on a copy of its committed seeds:
#   fuzz_trace_reader  traces/fuzz/corpus            any bytes as a trace
#   fuzz_safetensors   cuda/weights/fuzz/corpus      any bytes as a safetensors header
#   fuzz_json_inputs   validation/fit/fuzz/corpus    any bytes as a geometry, a hardware profile
#                                                    and a calibration points file
# What a run finds stays in BUILD_DIR/fuzz-corpus-<target>; a crash leaves crash-* in the
# current folder and fails the script.
#   scripts/fuzz.sh [SECONDS] [BUILD_DIR]
set -euo pipefail
seconds=${1:-60}
root=$(cd "$(dirname "$0")/.." && pwd)
build=${2:-$root/build-fuzz}
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_COMPILER=clang++ \
  -DKVTIER_CUDA=OFF -DKVTIER_FUZZ=ON -DKVTIER_BUILD_TESTS=OFF -DKVTIER_BUILD_BENCH=OFF >/dev/null
cmake --build "$build" --target fuzz_trace_reader fuzz_safetensors fuzz_json_inputs -j"$(nproc)"
run() {  # TARGET BINARY SEEDS [MAX_LEN]
  local corpus="$build/fuzz-corpus-$1"
  mkdir -p "$corpus"
  cp -n "$3"/* "$corpus"/
  echo "== $1: ${seconds} s"
  "$2" "$corpus" -max_total_time="$seconds" -max_len="${4:-8192}" -rss_limit_mb=2048 -timeout=10 \
    -print_final_stats=1
}
run trace_reader "$build/traces/fuzz_trace_reader" "$root/traces/fuzz/corpus"
run safetensors "$build/cuda/weights/fuzz_safetensors" "$root/cuda/weights/fuzz/corpus"
# a complete profile is ~34 KB: shorter inputs never pass its checks and reach the pricing
run json_inputs "$build/validation/fit/fuzz_json_inputs" "$root/validation/fit/fuzz/corpus" 65536
