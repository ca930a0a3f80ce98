#!/usr/bin/env bash
# The simulator's model forward (what `kvtier plan` prices) held to the QSA model runner, end to
# end (issue 15, item 3; docs/validation.md). Usage: scripts/validate_model.sh DIR PROFILE OUT
#   DIR      the unpacked OUT/model.tgz of `scripts/gpu.sh model`: for each case NAME, NAME.ktr
#            (the run recorded), rec-NAME.log (its JSON) and model-NAME.log (the same run with
#            CUDA graphs, not recorded: the figure)
#   PROFILE  a profile name or file for the simulator
#   OUT      receives sim-NAME.json (`kvtier sim` on the recording, the model forward, the rest
#            of the model at 0: the runner runs no non-QSA layers), model.json and the table
# Decode cases: the runner's steady ms per decode step (decode_steady_ms_per_step: the steps after
# each shape's first forward and its graph capture) against the mean span of the same last decode
# forwards of the simulator's. Prefill cases: the runner's prefill ms against the sum of the prefill forwards' spans.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
K=${KVTIER:-$root/build/kvtier}
dir=$1 profile=$2 out=$3
mkdir -p "$out"
for rec in "$dir"/rec-*.log; do
  name=$(basename "$rec" .log) name=${name#rec-}
  [[ -f $dir/$name.ktr && -f $dir/model-$name.log ]] || { echo "skipped $name: no trace or figure" >&2; continue; }
  mapfile -t args < <(python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))
print("--placement"); print(r["placement"])
if r["kv_dtype"] == "fp8": print("--dtype"); print("fp8")
if r["placement"] == "mirror": print("--slots"); print(max(r["pool_pages"]))
if r.get("device_kv_budget_bytes"): print("--device-kv-gib"); print(r["device_kv_budget_bytes"] / 2**30)' "$rec")
  "$K" sim --trace "$dir/$name.ktr" --profile "$profile" "${args[@]}" --non-qsa-forward-us 0 \
    --non-qsa-token-us 0 --per-forward --json >"$out/sim-$name.json"
  # the same run in K micro-batches (gpu.sh's MODEL_MICRO): the one-batch recording priced in K
  # groups, a mirror's pools together as the K runners had them
  for micro in "$dir/model-$name"-k*.log; do
    [[ -f $micro ]] || continue
    case=$(basename "$micro" .log) case=${case#model-}
    mapfile -t margs < <(python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))
print("--micro-batches"); print(r["micro_batches"])
if r["placement"] == "mirror": print("--slots"); print(sum(r["pool_pages"]))' "$micro")
    # the recording's own arguments less its pool (the K runs' pools are given above)
    args2=()
    for ((i = 0; i < ${#args[@]}; i++)); do
      if [[ ${args[i]} == --slots ]]; then ((i += 1)); else args2+=("${args[i]}"); fi
    done
    "$K" sim --trace "$dir/$name.ktr" --profile "$profile" "${args2[@]}" "${margs[@]}" \
      --non-qsa-forward-us 0 --non-qsa-token-us 0 --per-forward --json >"$out/sim-$case.json" ||
      { echo "not priced: $case (above)" >&2 && rm -f "$out/sim-$case.json"; }
  done
done
python3 - "$dir" "$out" <<'PY'
import glob, json, os, statistics, sys
d, out = sys.argv[1], sys.argv[2]
rows = []
for simf in sorted(glob.glob(f"{out}/sim-*.json")):
    name = os.path.basename(simf)[4:-5]
    run = json.load(open(f"{d}/model-{name}.log"))
    fw = json.load(open(simf))["per_forward"]
    dec = [f["span_us"] for f in fw if 0 < f["decode_tokens"] == f["tokens"]]
    pre = [f["span_us"] for f in fw if f["decode_tokens"] == 0]
    if run["fill_depth"] > 0:
        # the steady steps (after each shape's first forward and graph capture) where the run
        # reports them, against the same last forwards of the recording (the first ones find a
        # mirror pool colder); runs before that field gave every step
        gpu = run.get("decode_steady_ms_per_step") or run["decode_ms_per_step"]
        steady = run.get("decode_steady_forwards") or 0
        if run.get("decode_steady_ms_per_step") and 0 < steady < len(dec):
            dec = dec[len(dec) - steady:]
        kind, sim = "decode ms/step", statistics.mean(dec) / 1e3
    else:
        kind, gpu, sim = "prefill ms", run["prefill_ms"], sum(pre) / 1e3
    rows.append({"case": name, "placement": run["placement"], "kv_dtype": run["kv_dtype"],
                 "requests": run["requests"], "measure": kind, "gpu_ms": gpu, "sim_ms": sim,
                 "error": (sim - gpu) / gpu})
json.dump({"cases": rows}, open(f"{out}/model.json", "w"), indent=1)
print("error = (sim - gpu) / gpu (positive: the simulator is slower)\n")
print(f"{'case':22s} {'placement':9s} {'dtype':5s} {'measure':15s} {'runner':>11s} {'simulator':>11s} {'error':>8s}")
for r in rows:
    print(f"{r['case']:22s} {r['placement']:9s} {r['kv_dtype']:5s} {r['measure']:15s} "
          f"{r['gpu_ms']:11.3f} {r['sim_ms']:11.3f} {100 * r['error']:+7.1f}%")
for kind in ("decode ms/step", "prefill ms"):
    e = [abs(r["error"]) for r in rows if r["measure"] == kind]
    if e:
        print(f"{kind}: {len(e)} cases, median |error| {100 * statistics.median(e):.1f} %, "
              f"worst {100 * max(e):.1f} %")
PY
