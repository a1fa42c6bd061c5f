/* timeline.h — horovod's --horovod_timeline (Horovod's HOROVOD_TIMELINE): what each rank
 * did when, as a Chrome trace (chrome://tracing, ui.perfetto.dev), one file per rank.
 *
 * The file is the JSON Array Format, one event per line, so a script can read it with
 * grep and awk:
 *   {"name": "bucket ready", "ph": "i", "ts": 1234.567, "pid": 0, "tid": 1, "args": {"step": 3, ...}},
 * "ts" is CLOCK_MONOTONIC in microseconds (one clock for every rank on a machine); "pid"
 * is the rank; tid 1 is the step thread, 2 the communication thread. Closing writes the
 * final "]"; a run that was killed leaves the array open, which the viewers accept.
 *
 * Thread-safe: both threads write events. Every call on a NULL timeline does nothing. */
#ifndef CNNB_HOROVOD_TIMELINE_H
#define CNNB_HOROVOD_TIMELINE_H

#include <stdint.h>
#include <cnnb/cnnb.h>

typedef struct timeline timeline;

enum { TIMELINE_STEP_THREAD = 1, TIMELINE_COMM_THREAD = 2 };

/* The file for `rank`: path with ".rankR" before a final ".json", or ".rankR.json"
 * appended ("trace.json" -> "trace.rank0.json", "trace" -> "trace.rank0.json"). */
void timeline_path(const char *path, int32_t rank, char *out, size_t size);
/* Creates the rank's file; an empty path gives a NULL timeline (no file). */
cnnb_status timeline_open(cnnb_ctx *ctx, const char *path, int32_t rank, timeline **out);
/* Ends the array and closes the file. */
void timeline_close(timeline *t);

/* One event: ph is "i" (an instant), "B" or "E" (the start or end of a span on the
 * thread); args is the inside of the args object ("" for none). */
void timeline_event(timeline *t, const char *name, const char *ph, int tid, const char *args);
/* Writes what is buffered (once per step, so a killed run leaves its steps). */
void timeline_flush(timeline *t);

#endif
