#!/usr/bin/env bash
# Everything kvtier runs on the lent GPU machine, in one script.
#
# Here:  scripts/gpu.sh build
#   builds build-gpu/ (Release, sm_90, static libstdc++/libgcc/Boost/cudart; cuBLAS stays
#   dynamic): kvtier, bench_qsa, bench_qsa_decode, bench_projections, bench_prefill_load and
#   every test target labelled gpu in tests/*/CMakeLists.txt; fills gpu-carry/ (git-ignored)
#   with them stripped, libzstd and a build note as one archive (raw they outgrow a device
#   call's 64 MiB), and this script.
#   KVTIER_JOBS: build jobs (default 2); KVTIER_GPU_BUILD_DIR: another build directory.
# There (device run with carry ["gpu-carry"], in the repository root):
#   bash gpu-carry/gpu.sh MODE [OUT]
#   tests     every gpu test binary
#   sanitize  compute-sanitizer memcheck + racecheck over the residency step, the attend
#             variants, the decode index and the projections, memcheck over the in-place attend
#   trace     `kvtier run --trace` of every traces/samples/*.ktr on device, host and mirror, the
#             mirror at the pool `kvtier plan --json` qualifies for that trace
#   figures   the model runner's figures (`kvtier run --weights`; NEEDLE_1M=1 adds the 1M needle)
#   bench     bench_qsa (default, b2b, link), bench_qsa_decode, bench_projections,
#             bench_prefill_load, kvtier bench residency
#   validate  kvtier validate calibrate (the points file), then the validation traces (generated
#             from VALIDATION_TRACES below, seeds the calibration never saw) replayed in every
#             placement, the mirror below, at and above its cliff: OUT/validate.tgz holds the
#             points and every replay's JSON for `scripts/validate.sh` here (docs/validation.md)
#   scale     issue 17: 32 x 128k bf16, 8 x 1M fp8, 64 x 32k bf16 decoding at depth in device,
#             host and mirror (--pool-pages max at B = 16 and 24 GiB), a host profile each;
#             kvtier bench host-bank --gib 100 (SCALE_ONLY="32x128k ..." picks cases)
#   prefill1m issue 17: a 1M prompt's prefill on host at B = 24 GiB, sampled at three depths,
#             three chunks and three windows
#   model     issue 15's end-to-end check: MODEL_CASES below run through the QSA model (kvtier
#             run --weights), each once as measured (graphs) and once recorded (--record), then
#             `scripts/validate_model.sh` on them there (MODEL_PROFILE, default h200-pcie5):
#             OUT/model-table.txt and OUT/model.json; OUT/model.tgz (the traces and runs' JSON,
#             ~50 MB) for pricing them again here
#   targets   issue 17's targets, each run as its write-up measured it, judged last by
#             scripts/targets.py (OUT/targets.txt): a fresh machine's 100 GiB bank (first), the
#             all-hit step, the bundled trace's mirror / device, the SCALE_CASES in device,
#             host (B = 24 GiB) and mirror (--pool-pages max, B = 16 and 24 GiB), the 8 x 16k
#             mirror against --copy-first, the 1M prefill on host. All of it outlasts one device
#             call: TARGETS_ONLY="bank step trace 8x1m copy-first" and "32x128k 64x32k prefill"
#             split it in two
#   all       all of these but validate, scale, prefill1m and targets, in this order
# OUT (default $OUT, else /tmp/kvtier-gpu) receives summary.txt (the table printed last: name,
# rc, seconds; trace runs add digest and median GPU us per decode forward), all.log (every
# run's output) and logs-MODE.tgz (a file per run, trace runs' JSON included). Without a GPU
# all of it still runs: gpu tests skip, device runs fail with their reason.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)  # scripts/.. here, gpu-carry/.. there: the repository
carry=$root/gpu-carry

build() {
  local build=${KVTIER_GPU_BUILD_DIR:-$root/build-gpu} stage tests gen=()
  command -v ninja >/dev/null && gen=(-G Ninja)
  # the kvtier_add_test(<name> ... LABELS gpu ...) calls
  mapfile -t tests < <(cat "$root"/tests/*/CMakeLists.txt | tr '\n' ' ' |
    grep -o 'kvtier_add_test([^)]*LABELS gpu[^)]*)' | sed 's/kvtier_add_test(\([^ ]*\).*/\1/')
  cmake -S "$root" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DKVTIER_STATIC_RUNTIME=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null || return
  cmake --build "$build" -j "${KVTIER_JOBS:-2}" --target kvtier bench_qsa bench_qsa_decode \
    bench_projections bench_prefill_load "${tests[@]}" || return
  stage=$(mktemp -d)
  cp "$build"/{kvtier,bench/qsa/bench_qsa,bench/qsa_decode/bench_qsa_decode} \
    "$build"/bench/projections/{bench_projections,bench_prefill_load} "$stage/" || return
  for t in "${tests[@]}"; do cp "$build"/tests/*/"$t" "$stage/" || return; done
  strip "$stage"/*
  cp -L "$(ldd "$build/kvtier" | awk '/libzstd/ {print $3}')" "$stage/" || return
  printf '%s\n' "${tests[@]}" >"$stage/gpu-tests.txt"
  echo "built $(date -u '+%F %T') UTC at $(git -C "$root" describe --always --dirty): Release," \
    "sm_90, KVTIER_STATIC_RUNTIME=ON; gpu tests: ${tests[*]}" | tee "$stage/build-info.txt"
  rm -rf "$carry" && mkdir -p "$carry"
  tar czf "$carry/bins.tgz" -C "$stage" . && rm -rf "$stage"
  cp "$0" "$carry/gpu.sh"
  du -sh "$carry"
}

mode=${1:-}
case $mode in
  build) build; exit ;;
  tests | sanitize | trace | figures | bench | validate | scale | prefill1m | model | targets | all) ;;
  *) echo "usage: scripts/gpu.sh build, then: bash gpu-carry/gpu.sh MODE [OUT]" \
       "(MODE: tests, sanitize, trace, figures, bench, validate, scale, prefill1m, model," \
       "targets or all)" >&2
     exit 2 ;;
esac

# ---- on the GPU machine: the binaries unpacked outside the carry, which stays as built ----
bin=${TMPDIR:-/tmp}/kvtier-gpu-bin
[[ -f $carry/bins.tgz ]] || { echo "no $carry/bins.tgz: run scripts/gpu.sh build" >&2; exit 1; }
rm -rf "$bin" && mkdir -p "$bin"
tar xzf "$carry/bins.tgz" -C "$bin" || exit
out=${2:-${OUT:-/tmp/kvtier-gpu}}
logs=$(mktemp -d)
mkdir -p "$out"
: >"$out/all.log"
export LD_LIBRARY_PATH=$bin:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export KVTIER_SAMPLES_DIR=${KVTIER_SAMPLES_DIR:-$root/traces/samples}
K=$bin/kvtier
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)

# run NAME TIMEOUT COMMAND...: stdout into $logs/NAME.log (a trace run's JSON), stderr into
# NAME.err, both appended to all.log; a row (name, rc, seconds) of the summary.
run() {
  local name=$1 limit=$2 t0=$SECONDS rc
  shift 2
  echo "== $name"
  # stdin closed: a command reading it would eat the list a caller's loop reads (tests())
  timeout "$limit" "$@" </dev/null >"$logs/$name.log" 2>"$logs/$name.err"
  rc=$?
  [[ -s $logs/$name.err ]] || rm -f "$logs/$name.err"
  echo "=== $name rc=$rc: $*" >>"$out/all.log"
  cat "$logs/$name.log" "$logs/$name.err" 2>/dev/null >>"$out/all.log"
  ((rc == 0)) || tail -n 8 "$logs/$name.log" "$logs/$name.err" 2>/dev/null
  printf '%s\t%s\t%s\n' "$name" "$rc" "$((SECONDS - t0))" >>"$logs/runs.tsv"
}

tests() {
  local t
  while read -r t; do run "$t" 300 "$bin/$t"; done <"$bin/gpu-tests.txt"
}

sanitize() {  # sanitizer-sized: fewer RapidCheck cases, KVTIER_QSA_TEST_SMALL
  local few=(env RC_PARAMS="seed=20261129 max_success=12") small=(env KVTIER_QSA_TEST_SMALL=1)
  local mem=("$CS" --tool memcheck --error-exitcode 9)
  local race=("$CS" --tool racecheck --error-exitcode 9)
  local step=("$bin/cuda_residency_test" --gtest_filter='ResidencyStep.*')
  local attend=("$bin/qsa_gpu_test" --gtest_filter='*AttendVariantsAgree*:*PlacementsAreBitIdent*:*MergeSlices*')
  run memcheck-step 150 "${few[@]}" "${mem[@]}" "${step[@]}"
  run racecheck-step 150 "${few[@]}" "${race[@]}" "${step[@]}"
  run memcheck-in-place 90 "${mem[@]}" "$bin/qsa_gpu_test" --gtest_filter='*InPlaceRows*'
  run memcheck-attend 90 "${small[@]}" "${mem[@]}" "${attend[@]}"
  run racecheck-attend 150 "${small[@]}" "${race[@]}" "${attend[@]}"
  local index=("$bin/qsa_decode_select_test" --gtest_filter='*DecodeIndex*')
  run memcheck-index 150 "${mem[@]}" "${index[@]}"
  run racecheck-index 150 "${race[@]}" "${index[@]}"
  run memcheck-gemm 150 "${mem[@]}" "$bin/runner_gemm_test"
  run racecheck-gemm 150 "${race[@]}" "$bin/runner_gemm_test" --gtest_filter='*Mma*'
}

# The mirror pool `kvtier plan` qualifies (residency unit layer, as `kvtier run --trace` has it):
# the smallest within 5 % of all-resident speed with no dropped page, else within 10 %, else none.
plan_pool() {
  python3 -c 'import json, sys
for u in json.load(open(sys.argv[1]))["mirror"]:
    if u["unit"] == "layer": print(u["within_slots"] or u["chosen_slots"] or "")' "$1" 2>/dev/null
}

trace() {
  local t name pool
  for t in "$KVTIER_SAMPLES_DIR"/*.ktr; do
    name=$(basename "$t" .ktr)
    run "plan-$name" 300 "$K" plan --trace "$t" --placement mirror --unit layer --json
    pool=$(plan_pool "$logs/plan-$name.log")
    run "trace-$name-device" 120 "$K" run --trace "$t" --placement device --json
    run "trace-$name-host" 120 "$K" run --trace "$t" --placement host --json
    if [[ -n $pool ]]; then
      run "trace-$name-mirror-$pool" 120 "$K" run --trace "$t" --placement mirror \
        --pool-pages "$pool" --json
    else
      echo "== $name: kvtier plan qualified no mirror pool (plan-$name in all.log)"
    fi
  done
}

# The synthetic weights the runner's modes share (kvtier weights gen), made once per machine.
W=/tmp/kvtier-gpu-weights.safetensors
weights() {
  [[ -f $W ]] || run weights-gen 120 "$K" weights gen --vocab 1024 --needle --out "$W"
}

figures() {
  local w=$W p
  weights
  local k=("$K" run --weights "$w" --json) at128k=(--prompt-tokens 1 --fill-depth 131071)
  local eight=(--prompt-tokens "1,1,1,1,1,1,1,1") mirror=(--placement mirror --pool-pages)
  for p in host device; do
    run "decode-128k-$p" 120 "${k[@]}" "${at128k[@]}" --decode 64 --placement "$p"
    # 1,048,544 filled + 1 + 32 - 1 = 1,048,576 positions
    run "decode-1m-$p" 180 "${k[@]}" --yarn --prompt-tokens 1 --fill-depth 1048544 --decode 32 \
      --placement "$p"
    run "decode-8x128k-$p" 120 "${k[@]}" "${eight[@]}" --fill-depth 131071 --decode 32 \
      --placement "$p"
  done
  # 256 slots hold half of one 128k step's 515-page selection: an experiment on truncated
  # selections (kvtier run refuses it without --allow-drops)
  run decode-128k-mirror-256 120 "${k[@]}" "${at128k[@]}" --decode 64 "${mirror[@]}" 256 \
    --allow-drops
  run decode-128k-host-profile 120 "${k[@]}" "${at128k[@]}" --decode 16 --placement host \
    --profile-phases
  run decode-8x16k-mirror-2400 120 "${k[@]}" "${eight[@]}" --fill-depth 16383 --decode 64 \
    "${mirror[@]}" 2400
  run decode-8x16k-mirror-2400-copy-first 120 "${k[@]}" "${eight[@]}" --fill-depth 16383 \
    --decode 64 "${mirror[@]}" 2400 --copy-first
  run stand-in-host-profile 120 "${k[@]}" "${at128k[@]}" --decode 16 --placement host \
    --stand-in-width 6912 --profile-phases
  run prefill-128k-device-profile 180 "${k[@]}" --prompt-tokens 131072 --decode 1 --chunk 4096 \
    --placement device --profile-phases
  # CLI paths: a prompt file of two requests of 1,500 ids recorded, the recording replayed (64
  # slots, below the 98 that drop nothing: the recording carries the drops on purpose)
  seq 1 3000 | awk '{printf "%d%s", ($1 * 7919) % 1024, NR % 1500 ? " " : "\n"}' >/tmp/prompt.txt
  run cli-prompt-file-record 60 "${k[@]}" --prompt /tmp/prompt.txt --decode 16 "${mirror[@]}" 64 \
    --allow-drops --record /tmp/kvtier-gpu-rec.ktr
  run cli-recorded-replay 60 "$K" run --trace /tmp/kvtier-gpu-rec.ktr "${mirror[@]}" 64 \
    --read checksum --verify --json
  if [[ ${NEEDLE_1M:-0} == 1 ]]; then
    run needle-1m-yarn-device 420 "${k[@]}" --yarn --prompt-tokens 1048575 --needle-at 314159 \
      --decode 2 --chunk 4096 --placement device
  fi
}

# name:requests:concurrent:prompt-min:prompt-max:decode:seed (kvtier trace gen, prefill chunks
# of 4096): the same recipes on both machines give byte-identical traces.
VALIDATION_TRACES=(r1-32k:1:1:32768:32768:128:901 r8-16k-128k:8:8:16384:131072:32:902
  r32-16k-32k:32:32:16384:32768:16:903 r4-256k:4:4:262144:262144:16:904)

gen_args() {  # spec, output file: the kvtier trace gen arguments, one a line
  local name n c lo hi d seed
  IFS=: read -r name n c lo hi d seed <<<"$1"
  printf '%s\n' trace gen --out "$2" --requests "$n" --concurrent "$c" --prompt-min "$lo" \
    --prompt-max "$hi" --decode "$d" --seed "$seed" --prefill-chunk 4096
}

# The mirror pools of a trace: the smallest that runs, the cliff, and the smallest within 5 %.
plan_pools() {
  python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
u = [u for u in d["mirror"] if u["unit"] == "layer"][0]
print(d["min_slots"], u["cliff_slots"], u["within_slots"] or u["chosen_slots"])' "$1"
}

validate() {
  local v=/tmp/kvtier-validate spec name t pool dtype gen
  rm -rf "$v" && mkdir -p "$v"
  run calibrate 300 "$K" validate calibrate --out "$v/points.json"
  for spec in "${VALIDATION_TRACES[@]}"; do
    name=${spec%%:*} t=$v/${spec%%:*}.ktr
    mapfile -t gen < <(gen_args "$spec" "$t")
    run "gen-$name" 120 "$K" "${gen[@]}"
    sha256sum "$t" | tee -a "$v/traces.sha256"
    run "plan-$name" 300 "$K" plan --trace "$t" --placement mirror --unit layer --json
    for dtype in bf16 fp8; do
      [[ $dtype == fp8 && $name != r8-16k-128k && $name != r1-32k ]] && continue
      for p in device host; do
        run "vt-$name-$p-$dtype" 300 "$K" run --trace "$t" --placement $p --kv-dtype $dtype --json
        cp "$logs/vt-$name-$p-$dtype.log" "$v/"
      done
      for pool in $(plan_pools "$logs/plan-$name.log"); do
        run "vt-$name-mirror-$pool-$dtype" 300 "$K" run --trace "$t" --placement mirror \
          --pool-pages "$pool" --kv-dtype $dtype --json
        cp "$logs/vt-$name-mirror-$pool-$dtype.log" "$v/"
      done
    done
  done
  tar czf "$out/validate.tgz" -C "$v" .
}

# Issue 17: many long requests decoding together at depth (--fill-depth), in host, in mirror
# with the most pool --device-kv-gib B holds (B = 16 and 24 GiB) and in device with no budget
# (the ideal, where it fits in HBM); the host bank benchmark; the 1M prefill on host at B = 24
# sampled at three depths (SCALE_CASES picks cases by name, default all).
SCALE_CASES=(32x128k:32:131071:bf16: 8x1m:8:1048544:fp8:--yarn 64x32k:64:32767:bf16:)

# mirror_budgets PREFIX RUN...: RUN on placement mirror with the most pool B holds, for B = 16
# and 24 GiB, as runs PREFIX-b16 and PREFIX-b24.
mirror_budgets() {
  local prefix=$1 b
  shift
  for b in 16 24; do
    run "$prefix-b$b" 300 "$@" --placement mirror --pool-pages max --device-kv-gib "$b"
  done
}

# scale_case SPEC: the case's name into `name` and into the array `k` its `kvtier run`, every
# request decoding 16 steps together at the case's depth (one prompt token each).
scale_case() {
  local n depth dtype yarn ones
  IFS=: read -r name n depth dtype yarn <<<"$1"
  ones=$(printf '1%.0s,' $(seq "$n")) ones=${ones%,}
  k=("$K" run --weights "$W" --json --prompt-tokens "$ones" --fill-depth "$depth" --decode 16
    --kv-dtype "$dtype" $yarn)
}

scale() {
  local spec name k
  weights
  run bench-host-bank-100g 120 "$K" bench host-bank --gib 100
  for spec in "${SCALE_CASES[@]}"; do
    scale_case "$spec"
    [[ -n ${SCALE_ONLY:-} && " $SCALE_ONLY " != *" $name "* ]] && continue
    run "scale-$name-device" 300 "${k[@]}" --placement device
    run "scale-$name-host-b16" 300 "${k[@]}" --placement host --device-kv-gib 16
    mirror_budgets "scale-$name-mirror" "${k[@]}"
    run "scale-$name-host-profile" 300 "${k[@]}" --placement host --profile-phases
  done
}

# Issue 17 item 4: prefill of a 1M-token prompt on host at B = 24 GiB, sampled: the last 64k
# tokens of the prompt prefilled at depths 0, 480k and 960k (--fill-depth writes what comes
# before), with the chunk and window the link may favour.
prefill1m() {
  local w=$W d c win
  weights
  local k=("$K" run --weights "$w" --json --yarn --prompt-tokens 65536 --decode 1
    --placement host --device-kv-gib 24)
  for d in 0 491520 983040; do
    run "prefill-64k-at-$d-c4096-w131072" 300 "${k[@]}" --fill-depth "$d" --chunk 4096
  done
  for c in 2048 8192 16384; do
    run "prefill-64k-at-983040-c$c-w131072" 300 "${k[@]}" --fill-depth 983040 --chunk "$c"
  done
  for win in 65536 262144; do
    run "prefill-64k-at-983040-c4096-w$win" 300 "${k[@]}" --fill-depth 983040 --chunk 4096 \
      --window "$win"
  done
}

# The QSA model forward as the planner prices it, against the runner (issue 15, item 3, end to
# end): name:requests:prompt tokens each:fill depth:decode steps:dtype:placement:extra (extra's
# commas are spaces). A decode case prompts one token a request at depth; a prefill case fills
# nothing. Each case runs twice: with CUDA graphs (the figure) and recorded (--record, eager),
# the recording being what the simulator prices (scripts/validate_model.sh).
MODEL_CASES=(
  d-8x16k-device:8:1:16383:128:bf16:device:
  d-8x16k-host:8:1:16383:128:bf16:host:
  d-32x128k-device:32:1:131071:64:bf16:device:
  d-32x128k-host:32:1:131071:16:bf16:host:--device-kv-gib,16
  d-64x32k-device:64:1:32767:64:bf16:device:
  d-64x32k-host:64:1:32767:16:bf16:host:--device-kv-gib,16
  d-8x1m-device:8:1:1048544:16:fp8:device:--yarn
  d-8x1m-host:8:1:1048544:16:fp8:host:--yarn,--device-kv-gib,16
  d-8x1m-mirror:8:1:1048544:16:fp8:mirror:--yarn,--pool-pages,max,--device-kv-gib,24
  p-8x16k-device:8:16384:0:2:bf16:device:
  p-8x16k-host:8:16384:0:2:bf16:host:
  p-1x128k-device:1:131072:0:2:bf16:device:
  p-1x128k-host:1:131072:0:2:bf16:host:
)

model() {
  local v=/tmp/kvtier-model spec name n tokens depth decode dtype placement extra prompt fill
  rm -rf "$v" && mkdir -p "$v"
  weights
  for spec in "${MODEL_CASES[@]}"; do
    IFS=: read -r name n tokens depth decode dtype placement extra <<<"$spec"
    [[ -n ${MODEL_ONLY:-} && " $MODEL_ONLY " != *" $name "* ]] && continue
    prompt=$(printf "$tokens,%.0s" $(seq "$n")) prompt=${prompt%,} fill=()
    ((depth > 0)) && fill=(--fill-depth "$depth")
    # one micro-batch: a recording takes one, and the simulator prices one
    local k=("$K" run --weights "$W" --json --prompt-tokens "$prompt" "${fill[@]}" --decode "$decode"
      --kv-dtype "$dtype" --placement "$placement" --micro-batches 1 ${extra//,/ })
    run "model-$name" 300 "${k[@]}"
    run "rec-$name" 300 "${k[@]}" --record "$v/$name.ktr"
    cp "$logs/model-$name.log" "$logs/rec-$name.log" "$v/" 2>/dev/null
    # MODEL_MICRO="2 4": host and mirror decode cases also in that many micro-batches (the
    # figures the simulator's --micro-batches prices from the one-batch recording)
    if [[ -n ${MODEL_MICRO:-} && $placement != device && $depth -gt 0 ]]; then
      local m i km
      for m in $MODEL_MICRO; do
        km=()
        for ((i = 0; i < ${#k[@]}; i++)); do
          if [[ ${k[i]} == --micro-batches ]]; then
            km+=(--micro-batches "$m") && ((i += 1))
          else
            km+=("${k[i]}")
          fi
        done
        run "model-$name-k$m" 300 "${km[@]}"
        cp "$logs/model-$name-k$m.log" "$v/" 2>/dev/null
      done
    fi
  done
  tar czf "$out/model.tgz" -C "$v" .
  # priced there too: the decode recordings (~50 MB compressed) outgrow what a call brings back
  KVTIER=$K bash "$root/scripts/validate_model.sh" "$v" "${MODEL_PROFILE:-h200-pcie5}" \
    /tmp/kvtier-model-sim >"$out/model-table.txt" 2>&1
  cp /tmp/kvtier-model-sim/model.json "$out/" 2>/dev/null
}

# Issue 17's targets (scripts/targets.py judges the t-*.log files these runs leave).
targets() {
  local spec name t k eight=(--prompt-tokens 1,1,1,1,1,1,1,1)
  want() { [[ -z ${TARGETS_ONLY:-} || " $TARGETS_ONLY " == *" $1 "* ]]; }
  # first: the target is a fresh machine's bank, before any run has touched its memory
  want bank && run t-bank 120 "$K" bench host-bank --gib 100 --json
  want step && run t-step 300 "$K" bench residency --repeats 5 --json
  if want trace; then
    # the pool `kvtier plan` qualifies for this trace (gpu.sh trace plans it again)
    t=$KVTIER_SAMPLES_DIR/concurrent8-16k-128k.ktr
    run t-trace-device 120 "$K" run --trace "$t" --placement device --json
    run t-trace-mirror 120 "$K" run --trace "$t" --placement mirror --pool-pages 5590 --json
  fi
  for spec in "${SCALE_CASES[@]}"; do
    scale_case "$spec"
    want "$name" || continue
    weights
    run "t-$name-device" 300 "${k[@]}" --placement device
    run "t-$name-host-b24" 300 "${k[@]}" --placement host --device-kv-gib 24
    mirror_budgets "t-$name-mirror" "${k[@]}"
  done
  if want copy-first; then
    weights
    local m=("$K" run --weights "$W" --json "${eight[@]}" --fill-depth 16383 --decode 64
      --placement mirror --pool-pages 2400)
    run t-copy-first-default 120 "${m[@]}"
    run t-copy-first 120 "${m[@]}" --copy-first
  fi
  if want prefill; then
    weights
    run t-prefill-1m 300 "$K" run --weights "$W" --json --yarn --prompt-tokens 1048576 \
      --decode 1 --chunk 16384 --window 262144 --placement host --device-kv-gib 24
  fi
  python3 "$root/scripts/targets.py" "$logs" | tee "$out/targets.txt"
}

bench() {
  run bench-qsa 120 "$bin/bench_qsa"
  run bench-qsa-b2b 90 "$bin/bench_qsa" b2b
  run bench-qsa-link 90 "$bin/bench_qsa" link
  run bench-qsa-decode 90 "$bin/bench_qsa_decode"
  run bench-projections 300 "$bin/bench_projections"
  run bench-prefill-load 120 "$bin/bench_prefill_load"
  run bench-residency 120 "$K" bench residency
}

{
  cat "$bin/build-info.txt"
  echo "run $(date -u '+%F %T') UTC, mode $mode, KVTIER_SAMPLES_DIR=$KVTIER_SAMPLES_DIR"
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv
  else
    echo "no nvidia-smi: no GPU here"
  fi
  echo "compute-sanitizer: $CS"
} >"$logs/gpu.txt"
tee -a "$out/all.log" <"$logs/gpu.txt"
if [[ $mode == all ]]; then
  tests; sanitize; trace; figures; bench
else
  "$mode"
fi

# The summary: a row per run; trace runs add the digest (the device's on the same trace and
# dtype when the attention read the same bytes) and the median GPU us per decode forward (every
# row a decode token) of the most rows, as the write-ups give it; the others' against device's.
python3 - "$logs" <<'PY' | tee "$out/summary.txt"
import json, statistics, sys
device = {}  # (trace, dtype) -> (digest, median us)
print(f"{'run':46s} {'rc':>3s} {'s':>4s}  {'digest':16s} {'us/decode fwd':>13s}  note")
for line in open(f"{sys.argv[1]}/runs.tsv"):
    name, rc, secs = line.rstrip("\n").split("\t")
    digest, us, note = "", "", ""
    try:
        r = json.load(open(f"{sys.argv[1]}/{name}.log")) if name.startswith("trace-") else None
    except (OSError, ValueError):
        r, note = None, "no JSON"
    if r:
        dec = [s for s in r["steps"] if 0 < s["tokens"] == s["decode_tokens"]]
        rows = max((s["rows"] for s in dec), default=0)
        dec = [s["gpu_us"] for s in dec if s["rows"] == rows]
        digest, med = r["checksum"], statistics.median(dec) if dec else 0
        us, key = f"{med:.1f}" if dec else "-", (r["trace"], r["kv_dtype"])
        note = f"{len(dec)} decode fwds of {rows} rows, drops {r['total']['drops']}"
        if r["placement"] == "device":
            device[key] = (digest, med)
        elif key in device:
            note += ", digest " + ("= device" if device[key][0] == digest else "DIFFERS")
            if med and device[key][1]:
                note += f", {med / device[key][1]:.3f} x device"
    if name.startswith(("scale-", "prefill-")) and rc == "0":
        try:
            m = json.load(open(f"{sys.argv[1]}/{name}.log"))
            steps = m["decode_ms"] / m["decode_ms_per_step"] if m["decode_ms_per_step"] else 0
            # h2d over the decode steps and the one prefill forward of a 1-token prompt
            link = m["h2d_bytes"] / (steps + 1) if steps else 0
            us = f"{1000 * m['decode_ms_per_step']:.0f}"
            note = (f"{m['decode_tokens_per_s']:.0f} dec tok/s, hit {m['hit_rate']:.3f}, "
                    f"h2d/step {link / 1e6:.0f} MB ({link / 51e6 / m['decode_ms_per_step']:.2f}"
                    f" x 51 GB/s), pool {m['pool_pages']}, bank {m['host_bank_s']:.1f} s "
                    f"({m['host_bank_s_per_10_gib']:.2f} s/10 GiB), fill {m['fill_s']:.1f} s, "
                    f"prefill {m['prefill_tokens_per_s']:.0f} tok/s")
        except (OSError, ValueError, KeyError, ZeroDivisionError) as e:
            note = f"no figures ({e})"
    print(f"{name:46s} {rc:>3s} {secs:>4s}  {digest:16s} {us:>13s}  {note}")
PY
tar czf "$out/logs-$mode.tgz" -C "$logs" . && rm -rf "$logs"
echo "logs: $out/all.log, $out/logs-$mode.tgz"
