#!/usr/bin/env bash
# On the GPU machine: the model runner's gpu tests and `kvtier run --weights` figures, logs
# into $1 (default $OUT). Carried binaries in gpu-carry-runner/ (scripts/gpu-build-runner.sh).
# Usage: bash gpu-carry-runner/gpu-runner.sh [OUT] [verify|tests|figures|all|final]
# verify: every gpu test of the project (qsa, residency, trace attend, runner) and the host run
# at 1,048,576 tokens.
set -u
D=$(cd "$(dirname "$0")" && pwd)
OUT=${1:-${OUT:-/tmp/kvtier-out}}
WHAT=${2:-all}
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$D:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.total --format=csv |
  tee "$OUT/gpu.txt"
summary=()
run() {  # name, timeout, command...
  local name=$1 limit=$2
  shift 2
  local t0=$SECONDS
  timeout "$limit" "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  summary+=("$(printf '%-34s rc=%-3s %4ss' "$name" "$rc" "$((SECONDS - t0))")")
  tail -n 25 "$OUT/$name.log"
  printf '%s\n' "${summary[@]}" >"$OUT/summary.txt"
}
W=/tmp/kvtier-fn.safetensors
if [[ $WHAT == verify ]]; then
  run qsa_gpu_test 120 "$D/qsa_gpu_test"
  run cuda_residency_test 240 "$D/cuda_residency_test"
  run cuda_trace_attend_test 240 "$D/cuda_trace_attend_test"
  run runner_gpu_test 120 "$D/runner_gpu_test"
  run runner_placements_test 240 "$D/runner_placements_test"
  run runner_needle_test 300 "$D/runner_needle_test"
  "$D/kvtier" weights gen --vocab 1024 --needle --out "$W" >/dev/null
  # the largest host-placement context: 1,048,544 filled + 1 prompt token + 32 decoded, the
  # last stored at position 1,048,575 (max_context = fill + prompt + decode - 1 = 1,048,576)
  run decode-1m-exact-host 240 "$D/kvtier" run --weights "$W" --json --yarn --prompt-tokens 1 \
    --fill-depth 1048544 --decode 32 --placement host
fi
if [[ $WHAT == tests || $WHAT == all ]]; then
  run runner_gpu_test 120 "$D/runner_gpu_test"
  run runner_placements_test 240 "$D/runner_placements_test"
  run runner_needle_test 300 "$D/runner_needle_test"
fi
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
if [[ $WHAT == final ]]; then
  # the short list, most important first (a run cut short keeps what finished)
  [[ -f $W ]] || "$D/kvtier" weights gen --vocab 1024 --needle --out "$W" >/dev/null
  K=(--weights "$W" --json)
  run runner_gpu_test 60 "$D/runner_gpu_test"
  run runner_placements_test 90 "$D/runner_placements_test"
  for p in host device; do
    run "decode-128k-$p" 60 "$D/kvtier" run "${K[@]}" --prompt-tokens 1 --fill-depth 131071 \
      --decode 64 --placement "$p"
  done
  run decode-1m-host 120 "$D/kvtier" run "${K[@]}" --yarn --prompt-tokens 1 \
    --fill-depth 1048500 --decode 32 --placement host
  T=traces/samples/concurrent8-16k-128k.ktr
  run trace-device 90 "$D/kvtier" run --trace "$T" --placement device --json
  # the pool `kvtier plan` recommends for this trace (scripts/gpu-trace-attend.sh says how)
  run trace-mirror-8499 90 "$D/kvtier" run --trace "$T" --placement mirror --pool-pages 8499 --json
  run runner_needle_test 60 "$D/runner_needle_test"
  run decode-1m-device 120 "$D/kvtier" run "${K[@]}" --yarn --prompt-tokens 1 \
    --fill-depth 1048500 --decode 32 --placement device
  run decode-128k-host-profile 60 "$D/kvtier" run "${K[@]}" --prompt-tokens 1 \
    --fill-depth 131071 --decode 8 --placement host --profile
  run prefill-128k-device-profile 90 "$D/kvtier" run "${K[@]}" --prompt-tokens 131072 \
    --decode 1 --chunk 4096 --placement device --profile
  run trace-mirror-5264 90 "$D/kvtier" run --trace "$T" --placement mirror --pool-pages 5264 --json
fi
printf '%s\n' "${summary[@]}" | tee "$OUT/summary.txt"
