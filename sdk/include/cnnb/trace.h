/* cnnb/trace.h — ABI 1.5: events a plugin adds to the host's --trace_file, the Chrome
 * trace-event JSON (Perfetto, chrome://tracing) of a few steady-state steps.
 *
 * The host records the executor's side itself (every node's forward and backward, the
 * optimizer update, the wait for data); a plugin adds what only it sees: a strategy its
 * gradient communication (one track per bucket or chunk), a datasource its decoding, a
 * device its own kernels. Events carry real measurements taken by the caller with
 * cnnb_trace_now_us() around the work (synchronized with the device where the work is
 * asynchronous); the host never invents a duration.
 *
 * Tracks are named per process ("allreduce bucket 3"): the host maps each name to one
 * thread row of this rank's process in the trace (pid = rank) and writes its name once.
 * Events on one track must not overlap partially (nest or follow each other), as the
 * trace format requires of one thread.
 *
 * Cost when tracing is off, or outside the traced steps: cnnb_trace_active() is one
 * relaxed atomic load, and callers skip their clock reads on 0. */
#ifndef CNNB_TRACE_H
#define CNNB_TRACE_H

#include "ctx.h"

#ifdef __cplusplus
extern "C" {
#endif

/* [any-thread] 1 while the host records (--trace_file given and a traced step running),
 * else 0. ctx: the plugin's own (or a child of it). */
CNNB_EXPORT int32_t cnnb_trace_active(const cnnb_ctx *ctx);

/* [any-thread] The trace's clock: CLOCK_MONOTONIC in microseconds (one clock for every
 * rank on a machine). */
CNNB_EXPORT double cnnb_trace_now_us(void);

/* [any-thread] One complete event ("ph": "X") on `track` from start_us to end_us (the
 * clock above). args_json: NULL or the text of a JSON object ("{\"bytes\": 4096}") shown
 * with the event, copied; an args_json that is not an object is dropped with a warning.
 * Does nothing when the host is not recording. Strings are copied before it returns. */
CNNB_EXPORT void cnnb_trace_event(const cnnb_ctx *ctx, const char *track, const char *name,
                                  double start_us, double end_us, const char *args_json);

#ifdef __cplusplus
}
#endif
#endif
