#!/usr/bin/env bash
# cnnbench-mkrecords changes its --output_dir whole or not at all (issue 37, cases 11-12):
# - a directory already holding shards of --name (an earlier set, or a user's own file
#   named train-00000-of-00004) is refused, naming them and --overwrite, and left as it
#   was; with --overwrite the new set replaces the old one whole: 2, then 3, then 4
#   shards leave the 4 alone (before, all nine files were left, and cnnbench offered
#   --allow_missing_shards, which trained on 16 examples as 48);
# - cnnbench refuses a directory of several sets naming each count, and suggests no flag;
# - a failed run leaves the directory as it found it: every image bad (before: a 0-byte
#   train-00000-of-00001 cnnbench took for a set), a full disk (a 200 KiB tmpfs; before:
#   the finished shards stayed beside the old ones; skipped where no tmpfs can be
#   mounted), SIGTERM mid-run (the process stopped by CNNB_FAULT_SIGSTOP_AT once a shard
#   is written), and the temporaries a SIGKILL leaves are named so no reader takes them.
set -uo pipefail
if [ -z "${MKRECORDS:-}" ] || [ -z "${MAKE_JPEG:-}" ]; then
  echo "SKIP: cnnbench-mkrecords not built (component JPEG off)"; exit 77
fi
: "${CNNBENCH:?}" "${TFRECORD_DUMP:?}"
work=$(mktemp -d)
mounted=
trap '[ -n "$mounted" ] && umount "$mounted"; rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
# snap DIR: every name in it (hidden ones too) and each file's bytes, to compare before/after.
snap() { (cd "$1" && ls -A && find . -type f -exec cksum {} + | sort); }
records_in() { local n=0 f; for f in "$@"; do n=$((n + $("$TFRECORD_DUMP" "$f" | wc -l))); done; echo "$n"; }

# 16 images of 4 classes, ~24 KB each: 4 shards of ~96 KB.
in=$work/in
for c in 0 1 2 3; do
  mkdir -p "$in/c$c"
  for i in 0 1 2 3; do
    "$MAKE_JPEG" "$in/c$c/$i.jpg" 512 512 $((c * 4 + i)) || { echo "make_jpeg failed"; exit 1; }
  done
done
mk() { "$MKRECORDS" --input_dir="$in" --num_threads=1 "$@"; }

# Case 11: runs of 2, 3 and 4 shards into one directory.
out=$work/out
mk --output_dir="$out" --num_shards=2 >/dev/null 2>"$work/err" || fail "first run: $(cat "$work/err")"
echo notes > "$out/notes.txt"
before=$(snap "$out")
for n in 3 4; do
  mk --output_dir="$out" --num_shards=$n >"$work/stdout" 2>"$work/err"; rc=$?
  [ "$rc" -eq 2 ] || fail "--num_shards=$n into a directory of 2 shards: exit $rc, want 2"
  grep -qF "cnnbench-mkrecords: --output_dir=$out already holds 2 shards named train-*-of-*: train-00000-of-00002, train-00001-of-00002; --overwrite replaces them" \
    "$work/err" || fail "the refusal does not name the old shards and --overwrite: $(cat "$work/err")"
done
[ "$(snap "$out")" = "$before" ] || fail "a refused run changed the directory: $(ls -A "$out")"
mk --output_dir="$out" --num_shards=4 --overwrite >"$work/stdout" 2>"$work/err" \
  || fail "--overwrite: exit $?: $(cat "$work/err")"
grep -q "into 4 shards .*; replaced the 2 shards that were there" "$work/stdout" \
  || fail "--overwrite does not say what it replaced: $(cat "$work/stdout")"
[ "$(ls -A "$out" | tr '\n' ' ')" = "notes.txt train-00000-of-00004 train-00001-of-00004 train-00002-of-00004 train-00003-of-00004 " ] \
  || fail "--overwrite left other than the new set and notes.txt: $(ls -A "$out")"
[ "$(cat "$out/notes.txt")" = notes ] || fail "--overwrite touched notes.txt"
n=$(records_in "$out"/train-*)
[ "$n" = 16 ] || fail "the directory holds $n examples after --overwrite, not 16"
# The same count again: same-named shards replaced, no others.
mk --output_dir="$out" --num_shards=4 --overwrite --seed=3 >/dev/null 2>&1 || fail "--overwrite, same count"
[ "$(ls "$out" | grep -c '^train-')" = 4 ] && [ "$(records_in "$out"/train-*)" = 16 ] \
  || fail "--overwrite with the same count: $(ls -A "$out")"

# A user's own file of the pattern is refused, not overwritten.
mkdir "$work/user"
echo "mine" > "$work/user/train-00000-of-00004"
mk --output_dir="$work/user" --num_shards=4 >/dev/null 2>"$work/err"; rc=$?
[ "$rc" -eq 2 ] && grep -qF "already holds 1 shard named train-*-of-*: train-00000-of-00004;" "$work/err" \
  || fail "a user's train-00000-of-00004: exit $rc: $(cat "$work/err")"
[ "$(cat "$work/user/train-00000-of-00004")" = mine ] || fail "the user's file was overwritten"
[ "$(ls -A "$work/user")" = train-00000-of-00004 ] || fail "a refused run left: $(ls -A "$work/user")"
mkdir "$work/user/validation-00000-of-00001"
mk --output_dir="$work/user" --name=validation --overwrite >/dev/null 2>"$work/err"; rc=$?
[ "$rc" -eq 2 ] && grep -qF "validation-00000-of-00001 is a directory, not a shard to overwrite" "$work/err" \
  || fail "a directory in the way: exit $rc: $(cat "$work/err")"
mk --output_dir="$work/user" --overwrite=yes >/dev/null 2>"$work/err"; rc=$?
[ "$rc" -eq 2 ] && grep -qF -- "--overwrite=yes: must be --overwrite, --overwrite=true or --overwrite=false" "$work/err" \
  || fail "--overwrite=yes: exit $rc: $(cat "$work/err")"

# Sets of 2, 3 and 4 side by side (copied together): cnnbench names the mix, suggests no
# flag, and --allow_missing_shards does not read it (it would count each example thrice).
mkdir "$work/mix"
for n in 2 3 4; do
  mk --output_dir="$work/set$n" --num_shards=$n >/dev/null 2>&1 || fail "set of $n"
  cp "$work/set$n"/train-* "$work/mix/"
done
train() { "$CNNBENCH" --model=trivial --num_classes=5 --batch_size=4 --num_batches=1 \
            --num_warmup_batches=0 --data_dir="$work/mix" "$@"; }
for flag in "" --allow_missing_shards; do
  train $flag >/dev/null 2>"$work/err"; rc=$?
  [ "$rc" -ne 0 ] || fail "a directory of 3 sets trained ${flag:+with $flag}"
  grep -qF "holds 3 sets of train shards that differ in their count: 2 of train-*-of-00002, 3 of train-*-of-00003, 4 of train-*-of-00004; read together they would count the same examples once per set" \
    "$work/err" || fail "the mix is not named ${flag:+with $flag}: $(cat "$work/err")"
  ! grep -q "allow_missing_shards reads" "$work/err" || fail "the mix's refusal suggests --allow_missing_shards"
done

# Case 12: every image bad: exit 1, and no shard (no directory when there was none).
mkdir -p "$work/bad/c"
printf 'not a jpeg' > "$work/bad/c/1.jpg"; printf 'nor this' > "$work/bad/c/2.jpg"
"$MKRECORDS" --input_dir="$work/bad" --output_dir="$work/bad_out" >/dev/null 2>"$work/err"; rc=$?
[ "$rc" -eq 1 ] && grep -q "every one of the 2 images was skipped" "$work/err" \
  || fail "every image bad: exit $rc: $(cat "$work/err")"
[ ! -e "$work/bad_out" ] || fail "every image bad left: $(ls -A "$work/bad_out")"
mkdir "$work/bad_there"; echo notes > "$work/bad_there/notes.txt"
"$MKRECORDS" --input_dir="$work/bad" --output_dir="$work/bad_there" >/dev/null 2>&1
[ "$(ls -A "$work/bad_there")" = notes.txt ] || fail "every image bad left: $(ls -A "$work/bad_there")"

# SIGTERM once shard 0 of 3 is written (the process stopped there): the old set stays
# whole, the temporaries go, and the process dies of the signal.
interrupted() { # DIR SIGNAL: runs --overwrite into DIR, stops it after a shard, sends SIGNAL
  CNNB_FAULT_SIGSTOP_AT=mkrecords_shard_written "$MKRECORDS" --input_dir="$in" --output_dir="$1" \
    --num_shards=3 --num_threads=1 --overwrite >/dev/null 2>"$work/err" &
  local pid=$! state="" i
  for ((i = 0; i < 600; i++)); do # up to 30 s on a loaded machine
    state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)
    [ "$state" = T ] && break
    sleep 0.05
  done
  [ "$state" = T ] || fail "mkrecords did not stop at CNNB_FAULT_SIGSTOP_AT (state '$state')"
  kill "-$2" "$pid"; kill -CONT "$pid" 2>/dev/null
  wait "$pid"
}
mkdir "$work/sig"; cp "$work/set2"/train-* "$work/sig/"
before=$(snap "$work/sig")
interrupted "$work/sig" TERM; rc=$?
[ "$rc" -eq 143 ] || fail "SIGTERM mid-run: exit $rc, want 143 (killed by SIGTERM): $(cat "$work/err")"
grep -qF "interrupted by SIGTERM; the new shards were removed, --output_dir=$work/sig is as it was" \
  "$work/err" || fail "SIGTERM mid-run: $(cat "$work/err")"
[ "$(snap "$work/sig")" = "$before" ] || fail "SIGTERM mid-run changed the directory: $(ls -A "$work/sig")"
# SIGKILL cannot be cleaned up after: what is left is hidden and no reader's shard.
interrupted "$work/sig" KILL
left=$(cd "$work/sig" && ls -A | grep -v '^train-0000[01]-of-00002$')
[[ "$left" == .train-00000-of-00003.tmp-* ]] || fail "SIGKILL left '$left', not one hidden temporary"
[ "$(cd "$work/sig" && ls -d train-*-of-* | tr '\n' ' ')" = "train-00000-of-00002 train-00001-of-00002 " ] \
  || fail "after SIGKILL, names a reader takes for shards: $(ls -A "$work/sig")"

# A full disk at the second of 4 shards (~96 KB each) into a 200 KiB tmpfs holding a
# user's file of the pattern: --overwrite fails, and the directory is as it was.
full=$work/full
mkdir "$full"
if mount -t tmpfs -o size=200k tmpfs "$full" 2>"$work/mount.err"; then
  mounted=$full
  echo mine > "$full/train-00000-of-00003"; echo notes > "$full/notes.txt"
  for flags in --overwrite ""; do
    [ -n "$flags" ] || rm "$full/train-00000-of-00003"
    before=$(snap "$full")
    mk --output_dir="$full" --num_shards=4 $flags >/dev/null 2>"$work/err"; rc=$?
    [ "$rc" -eq 1 ] || fail "a full disk (${flags:-no flag}): exit $rc, want 1: $(cat "$work/err")"
    grep -q "No space left on device" "$work/err" || fail "a full disk not named: $(cat "$work/err")"
    grep -qF "the new shards were removed, --output_dir=$full is as it was" "$work/err" \
      || fail "a full disk: $(cat "$work/err")"
    [ "$(snap "$full")" = "$before" ] || fail "a full disk (${flags:-no flag}) left: $(ls -A "$full")"
  done
else
  echo "skipped the full disk (cannot mount a tmpfs here: $(cat "$work/mount.err"))"
fi

if [ "$failures" -ne 0 ]; then echo "$failures failure(s)"; exit 1; fi
echo "mkrecords_output: old sets refused or replaced whole, mixes named, failed runs leave nothing"
