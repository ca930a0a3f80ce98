#!/usr/bin/env bash
# compute-sanitizer over the runner's gpu tests (the new kernels: tier_ops, skinny_gemm).
set -u
D=$(cd "$(dirname "$0")" && pwd)
OUT=${1:-/tmp/out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$D:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
F='RunnerPlacements.SameTokens*:RunnerPlacements.SmallStaging*:RunnerPlacements.Fp8*:RunnerPlacements.GraphReplay*:RunnerPlacements.FilledDepth*'
timeout 100 "$CS" --tool memcheck "$D/runner_placements_test" --gtest_filter="$F" >"$OUT/memcheck-placements.log" 2>&1; echo "memcheck placements rc=$?"
tail -4 "$OUT/memcheck-placements.log"
timeout 40 "$CS" --tool memcheck "$D/runner_gpu_test" --gtest_filter='RunnerGpu.Skinny*:RunnerGpu.PrefillChunks*' >"$OUT/memcheck-gpu.log" 2>&1; echo "memcheck gpu rc=$?"
tail -4 "$OUT/memcheck-gpu.log"
timeout 60 "$CS" --tool racecheck "$D/runner_placements_test" --gtest_filter='RunnerPlacements.SmallStaging*:RunnerPlacements.RecordedTrace*' >"$OUT/racecheck-placements.log" 2>&1; echo "racecheck placements rc=$?"
tail -4 "$OUT/racecheck-placements.log"
