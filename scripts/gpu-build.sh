#!/usr/bin/env bash
# Builds the GPU binaries here (Release, sm_90, static runtime) and copies what the GPU
# machine needs into gpu-carry/ (git-ignored): pass carry: ["gpu-carry"] to the device run.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build-cuda}
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVTIER_STATIC_RUNTIME=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null
cmake --build "$build" --target kvtier cuda_residency_test -j2
mkdir -p "$root/gpu-carry"
cp "$build/kvtier" "$build/tests/cuda/cuda_residency_test" "$root/gpu-carry/"
cp "$root/scripts/gpu-run.sh" "$root/gpu-carry/"
# kvtier reads zstd-compressed traces: carry the library it was linked against.
cp -L "$(ldd "$build/kvtier" | awk '/libzstd/ {print $3}')" "$root/gpu-carry/"
ls -la "$root/gpu-carry"
