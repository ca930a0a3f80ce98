#!/usr/bin/env bash
# Runs on the GPU machine from the repository root: the gpu tests, the same tests under
# compute-sanitizer memcheck and racecheck (fewer RapidCheck cases), and the residency
# benchmark. Logs go to $OUT; a short table is printed last.
set -uo pipefail
c=gpu-carry
out=${OUT:-/tmp/out}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv \
  | tee "$out/gpu.txt"
echo "== tests"
"$c/cuda_residency_test" --gtest_output=xml:"$out/tests.xml" 2>&1 | tee "$out/tests.log" | tail -25
t_rc=${PIPESTATUS[0]}
san() {
  local tool=$1
  RC_PARAMS="seed=20261129 max_success=4" timeout 300 compute-sanitizer --tool "$tool" \
    --error-exitcode 9 "$c/cuda_residency_test" \
    --gtest_filter="${2:-*}" >"$out/sanitize-$tool.log" 2>&1
  echo $?
}
echo "== memcheck"; m_rc=$(san memcheck '-EnsureForms.BlockFormOnLargePools:HostBank.LargeBank*:DevicePool.TooLarge*:HostBank.Impossible*')
tail -5 "$out/sanitize-memcheck.log"
echo "== racecheck"; r_rc=$(san racecheck 'EnsureForms.*:Compaction.*:Graph.*:BadConfig.*')
tail -5 "$out/sanitize-racecheck.log"
echo "== bench"
"$c/kvtier" bench residency --repeats 50 2>&1 | tee "$out/bench.txt"
b_rc=${PIPESTATUS[0]}
echo "== summary"
grep -E "^\[  (PASSED|FAILED|SKIPPED)" "$out/tests.log" | head
grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$out"/sanitize-*.log
echo "tests rc=$t_rc memcheck rc=$m_rc racecheck rc=$r_rc bench rc=$b_rc"
