#!/usr/bin/env bash
# horovod overlaps communication with backward: with small gradient buckets (lenet's
# gradients in 0.5 MiB buckets: three per step), each rank's --horovod_timeline shows the
# step's first allreduce starting before "backward done" (finish_step entered). Also
# checks the timeline itself: one file per rank, named FILE.rankN.json, every allreduce
# that starts ends, every bucket announced, strict JSON once closed (read with python3
# when there is one; the rest is grep and awk, which every CI image has).
set -euo pipefail
: "${CNNBENCH:?}" "${CNNB_SOURCE_DIR:?}"
source "$CNNB_SOURCE_DIR/tests/support/mpi.sh"
mpi_require horovod
tmp=$(mktemp -d)
trap 'mpi_cleanup; rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

K=6
mpi_run_bounded 300 2 "$CNNBENCH" --model=lenet --batch_size=64 --num_batches=$K --num_warmup_batches=0 \
  --num_intra_threads=1 --variable_update=horovod --gradient_bucket_mb=0.5 \
  --horovod_fusion_threshold=1000000 --horovod_timeline="$tmp/trace.json" >"$tmp/out" 2>&1 \
  || fail "the run: $(cat "$tmp/out")"

for r in 0 1; do
  f=$tmp/trace.rank$r.json
  [ -s "$f" ] || fail "no timeline $f: $(ls "$tmp")"
  begins=$(grep -c '"name": "allreduce", "ph": "B"' "$f" || true)
  ends=$(grep -c '"name": "allreduce", "ph": "E"' "$f" || true)
  buckets=$(grep -c '"name": "bucket ready"' "$f" || true)
  [ "$begins" -gt 0 ] && [ "$begins" = "$ends" ] || fail "rank $r: $begins allreduces started, $ends ended"
  [ "$buckets" -ge $((2 * K)) ] || fail "rank $r: $buckets buckets announced in $K steps (want several per step)"
  [ "$(tail -n 1 "$f")" = "]" ] || fail "rank $r: the timeline is not closed"
  if command -v python3 >/dev/null 2>&1; then
    python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$f" || fail "rank $r: not JSON"
  fi
  # Per step: when its first allreduce started, and when backward was done.
  read -r steps early margin < <(awk '
    function num(key,   at) {
      if (!match($0, "\"" key "\": [0-9.]+")) return -1
      return substr($0, RSTART + length(key) + 4, RLENGTH - length(key) - 4) + 0
    }
    /"name": "allreduce", "ph": "B"/ { s = num("step"); t = num("ts"); if (!(s in first) || t < first[s]) first[s] = t }
    /"name": "backward done"/ { done[num("step")] = num("ts") }
    END {
      for (s in done) {
        n++
        if ((s in first) && first[s] < done[s]) { early++; gap += done[s] - first[s] }
      }
      printf "%d %d %.0f\n", n, early, early ? gap / early : 0
    }' "$f")
  [ "$steps" = "$K" ] || fail "rank $r: $steps steps in the timeline, want $K"
  # A busy machine may hold the communication thread back in a step or two; without
  # overlap no step would have its first allreduce before backward ends.
  [ "$early" -ge $((K / 2)) ] \
    || fail "rank $r: the first allreduce started before backward ended in only $early of $K steps"
  echo "ok: rank $r: first allreduce before backward done in $early of $K steps (by $margin us on average)"
done
