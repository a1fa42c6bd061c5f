#!/usr/bin/env bash
# cnnbench-mkrecords on an image folder the test makes (make_jpeg: baseline, progressive,
# grayscale JPEGs of several sizes; upper-case extensions; a PNG, a text file, a corrupt
# and a truncated .jpg): the shards are named as TensorFlow's, hold every good image once
# with label = class index + 1 (classes in sorted order) and its bytes unchanged, the bad
# files are skipped and named; the output depends on --seed only (not on --num_threads),
# and bad command lines and folders are refused with a message. tfrecord_dump reads the
# shards through cnnbench's record layer and names the offset of a damaged record.
set -uo pipefail
if [ -z "${MKRECORDS:-}" ] || [ -z "${MAKE_JPEG:-}" ]; then
  echo "SKIP: cnnbench-mkrecords not built (component JPEG off)"; exit 77
fi
: "${TFRECORD_DUMP:?}"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# Classes: "Zebra" sorts before "apple" (upper case first, as Python's sorted()).
in=$work/in
mkdir -p "$in/apple" "$in/banana" "$in/Zebra" "$in/empty" "$in/apple/nested"
"$MAKE_JPEG" "$in/apple/a1.jpg" 64 48 1 &&
"$MAKE_JPEG" "$in/apple/a2.JPEG" 33 17 2 progressive &&
"$MAKE_JPEG" "$in/apple/nested/a3.jpg" 20 20 3 &&
"$MAKE_JPEG" "$in/banana/b1.jpeg" 100 75 4 gray &&
"$MAKE_JPEG" "$in/banana/b2.jpg" 8 8 5 &&
"$MAKE_JPEG" "$in/Zebra/z1.JPG" 40 30 6 &&
"$MAKE_JPEG" "$in/Zebra/z2.jpg" 300 200 7 || { echo "make_jpeg failed"; exit 1; }
printf 'not a jpeg at all' > "$in/banana/corrupt.jpg"
head -c 200 "$in/Zebra/z2.jpg" > "$in/Zebra/truncated.jpg"
printf '\x89PNG\r\n\x1a\n' > "$in/banana/picture.png"
echo notes > "$in/apple/notes.txt"
good=7

# The expected (label, bytes, hash) of each good image: Zebra=1, apple=2, banana=3, empty=4.
{
  for f in "$in"/Zebra/z1.JPG "$in"/Zebra/z2.jpg; do echo "1 $("$TFRECORD_DUMP" --hash "$f")"; done
  for f in "$in"/apple/a1.jpg "$in"/apple/a2.JPEG "$in"/apple/nested/a3.jpg; do echo "2 $("$TFRECORD_DUMP" --hash "$f")"; done
  for f in "$in"/banana/b1.jpeg "$in"/banana/b2.jpg; do echo "3 $("$TFRECORD_DUMP" --hash "$f")"; done
} | awk '{print $1, $3, $2, 0}' | sort > "$work/want"

out=$work/out
"$MKRECORDS" --input_dir="$in" --output_dir="$out" --num_shards=3 --seed=7 --num_threads=2 \
  >"$work/stdout" 2>"$work/stderr"
rc=$?
[ "$rc" -eq 0 ] || { fail "mkrecords exited $rc"; cat "$work/stderr"; }
for f in train-00000-of-00003 train-00001-of-00003 train-00002-of-00003; do
  [ -s "$out/$f" ] || fail "shard $f missing or empty"
done
[ "$(ls "$out" | wc -l)" -eq 3 ] || fail "unexpected files in the output: $(ls "$out")"
grep -q "corrupt.jpg" "$work/stderr" || fail "corrupt.jpg not named in warnings: $(cat "$work/stderr")"
grep -q "truncated.jpg" "$work/stderr" || fail "truncated.jpg not named in warnings"
grep -q "1 .png files not converted" "$work/stderr" || fail "the png is not counted: $(cat "$work/stderr")"
grep -q "wrote $good examples of 4 classes into 3 shards" "$work/stdout" || fail "summary: $(cat "$work/stdout")"
grep -q "skipped 2 files" "$work/stdout" || fail "skip count: $(cat "$work/stdout")"

"$TFRECORD_DUMP" "$out"/train-* > "$work/dump" || fail "tfrecord_dump failed on mkrecords' shards"
sort "$work/dump" > "$work/got"
diff "$work/want" "$work/got" > "$work/diff" || { fail "records differ from the images:"; cat "$work/diff"; }
# 9 files in 3 shards: 3 per shard (contiguous ranges, as build_imagenet_data.py cuts
# them), less the 2 skipped wherever the shuffle put them.
counts=$(for f in "$out"/train-*; do "$TFRECORD_DUMP" "$f" | wc -l; done | tr '\n' ' ')
for c in $counts; do [ "$c" -ge 1 ] && [ "$c" -le 3 ] || fail "examples per shard: $counts"; done

# Same seed, other thread count: identical bytes. Another seed: another order.
"$MKRECORDS" --input_dir="$in" --output_dir="$work/same" --num_shards=3 --seed=7 --num_threads=1 \
  >/dev/null 2>&1 || fail "second run failed"
for f in "$out"/train-*; do cmp -s "$f" "$work/same/$(basename "$f")" || fail "$(basename "$f") differs across --num_threads"; done
"$MKRECORDS" --input_dir="$in" --output_dir="$work/other" --name=validation --num_shards=1 --seed=8 \
  >/dev/null 2>&1 || fail "--seed=8 run failed"
[ -s "$work/other/validation-00000-of-00001" ] || fail "--name=validation shard missing"
"$TFRECORD_DUMP" "$work/other/validation-00000-of-00001" > "$work/order8"
"$TFRECORD_DUMP" "$out"/train-00000-of-00003 "$out"/train-00001-of-00003 "$out"/train-00002-of-00003 > "$work/order7"
cmp -s "$work/order7" "$work/order8" && fail "--seed=7 and --seed=8 gave the same order"
[ "$(sort "$work/order8")" = "$(cat "$work/got")" ] || fail "--seed=8 holds other examples"

# A damaged shard: a flipped byte inside the second record's data names file and offset.
shard=$out/train-00002-of-00003
first=$(od -An -t u8 -N 8 "$shard" | tr -d ' ')
second=$((16 + first))
python_free_flip() { # flip one byte at offset $2 of file $1
  local byte; byte=$(od -An -t u1 -j "$2" -N 1 "$1" | tr -d ' ')
  printf "$(printf '\\%03o' $((byte ^ 0x5a)))" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}
cp "$shard" "$work/damaged"
python_free_flip "$work/damaged" $((second + 12 + 40))
err=$("$TFRECORD_DUMP" "$work/damaged" 2>&1 >/dev/null); rc=$?
[ "$rc" -ne 0 ] || fail "a damaged shard read without error"
grep -qF "$work/damaged: record at byte $second: data CRC mismatch" <<<"$err" || fail "damage message: $err"
head -c $((second + 100)) "$shard" > "$work/cut"
err=$("$TFRECORD_DUMP" "$work/cut" 2>&1 >/dev/null)
grep -qF "$work/cut: record at byte $second: truncated: 100 of" <<<"$err" || fail "truncation message: $err"

# Bad command lines and folders: exit 2 and the reason.
expect() { # expect <code> <substring> -- args...
  local code=$1 want=$2; shift 3
  local e; e=$("$MKRECORDS" "$@" 2>&1 >/dev/null); local r=$?
  if [ "$r" -ne "$code" ] || ! grep -qF -- "$want" <<<"$e"; then
    fail "mkrecords $* -> rc $r (want $code): $e"
  fi
}
expect 2 "--input_dir=$work/nope: $work/nope: No such file or directory" -- --input_dir="$work/nope" --output_dir="$work/x"
expect 2 "not a directory" -- --input_dir="$in/apple/a1.jpg" --output_dir="$work/x"
mkdir -p "$work/flat"; cp "$in/apple/a1.jpg" "$work/flat/"
expect 2 "no class folders" -- --input_dir="$work/flat" --output_dir="$work/x"
mkdir -p "$work/noimg/cls"
expect 2 "1 class folders but no .jpg/.jpeg images" -- --input_dir="$work/noimg" --output_dir="$work/x"
expect 2 "--input_dir and --output_dir are required" -- --input_dir="$in"
expect 2 "--num_shards=0: must be an integer in [1, 99999]" -- --input_dir="$in" --output_dir="$work/x" --num_shards=0
expect 2 "--num_shards=abc" -- --input_dir="$in" --output_dir="$work/x" --num_shards=abc
expect 2 "--seed=-1: must be a non-negative integer" -- --input_dir="$in" --output_dir="$work/x" --seed=-1
expect 2 "unknown flag --shards" -- --input_dir="$in" --output_dir="$work/x" --shards=3
expect 2 "unexpected argument 'extra'" -- --input_dir="$in" --output_dir="$work/x" extra
expect 1 "--output_dir=$in/apple/a1.jpg/sub" -- --input_dir="$in" --output_dir="$in/apple/a1.jpg/sub"
mkdir -p "$work/allbad/c"; cp "$in/banana/corrupt.jpg" "$work/allbad/c/"
expect 1 "every one of the 1 images was skipped" -- --input_dir="$work/allbad" --output_dir="$work/y"
[ ! -e "$work/x" ] || fail "a refused run created its output folder"

if [ "$failures" -ne 0 ]; then echo "$failures failure(s)"; exit 1; fi
echo "mkrecords: $good examples in 3 shards, bad files skipped and named, deterministic, bad input refused"
