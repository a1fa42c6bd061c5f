/* eval_watch.c — each new checkpoint of --train_dir evaluated as it appears
 * (eval_watch.h). */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include "run/eval_watch.h"

#include <time.h>

#include "base/interrupt.h"
#include "store/checkpoint_dir.h"

/* What one evaluation's run was: the checkpoint's global step and the job's size, taken
 * by a hook before the run is taken apart; the caller's own hook runs after it. */
typedef struct watched {
  const cnnb_run_hooks *user;
  int64_t global_step;
  int32_t world_size;
} watched;

static cnnb_status note_run(cnnb_run *run, void *user) {
  watched *w = user;
  w->global_step = run->facts.start_step;
  w->world_size = run->facts.world.size;
  return w->user && w->user->after_steps ? w->user->after_steps(run, w->user->user) : CNNB_OK;
}

/* Sleeps `seconds` in slices of 0.1 s; false when a signal asked to stop meanwhile. */
static bool wait_interval(double seconds) {
  for (double left = seconds; left > 0 && !cnnb_interrupt_signal(); left -= 0.1) {
    double slice = left < 0.1 ? left : 0.1;
    struct timespec ts = {0, (long)(slice * 1e9)};
    nanosleep(&ts, NULL);
  }
  return !cnnb_interrupt_signal();
}

cnnb_status cnnb_eval_watch(const cnnb_run_config *cfg, cnnb_ctx *parent, cnnb_loader *loader,
                            FILE *out, char *err, size_t err_size, const cnnb_run_hooks *hooks) {
  /* From the start, not from the first evaluation's steps: a signal while waiting for the
   * first checkpoint stops the watch as one during any later wait does. */
  cnnb_interrupt_arm();
  int64_t seen = -1; /* the newest step looked at or evaluated */
  int evaluated = 0;
  bool said_none = false;
  for (;;) {
    int64_t newest = cnnb_checkpoint_dir_newest_step(cfg->train_dir);
    if (newest > seen) {
      watched w = {.user = hooks, .global_step = -1, .world_size = 1};
      cnnb_run_hooks mine = {.after_steps = note_run, .user = &w};
      cnnb_status st = cnnb_benchmark_run(cfg, parent, loader, out, err, err_size, &mine);
      if (st != CNNB_OK) return st;
      evaluated++;
      /* The run took the newest file that reads back whole: a damaged newer one is not
       * evaluated again and again at every look. */
      seen = w.global_step > newest ? w.global_step : newest;
      if (w.world_size > 1) {
        snprintf(err, err_size,
                 "--eval_interval_secs: a job of %d processes evaluates once (MPI starts once "
                 "in a process): run the watching --eval as one process, without mpirun",
                 (int)w.world_size);
        return CNNB_EUNSUPPORTED;
      }
      if (out) {
        fprintf(out, "Waiting for a checkpoint of %s newer than global step %lld (every %g s)\n",
                cfg->train_dir, (long long)seen, cfg->eval_interval_secs);
        fflush(out);
      }
    } else if (newest < 0 && !said_none && out) {
      fprintf(out, "Checkpoint not found in %s\n", cfg->train_dir); /* tf's line */
      fflush(out);
      said_none = true;
    }
    if (cnnb_interrupt_signal() || !wait_interval(cfg->eval_interval_secs)) break;
  }
  int signo = cnnb_interrupt_signal();
  if (!cnnb_interrupt_stopped()) {
    /* Stopped while waiting: nothing was running. */
    fflush(out);
    fprintf(stderr,
            "cnnbench: %s while waiting for a new checkpoint in %s: stopping after %d "
            "evaluation%s\n",
            cnnb_interrupt_name(signo), cfg->train_dir, evaluated, evaluated == 1 ? "" : "s");
    cnnb_interrupt_stop(signo);
  }
  return CNNB_OK;
}
