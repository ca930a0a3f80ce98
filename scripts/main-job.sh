#!/usr/bin/env bash
# The README's first command: install what is missing, build, and run the main job on its
# bundled default. Arguments are passed to the command.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/setup.sh"
"$root/scripts/build.sh"
# The bundled default trace, wherever KVTIER_BUILD_DIR puts the build and whatever the directory.
export KVTIER_SAMPLES_DIR="${KVTIER_SAMPLES_DIR:-$root/traces/samples}"
# With no arguments: the bundled default under a 15.9 GiB KV budget (--device-kv-gib), below
# the 16.04 GiB that holding every page on the device needs, so the plan recommends what fits
# (a mirror pool) and says why (README). Any arguments replace the budget: `scripts/main-job.sh --profile
# h100-sxm5-pcie5` plans with the card's whole memory as the KV budget.
if [ $# -eq 0 ]; then set -- --device-kv-gib 15.9; fi
exec "${KVTIER_BUILD_DIR:-$root/build}/kvtier" plan "$@"
