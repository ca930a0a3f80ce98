#!/usr/bin/env bash
# Builds every GPU binary here (Release, sm_90, static runtime; cuBLAS stays dynamic): kvtier,
# the runner, residency, trace-attend and qsa gpu tests and bench_qsa, and copies them with
# scripts/gpu-runner.sh into gpu-carry-runner/ (git-ignored): pass carry: ["gpu-carry-runner"]
# to the device run.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build-runner}
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVTIER_STATIC_RUNTIME=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null
cmake --build "$build" --target kvtier runner_gpu_test runner_placements_test runner_needle_test \
  cuda_residency_test cuda_trace_attend_test qsa_gpu_test qsa_decode_select_test bench_qsa \
  bench_qsa_decode -j2
# The stripped binaries, gzip'ed into one archive (gpu-runner.sh unpacks it on the GPU machine):
# all of them raw would pass the 64 MiB carry with the tracked tree. SET=qsa: the qsa tests and
# bench_qsa, bench_qsa_decode only.
bins=()
if [[ ${SET:-all} == qsa ]]; then
  bins=("$build"/tests/qsa/qsa_{gpu,decode_select}_test "$build/bench/qsa/bench_qsa"
    "$build/bench/qsa_decode/bench_qsa_decode")
else
  bins=("$build/kvtier" "$build"/tests/runner/runner_{gpu,placements,needle}_test
    "$build"/tests/cuda/cuda_{residency,trace_attend}_test "$build"/tests/qsa/qsa_{gpu,decode_select}_test
    "$build/bench/qsa/bench_qsa" "$build/bench/qsa_decode/bench_qsa_decode")
fi
stage=$(mktemp -d)
cp "${bins[@]}" "$stage/"
strip "$stage"/*
cp -L "$(ldd "$build/kvtier" | awk '/libzstd/ {print $3}')" "$stage/"
rm -rf "$root/gpu-carry-runner"
mkdir -p "$root/gpu-carry-runner"
tar czf "$root/gpu-carry-runner/bins.tgz" -C "$stage" .
rm -rf "$stage"
cp "$root/scripts/gpu-runner.sh" "$root/gpu-carry-runner/"
du -sh "$root/gpu-carry-runner"
