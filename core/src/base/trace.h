/* trace.h — the host's recorder for --trace_file: events of a few traced steps kept in
 * memory and written at the end of the run as one Chrome trace-event JSON file per rank
 * (JSON Object Format: {"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}),
 * which Perfetto and chrome://tracing open. Core-private; plugins reach it only through
 * the SDK's cnnb_trace_active / cnnb_trace_event (cnnb/trace.h), which find it through
 * their ctx: a ctx family shares it (ctx_internal.h).
 *
 * One process of the trace is this rank (pid = rank, named "rank R"); each track name
 * becomes one thread row (tid from 1 in order of first use, named by thread_name
 * metadata). Events are only kept between cnnb_trace_begin and cnnb_trace_end (one
 * traced step); outside, cnnb_trace_active reads 0 and every append is dropped.
 *
 * Threading: appends from any thread (under the recorder's mutex); open, attach, begin,
 * end, finish and free from the main thread. The recorder must outlive every thread that
 * may still hold its ctx family (free it after the run's plugins are gone). */
#ifndef CNNB_CORE_TRACE_H
#define CNNB_CORE_TRACE_H

#include <stdint.h>
#include <cnnb/trace.h>

typedef struct cnnb_trace cnnb_trace;

/* What otherData says about the run; strings are copied. */
typedef struct cnnb_trace_info {
  const char *model, *device, *strategy;
  int64_t steps; /* traced steps asked for */
  int32_t rank, world_size;
  const char *flag; /* the flag that asked for the trace, for messages (NULL: trace_file) */
} cnnb_trace_info;

/* The file for `path` under world_size ranks: path itself for one process, else path
 * with ".rankR" before a final ".json" (or ".rankR.json" appended), as the strategies'
 * timelines name theirs. */
void cnnb_trace_path(const char *path, int32_t rank, int32_t world_size, char *out, size_t size);

/* Creates the file now (so a bad path fails before any step: CNNB_EIO naming the flag,
 * the path and the reason) and a recorder writing to it at finish. */
cnnb_status cnnb_trace_open(cnnb_ctx *ctx, const char *path, const cnnb_trace_info *info,
                            cnnb_trace **out);
/* Makes ctx's family (its root and every child) record into t; NULL detaches. */
void cnnb_trace_attach(cnnb_ctx *ctx, cnnb_trace *t);
/* The traced window: a step starts / ends. cnnb_trace_active reads 1 between them. */
void cnnb_trace_begin(cnnb_trace *t);
void cnnb_trace_end(cnnb_trace *t);

/* One complete event on `track` (from the host; plugins use cnnb_trace_event). cat: a
 * category ("forward", "step") or NULL; args: a JSON object taken over (freed here), or
 * NULL. Dropped outside the window. */
struct json_t;
void cnnb_trace_add(cnnb_trace *t, const char *track, const char *name, const char *cat,
                    double start_us, double end_us, struct json_t *args);
/* The same into the recorder ctx's family records into, during a traced step (for host
 * code holding a ctx, not the recorder: the executor, the step loop); args is freed
 * when nothing records. */
void cnnb_trace_host_event(const cnnb_ctx *ctx, const char *track, const char *name,
                           const char *cat, double start_us, double end_us, struct json_t *args);

/* The events kept so far (the traceEvents array; owned by t, read after the run's
 * threads are done with it) and the steps the trace was opened for. */
const struct json_t *cnnb_trace_events(const cnnb_trace *t);
int64_t cnnb_trace_steps(const cnnb_trace *t);

/* Writes the file and closes it; later appends are dropped. CNNB_EIO with a message in
 * ctx when writing fails. */
cnnb_status cnnb_trace_finish(cnnb_trace *t, cnnb_ctx *ctx);
/* Frees t (after finish; NULL is a no-op). */
void cnnb_trace_free(cnnb_trace *t);

#endif
