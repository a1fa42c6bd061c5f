#!/usr/bin/env bash
# Plugins that misbehave, and files that are no plugins, as a user meets them:
#  - a FIFO named *.so on the plugin path or given to --plugin is refused, not opened
#    (opening one waits for a writer forever), and every command still works;
#  - --version loads no plugin, so a plugin that crashes in its entry cannot stop it;
#  - a plugin that crashes (entry segfault, abort in build) gets one line naming its file
#    and what it was doing, and the process still dies of that signal;
#  - a plugin failing without a message, a NaN default learning rate, a NULL [required]
#    slot: each refused with exit 2 and a message naming the plugin;
#  - [optional] slots left NULL (device, strategy, datasource) are checked by the host,
#    which falls back: the minimal device trains resnet20 with the cpu device's losses.
set -uo pipefail
: "${CNNBENCH:?}" "${CNNB_BUILD_DIR:?}"
fx="$CNNB_BUILD_DIR/fixtures"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
# run NAME [env...] -- args: runs cnnbench (at most 60 s) into $tmp/NAME.{out,err,rc}
run() {
  local name=$1; shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  env "${envs[@]}" timeout 60 "$CNNBENCH" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
  echo $? >"$tmp/$name.rc"
}
rc() { cat "$tmp/$1.rc"; }
expect_rc() { [ "$(rc "$1")" = "$2" ] || fail "$1: exit $(rc "$1"), want $2; stderr: $(cat "$tmp/$1.err")"; }
expect_err() { grep -qF -- "$2" "$tmp/$1.err" || fail "$1: stderr lacks '$2': $(cat "$tmp/$1.err")"; }

# ---- FIFOs --------------------------------------------------------------------------
mkdir "$tmp/fifo"
mkfifo "$tmp/fifo/libfifo.so"
run fifo_list CNNB_PLUGIN_PATH="$tmp/fifo" -- --list_plugins
expect_rc fifo_list 0
grep -qF "libfifo.so  is not a regular file (a FIFO)" "$tmp/fifo_list.out" ||
  fail "fifo_list: --list_plugins does not show the FIFO rejected: $(cat "$tmp/fifo_list.out")"
run fifo_run CNNB_PLUGIN_PATH="$tmp/fifo" -- --num_batches=1 --num_warmup_batches=0
expect_rc fifo_run 0
expect_err fifo_run "libfifo.so: is not a regular file (a FIFO)"
run fifo_explicit -- --plugin="$tmp/fifo/libfifo.so" --version
expect_rc fifo_explicit 0
run fifo_explicit_run -- --plugin="$tmp/fifo/libfifo.so" --num_batches=1
expect_rc fifo_explicit_run 2
expect_err fifo_explicit_run "$tmp/fifo/libfifo.so: is not a regular file (a FIFO)"

# ---- crashes ------------------------------------------------------------------------
run crash_version CNNB_PLUGIN_PATH="$fx/crash" -- --version
expect_rc crash_version 0
grep -q "^cnnbench " "$tmp/crash_version.out" || fail "crash_version: no version printed"
run crash_list CNNB_PLUGIN_PATH="$fx/crash" -- --list_plugins
[ "$(rc crash_list)" -ne 0 ] && [ "$(rc crash_list)" -ne 124 ] ||
  fail "crash_list: exit $(rc crash_list), want a crash (not 0, not a timeout)"
expect_err crash_list "cnnbench: crashed with SIGSEGV (invalid memory access) in $fx/crash/libfixture_crash_entry.so, in cnnb_plugin_entry: the plugin has a bug; take its file off the plugin path"
run abort_build CNNB_PLUGIN_PATH="$fx/faults" -- --model=fixture_abort_build --num_batches=1
[ "$(rc abort_build)" -ne 0 ] && [ "$(rc abort_build)" -ne 124 ] ||
  fail "abort_build: exit $(rc abort_build), want a crash"
expect_err abort_build "cnnbench: crashed with SIGABRT (abort) in model plugin 'fixture_abort_build' ($fx/faults/libfixture_abort_build.so), in build of 'fixture_abort_build'"

# ---- refusals -----------------------------------------------------------------------
run silent CNNB_PLUGIN_PATH="$fx/faults" -- --model=fixture_silent --num_batches=1
expect_rc silent 2
expect_err silent "building model fixture_silent (model plugin 'fixture_silent' ($fx/faults/libfixture_silent.so)): invalid argument (model plugin 'fixture_silent' ($fx/faults/libfixture_silent.so) returned this status without a message)"
run nan_lr CNNB_PLUGIN_PATH="$fx/faults" -- --model=fixture_nan_lr --num_batches=1
expect_rc nan_lr 2
expect_err nan_lr "default learning rate nan"
run null_build CNNB_PLUGIN_PATH="$fx/faults" -- --model=fixture_null_build --num_batches=1
expect_rc null_build 2
expect_err null_build "cnnb_model_vtable.build is NULL, but the SDK marks it [required] (cnnb/model.h)"

# ---- optional slots left NULL ---------------------------------------------------------
common=(--model=resnet20 --data_name=cifar10 --batch_size=4 --num_batches=4
        --num_warmup_batches=0 --display_every=1 --num_intra_threads=1)
run cpu -- "${common[@]}"
run minimal CNNB_PLUGIN_PATH="$fx/faults" -- "${common[@]}" --device=fixture_minimal \
  --variable_update=fixture_strategy_minimal
expect_rc cpu 0
expect_rc minimal 0
losses() { awk -F'\t' '/^[0-9]+\timages\/sec/ {print $3}' "$tmp/$1.out" | tr '\n' ' '; }
[ -n "$(losses cpu)" ] && [ "$(losses cpu)" = "$(losses minimal)" ] ||
  fail "the minimal device's losses ($(losses minimal)) differ from the cpu device's ($(losses cpu))"
grep -qF "the cpu device without its optional slots" "$tmp/minimal.out" ||
  fail "minimal: a device without describe() should show its plugin's description"
run no_epoch CNNB_PLUGIN_PATH="$fx/faults" -- --datasource=fixture_data --num_epochs=1
expect_rc no_epoch 2
expect_err no_epoch "--num_epochs=1: datasource fixture_data does not say how many examples an epoch holds"
run no_epoch_steps CNNB_PLUGIN_PATH="$fx/faults" -- --datasource=fixture_data --num_batches=2 \
  --num_warmup_batches=0
expect_rc no_epoch_steps 0
grep -qF "Num epochs:  None" "$tmp/no_epoch_steps.out" || fail "no_epoch_steps: epochs should read None"

[ "$failures" -eq 0 ] && echo "PASS" || exit 1
