#!/usr/bin/env bash
# --flagfile from anything that reads like a file (issue 37): a pipe (/dev/stdin), a
# process substitution, stdin redirected from a file and a FIFO whose writer writes once
# give the same run as the same flags in a regular file (the printed configuration is
# compared), because the file is read once for both passes over the command line (and
# --mkl's restart, which would read it again, is skipped for such a file). An
# endless or huge flagfile is refused by its size, at once, naming it and the limit; a
# line the convention has no place for (a NUL, a comment after a flag, a quoted value, two
# flags on one line, a line past 16 KiB) is refused naming the file and line, with a
# message that quotes at most 80 characters of it; so is a value refused later, by the
# run's configuration or the loader.
set -uo pipefail
: "${CNNBENCH:?}"
tmp=$(mktemp -d)
writer=
cleanup() {
  [ -n "$writer" ] && kill "$writer" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
quick=(--num_warmup_batches=0 --image_size=8 --num_classes=4 --num_intra_threads=1)

# --- the same run whatever the file is ----------------------------------------------
printf -- '--model=trivial\n--num_batches=1\n--batch_size=2\n' >"$tmp/run.flags"
config() { sed -n '/^Model:/,/^==========/p' "$1"; }
run() { # run <name> <cnnbench args...>: the run's configuration into $tmp/<name>.config
  local name=$1; shift
  timeout 60 "$CNNBENCH" "$@" "${quick[@]}" >"$tmp/$name.out" 2>"$tmp/$name.err"
  local rc=$?
  [ "$rc" -eq 0 ] || fail "$name: exit $rc: $(tail -2 "$tmp/$name.err")"
  config "$tmp/$name.out" >"$tmp/$name.config"
}
run regular --flagfile="$tmp/run.flags"
grep -qx "Model:       trivial" "$tmp/regular.config" || fail "regular file: no 'Model: trivial' line"
grep -qx "Num batches: 1" "$tmp/regular.config" || fail "regular file: not 1 batch: $(cat "$tmp/regular.config")"
grep -q "^Batch size:  2 global" "$tmp/regular.config" || fail "regular file: not batch 2"

cat "$tmp/run.flags" | run pipe --flagfile=/dev/stdin
run process_substitution --flagfile=<(cat "$tmp/run.flags")
run stdin_redirect --flagfile=/dev/stdin <"$tmp/run.flags"
mkfifo "$tmp/fifo"
(cat "$tmp/run.flags" >"$tmp/fifo") &
writer=$!
run fifo --flagfile="$tmp/fifo"
wait "$writer" 2>/dev/null
writer=
# --mkl restarts the process with the same argv: a pipe read once cannot give its flags
# again, so the restart is skipped (saying so) rather than running the defaults.
cat "$tmp/run.flags" | run mkl_pipe --flagfile=/dev/stdin --mkl
grep -q "not restarting.*--flagfile=/dev/stdin is read once" "$tmp/mkl_pipe.err" ||
  fail "mkl_pipe: no word of the skipped restart: $(tail -2 "$tmp/mkl_pipe.err")"
for name in pipe process_substitution stdin_redirect fifo mkl_pipe; do
  cmp -s "$tmp/regular.config" "$tmp/$name.config" ||
    fail "$name: a different run than the regular file's:$(diff "$tmp/regular.config" "$tmp/$name.config" | sed 's/^/  /')"
done

# --- refused: exit 2, at once, naming where -----------------------------------------
refused() { # refused <name> <message substring> <cnnbench args...>
  local name=$1 want=$2; shift 2
  timeout 20 "$CNNBENCH" "$@" "${quick[@]}" >"$tmp/$name.out" 2>"$tmp/$name.err"
  local rc=$?
  [ "$rc" -eq 2 ] || fail "$name: exit $rc, want 2 (124: it hung): $(head -c 300 "$tmp/$name.err")"
  grep -qF -- "$want" "$tmp/$name.err" || fail "$name: no '$want' in: $(head -c 300 "$tmp/$name.err")"
  local longest
  longest=$(awk '{ if (length($0) > n) n = length($0) } END { print n + 0 }' "$tmp/$name.err")
  [ "$longest" -le 400 ] || fail "$name: a message line of $longest characters"
  grep -q "Model:" "$tmp/$name.out" && fail "$name: it ran"
}
refused dev_zero "--flagfile=/dev/zero: larger than 1048576 bytes" --flagfile=/dev/zero
head -c 2000000 /dev/zero | tr '\0' '#' >"$tmp/huge.flags"
refused huge "--flagfile=$tmp/huge.flags: larger than 1048576 bytes" --flagfile="$tmp/huge.flags"
# An endless writer into a FIFO: refused after 1 MiB; the writer then ends by SIGPIPE.
mkfifo "$tmp/endless"
(yes -- --num_batches=1 >"$tmp/endless") 2>/dev/null &
writer=$!
refused endless_fifo "--flagfile=$tmp/endless: larger than 1048576 bytes" --flagfile="$tmp/endless"
kill "$writer" 2>/dev/null
writer=

at() { # at <name> <file text (printf format)> <message substring>: refused at line 2
  printf -- "$2" >"$tmp/$1.flags"
  refused "$1" "$tmp/$1.flags:2: $3" --flagfile="$tmp/$1.flags"
}
at nul '--model=trivial\n\0--batch_size=4\n' "byte 0x00 at column 1"
at escape '--model=trivial\n--batch_size=4\033\n' "byte 0x1b at column 15"
at comment '--num_batches=1\n--model=trivial # comment\n' "'--model=trivial # comment': a comment after a flag"
at quoted '--num_batches=1\n--model="trivial"\n' "'--model=\"trivial\"': quotes in a flagfile stay part of the value"
at two_flags '--num_batches=1\n--model=trivial --num_batches=1\n' "'--model=trivial --num_batches=1': two flags on one line"
at bad_value '--num_batches=1\n--batch_size=many\n' "flag --batch_size: 'many' is not an integer"
# Values refused after the parse (by the run's configuration, by the loader) still name
# the flagfile's line that gave them; the same value on the command line names no file.
at late_value '--num_batches=1\n--batch_size=-3\n' "--batch_size=-3: must be in"
at late_plugin '--num_batches=1\n--variable_update=nosuch\n' "--variable_update=nosuch: no strategy plugin offers 'nosuch'"
refused late_cli "error: --batch_size=-3: must be in" --flagfile="$tmp/late_value.flags" --batch_size=-3
{ echo --num_batches=1; printf -- '--batch_size='; head -c 1200000 /dev/zero | tr '\0' '7'; echo x; } >"$tmp/mb_line.flags"
refused mb_line "larger than 1048576 bytes" --flagfile="$tmp/mb_line.flags"
{ echo --num_batches=1; printf -- '--batch_size='; head -c 100000 /dev/zero | tr '\0' '7'; echo x; } >"$tmp/long_line.flags"
refused long_line "$tmp/long_line.flags:2: a line of 100014 bytes, longer than 16384" --flagfile="$tmp/long_line.flags"
{ echo --num_batches=1; printf -- '--batch_size='; head -c 10000 /dev/zero | tr '\0' '7'; echo x; } >"$tmp/long_value.flags"
refused long_value "$tmp/long_value.flags:2: flag --batch_size: '77777" --flagfile="$tmp/long_value.flags"
grep -qF "...' is not an integer" "$tmp/long_value.err" || fail "long_value: the reason was cut: $(head -c 300 "$tmp/long_value.err")"

[ "$failures" -eq 0 ] || exit 1
echo "ok: a flagfile from a pipe, <(...), /dev/stdin or a FIFO runs as a regular one; endless, huge and malformed ones refused naming the file and line"
