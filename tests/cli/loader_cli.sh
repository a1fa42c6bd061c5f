#!/usr/bin/env bash
# loader_cli.sh — the loader as a user meets it through cnnbench: a broken --plugin=FILE
# is an error (exit 2) whose message names the file, what is wrong and the fix; the same
# files found on CNNB_PLUGIN_PATH are warnings, the run goes on, and --list_plugins shows
# them as rejected; wrong-kind and unknown names exit 2 with a useful message, and so do
# tf_cnn_benchmarks' models that are not image classifiers (ssd300, deepspeech2, ncf).
# Uses the fixtures built by tests/fixtures/ into $CNNB_BUILD_DIR/fixtures.
set -u
: "${CNNBENCH:?run through ctest (CNNBENCH unset)}"
: "${CNNB_BUILD_DIR:?run through ctest (CNNB_BUILD_DIR unset)}"
fx="$CNNB_BUILD_DIR/fixtures"
[[ -f "$fx/libfixture_good.so" ]] || { echo "FAIL: fixtures not built in $fx"; exit 1; }

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
failures=0

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# run NAME ARGS...: runs cnnbench, keeping stdout, stderr and the exit code.
run() {
  local name="$1"
  shift
  "$CNNBENCH" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
  echo $? >"$tmp/$name.rc"
}

expect_rc() { # NAME CODE
  local rc
  rc="$(cat "$tmp/$1.rc")"
  [[ "$rc" == "$2" ]] || fail "$1: exit code $rc, expected $2; stderr:
$(cat "$tmp/$1.err")"
}

expect_in() { # NAME out|err TEXT
  grep -qF -- "$3" "$tmp/$1.$2" || fail "$1: expected in std$2: $3
--- std$2:
$(cat "$tmp/$1.$2")"
}

# ---- each broken plugin given explicitly: exit 2, the file, what is wrong, the fix -----
check_bad() { # FILE MODEL TEXT...
  local file="$1" model="$2"
  shift 2
  local name="bad_${file%.so}"
  run "$name" --plugin="$fx/$file" --model="$model" --num_batches=1
  expect_rc "$name" 2
  expect_in "$name" err "cnnbench: error: $fx/$file: "
  local text
  for text in "$@"; do expect_in "$name" err "$text"; done
}

check_bad libfixture_abi99.so fixture_abi99 \
  "built for cnnbench ABI 99.0, this host speaks 1.x: rebuild it against the 1.x SDK"
check_bad libfixture_noentry.so fixture_noentry \
  "does not export cnnb_plugin_entry: is it a cnnbench plugin?" "cnnb_add_plugin()"
check_bad libnotelf.so notelf "not a shared object (no ELF header)" "(dlopen: "
check_bad libfixture_truncated.so fixture_truncated "truncated or corrupt ELF file" \
  "rebuild or reinstall it"
check_bad libfixture_unresolved.so fixture_unresolved \
  "undefined symbol 'fixture_missing'" "-Wl,-z,defs"
check_bad libfixture_newer_sdk.so fixture_newer_sdk \
  "needs 'cnnb_future_service'" "built against a newer cnnbench SDK"
check_bad libfixture_null_entry.so fixture_null_entry "cnnb_plugin_entry returned NULL"
check_bad libfixture_badkind.so fixture_badkind "declares kind 42"
check_bad libfixture_small_desc.so fixture_small_desc "its descriptor is 40 bytes"
check_bad libfixture_no_vtable.so fixture_no_vtable ".vtable is NULL"
check_bad libfixture_small_vtable.so fixture_small_vtable "cnnb_model_vtable is 16 bytes"

# ---- a plugin of another kind, and a name nothing offers --------------------------------
run wrong_kind --plugin="$fx/libfixture_strategy.so" --model=fixture_strategy --num_batches=1
expect_rc wrong_kind 2
expect_in wrong_kind err "--model=fixture_strategy: 'fixture_strategy' is a strategy plugin ($fx/libfixture_strategy.so), not a model"

run unknown --plugin="$fx/libfixture_good.so" --model=fixture_godo --num_batches=1
expect_rc unknown 2
expect_in unknown err "--model=fixture_godo: no model plugin offers 'fixture_godo' (did you mean 'fixture_good'?)"
expect_in unknown err "fixture_good"

# ---- tf_cnn_benchmarks' models of other tasks: refused saying what they are, exit 2 -----
for model in ssd300 deepspeech2 ncf; do
  run "task_$model" --model="$model" --num_batches=1
  expect_rc "task_$model" 2
  expect_in "task_$model" err "--model=$model: '$model' is tf_cnn_benchmarks' "
  expect_in "task_$model" err ", not an image-classification model: cnnbench trains and benchmarks image classifiers only"
  grep -qF "no model plugin offers" "$tmp/task_$model.err" && fail "task_$model: refused as an unknown name"
done
expect_in task_ssd300 err "SSD300 object detector (COCO)"
expect_in task_deepspeech2 err "DeepSpeech2 speech recognizer (LibriSpeech)"

# ---- two plugins, one name: the first on the path wins, the other is named -------------
CNNB_PLUGIN_PATH="$fx/dup_a:$fx/dup_b" run dup --list_plugins
expect_rc dup 0
expect_in dup err "$fx/dup_b/libfixture_dup.so: offers 'fixture_dup' already offered by $fx/dup_a/libfixture_dup.so: ignored"
grep -F "$fx/dup_a/libfixture_dup.so" "$tmp/dup.out" | grep -qF "1.0.0-a" ||
  fail "dup: dup_a's plugin is not listed as accepted"

# ---- discovered (not asked for): warnings, and the listing shows why --------------------
CNNB_PLUGIN_PATH="$fx:/nonexistent/cnnb_plugins" run list --list_plugins
expect_rc list 0
expect_in list err "loader: warning: $fx/libfixture_abi99.so: built for cnnbench ABI 99.0"
expect_in list err "CNNB_PLUGIN_PATH entry '/nonexistent/cnnb_plugins' does not exist: ignored"
expect_in list out "Rejected ("
for file in libfixture_abi99.so libfixture_noentry.so libnotelf.so libfixture_truncated.so \
            libfixture_unresolved.so libfixture_null_entry.so libfixture_badkind.so \
            libfixture_small_desc.so libfixture_no_vtable.so libfixture_small_vtable.so; do
  sed -n '/^Rejected/,$p' "$tmp/list.out" | grep -qF "$fx/$file" ||
    fail "list: $file is not in the Rejected section"
done
sed -n '/^Rejected/,$p' "$tmp/list.out" | grep -F "$fx/libfixture_abi99.so" |
  grep -qF "this host speaks 1.x" || fail "list: the rejection of libfixture_abi99.so lacks why"
for name in fixture_good fixture_newer fixture_strategy; do
  sed -n '/^Plugins/,/^Rejected/p' "$tmp/list.out" | grep -qE "(^| )$name(,| |$)" ||
    fail "list: $name is not listed as accepted"
done
expect_in list out "1.99" # the newer-minor plugin is listed with its ABI

# Asking for a rejected one by name turns its warning into an error.
CNNB_PLUGIN_PATH="$fx" run rejected_by_name --model=fixture_abi99 --num_batches=1
expect_rc rejected_by_name 2
expect_in rejected_by_name err "--model=fixture_abi99: $fx/libfixture_abi99.so, which offers 'fixture_abi99', was rejected: built for cnnbench ABI 99.0"

# A bad --plugin with --list_plugins: the listing still comes, then the error.
run list_explicit --plugin="$fx/libfixture_abi99.so" --list_plugins
expect_rc list_explicit 2
expect_in list_explicit out "$fx/libfixture_abi99.so"
expect_in list_explicit err "cnnbench: error: $fx/libfixture_abi99.so: built for cnnbench ABI 99.0"

# ---- the good ones run, with broken neighbours on the path -------------------------------
CNNB_PLUGIN_PATH="$fx" run good --model=fixture_good --num_batches=2 --batch_size=2 \
  --num_warmup_batches=0
expect_rc good 0
expect_in good out "total images/sec:"
run newer --plugin="$fx/libfixture_newer.so" --model=fixture_newer --num_batches=2 \
  --batch_size=2 --num_warmup_batches=0
expect_rc newer 0
abi=$(sed -n 's/^#define CNNB_ABI_MAJOR \([0-9]*\).*/\1/p; s/^#define CNNB_ABI_MINOR \([0-9]*\).*/\1/p' "$CNNB_SOURCE_DIR/sdk/include/cnnb/abi.h" | paste -sd.)
expect_in newer err "built for cnnbench ABI 1.99, newer than this host's $abi: loaded"
expect_in newer out "total images/sec:"

# A bare file name is a file in the current directory, not a library-path lookup.
(cd "$fx" && "$CNNBENCH" --plugin=libfixture_good.so --list_plugins >"$tmp/bare.out" 2>&1) ||
  fail "bare: --plugin=libfixture_good.so from its directory failed: $(cat "$tmp/bare.out")"
grep -qE "^ +model +fixture_good " "$tmp/bare.out" || fail "bare: fixture_good not listed"

if ((failures > 0)); then
  echo "$failures check(s) failed"
  exit 1
fi
echo "loader CLI: all checks passed"
