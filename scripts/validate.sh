#!/usr/bin/env bash
# The simulator held to the GPU replays that `scripts/gpu.sh validate` brought back
# (docs/validation.md). Usage: scripts/validate.sh DIR PROFILE OUT
#   DIR      the unpacked OUT/validate.tgz: points.json, the traces, vt-*.log (each a
#            `kvtier run --trace ... --json`)
#   PROFILE  a profile name or file for the simulator (e.g. the one `kvtier validate fit` wrote)
#   OUT      receives sim-*.json (the simulator on the same trace and configuration,
#            `--forward trace-replay --per-forward`), compare.json, compare.html and the table
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
K=${KVTIER:-$root/build/kvtier}
dir=$1 profile=$2 out=$3
mkdir -p "$out"
pairs=()
for gpu in "$dir"/vt-*.log; do
  name=$(basename "$gpu" .log)
  read -r trace placement dtype pool < <(python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))
print(r["trace"].split("/")[-1], r["placement"], r["kv_dtype"], r.get("pool_pages", 0))' "$gpu")
  args=(sim --trace "$dir/$trace" --profile "$profile" --placement "$placement" --dtype "$dtype"
    --forward trace-replay --per-forward --json)
  [[ $placement == mirror ]] && args+=(--slots "$pool")
  "$K" "${args[@]}" >"$out/sim-${name#vt-}.json" 2>/dev/null
  pairs+=(--pair "$gpu" "$out/sim-${name#vt-}.json")
done
"$K" validate compare "${pairs[@]}" --json >"$out/compare.json"
"$K" validate compare "${pairs[@]}" --html "$out/compare.html" | tee "$out/compare.txt"
