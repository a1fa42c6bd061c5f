#!/usr/bin/env bash
# Installs the Debian 12 packages that the README's set-up commands need (configure, build,
# run cnnbench, run every test), on any Debian 12 down to a `debootstrap --variant=minbase`
# root: nothing else is assumed (.ci/fresh-debian.sh proves it in such a root). Runs as
# root, or through sudo when sudo is there. Already-installed packages are skipped, so it is
# cheap to run again. Extra package names given as arguments are installed too (CI adds
# clang for its sanitizer build).
# The CUDA toolkit (cuDNN, NCCL) is not a Debian package: install it from NVIDIA; the
# cuda device is built only when it is found.
set -euo pipefail
packages=(
  build-essential     # gcc, make, libc headers; brings binutils (nm, readelf: tests/cli) and
                      # libgomp (OpenMP, which the cpu device and oneDNN use)
  cmake               # the build
  pkg-config          # how CMake finds Check, libturbojpeg and libjpeg
  libdnnl-dev         # oneDNN: the cpu device
  ocl-icd-opencl-dev  # OpenCL headers + libOpenCL.so: Debian's oneDNN CMake package (GPU
                      # runtime OCL) find_package()s OpenCL REQUIRED, and libdnnl-dev only
                      # Recommends them
  libjansson-dev      # JSON: checkpoints' safetensors headers and index, the benchmark log
  check               # the unit tests' framework (without it no tests are configured)
  libturbojpeg0-dev   # libjpeg-turbo: the ImageNet datasource's JPEG decoding
  libjpeg62-turbo-dev # libjpeg-turbo's libjpeg API (jpeglib.h): region and scaled decodes
  zlib1g-dev          # zlib: the mnist datasource reads gzipped IDX files (.gz, as MNIST and
                      # Fashion-MNIST are published); without it, plain IDX files only
  dataset-fashion-mnist # the real Fashion-MNIST IDX files (.gz) in
                      # /usr/share/datasets/fashion-mnist: tests/cli/mnist.sh trains on them
                      # (and skips, saying why, without them)
  libopenmpi-dev      # MPI headers, mpicc (FindMPI): the MPI strategies
  openmpi-bin         # mpirun, to run them
  iproute2            # ip, tc: several MPI hosts on one machine (network namespaces joined
                      # by a bridge, links shaped with tc) for tests/cli/strategy_netns.sh
                      # and bench/scaling.sh
  slurm-wlm           # Slurm 22.05: slurmctld, slurmd, srun/sbatch/scancel and its basic
                      # plugins (auth/none, mpi/pmix, proctrack/linuxproc): tests/cli/
                      # slurm_*.sh start a Slurm of their own on loopback (docs/slurm.md).
                      # The packaged services stay down: no /etc/slurm/slurm.conf
  libpmix-dev         # libpmix.so, the unversioned name Slurm's mpi/pmix plugin dlopen()s
                      # for srun --mpi=pmix (libopenmpi-dev depends on it too)
)
packages+=("$@")

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
((${#missing[@]})) || exit 0

sudo=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || {
    echo "install-deps: not root and sudo is not installed; run as root: ${missing[*]}" >&2
    exit 1
  }
  sudo=(sudo)
fi
echo "install-deps: installing ${missing[*]}"
# env: sudo drops the caller's environment, so the frontend is set on the command itself.
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
