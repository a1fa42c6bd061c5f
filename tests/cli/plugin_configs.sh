#!/usr/bin/env bash
# What a plugin needs of the run reaches it in its config struct (ABI 1.8), not through
# the core's flags: fixture plugins that log their config show --num_gpus as the
# device's, strategy's and datasource's local replicas, --device and --num_intra_threads
# as the datasource's device and threads, and --fp16_enable_auto_loss_scale as the
# strategy's auto_loss_scale only under fp16 (the trainer skips non-finite updates only
# then). No plugin of the tree reads a core flag by name (the source check below).
set -uo pipefail
: "${CNNBENCH:?}" "${CNNB_BUILD_DIR:?}" "${CNNB_SOURCE_DIR:?}"
fx="$CNNB_BUILD_DIR/fixtures/faults"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
expect_err() { grep -qF -- "$2" "$tmp/$1.err" || fail "$1: stderr lacks '$2': $(cat "$tmp/$1.err")"; }
run() { # run NAME args...: cnnbench with the fixtures on the plugin path
  local name=$1; shift
  CNNB_PLUGIN_PATH="$fx" timeout 120 "$CNNBENCH" --model=trivial --batch_size=2 \
    --num_batches=1 --num_warmup_batches=0 --datasource=fixture_data \
    --variable_update=fixture_strategy_minimal "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
  local rc=$?
  [ "$rc" -eq 0 ] || fail "$name: exit $rc: $(cat "$tmp/$name.err")"
}

run two --device=fixture_minimal --num_gpus=2 --num_intra_threads=1 --fp16_enable_auto_loss_scale
expect_err two "fixture_minimal config: device 0 of 2 local replicas"
expect_err two "fixture_minimal config: device 1 of 2 local replicas"
expect_err two "fixture_strategy_minimal config: 2 local replicas of device fixture_minimal, auto loss scale 0"
expect_err two "fixture_data config: shard 0 of 2, 2 local replicas, device fixture_minimal with 1 threads"
expect_err two "fixture_data config: shard 1 of 2, 2 local replicas, device fixture_minimal with 1 threads"

run one --num_gpus=1
expect_err one "fixture_strategy_minimal config: 1 local replicas of device cpu, auto loss scale 0"
expect_err one "fixture_data config: shard 0 of 1, 1 local replicas, device cpu with 0 threads"

# The source rule: a plugin reads its own flags by name, never one the core declares.
core_flags=$(sed -n 's/^ *{"\([a-z0-9_]*\)", CNNB_FLAG_.*/\1/p' \
  "$CNNB_SOURCE_DIR/core/src/config/core_flags.c" | sort -u)
[ -n "$core_flags" ] || fail "read no core flag names from core/src/config/core_flags.c"
reads=$(grep -rhoE 'cnnb_flag_(int|float|bool|string|is_set|declared)\([^,]+, *"[a-z0-9_]+"' \
  "$CNNB_SOURCE_DIR/plugins" | sed -E 's/.*"([a-z0-9_]+)"$/\1/' | sort -u)
[ -n "$reads" ] || fail "found no flag read in plugins/ at all: the pattern is stale"
leaked=$(comm -12 <(echo "$core_flags") <(echo "$reads"))
[ -z "$leaked" ] || fail "plugins read core flags by name: $(echo $leaked)"

[ "$failures" -eq 0 ] || exit 1
echo "PASS"
