#!/usr/bin/env bash
# Builds every GPU binary here (Release, sm_90, static runtime; cuBLAS stays dynamic): kvtier,
# the runner, residency, trace-attend and qsa gpu tests and bench_qsa, and copies them with
# scripts/gpu-runner.sh into gpu-carry-runner/ (git-ignored; stripped, within the 64 MiB carry):
# pass carry: ["gpu-carry-runner"] to the device run.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build-runner}
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVTIER_STATIC_RUNTIME=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null
cmake --build "$build" --target kvtier runner_gpu_test runner_placements_test runner_needle_test \
  cuda_residency_test cuda_trace_attend_test qsa_gpu_test qsa_decode_select_test bench_qsa -j2
# Two sets, since all the binaries together pass the 64 MiB carry: SET=runner (default: kvtier,
# the runner, residency, trace-attend and qsa gpu tests) or SET=qsa (the qsa tests, bench_qsa).
bins=()
if [[ ${SET:-runner} == qsa ]]; then
  bins=("$build"/tests/qsa/qsa_{gpu,decode_select}_test "$build/bench/qsa/bench_qsa")
else
  bins=("$build/kvtier" "$build"/tests/runner/runner_{gpu,placements,needle}_test
    "$build"/tests/cuda/cuda_{residency,trace_attend}_test "$build/tests/qsa/qsa_gpu_test")
fi
rm -rf "$root/gpu-carry-runner"
mkdir -p "$root/gpu-carry-runner"
cp "${bins[@]}" "$root/scripts/gpu-runner.sh" "$root/gpu-carry-runner/"
# Symbols off: the carry holds the stripped binaries only.
strip "$root"/gpu-carry-runner/*_test
[[ -f $root/gpu-carry-runner/kvtier ]] && strip "$root/gpu-carry-runner/kvtier"
[[ -f $root/gpu-carry-runner/bench_qsa ]] && strip "$root/gpu-carry-runner/bench_qsa"
cp -L "$(ldd "$build/kvtier" | awk '/libzstd/ {print $3}')" "$root/gpu-carry-runner/"
du -sh "$root/gpu-carry-runner"
