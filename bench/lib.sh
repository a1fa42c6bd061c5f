# lib.sh — shared pieces of the bench/ scripts (sourced, not run): where cnnbench and
# the helper programs are, machine and version facts, and reading numbers out of the
# programs' output.
#
# Expects: REPO (the checkout's root) and BUILD (a cnnbench build directory) set.

PYTHON=${PYTHON:-/usr/bin/python3}   # e.g. a venv with PyPI's torch (and tensorflow, tf_keras)
# Debian's PyTorch does fp32 matmuls (nn.Linear) through whatever libblas.so.3 the system
# alternative points to; its convolutions go through oneDNN either way. PYTORCH_BLAS=
# openblas runs it on OpenBLAS (apt-get install libopenblas0-pthread) without touching
# the system's choice; "system" (the default) leaves it alone.
PYTORCH_BLAS=${PYTORCH_BLAS:-system}
OPENBLAS_DIR=/usr/lib/x86_64-linux-gnu/openblas-pthread
TIME=/usr/bin/time

die() { echo "$(basename "$0"): $*" >&2; exit 2; }

# Checks the build; the two helper programs (cnnb_profile, onednn_peak) are targets of
# the build itself (bench/CMakeLists.txt), so they match the commit that runs.
bench_prepare() {
  CNNBENCH="$BUILD/bin/cnnbench"
  PROFILE_BIN="$BUILD/bin/cnnb_profile"
  PEAK_BIN="$BUILD/bin/onednn_peak"
  pytorch_env
  # Bring the build up to date first, so the commit the results name is what ran
  # (NO_BUILD=1 skips it, e.g. to measure a build kept on purpose).
  if [ "${NO_BUILD:-0}" != 1 ] && [ -f "$BUILD/CMakeCache.txt" ]; then
    echo "updating $BUILD (NO_BUILD=1 skips this)"
    cmake --build "$BUILD" -j2 > "$BUILD/bench-build.log" 2>&1 ||
      die "building $BUILD failed: see $BUILD/bench-build.log"
  fi
  [ -x "$CNNBENCH" ] || die "no $CNNBENCH: build first (cmake -S $REPO -B $BUILD -DCMAKE_BUILD_TYPE=Release && cmake --build $BUILD -j2)"
  [ -x "$PROFILE_BIN" ] || die "no $PROFILE_BIN: build the cnnb_profile target"
  [ -x "$PEAK_BIN" ] || die "no $PEAK_BIN: build the onednn_peak target (needs oneDNN and OpenMP)"
  [ -x "$TIME" ] || die "no $TIME: apt-get install -y time"
}

# PYTORCH_ENV: what goes before PyTorch's command line for the BLAS PYTORCH_BLAS asks
# for (an `env VAR=...` prefix, or nothing).
pytorch_env() {
  PYTORCH_ENV=()
  case "$PYTORCH_BLAS" in
    system) ;;
    openblas)
      [ -e "$OPENBLAS_DIR/libblas.so.3" ] || die "--pytorch-blas=openblas: no $OPENBLAS_DIR (apt-get install libopenblas0-pthread)"
      PYTORCH_ENV=(env "LD_LIBRARY_PATH=$OPENBLAS_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
                   "OPENBLAS_NUM_THREADS=$THREADS") ;;
    *) die "--pytorch-blas=$PYTORCH_BLAS: known: system, openblas" ;;
  esac
}

# The BLAS library Debian's PyTorch gets, as the loader resolves it.
pytorch_blas_name() {
  local lib
  if [ "$PYTORCH_BLAS" = openblas ]; then lib="$OPENBLAS_DIR/libblas.so.3"
  else lib=$(readlink -f /lib/x86_64-linux-gnu/libblas.so.3 2>/dev/null); fi
  case "$(readlink -f "$lib")" in
    *openblas*) echo "OpenBLAS" ;;
    */blas/libblas.so*) echo "reference BLAS (netlib libblas3)" ;;
    *) echo "${lib:-unknown}" ;;
  esac
}

# Facts for the results' header.
machine_info() {
  local cpu cores commit dirty onednn torch
  cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
  cores=$(nproc)
  commit=$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)
  # Files other helpers have not committed yet are built too (core/ globs its sources).
  dirty=$(git -C "$REPO" status --porcelain 2>/dev/null | wc -l)
  [ "$dirty" = 0 ] && dirty="" || dirty=" + $dirty uncommitted/untracked files"
  onednn=$(dpkg-query -W -f '${Version}' libdnnl2 2>/dev/null || echo unknown)
  torch=$("$PYTHON" -c 'import torch, torchvision; print(torch.__version__, "/ torchvision", torchvision.__version__)' 2>/dev/null || echo "not installed")
  echo "- Machine: $cpu, $cores cores ($(lscpu | sed -n 's/^Flags:.*\(avx512_bf16\).*/avx512_bf16/p')$(grep -q amx_bf16 /proc/cpuinfo && echo ', amx_bf16')), $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo) RAM"
  echo "- cnnbench commit: $commit$dirty, build $BUILD ($(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$BUILD/CMakeCache.txt" 2>/dev/null))"
  case "$("$PYTHON" -c 'import torch; print(torch.__file__)' 2>/dev/null)" in
    /usr/lib/python3/*)
      echo "- oneDNN (libdnnl2): $onednn; PyTorch: $torch (Debian python3-torch, on the same"
      echo "  libdnnl.so.2; fp32 matmuls on $(pytorch_blas_name))" ;;
    *)
      echo "- oneDNN (libdnnl2): $onednn; PyTorch: $torch from PyPI ($PYTHON), with its"
      echo "  own $("$PYTHON" -c 'import re, torch; m = re.search(r"(?:oneDNN|MKL-DNN) v([0-9.]+)", torch.__config__.show()); print("oneDNN " + m.group(1) if m else "oneDNN")' 2>/dev/null)" ;;
  esac
  if [ -n "${TF_DIR:-}" ]; then
    echo "- TensorFlow: $(TF_CPP_MIN_LOG_LEVEL=3 "$PYTHON" -c 'import tensorflow as t; print(t.__version__)' 2>/dev/null || echo "not installed") ($PYTHON), tf_cnn_benchmarks from $TF_DIR"
  fi
  echo "- Load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
}

# value_of FILE PREFIX: the first number after PREFIX on a line of FILE.
value_of() {
  sed -n "s|^.*$2 *\([0-9.][0-9.]*\).*$|\1|p" "$1" | head -1
}

# Peak RSS in MiB from /usr/bin/time -v output.
rss_mib() {
  awk -F: '/Maximum resident set size/ {printf "%.0f", $2/1024}' "$1"
}

# Forward GFLOPs per image (conv + dense, multiply-add = 2) from cnnbench --model_info.
forward_gflops() {
  "$CNNBENCH" --model="$1" --model_info 2>/dev/null | sed -n 's/^Forward GFLOPs per image: //p'
}

# Arithmetic without bc: calc 'expr'.
calc() { awk "BEGIN { v = $1; if (v == v + 0) printf \"%.${2:-2}f\", v; else print \"-\" }"; }

# "Percent of CPU this job got" from /usr/bin/time -v: about 100 x threads when the run
# had the cores to itself; much less means other work shared them (the numbers are low).
cpu_pct() {
  sed -n 's/.*Percent of CPU this job got: *\([0-9]*\)%.*/\1/p' "$1" | head -1
}
