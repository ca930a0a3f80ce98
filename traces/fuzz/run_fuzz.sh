#!/usr/bin/env bash
# Builds the trace-reader fuzzer with clang and runs it for a while (default 60 s, the CI
# short run; pass more seconds for a long run). Seeds: the committed samples' first frames
# and small generated traces in both forms.
#   traces/fuzz/run_fuzz.sh [SECONDS] [BUILD_DIR]
set -euo pipefail
seconds=${1:-60}
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${2:-$root/build-fuzz}
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_COMPILER=clang++ \
  -DKVTIER_CUDA=OFF -DKVTIER_FUZZ=ON -DKVTIER_BUILD_TESTS=OFF -DKVTIER_BUILD_BENCH=OFF >/dev/null
cmake --build "$build" --target fuzz_trace_reader -j"$(nproc)"
# The committed seeds (traces/fuzz/corpus, made with the commands in traces/fuzz/README.md)
# are copied so that what the fuzzer finds stays in the build directory.
corpus="$build/fuzz-corpus"
mkdir -p "$corpus"
cp -n "$root"/traces/fuzz/corpus/* "$corpus"/
"$build/traces/fuzz/fuzz_trace_reader" "$corpus" -max_total_time="$seconds" -max_len=8192 \
  -rss_limit_mb=2048 -timeout=10 -print_final_stats=1
