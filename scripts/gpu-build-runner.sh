#!/usr/bin/env bash
# Builds the model runner's GPU binaries here (Release, sm_90, static runtime; cuBLAS stays
# dynamic) and copies them with scripts/gpu-runner.sh into gpu-carry-runner/ (git-ignored):
# pass carry: ["gpu-carry-runner"] to the device run.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build-runner}
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVTIER_STATIC_RUNTIME=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null
cmake --build "$build" --target kvtier runner_gpu_test runner_placements_test runner_needle_test -j2
rm -rf "$root/gpu-carry-runner"
mkdir -p "$root/gpu-carry-runner"
cp "$build/kvtier" "$build"/tests/runner/runner_{gpu,placements,needle}_test "$root/gpu-carry-runner/"
cp "$root/scripts/gpu-runner.sh" "$root/gpu-carry-runner/"
cp -L "$(ldd "$build/kvtier" | awk '/libzstd/ {print $3}')" "$root/gpu-carry-runner/"
du -sh "$root/gpu-carry-runner"
