#!/usr/bin/env bash
# Runs on the GPU machine from the repository root: the gpu tests, the residency benchmark,
# trace replays of the bundled samples (`kvtier run`, every placement), then the tests under
# compute-sanitizer memcheck and racecheck (fewer RapidCheck cases). Logs go to $OUT; a
# short summary is printed last. Each stage has its own time limit.
set -uo pipefail
c=gpu-carry
export LD_LIBRARY_PATH=$PWD/$c${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}  # libzstd from gpu-build.sh
out=${OUT:-/tmp/out}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv \
  | tee "$out/gpu.txt"
echo "== tests"
timeout 150 "$c/cuda_residency_test" --gtest_output=xml:"$out/tests.xml" >"$out/tests.log" 2>&1
t_rc=$?
grep -E "^\[  (FAILED|PASSED|SKIPPED) |Failure|error" "$out/tests.log" | head -30
echo "== bench"
timeout 90 "$c/kvtier" bench residency --repeats ${REPEATS:-30} >"$out/bench.txt" 2>&1
b_rc=$?
echo "== replay"
dec=traces/samples/single-32k-decode1000.ktr
runs=$out/replay.txt
: >"$runs"
replay() {  # name, args...
  local name=$1
  shift
  timeout 60 "$c/kvtier" run --json "$@" >"$out/run-$name.json" 2>>"$runs"
  local rc=$?
  python3 - "$name" "$rc" "$out/run-$name.json" >>"$runs" <<'PY'
import json, sys
name, rc, path = sys.argv[1], sys.argv[2], sys.argv[3]
try:
    r = json.load(open(path))
except Exception as e:
    print(f"{name:28s} rc={rc} no JSON ({e})"); sys.exit()
t = r["total"]; steps = r["steps"]
dec = [s for s in steps if s["decode_tokens"] == s["tokens"] and s["tokens"] > 0]
med = sorted(s["gpu_us"] for s in dec)[len(dec) // 2] if dec else 0
extra = ""
if "decision_mismatches" in r:
    extra = f" verify q/d mismatches {r['query_mismatches']}/{r['decision_mismatches']} expected {r['expected_checksum']}"
print(f"{name:28s} rc={rc} fwd={t['forward']} total_us={t['gpu_us']:.0f} decode_fwds={len(dec)} "
      f"decode_median_us={med:.2f} decode_total_us={sum(s['gpu_us'] for s in dec):.0f} hits={t['hits']} "
      f"misses={t['misses']} drops={t['drops']} missing={t['missing']} h2d={t['h2d_bytes']} "
      f"d2h={t['d2h_bytes']} checksum={r['checksum']}{extra}")
PY
}
replay device --trace $dec --placement device
replay device-wt --trace $dec --placement device --write-through
replay device-2 --trace $dec --placement device
replay device-wt-2 --trace $dec --placement device --write-through
replay mirror1024 --trace $dec --placement mirror --pool-pages 1024
replay mirror1024-multi --trace $dec --placement mirror --pool-pages 1024 --ensure-form multi-block
replay mirror384 --trace $dec --placement mirror --pool-pages 384
replay mirror384-multi --trace $dec --placement mirror --pool-pages 384 --ensure-form multi-block
replay host --trace $dec --placement host
replay device-fp8 --trace $dec --placement device --kv-dtype fp8
replay mirror1024-fp8 --trace $dec --placement mirror --pool-pages 1024 --kv-dtype fp8
replay verify-shared --trace traces/samples/prefill-shared-prefix.ktr --placement mirror \
  --pool-pages 400 --verify --forwards 40
replay verify-shared-multi --trace traces/samples/prefill-shared-prefix.ktr --placement mirror \
  --pool-pages 400 --verify --forwards 40 --ensure-form multi-block
cat "$runs"
san() {  # tool, filter, limit, log name
  local tool=$1
  RC_PARAMS="seed=20261129 max_success=4" timeout ${3:-120} compute-sanitizer --tool "$tool" \
    --error-exitcode 9 "$c/cuda_residency_test" \
    --gtest_filter="${2:-*}" >"$out/sanitize-${4:-$tool}.log" 2>&1
  echo $?
}
echo "== memcheck"; m_rc=$(san memcheck '-EnsureForms.BlockFormOnLargePools:EnsureForms.ManyChunks*:HostBank.LargeBank*:DevicePool.TooLarge*:HostBank.Impossible*:ReplayMatches*:TraceReplay.Placements*' 120)
tail -3 "$out/sanitize-memcheck.log"
echo "== memcheck replay"; m2_rc=$(san memcheck 'Traces/ReplayMatchesSimulator.SameDecisionsAndBytes/2:TraceReplay.PoolTooSmall*' 60 memcheck-replay)
tail -3 "$out/sanitize-memcheck-replay.log"
echo "== racecheck"; r_rc=$(san racecheck 'EnsureForms.DeviceForms*:Compaction.*:Graph.*:BadConfig.*' 100)
tail -3 "$out/sanitize-racecheck.log"
echo "== summary"
cat "$out/bench.txt"
grep -E "^\[  (PASSED|FAILED|SKIPPED)|tests, listed below" "$out/tests.log" | head
grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$out"/sanitize-*.log
echo "tests rc=$t_rc bench rc=$b_rc memcheck rc=$m_rc/$m2_rc racecheck rc=$r_rc"
