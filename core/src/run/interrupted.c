/* interrupted.c — stopping a run's steps for SIGINT, SIGTERM, SIGHUP, SIGUSR1 or SIGUSR2
 * (interrupted.h). */
#include "run/interrupted.h"

#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "base/interrupt.h"
#include "report/benchmark_log.h"
#include "run/checkpoint.h"
#include "run/world.h"

cnnb_status cnnb_run_check_interrupt(cnnb_run *run, bool *stop) {
  /* Ranks signalled with each of the signals that stop a run (base/interrupt.h's order). */
  int64_t counts[CNNB_INTERRUPT_SIGNALS] = {0};
  int mine = cnnb_interrupt_index(cnnb_interrupt_signal());
  if (mine >= 0) counts[mine] = 1;
  *stop = false;
  const cnnb_world *w = &run->facts.world;
  if (w->size > 1) {
    cnnb_status st = cnnb_world_sum(w, counts, CNNB_INTERRUPT_SIGNALS,
                                    "agreeing whether a rank was signalled to stop");
    if (st != CNNB_OK) return st;
  }
  int64_t ranks = 0;
  int first = -1;
  for (int i = 0; i < CNNB_INTERRUPT_SIGNALS; i++) {
    ranks += counts[i];
    if (counts[i] > 0 && first < 0) first = i;
  }
  if (first < 0) return CNNB_OK;
  *stop = true;
  run->interrupted = cnnb_interrupt_signal_at(first);
  run->interrupted_ranks = (int32_t)ranks;
  cnnb_interrupt_stop(run->interrupted);
  return CNNB_OK;
}

/* Rank 0's line (interrupted.h). */
static void say(const cnnb_run *run, int64_t step, bool warm_up, int64_t global_step,
                const char *saved, const char *why) {
  const cnnb_world *w = &run->facts.world;
  char where[96], ranks[64] = "";
  if (warm_up) snprintf(where, sizeof where, "in the warm-up");
  else snprintf(where, sizeof where, "at step %lld", (long long)step);
  if (global_step >= 0)
    snprintf(where + strlen(where), sizeof where - strlen(where), " (global step %lld)",
             (long long)global_step);
  if (w->size > 1)
    snprintf(ranks, sizeof ranks, " (to %d of %d ranks)", (int)run->interrupted_ranks,
             (int)w->size);
  const char *stopping = w->size > 1 ? "every rank stopping" : "stopping";
  fflush(stdout); /* the report's step lines before it */
  if (saved)
    fprintf(stderr, "cnnbench: %s%s %s: saved checkpoint %s; %s\n",
            cnnb_interrupt_name(run->interrupted), ranks, where, saved, stopping);
  else
    fprintf(stderr, "cnnbench: %s%s %s: nothing saved (%s); %s\n",
            cnnb_interrupt_name(run->interrupted), ranks, where, why, stopping);
  fflush(stderr);
}

cnnb_status cnnb_run_report_interrupted(cnnb_run *run, int64_t step, bool warm_up,
                                        int64_t global_step, bool saved, const char *why) {
  if (run->facts.world.rank == 0) {
    const char *path = saved ? cnnb_checkpoint_last_saved(run) : NULL;
    say(run, step, warm_up, global_step, path, path ? NULL : why);
  }
  json_t *extras = json_pack("{s:{s:s,s:I,s:o,s:b}}", "interrupted", "signal",
                             cnnb_interrupt_name(run->interrupted), "step", (json_int_t)step,
                             "global_step",
                             global_step >= 0 ? json_integer(global_step) : json_null(), "saved",
                             saved);
  if (!extras) return cnnb_error(run->ctx, CNNB_ENOMEM, "out of memory");
  cnnb_status st = cnnb_benchmark_log_summary_extras(run->log, extras);
  json_decref(extras);
  return st;
}

void cnnb_run_interrupted_note(const cnnb_run *run, int64_t steps, char *buf, size_t size) {
  snprintf(buf, size, "interrupted by %s after %lld of %lld steps",
           cnnb_interrupt_name(run->interrupted), (long long)steps,
           (long long)run->facts.num_batches);
}
