# tests/support/timeline.sh — sourced by the tests that read a strategy's timeline
# (plugins/strategies/common/timeline.h: --horovod_timeline, --replicated_timeline).
#   timeline_check FILE STEPS [TID]   checks one rank's file and that its communication
#                          overlaps backward; prints one "ok: ..." line, or "FAIL: ..."
#                          and returns 1:
#     - the file is there, closed ("]" last) and strict JSON (read with python3 when there
#       is one; the rest is grep and awk, which every CI image has);
#     - every "allreduce" that starts ends, and there are some;
#     - at least 2 buckets announced per step (the test asked for small buckets);
#     - STEPS steps have "backward done";
#     - in at least half of them the step's first allreduce started before backward was
#       done (a busy machine may hold the communication thread back in a step or two;
#       without overlap no step would have it);
#     - with TID, every allreduce ran on that thread (1 step thread, 2 communication thread).
#   timeline_field FILE NAME KEY      the value of args KEY in the first event NAME
timeline_check() {
  local f=$1 steps=$2 tid=${3:-} begins ends buckets early margin done_steps
  [ -s "$f" ] || { echo "FAIL: no timeline $f"; return 1; }
  begins=$(grep -c '"name": "allreduce", "ph": "B"' "$f" || true)
  ends=$(grep -c '"name": "allreduce", "ph": "E"' "$f" || true)
  buckets=$(grep -c '"name": "bucket ready"' "$f" || true)
  [ "$begins" -gt 0 ] && [ "$begins" = "$ends" ] \
    || { echo "FAIL: $f: $begins allreduces started, $ends ended"; return 1; }
  [ "$buckets" -ge $((2 * steps)) ] \
    || { echo "FAIL: $f: $buckets buckets announced in $steps steps (want several per step)"; return 1; }
  [ "$(tail -n 1 "$f")" = "]" ] || { echo "FAIL: $f: the timeline is not closed"; return 1; }
  if command -v python3 >/dev/null 2>&1; then
    python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$f" \
      || { echo "FAIL: $f: not JSON"; return 1; }
  fi
  if [ -n "$tid" ] && grep '"name": "allreduce"' "$f" | grep -qv "\"tid\": $tid[,}]"; then
    echo "FAIL: $f: an allreduce ran on another thread than tid $tid: $(grep '"name": "allreduce"' "$f" | grep -v "\"tid\": $tid[,}]" | head -n 1)"
    return 1
  fi
  # Per step: when its first allreduce started, and when backward was done.
  read -r done_steps early margin < <(awk '
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
  [ "$done_steps" = "$steps" ] || { echo "FAIL: $f: $done_steps steps in the timeline, want $steps"; return 1; }
  [ "$early" -ge $(((steps + 1) / 2)) ] \
    || { echo "FAIL: $f: the first allreduce started before backward ended in only $early of $steps steps"; return 1; }
  echo "ok: $(basename "$f"): first allreduce before backward done in $early of $steps steps (by $margin us on average), $buckets buckets, $begins allreduces"
}

timeline_field() {
  grep -m 1 "\"name\": \"$2\"" "$1" \
    | sed -n -e "s/.*\"$3\": \"\\([^\"]*\\)\".*/\\1/p" -e t -e "s/.*\"$3\": \\([^,}]*\\).*/\\1/p"
}
