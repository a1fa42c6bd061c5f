/* clock.h — the one clock the host times things with: CLOCK_MONOTONIC, in seconds, so a
 * step time never jumps with the wall clock (NTP, a suspended VM's catch-up). Traces keep
 * their own microsecond reading of the same clock (cnnb_trace_now_us, cnnb/trace.h). */
#ifndef CNNB_BASE_CLOCK_H
#define CNNB_BASE_CLOCK_H

/* Seconds since an arbitrary fixed point; only differences mean anything. [any-thread] */
double cnnb_now_seconds(void);
/* The wall clock (CLOCK_REALTIME): Unix seconds, fractional, for the time a record says
 * it was written (the benchmark log, TensorBoard events), never for a duration.
 * [any-thread] */
double cnnb_unix_seconds(void);

#endif
