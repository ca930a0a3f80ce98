#!/usr/bin/env bash
# Builds every GPU binary here (Release, sm_90, static runtime; cuBLAS stays dynamic): kvtier,
# the runner, residency, trace-attend and qsa gpu tests and bench_qsa, and copies them with
# scripts/gpu-runner.sh into gpu-carry-runner/ (git-ignored, about 57 MB of the 64 MiB carry):
# pass carry: ["gpu-carry-runner"] to the device run.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build-runner}
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVTIER_STATIC_RUNTIME=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null
cmake --build "$build" --target kvtier runner_gpu_test runner_placements_test runner_needle_test \
  cuda_residency_test cuda_trace_attend_test qsa_gpu_test bench_qsa -j2
rm -rf "$root/gpu-carry-runner"
mkdir -p "$root/gpu-carry-runner"
cp "$build/kvtier" "$build"/tests/runner/runner_{gpu,placements,needle}_test \
  "$build"/tests/cuda/cuda_{residency,trace_attend}_test "$build/tests/qsa/qsa_gpu_test" \
  "$build/bench/qsa/bench_qsa" "$root/gpu-carry-runner/"
cp "$root/scripts/gpu-runner.sh" "$root/gpu-carry-runner/"
cp -L "$(ldd "$build/kvtier" | awk '/libzstd/ {print $3}')" "$root/gpu-carry-runner/"
du -sh "$root/gpu-carry-runner"
