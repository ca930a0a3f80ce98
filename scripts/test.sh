#!/usr/bin/env bash
# The README's second command: install what is missing, build, and run every test. Tests
# labelled `gpu` skip themselves (with the reason) where there is no GPU.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${KVTIER_BUILD_DIR:-$root/build}"
"$root/scripts/setup.sh"
"$root/scripts/build.sh"
cd "$build"
ctest --output-on-failure -j "${KVTIER_JOBS:-$(nproc)}" "$@"
