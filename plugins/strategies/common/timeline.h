/* timeline.h — a strategy's timeline of its gradient communication (--horovod_timeline,
 * --replicated_timeline; Horovod's HOROVOD_TIMELINE): what each rank did when, as a
 * Chrome trace (chrome://tracing, ui.perfetto.dev), one file per rank. It is how a test
 * proves that communication overlaps backward, whichever strategy does it.
 *
 * The file is the JSON Array Format, one event per line, so a script can read it with
 * grep and awk. The events, the same for every strategy (steps count from 1):
 *   {"name": "bucket ready", "ph": "i", "ts": ..., "pid": R, "tid": 1, "s": "t",
 *    "args": {"step": S, "bucket": B, "offset": O, "count": C}}
 *       the host announced a gradient bucket (bucket_ready: for a strategy with several
 *       local replicas, when the last of them has it); B counts from 1 within step S,
 *       [O, O + C) is its range of the gradient arena
 *   {"name": "allreduce", "ph": "B", "ts": ..., "pid": R, "tid": T,
 *    "args": {"step": S, "what": "buckets 1-3", "bytes": N, "how": "MPI fp32"}}
 *   {"name": "allreduce", "ph": "E", "ts": ..., "pid": R, "tid": T}
 *       the start and end of one range's all-reduce (every replica of every rank ends
 *       with the mean), on the communication thread (T = 2) or the step thread (T = 1):
 *       `what` names the buckets (or chunks) it covers, `bytes` is the range's size in
 *       fp32, `how` the algorithm (and the format sent between ranks)
 *   {"name": "backward done", "ph": "i", "ts": ..., "pid": R, "tid": 1, "s": "t",
 *    "args": {"step": S}}
 *       finish_step entered: every local replica's backward of step S is over
 * "ts" is CLOCK_MONOTONIC in microseconds (one clock for every rank on a machine); "pid"
 * is the rank; tid 1 is the step thread, 2 the communication thread. Closing writes the
 * final "]"; a run that was killed leaves the array open, which the viewers accept.
 *
 * The same measurements go to the host's --trace_file (cnnb/trace.h) while it records: each
 * range's all-reduce as one complete event named "allreduce" on a track of its own,
 * "allreduce " + what ("allreduce buckets 1-3", "allreduce chunk 2 of 4"), args step,
 * bytes and how. So a timeline exists without a file too (timeline_open with an empty
 * path), for the trace alone.
 *
 * Thread-safe: both threads write events. Every call on a NULL timeline does nothing. */
#ifndef CNNB_STRATEGY_TIMELINE_H
#define CNNB_STRATEGY_TIMELINE_H

#include <stdbool.h>
#include <stdint.h>
#include <cnnb/cnnb.h>

typedef struct timeline timeline;

enum { TIMELINE_STEP_THREAD = 1, TIMELINE_COMM_THREAD = 2 };

/* The file for `rank`: path with ".rankR" before a final ".json", or ".rankR.json"
 * appended ("trace.json" -> "trace.rank0.json", "trace" -> "trace.rank0.json"). */
void timeline_path(const char *path, int32_t rank, char *out, size_t size);
/* Creates the rank's file; an empty path gives a timeline without one, which only feeds
 * --trace_file. `flag` is the flag the path came from ("horovod_timeline"), for
 * messages; ctx is the strategy's (or a child): the trace's. */
cnnb_status timeline_open(cnnb_ctx *ctx, const char *flag, const char *path, int32_t rank,
                          timeline **out);
/* Ends the array and closes the file. */
void timeline_close(timeline *t);

void timeline_bucket_ready(timeline *t, int64_t step, int32_t bucket, int64_t offset,
                           int64_t count);
/* One range's all-reduce under way, from timeline_allreduce_begin to _end (on one
 * thread): what the trace's event needs at its end. */
typedef struct timeline_span {
  double start_us; /* cnnb_trace_now_us() at begin */
  bool traced;     /* --trace_file was recording at begin */
  int tid;
  int64_t step, bytes;
  char what[64], how[96];
} timeline_span;

/* Whether anything wants the all-reduces described (a file, or a recording trace): a
 * caller builds `how` only then. */
bool timeline_recording(const timeline *t);
/* what: "buckets 1-3", "chunk 2 of 4"; how: "MPI fp32", "xring#1, then MPI bf16". */
void timeline_allreduce_begin(timeline *t, timeline_span *span, int tid, int64_t step,
                              const char *what, int64_t bytes, const char *how);
void timeline_allreduce_end(timeline *t, const timeline_span *span);
void timeline_backward_done(timeline *t, int64_t step);
/* Writes what is buffered (once per step, so a killed run leaves its steps). */
void timeline_flush(timeline *t);

#endif
