/* op_times.h — --tfprof_file's table of where the traced steps' time went, by op kind
 * (tf_cnn_benchmarks prints its 20 slowest ops after a tfprof profile): read off the
 * trace's own events, so the table and the file agree. Host-internal. */
#ifndef CNNB_REPORT_OP_TIMES_H
#define CNNB_REPORT_OP_TIMES_H

#include <stdint.h>
#include <stdio.h>

struct json_t;

/* events: a trace's traceEvents array (trace.h). Every complete event ("ph": "X") with an
 * "op" arg (a node's forward or backward) counts for its op kind; the host's events
 * ("cat": "host": data wait, optimizer update, ...) each for their name; spans that hold
 * other events ("cat": "span") and plugins' events (other tracks, overlapping) do not.
 * Prints the `top` slowest kinds, per traced step (`steps` of them, at least 1), to out:
 * calls (nodes run, a forward and its backward once; host events), forward, backward and
 * total milliseconds, and the share of the time counted. 0, or -1 when
 * out of memory (nothing printed). */
int cnnb_op_times_print(const struct json_t *events, int64_t steps, int32_t top, FILE *out);

#endif
