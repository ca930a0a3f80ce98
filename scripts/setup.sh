#!/usr/bin/env bash
# Installs the Debian 12 packages kvtier builds with. Idempotent: installs only what is
# missing, and does nothing (no apt, no root needed) when everything is already there.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libgtest-dev libgmock-dev librapidcheck-dev libbenchmark-dev
  libeigen3-dev libboost-json1.81-dev libboost-program-options1.81-dev
  libzstd-dev zstd clang clang-format
  python3 python3-numpy python3-zstandard python3-pip python3-venv python3-setuptools
  python3-wheel
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
