#!/usr/bin/env bash
# The checkpoints of one --train_dir, as files:
# - --save_model_steps saves every n global steps and the run's end saves once more;
#   --max_ckpts_to_keep keeps the newest; the index names the latest; --save_model_secs
#   saves on time;
# - a torn (truncated) or corrupt (bad header byte) newest checkpoint is skipped, with a
#   warning naming it, for the previous one; a tensor of the wrong shape, a missing one, a
#   checkpoint of more classes are refused naming the file and the tensor;
# - flags that make no sense are refused before anything runs, and a --train_dir that
#   cannot be created fails before the first step;
# - two MPI ranks (horovod): rank 0 writes, both resume from the same step.
# (A save killed half way: cli_checkpoint_atomic.)
set -euo pipefail
: "${CNNBENCH:?}" "${CHECKPOINT_EDIT:?}" "${CNNB_SOURCE_DIR:?}"
source "$CNNB_SOURCE_DIR/tests/support/mpi.sh"
tmp=$(mktemp -d)
trap 'mpi_cleanup; rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; for f in "$tmp"/*.out "$tmp"/*.err; do echo "--- $f"; cat "$f"; done; exit 1; }
run() { "$CNNBENCH" --model=resnet20 --data_name=cifar10 --batch_size=2 --num_warmup_batches=0 --num_intra_threads=1 \
          --optimizer=momentum "$@"; }
ckpt() { printf '%s/model.ckpt-%010d.safetensors' "$1" "$2"; }

run --num_batches=10 --save_model_steps=3 --max_ckpts_to_keep=2 --train_dir="$tmp/d" \
  >"$tmp/save.out" 2>"$tmp/save.err" || fail "saving run: exit $?"
[ "$(grep -c "saved checkpoint" "$tmp/save.err")" -eq 4 ] || fail "expected saves at steps 3, 6, 9 and 10"
ls "$tmp/d" >"$tmp/ls.out"
[ "$(grep -c '^model\.ckpt-.*\.safetensors$' "$tmp/ls.out")" -eq 2 ] || fail "--max_ckpts_to_keep=2 kept $(cat "$tmp/ls.out")"
[ -f "$(ckpt "$tmp/d" 9)" ] && [ -f "$(ckpt "$tmp/d" 10)" ] || fail "not the newest two kept"
grep -q '"latest": *"model.ckpt-0000000010.safetensors"' "$tmp/d/checkpoint" || fail "the index does not name step 10"
! ls "$tmp/d" | grep -q tmp || fail "a temporary file was left behind"

# A torn newest file: the previous one, with a warning naming the torn one.
cp -r "$tmp/d" "$tmp/torn"
truncate -s -1000 "$(ckpt "$tmp/torn" 10)"
# (--num_batches is the total on resume: one step more than the step-9 checkpoint.)
run --num_batches=10 --train_dir="$tmp/torn" >"$tmp/torn.out" 2>"$tmp/torn.err" || fail "torn: exit $?"
grep -i warn "$tmp/torn.err" | grep -q "model.ckpt-0000000010.safetensors" \
  || fail "torn: no warning naming the torn file"
grep -q "resuming from .*model.ckpt-0000000009.safetensors (global step 9)" "$tmp/torn.err" \
  || fail "torn: did not fall back to step 9"
# A corrupt header byte: the same.
cp -r "$tmp/d" "$tmp/bad"
printf 'X' | dd of="$(ckpt "$tmp/bad" 10)" bs=1 seek=12 conv=notrunc status=none
run --num_batches=10 --train_dir="$tmp/bad" >"$tmp/bad.out" 2>"$tmp/bad.err" || fail "bad header: exit $?"
grep -q "resuming from .*model.ckpt-0000000009.safetensors" "$tmp/bad.err" || fail "bad header: no fallback"

# Wrong shape, missing tensor, more classes: refused, naming file and tensor.
refused() { # NAME EXPECTED-TEXT ARGS...: the run must fail saying EXPECTED-TEXT
  local name=$1 text=$2; shift 2
  if run --num_batches=1 "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"; then fail "$name: accepted"; fi
  grep -qF -- "$text" "$tmp/$name.err" || fail "$name: expected '$text'"
}
kernel=$(grep -aoP '"[^"]*conv[^"]*kernel"' "$(ckpt "$tmp/d" 10)" | head -1 | tr -d '"') \
  || fail "no conv kernel in the checkpoint's header"
mkdir "$tmp/shape" "$tmp/missing"
"$CHECKPOINT_EDIT" reshape "$kernel" "$(ckpt "$tmp/d" 10)" "$(ckpt "$tmp/shape" 10)"
"$CHECKPOINT_EDIT" drop "$kernel" "$(ckpt "$tmp/d" 10)" "$(ckpt "$tmp/missing" 10)"
refused shape "tensor '$kernel' is F32 [" --train_dir="$tmp/shape"
refused missing "has no tensor '$kernel'" --train_dir="$tmp/missing"
refused classes "has 10 classes, this run 20" --num_classes=20 --train_dir="$tmp/d"

# Flags: refused up front (exit 2, nothing written).
for args in "--save_model_steps=5" "--max_ckpts_to_keep=3" "--train_dir=$tmp/x --max_ckpts_to_keep=0" \
            "--train_dir=$tmp/x --forward_only" "--train_dir=$tmp/x --eval --save_model_steps=2"; do
  set +e; run --num_batches=1 $args >"$tmp/flag.out" 2>"$tmp/flag.err"; code=$?; set -e
  [ "$code" -eq 2 ] || fail "'$args': exit $code, expected 2"
  [ ! -e "$tmp/x" ] || fail "'$args' created the directory"
done
touch "$tmp/file"
refused unwritable "$tmp/file/sub" --train_dir="$tmp/file/sub"
grep -q "images/sec" "$tmp/unwritable.out" && fail "unwritable: steps ran before the error"

# --save_model_secs: a tiny period saves after every step.
run --num_batches=3 --save_model_secs=0.000001 --train_dir="$tmp/secs" >"$tmp/secs.out" 2>"$tmp/secs.err" \
  || fail "--save_model_secs: exit $?"
[ "$(grep -c "saved checkpoint" "$tmp/secs.err")" -eq 3 ] || fail "--save_model_secs: expected 3 saves"

# Two ranks: rank 0 writes; both resume from step 4.
if command -v mpirun >/dev/null && [ -e "$CNNB_PLUGIN_DIR/libcnnb_strategy_horovod.so" ]; then
  for pass in 1 2; do
    mpi_run_bounded 120 2 "$CNNBENCH" --model=resnet20 --data_name=cifar10 --batch_size=2 \
      --num_warmup_batches=0 --num_batches=$((2 * pass)) --variable_update=horovod --train_dir="$tmp/mpi" \
      >"$tmp/mpi$pass.out" 2>"$tmp/mpi$pass.err" || fail "2 ranks, pass $pass: exit $?"
  done
  # Counted as matches, not lines: mpirun forwards the ranks' stderr, and two ranks' lines
  # can end up on one.
  [ "$(grep -oP "\[rank [01]\] cnnbench: resuming from \S*model.ckpt-0000000002.safetensors \(global step 2\)" "$tmp/mpi2.err" | sort -u | wc -l)" -eq 2 ] \
    || fail "2 ranks: not both resumed from step 2"
  [ -f "$(ckpt "$tmp/mpi" 4)" ] || fail "2 ranks: no checkpoint of step 4"
  [ "$(grep -o "saved checkpoint" "$tmp/mpi2.err" | wc -l)" -eq 1 ] || fail "2 ranks: more than rank 0 saved"
else
  echo "note: no mpirun or horovod plugin: the two-rank part did not run"
fi
echo PASS
