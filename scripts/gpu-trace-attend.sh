#!/usr/bin/env bash
# Issue 7's figure "decode, mirror, replaying a sample trace's selections through the real
# attention at the planner's recommended pool size: within 1.2 x of device placement", plus the
# attend-mode gpu tests. Runs on the GPU machine from the repository root:
#
#   bash gpu-carry-trace/gpu-trace-attend.sh "$OUT"        (device run with carry ["gpu-carry-trace"])
#
# gpu-carry-trace/ holds what this needs, built on the CPU machine with the static settings of
# scripts/gpu-build.sh (Release, sm_90, static libstdc++/libgcc/Boost/cudart):
#   cmake -S . -B build-trace -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVTIER_STATIC_RUNTIME=ON \
#     -DCMAKE_CUDA_ARCHITECTURES=90
#   cmake --build build-trace --target kvtier cuda_trace_attend_test cuda_residency_test -j2
#   mkdir -p gpu-carry-trace && cp build-trace/kvtier build-trace/tests/cuda/cuda_trace_attend_test \
#     build-trace/tests/cuda/cuda_residency_test scripts/gpu-trace-attend.sh gpu-carry-trace/
#   cp -L "$(ldd build-trace/kvtier | awk '/libzstd/ {print $3}')" gpu-carry-trace/
# (kvtier also needs libcublas.so.13 / libcublasLt.so.13 of the GPU machine's CUDA install.)
#
# What it measures: `kvtier run --trace traces/samples/concurrent8-16k-128k.ktr --read attend`
# (the default) with the device placement, the mirror placement at the planner's pool size and
# the host placement, bf16 (device and mirror also fp8), --json each. The table gives the GPU
# time per DECODE-ONLY forward (every row a decode token: the trace's 128 decode steps of its 8
# requests; its prefill forwards are listed apart). A forward's GPU time is the sum over the 12
# QSA layers of the CUDA-event span of the layer's work: device/host store_kv + attend; mirror
# compaction + ensure + miss copy + table translate + store_kv (pool and host bank) + attend.
# The K/V and query generation that stands in for the model's projections is outside the spans.
set -uo pipefail
out=${1:-${OUT:-/tmp/out}}
mkdir -p "$out"
c=gpu-carry-trace
export LD_LIBRARY_PATH=$PWD/$c:/usr/local/cuda/lib64:/usr/local/cuda/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
trace=traces/samples/concurrent8-16k-128k.ktr
# The planner's recommended mirror pool for this trace, computed on the CPU machine (2026-11-29,
# build-trace at commit e3e44a3 + the run --trace CLI):
#   kvtier plan --trace traces/samples/concurrent8-16k-128k.ktr --placement mirror --unit layer
#   -> "mirror, residency unit layer, pool of 8499 slots: within 5 % of its all-resident decode
#      speed with no truncated selection (cliff below 5264 slots)"
# (`kvtier plan` with every placement recommends device placement for this trace: its 5.7k
# pages fit the card. 8499 slots per layer exceed the trace's peak page count, so the mirror
# never evicts here: the ratio prices the mirror's per-layer machinery and first-touch copies.)
pool=8499
cliff=5264  # the planner's cliff: evictions and truncated selections (drops), for reference

{
  date -u
  git rev-parse HEAD 2>/dev/null || true
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv
  ldd "$c/kvtier" | grep -E "not found|cublas" || true
} 2>&1 | tee "$out/env.txt"

echo "== gpu test: cuda_trace_attend_test" | tee "$out/summary.txt"
timeout 400 "$c/cuda_trace_attend_test" --gtest_output=xml:"$out/trace-attend-tests.xml" \
  >"$out/trace-attend-tests.log" 2>&1
ta_rc=$?
grep -E "^\[  (FAILED|PASSED|SKIPPED|  OK) |Failure|error|Expected|Which is|actual" \
  "$out/trace-attend-tests.log" | head -40 | tee -a "$out/summary.txt"
echo "== gpu test: cuda_residency_test, the checksum-mode replay tests" | tee -a "$out/summary.txt"
timeout 200 "$c/cuda_residency_test" --gtest_filter='*ReplayMatches*:TraceReplay.*' \
  >"$out/residency-replay-tests.log" 2>&1
tr_rc=$?
grep -E "^\[  (FAILED|PASSED|SKIPPED) |Failure" "$out/residency-replay-tests.log" | head -20 |
  tee -a "$out/summary.txt"

runs=()
run() {  # name, args...
  local name=$1
  shift
  local cmd=("$c/kvtier" run --trace "$trace" --json "$@")
  echo "${cmd[*]}" >"$out/run-$name.cmd"
  local t0=$SECONDS
  timeout 300 "${cmd[@]}" >"$out/run-$name.json" 2>"$out/run-$name.err"
  echo "$name rc=$? wall=$((SECONDS - t0))s: ${cmd[*]}" | tee -a "$out/runs.txt"
  runs+=("$name")
}
echo "== replays of $trace (attend)"
run device --placement device
run mirror --placement mirror --pool-pages $pool
run host --placement host
run device-2 --placement device
run mirror-2 --placement mirror --pool-pages $pool
run device-fp8 --placement device --kv-dtype fp8
run mirror-fp8 --placement mirror --pool-pages $pool --kv-dtype fp8
run mirror-cliff --placement mirror --pool-pages $cliff

python3 - "$out" "$pool" "${runs[@]}" <<'PY' | tee -a "$out/summary.txt"
import json, statistics, sys
out, pool, names = sys.argv[1], sys.argv[2], sys.argv[3:]
res = {}
for n in names:
    try:
        res[n] = json.load(open(f"{out}/run-{n}.json"))
    except Exception as e:
        print(f"{n}: no JSON ({e}); stderr: {open(f'{out}/run-{n}.err').read()[-400:]}")
def decode_steps(r):
    return [s for s in r["steps"] if s["tokens"] > 0 and s["decode_tokens"] == s["tokens"]]
def figs(r):
    d = [s["gpu_us"] for s in decode_steps(r)]
    p = [s for s in r["steps"] if s not in decode_steps(r)]
    return {
        "n": len(d), "median": statistics.median(d) if d else float("nan"),
        "mean": statistics.fmean(d) if d else float("nan"),
        "p90": sorted(d)[int(0.9 * (len(d) - 1))] if d else float("nan"),
        "prefill_n": len(p), "prefill_us": sum(s["gpu_us"] for s in p),
        "dec_hits": sum(s["hits"] for s in decode_steps(r)),
        "dec_misses": sum(s["misses"] for s in decode_steps(r)),
    }
print("decode GPU time per decode-only forward (8 rows, 12 QSA layers; sum of per-layer "
      "store..attend spans, generation excluded)")
hdr = (f"{'run':13s} {'placement':9s} {'dtype':5s} {'pool':>5s} {'dec fwds':>8s} {'median us':>10s} "
       f"{'mean us':>9s} {'p90 us':>9s} {'x dev (med)':>11s} {'x dev (mean)':>12s} "
       f"{'dec hit %':>9s} {'evict':>7s} {'drops':>7s} {'missing':>7s} {'prefill fwds/us':>16s}  digest")
print(hdr)
print("-" * len(hdr))
base = {}
for n, r in res.items():
    f = figs(r)
    key = r["kv_dtype"]
    if r["placement"] == "device" and key not in base:
        base[key] = f
    b = base.get(key)
    t = r["total"]
    hr = 100.0 * f["dec_hits"] / (f["dec_hits"] + f["dec_misses"]) if f["dec_hits"] + f["dec_misses"] else float("nan")
    rm = f["median"] / b["median"] if b else float("nan")
    ra = f["mean"] / b["mean"] if b else float("nan")
    print(f"{n:13s} {r['placement']:9s} {r['kv_dtype']:5s} {r['pool_pages'] or '-':>5} {f['n']:8d} "
          f"{f['median']:10.1f} {f['mean']:9.1f} {f['p90']:9.1f} {rm:11.3f} {ra:12.3f} {hr:9.2f} "
          f"{t['evictions']:7d} {t['drops']:7d} {t['missing']:7d} "
          f"{f['prefill_n']:>5d}/{f['prefill_us']:10.0f}  {r['checksum']}")
print()
for n, r in res.items():
    print(f"{n}: read={r.get('read')} kernel={r.get('attend_kernel')} forwards={r['total']['forward']} "
          f"device_bytes={r['device_bytes']} host_bytes={r['host_bytes']} h2d={r['total']['h2d_bytes']} "
          f"d2h={r['total']['d2h_bytes']}")
def same(a, b):
    if a in res and b in res:
        ok = res[a]["checksum"] == res[b]["checksum"]
        print(f"digest {a} == {b}: {ok}")
for a, b in [("mirror", "device"), ("host", "device"), ("device-2", "device"), ("mirror-2", "mirror"),
             ("mirror-fp8", "device-fp8")]:
    same(a, b)
if "mirror" in res and "device" in res:
    m, d = figs(res["mirror"]), figs(res["device"])
    print(f"FIGURE: decode mirror ({pool} slots) / device, median per decode forward: "
          f"{m['median']:.1f} / {d['median']:.1f} us = {m['median'] / d['median']:.3f} x "
          f"(target <= 1.2 x); mean {m['mean'] / d['mean']:.3f} x")
PY
echo "tests rc: trace_attend=$ta_rc residency_replay=$tr_rc" | tee -a "$out/summary.txt"
cat "$out/runs.txt"
