/* interrupted.h — a run stopped by SIGINT, SIGTERM, SIGHUP, SIGUSR1 or SIGUSR2
 * (base/interrupt.h) between two steps: the step loops ask here whether to stop, and say
 * so once they have saved. Host-internal. */
#ifndef CNNB_RUN_INTERRUPTED_H
#define CNNB_RUN_INTERRUPTED_H

#include <stdbool.h>
#include <stdint.h>

#include "run/run.h"

/* Whether the steps stop here: this process was signalled, or, under several ranks, any
 * rank was (one allgather of a counter per signal, so every rank stops before the same
 * step). On a stop, run->interrupted holds the signal the ranks agreed on (the first of
 * SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2 that any rank got) and
 * run->interrupted_ranks how many were signalled, and base/interrupt.h's
 * cnnb_interrupt_stop has it. Collective under several ranks: every rank calls it at the
 * same points of its steps. */
cnnb_status cnnb_run_check_interrupt(cnnb_run *run, bool *stop);

/* Says where the run stopped and what it saved: one line on stderr (rank 0's),
 * "cnnbench: SIGINT at step 37 (global step 39): saved checkpoint PATH; stopping", and
 * the benchmark log summary's "interrupted" key (every rank's). `step` is the report's
 * step (the timed steps done; 0 in the warm-up, which `warm_up` says), `global_step` the
 * optimizer steps so far (< 0: not training); `saved`: the run just saved (or had saved)
 * the checkpoint of that step, else `why` says why nothing was. */
cnnb_status cnnb_run_report_interrupted(cnnb_run *run, int64_t step, bool warm_up,
                                        int64_t global_step, bool saved, const char *why);

/* The note of the report's total line and the summary's "interrupted" key, after a stop:
 * what stopped the run after how many of its steps. */
void cnnb_run_interrupted_note(const cnnb_run *run, int64_t steps, char *buf, size_t size);

#endif
