#!/usr/bin/env bash
# On the GPU machine: the model runner's gpu tests and `kvtier run --weights` figures, logs
# into $1 (default $OUT). Carried binaries in gpu-carry-runner/ (scripts/gpu-build-runner.sh).
# Usage: bash gpu-carry-runner/gpu-runner.sh [OUT] [final|figures|all|sanitize|qsa|mirror|micro|link|trace]
# final: every gpu test, then the issue figures; figures: the longer list of runner figures;
# all: every gpu test and `figures`; the others: see each block.
set -u
D=$(cd "$(dirname "$0")" && pwd)
# the binaries travel as one archive (scripts/gpu-build-runner.sh)
if [[ -f $D/bins.tgz ]]; then tar xzf "$D/bins.tgz" -C "$D" && rm "$D/bins.tgz"; fi
OUT=${1:-${OUT:-/tmp/kvtier-out}}
WHAT=${2:-all}
mkdir -p "$OUT"
# One log per run outside $OUT (the device call returns few files): all.log collects them as
# they finish, and logs-$WHAT.tgz holds them at the end.
LOGS=$(mktemp -d)
export LD_LIBRARY_PATH="$D:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.total --format=csv |
  tee "$OUT/gpu.txt"
summary=()
run() {  # name, timeout, command...
  local name=$1 limit=$2
  shift 2
  local t0=$SECONDS
  timeout "$limit" "$@" >"$LOGS/$name.log" 2>&1
  local rc=$?
  summary+=("$(printf '%-34s rc=%-3s %4ss' "$name" "$rc" "$((SECONDS - t0))")")
  { echo "=== $name rc=$rc: $*"; cat "$LOGS/$name.log"; } >>"$OUT/all.log"
  tail -n 25 "$LOGS/$name.log"
  printf '%s\n' "${summary[@]}" >"$OUT/summary.txt"
}
W=/tmp/kvtier-fn.safetensors
# every gpu test binary of the project, most telling first
gpu_tests() {
  run cuda_trace_attend_test 150 "$D/cuda_trace_attend_test"
  run runner_gpu_test 60 "$D/runner_gpu_test"
  run runner_placements_test 90 "$D/runner_placements_test"
  run cuda_residency_test 90 "$D/cuda_residency_test"
  run qsa_gpu_test 60 "$D/qsa_gpu_test"
  run qsa_decode_select_test 60 "$D/qsa_decode_select_test"
  run runner_needle_test 90 "$D/runner_needle_test"
}
T=traces/samples/concurrent8-16k-128k.ktr
# mirror against device on the sample trace at the pool `kvtier plan` recommends for it
# (docs/run-trace.md says how), the mirror in place and with --copy-first, twice
trace_figures() {
  for i in 1 2; do
    run "trace-device-$i" 90 "$D/kvtier" run --trace "$T" --placement device --json
    run "trace-mirror-8499-$i" 90 "$D/kvtier" run --trace "$T" --placement mirror \
      --pool-pages 8499 --json
    run "trace-mirror-8499-copy-first-$i" 90 "$D/kvtier" run --trace "$T" --placement mirror \
      --pool-pages 8499 --copy-first --json
  done
}
# memcheck and racecheck over the residency step's tests, memcheck over the in-place attend's
step_sanitizers() {
  local CS
  CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  RC_PARAMS="seed=20261129 max_success=12" run memcheck-step 150 "$CS" --tool memcheck \
    --error-exitcode 9 "$D/cuda_residency_test" --gtest_filter='ResidencyStep.*'
  RC_PARAMS="seed=20261129 max_success=12" run racecheck-step 150 "$CS" --tool racecheck \
    --error-exitcode 9 "$D/cuda_residency_test" --gtest_filter='ResidencyStep.*'
  run memcheck-in-place 90 "$CS" --tool memcheck --error-exitcode 9 "$D/qsa_gpu_test" \
    --gtest_filter='*InPlaceRows*'
}
# memcheck and racecheck over the attend variants and placements (sanitizer-sized tests)
attend_sanitizers() {
  local CS A='*AttendVariantsAgree*:*PlacementsAreBitIdentical*'
  CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  KVTIER_QSA_TEST_SMALL=1 run memcheck-attend 90 "$CS" --tool memcheck --error-exitcode 9 \
    "$D/qsa_gpu_test" --gtest_filter="$A"
  KVTIER_QSA_TEST_SMALL=1 run racecheck-attend 120 "$CS" --tool racecheck --error-exitcode 9 \
    "$D/qsa_gpu_test" --gtest_filter="$A"
}
[[ $WHAT == all ]] && gpu_tests
if [[ $WHAT == figures || $WHAT == all ]]; then
  [[ -f $W ]] || "$D/kvtier" weights gen --vocab 1024 --needle --out "$W" >/dev/null
  K=(--weights "$W" --json)
  # decode at depth (written directly): 12 QSA layers, bf16, one request
  for p in host device; do
    run "decode-128k-$p" 120 "$D/kvtier" run "${K[@]}" --prompt-tokens 1 --fill-depth 131071 \
      --decode 128 --placement "$p"
  done
  run decode-128k-mirror 120 "$D/kvtier" run "${K[@]}" --prompt-tokens 1 --fill-depth 131071 \
    --decode 128 --placement mirror --pool-pages 256
  run decode-128k-host-eager 120 "$D/kvtier" run "${K[@]}" --prompt-tokens 1 \
    --fill-depth 131071 --decode 32 --placement host --no-graphs
  run decode-128k-host-profile 120 "$D/kvtier" run "${K[@]}" --prompt-tokens 1 \
    --fill-depth 131071 --decode 16 --placement host --profile
  for p in host device; do
    run "decode-1m-$p" 180 "$D/kvtier" run "${K[@]}" --yarn --prompt-tokens 1 \
      --fill-depth 1048500 --decode 64 --placement "$p"
  done
  run decode-1m-device-profile 180 "$D/kvtier" run "${K[@]}" --yarn --prompt-tokens 1 \
    --fill-depth 1048500 --decode 16 --placement device --profile
  # decode of a batch of 8 requests at 16k
  run decode-8x16k-host 120 "$D/kvtier" run "${K[@]}" --prompt-tokens 1,1,1,1,1,1,1,1 \
    --fill-depth 16383 --decode 64 --placement host
  run decode-8x16k-device 120 "$D/kvtier" run "${K[@]}" --prompt-tokens 1,1,1,1,1,1,1,1 \
    --fill-depth 16383 --decode 64 --placement device
  # prefill of the QSA stack at 128k
  run prefill-128k-device-profile 180 "$D/kvtier" run "${K[@]}" --prompt-tokens 131072 \
    --decode 1 --chunk 4096 --placement device --profile
  if [[ ${NEEDLE_1M:-0} == 1 ]]; then
    # the needle at 1,048,576 tokens with YaRN (device placement: prefill through HBM)
    run needle-1m-yarn-device 420 "$D/kvtier" run "${K[@]}" --yarn --prompt-tokens 1048575 \
      --needle-at 314159 --decode 2 --chunk 4096 --placement device
  fi
fi
if [[ $WHAT == qsa ]]; then
  # the QSA kernels: their tests, the attend and decode-select figures, the sanitizers over the
  # attend variants, the decode index and the decode top-k (sanitizer-sized tests)
  run qsa_gpu_test 120 "$D/qsa_gpu_test"
  run qsa_decode_select_test 120 "$D/qsa_decode_select_test"
  run bench-qsa-b2b 90 "$D/bench_qsa" b2b
  run bench-qsa-decode 60 "$D/bench_qsa_decode"
  attend_sanitizers
  CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  export KVTIER_QSA_TEST_SMALL=1
  I='Shapes/DecodeIndex.*/1rows_1req_2048*:Shapes/DecodeIndex.*/16rows_16req_2048*:DecodeIndexForced.*'
  run memcheck-index 60 "$CS" --tool memcheck --error-exitcode 9 "$D/qsa_decode_select_test" \
    --gtest_filter="$I"
  run racecheck-index 60 "$CS" --tool racecheck --error-exitcode 9 "$D/qsa_decode_select_test" \
    --gtest_filter="$I"
  T='DecodeTopkSmall.*:DecodeTopkCluster.*'
  run memcheck-topk-small 60 "$CS" --tool memcheck --error-exitcode 9 \
    "$D/qsa_decode_select_test" --gtest_filter="$T"
  run racecheck-topk-small 180 "$CS" --tool racecheck --error-exitcode 9 \
    "$D/qsa_decode_select_test" --gtest_filter="$T"
  unset KVTIER_QSA_TEST_SMALL
fi
if [[ $WHAT == mirror ]]; then
  # the mirror's cost on the sample trace: the figures, the residency benchmark, and the kernels
  # of a stretch of the mirror's decode forwards (launches 7,000 .. 7,299) by ncu
  trace_figures
  run bench-residency 120 "$D/kvtier" bench residency
  NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
  run ncu-trace-mirror 180 "$NCU" --clock-control none --launch-skip 7000 --launch-count 300 \
    --metrics gpu__time_duration.sum --csv "$D/kvtier" run --trace "$T" --placement mirror \
    --pool-pages 8499 --json
fi
if [[ $WHAT == final ]]; then
  # the session's closing run (tests, then figures), most important first: a run cut short keeps
  # what finished
  [[ -f $W ]] || "$D/kvtier" weights gen --vocab 1024 --needle --out "$W" >/dev/null
  K=(--weights "$W" --json)
  gpu_tests
  trace_figures
  step_sanitizers
  E=(--prompt-tokens 1,1,1,1,1,1,1,1 --fill-depth 16383 --decode 64)
  run decode-8x16k-mirror-2400 120 "$D/kvtier" run "${K[@]}" "${E[@]}" --placement mirror \
    --pool-pages 2400
  run decode-8x16k-mirror-2400-copy-first 120 "$D/kvtier" run "${K[@]}" "${E[@]}" \
    --placement mirror --pool-pages 2400 --copy-first
  for p in host device; do
    run "decode-128k-$p" 60 "$D/kvtier" run "${K[@]}" --prompt-tokens 1 --fill-depth 131071 \
      --decode 64 --placement "$p"
  done
  run decode-128k-host-profile 60 "$D/kvtier" run "${K[@]}" --prompt-tokens 1 \
    --fill-depth 131071 --decode 16 --placement host --profile
  run decode-1m-exact-host 120 "$D/kvtier" run "${K[@]}" --yarn --prompt-tokens 1 \
    --fill-depth 1048544 --decode 32 --placement host
  # 8 requests at 128k in one batch: the link's floor is then 8 x 12 x 4.2 MB per step
  for p in host device; do
    run "decode-8x128k-$p" 120 "$D/kvtier" run "${K[@]}" --prompt-tokens 1,1,1,1,1,1,1,1 \
      --fill-depth 131071 --decode 32 --placement "$p"
  done
  # CLI paths: a prompt file, a recorded trace replayed, the stand-in MLP
  # two requests (one per line) of 1,500 token ids
  seq 1 3000 | awk '{printf "%d%s", ($1 * 7919) % 1024, NR % 1500 ? " " : "\n"}' >/tmp/prompt.txt
  run cli-prompt-file-record 60 "$D/kvtier" run "${K[@]}" --prompt /tmp/prompt.txt --decode 16 \
    --placement mirror --pool-pages 64 --record /tmp/rec.ktr
  run cli-recorded-replay 60 "$D/kvtier" run --trace /tmp/rec.ktr --placement mirror \
    --pool-pages 64 --read checksum --verify --json
  run cli-stand-in-host 60 "$D/kvtier" run "${K[@]}" --prompt-tokens 1 --fill-depth 131071 \
    --decode 16 --placement host --stand-in-width 6912 --profile
  run prefill-128k-device-profile 90 "$D/kvtier" run "${K[@]}" --prompt-tokens 131072 \
    --decode 1 --chunk 4096 --placement device --profile
  run bench-qsa-b2b 90 "$D/bench_qsa" b2b
fi
if [[ $WHAT == link ]]; then
  # the host attend's read: SM loads over PCIe by grid shape, the attend launched early against
  # the default, the attend and decode-select figures, host decode at 128k with the attend
  # early and not, the QSA tests and the attend's sanitizers
  [[ -f $W ]] || "$D/kvtier" weights gen --vocab 1024 --needle --out "$W" >/dev/null
  K=(--weights "$W" --json --prompt-tokens 1 --fill-depth 131071 --decode 64 --placement host)
  run qsa_gpu_test 120 "$D/qsa_gpu_test"
  run qsa_decode_select_test 120 "$D/qsa_decode_select_test"
  run bench-qsa-link 120 "$D/bench_qsa" link
  run bench-qsa-early 120 "$D/bench_qsa" early
  run bench-qsa-b2b 90 "$D/bench_qsa" b2b
  run bench-qsa-decode 60 "$D/bench_qsa_decode"
  for i in 1 2; do
    run "decode-128k-host-$i" 60 "$D/kvtier" run "${K[@]}"
    KVTIER_QSA_ATTEND_EARLY=1 run "decode-128k-host-early-$i" 60 "$D/kvtier" run "${K[@]}"
  done
  attend_sanitizers
fi
if [[ $WHAT == trace ]]; then
  # the trace replay alone: its tests and the mirror / device figures
  run cuda_trace_attend_test 150 "$D/cuda_trace_attend_test"
  trace_figures
fi
if [[ $WHAT == micro ]]; then
  # the runner after the launch / finish split: its tests, then decode of 8 requests at 128k in
  # 1, 2 and 4 micro-batches (host: the link's floor is 8 x 12 x 4.2 MB per step)
  [[ -f $W ]] || "$D/kvtier" weights gen --vocab 1024 --needle --out "$W" >/dev/null
  K=(--weights "$W" --json)
  run runner_placements_test 120 "$D/runner_placements_test"
  E=(--prompt-tokens 1,1,1,1,1,1,1,1 --fill-depth 131071 --decode 32 --placement host)
  for m in 1 2 4; do
    run "decode-8x128k-host-micro$m" 120 "$D/kvtier" run "${K[@]}" "${E[@]}" --micro-batches "$m"
  done
  for sp in 4 16 33; do
    run "decode-8x128k-host-micro2-splits$sp" 120 "$D/kvtier" run "${K[@]}" "${E[@]}" \
      --micro-batches 2 --decode-splits "$sp"
  done
  run decode-8x128k-host-micro4-splits4 120 "$D/kvtier" run "${K[@]}" "${E[@]}" \
    --micro-batches 4 --decode-splits 4
  run decode-2x128k-host-micro2 120 "$D/kvtier" run "${K[@]}" --prompt-tokens 1,1 \
    --fill-depth 131071 --decode 32 --placement host --micro-batches 2
  run decode-2x128k-host 120 "$D/kvtier" run "${K[@]}" --prompt-tokens 1,1 \
    --fill-depth 131071 --decode 32 --placement host
fi
if [[ $WHAT == sanitize ]]; then
  # compute-sanitizer over the sanitizer-sized tests; cuBLAS's own kernels are left out of the
  # runner's racecheck (they report split-K hazards of their own, not ours)
  CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  export KVTIER_QSA_TEST_SMALL=1
  run racecheck-topk-small 200 "$CS" --tool racecheck --error-exitcode 9 \
    "$D/qsa_decode_select_test" --gtest_filter='DecodeTopkSmall.*'
  run racecheck-runner 150 "$CS" --tool racecheck --error-exitcode 9 \
    --kernel-name-exclude kns=xmma --kernel-name-exclude kns=cutlass \
    --kernel-name-exclude kns=splitK --kernel-name-exclude kns=gemv "$D/runner_gpu_test" \
    --gtest_filter='*LayersAndLogits*:*Skinny*'
  run memcheck-trace-attend 150 "$CS" --tool memcheck --error-exitcode 9 \
    "$D/cuda_trace_attend_test" --gtest_filter='-*Checksum*'
  unset KVTIER_QSA_TEST_SMALL
fi
printf '%s\n' "${summary[@]}" | tee "$OUT/summary.txt"
tar czf "$OUT/logs-$WHAT.tgz" -C "$LOGS" .
