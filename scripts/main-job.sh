#!/usr/bin/env bash
# The README's first command: install what is missing, build, and run the main job on its
# bundled default. Arguments are passed to the command.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/setup.sh"
"$root/scripts/build.sh"
# The bundled default trace, wherever KVTIER_BUILD_DIR puts the build and whatever the directory.
export KVTIER_SAMPLES_DIR="${KVTIER_SAMPLES_DIR:-$root/traces/samples}"
exec "${KVTIER_BUILD_DIR:-$root/build}/kvtier" plan "$@"
