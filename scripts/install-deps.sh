#!/usr/bin/env bash
# Installs the Debian packages cnnbench builds and tests with (run as root, or with sudo
# available). Already-installed packages are skipped, so it is cheap to run again.
# The CUDA toolkit (cuDNN, NCCL) is not a Debian package: install it from NVIDIA; the
# cuda device is built only when it is found.
set -euo pipefail
packages=(build-essential cmake pkg-config clang libdnnl-dev check libopenmpi-dev openmpi-bin
          libturbojpeg0-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
((${#missing[@]})) || exit 0
sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
