#!/usr/bin/env bash
# What a user who cannot read or write --train_dir's files gets (issue 23, findings 1 and
# 4), as a non-root user: root reads a mode-000 file and writes a mode-555 directory, so
# under root the runs go through `setpriv` as nobody (skipped, exit 77, where neither
# works):
# - five checkpoints of mode 000: the run stops before its first step, exit 1, naming each
#   file and why (permission denied) and --ignore_unreadable_checkpoints; nothing is
#   deleted. With the flag it trains from step 0; rotation deletes none of the five, and a
#   save under one's name moves it aside instead of replacing it;
# - a --train_dir of mode 555: refused before the first step, naming the directory and the
#   reason.
set -euo pipefail
: "${CNNBENCH:?}"
tmp=$(mktemp -d)
trap 'chmod -R u+rwX "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; for f in "$tmp"/*.out "$tmp"/*.err; do echo "--- $f"; cat "$f"; done; exit 1; }
as_user=()
if [ "$(id -u)" -eq 0 ]; then
  if ! setpriv --reuid=nobody --regid=nogroup --clear-groups true 2>/dev/null; then
    echo "SKIP: running as root, and setpriv cannot switch to nobody:nogroup"
    exit 77
  fi
  as_user=(setpriv --reuid=nobody --regid=nogroup --clear-groups)
  if ! "${as_user[@]}" test -x "$CNNBENCH"; then
    echo "SKIP: nobody cannot run $CNNBENCH (its directories are not open to others)"
    exit 77
  fi
  chmod 755 "$tmp"
fi
owner() { [ ${#as_user[@]} -eq 0 ] || chown -R nobody:nogroup "$@"; }
# NAME ARGS...: runs as the user, output in $tmp/NAME.out and .err; sets $code.
try() {
  local name=$1; shift
  set +e
  "${as_user[@]}" "$CNNBENCH" --model=trivial --data_name=cifar10 --batch_size=2 --num_warmup_batches=0 \
    --num_intra_threads=1 "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
  code=$?
  set -e
}
ckpt() { printf '%s/model.ckpt-%010d.safetensors' "$1" "$2"; }

mkdir "$tmp/d"
owner "$tmp/d"
try save --num_batches=5 --save_model_steps=1 --train_dir="$tmp/d"
[ "$code" -eq 0 ] || fail "saving run: exit $code"
declare -A sums
for s in 1 2 3 4 5; do sums[$s]=$(md5sum <"$(ckpt "$tmp/d" $s)"); done
chmod 000 "$tmp"/d/model.ckpt-*.safetensors
try locked --num_batches=2 --save_model_steps=1 --train_dir="$tmp/d"
[ "$code" -eq 1 ] || fail "mode 000: exit $code, expected 1"
grep -q "holds 5 checkpoint file(s) and none reads back whole" "$tmp/locked.err" || fail "mode 000: no refusal"
for s in 1 2 3 4 5; do
  grep -qF "$(ckpt "$tmp/d" $s): cannot open: Permission denied" "$tmp/locked.err" \
    || fail "mode 000: step $s's file and reason not named"
done
grep -q -- "--ignore_unreadable_checkpoints" "$tmp/locked.err" || fail "mode 000: the flag is not named"
grep -q "images/sec" "$tmp/locked.out" && fail "mode 000: steps ran"

# Starting over anyway: six saves, five kept; the unreadable five all survive.
try ignore --num_batches=6 --save_model_steps=1 --train_dir="$tmp/d" --ignore_unreadable_checkpoints
[ "$code" -eq 0 ] || fail "--ignore_unreadable_checkpoints: exit $code"
grep -q "training starts at step 0" "$tmp/ignore.err" || fail "ignore: did not start over"
chmod 644 "$tmp"/d/*.kept
for s in 1 2 3 4 5; do
  [ "$(md5sum <"$(ckpt "$tmp/d" $s).kept")" = "${sums[$s]}" ] || fail "ignore: step $s's unreadable file was not kept"
done
[ ! -e "$(ckpt "$tmp/d" 1)" ] && [ -f "$(ckpt "$tmp/d" 6)" ] || fail "ignore: the new saves did not rotate"

# A directory the user cannot write: refused up front.
mkdir "$tmp/ro"
owner "$tmp/ro"
chmod 555 "$tmp/ro"
try ro --num_batches=2 --train_dir="$tmp/ro"
[ "$code" -eq 1 ] || fail "mode 555 --train_dir: exit $code, expected 1"
grep -qF -- "--train_dir=$tmp/ro: cannot write there: creating the test file" "$tmp/ro.err" \
  || fail "mode 555: the directory is not named"
grep -q "Permission denied" "$tmp/ro.err" || fail "mode 555: no reason"
grep -q "images/sec" "$tmp/ro.out" && fail "mode 555: steps ran before the refusal"
echo PASS
