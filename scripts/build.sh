#!/usr/bin/env bash
# Configures and builds kvtier into ${KVTIER_BUILD_DIR:-build} (Release by default).
# Extra arguments go to the CMake configure step.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${KVTIER_BUILD_DIR:-$root/build}"
jobs="${KVTIER_JOBS:-$(nproc)}"
gen=()
if command -v ninja >/dev/null 2>&1; then gen=(-G Ninja); fi
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release "$@"
elif [ $# -gt 0 ]; then
  cmake -S "$root" -B "$build" "$@"
fi
cmake --build "$build" -j "$jobs"
