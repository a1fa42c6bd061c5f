#!/usr/bin/env bash
# A read-only --train_dir (a read-only bind mount the test makes, and removes on exit) is
# refused before the first step, exit 1, naming the directory and the reason; before
# issue 23 (finding 4) the run trained to its end and failed at the final save. Skips
# (77) where mounts cannot be made (not root, or no CAP_SYS_ADMIN).
set -euo pipefail
: "${CNNBENCH:?}"
tmp=$(mktemp -d)
mounted=
trap '[ -n "$mounted" ] && umount "$mounted"; rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; for f in "$tmp"/*.out "$tmp"/*.err; do echo "--- $f"; cat "$f"; done; exit 1; }
mkdir "$tmp/src" "$tmp/ro"
if ! mount --bind "$tmp/src" "$tmp/ro" 2>"$tmp/mount.err"; then
  echo "SKIP: cannot make a bind mount here: $(cat "$tmp/mount.err")"
  exit 77
fi
mounted=$tmp/ro
mount -o remount,bind,ro "$tmp/ro" || fail "cannot make the bind mount read-only"
touch "$tmp/ro/x" 2>/dev/null && fail "the read-only mount is writable"
run() { "$CNNBENCH" --model=trivial --data_name=cifar10 --batch_size=2 --num_warmup_batches=0 \
          --num_intra_threads=1 "$@"; }
set +e
run --num_batches=3 --train_dir="$tmp/ro" >"$tmp/ro.out" 2>"$tmp/ro.err"
code=$?
set -e
[ "$code" -eq 1 ] || fail "read-only --train_dir: exit $code, expected 1"
grep -qF -- "--train_dir=$tmp/ro: cannot write there: creating the test file $tmp/ro/.cnnbench-write-test." "$tmp/ro.err" \
  || fail "the directory and the test file are not named"
grep -q "Read-only file system" "$tmp/ro.err" || fail "the reason is not given"
grep -q "images/sec" "$tmp/ro.out" && fail "steps ran before the refusal"
[ -z "$(ls -A "$tmp/src")" ] || fail "something was written under the mount"
echo PASS
