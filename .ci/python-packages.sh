#!/usr/bin/env bash
# .ci/python-packages.sh — the Python packages that the tests labelled "python" check
# cnnbench's files against, in a venv (.ci/run runs it in the background and hands its
# last line's CNNB_PYTHON to ctest):
#   tensorflow-cpu   cli_tfrecord_tensorflow (tf.io.TFRecordWriter, tf.data)
#   tensorboard      cli_tensorboard (EventAccumulator)
#   torch, torchvision, safetensors, numpy
#                    cli_torchvision_checkpoint, cli_torchvision_keys, cli_safetensors_python
# PyPI's torch is its CUDA build: its nvidia-* wheels are most of the download (none of
# these tests uses a GPU). A venv that already imports them all (a second CI run on the
# same machine) is kept as it is. The venv: $CNNB_CI_VENV, default
# /var/cache/cnnbench-ci/python. Prints CNNB_PYTHON=<its python> last.
set -euo pipefail
venv=${CNNB_CI_VENV:-/var/cache/cnnbench-ci/python}
packages=(tensorflow-cpu tensorboard torch torchvision safetensors numpy)
# One process per test's imports, as the tests import them: TensorFlow and torch each
# carry their own LLVM, and both in one process abort ("Option ... registered more
# than once"), which no test does.
probes=('import tensorflow'
        'import torch, torchvision, safetensors.torch, numpy'
        'from tensorboard.backend.event_processing.event_accumulator import EventAccumulator')
imports_all() {
  local probe
  for probe in "${probes[@]}"; do
    TF_CPP_MIN_LOG_LEVEL=3 "$venv/bin/python" -c "$probe" || return 1
  done
}
start=$SECONDS
if [ -x "$venv/bin/python" ] && imports_all >/dev/null 2>&1; then
  echo "python-packages: $venv already has ${packages[*]}"
else
  rm -rf "$venv"
  mkdir -p "$(dirname "$venv")"
  python3 -m venv "$venv" || { echo "python-packages: python3 -m venv $venv failed" >&2; exit 1; }
  "$venv/bin/pip" install --no-cache-dir --progress-bar off "${packages[@]}"
fi
imports_all || { echo "python-packages: $venv does not import them (above)" >&2; exit 1; }
echo "python-packages: ready in $((SECONDS - start)) s, $(du -sh "$venv" | cut -f1)"
echo "CNNB_PYTHON=$venv/bin/python"
