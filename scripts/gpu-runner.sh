#!/usr/bin/env bash
# On the GPU machine: the model runner's gpu tests and `kvtier run --weights` figures, logs
# into $1 (default $OUT). Carried binaries in gpu-carry-runner/ (scripts/gpu-build-runner.sh).
# Usage: bash gpu-carry-runner/gpu-runner.sh [OUT] [tests|figures|all]
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
}
W=/tmp/kvtier-fn.safetensors
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
  for p in host device; do
    run "decode-1m-$p" 180 "$D/kvtier" run "${K[@]}" --yarn --prompt-tokens 1 \
      --fill-depth 1048574 --decode 64 --placement "$p"
  done
  # prefill of the QSA stack at 128k
  for p in device host; do
    run "prefill-128k-$p" 180 "$D/kvtier" run "${K[@]}" --prompt-tokens 131072 --decode 1 \
      --chunk 4096 --placement "$p"
  done
  # the needle at 1,048,576 tokens with YaRN (device placement: prefill through HBM)
  run needle-1m-yarn-device 420 "$D/kvtier" run "${K[@]}" --yarn --prompt-tokens 1048575 \
    --needle-at 314159 --decode 2 --chunk 4096 --placement device
fi
printf '%s\n' "${summary[@]}" | tee "$OUT/summary.txt"
