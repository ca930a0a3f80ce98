#!/usr/bin/env bash
# On the GPU machine: the decode top-k / index tests, the existing qsa gpu tests, the benchmark and
# compute-sanitizer over the new tests; logs into $OUT. Expects qsa_decode_select_test,
# qsa_gpu_test and bench_qsa_decode beside it (copied into gpu-carry-sel/, carried to the device).
set -u
D=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/sel-out}
mkdir -p "$OUT"
summary=()
run() {  # name, timeout, command...
  local name=$1 limit=$2
  shift 2
  local t0=$SECONDS
  timeout "$limit" "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  summary+=("$(printf '%-22s rc=%-3s %4ss' "$name" "$rc" "$((SECONDS - t0))")")
  printf '%s\n' "${summary[@]}" >"$OUT/summary.txt"
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.total --format=csv >"$OUT/gpu.txt" 2>&1
date -u >>"$OUT/gpu.txt"
run decode_test 40 "$D/qsa_decode_select_test"
run qsa_gpu_test 30 "$D/qsa_gpu_test"
run bench 30 "$D/bench_qsa_decode"
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
F1='Sizes/DecodeTopk.*/*2048*:DecodeTopkSmall.*:DecodeTopkCluster.*:DecodeTopkClamp.*:Shapes/DecodeIndex.*2048*:DecodeIndexForced.*:DecodeSelectGraph.*'
F2='Shapes/DecodeIndex.*/1rows_1req_2048*:Shapes/DecodeIndex.*/16rows_16req_2048*:DecodeIndexForced.*'
F3='DecodeTopkSmall.*'
run memcheck 25 "$CS" --tool memcheck --error-exitcode 3 "$D/qsa_decode_select_test" --gtest_filter="$F1"
run racecheck_index 20 "$CS" --tool racecheck --error-exitcode 3 "$D/qsa_decode_select_test" --gtest_filter="$F2"
run racecheck_topk 35 "$CS" --tool racecheck --error-exitcode 3 "$D/qsa_decode_select_test" --gtest_filter="$F3"
cat "$OUT/gpu.txt"
grep -hE "^\[  (PASSED|FAILED) |tests ran|FAILED  \]" "$OUT"/decode_test.log "$OUT"/qsa_gpu_test.log
grep -hE "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" "$OUT"/memcheck.log "$OUT"/racecheck_index.log "$OUT"/racecheck_topk.log
grep -h -B2 -A12 "Failure" "$OUT"/decode_test.log | head -60
cat "$OUT/bench.log"
cat "$OUT/summary.txt"
