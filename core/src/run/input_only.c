/* input_only.c — --input_only: the input pipeline timed alone (the datasource instances
 * and their prefetch threads, one per replica), reported like a training run's steps and
 * total so its images/sec sit next to a training run's and show which of the two bounds
 * it. No executor exists: a step takes one batch from every replica's queue, and its
 * time is how long that waited, so it measures what the pipeline sustains when nothing
 * else competes for the batches. The queues are emptied after the warm-up. A signal stops
 * the steps between two (run/interrupted.h); nothing is saved. */
#include "run/input_only.h"

#include <stdbool.h>

#include "base/clock.h"
#include "report/report.h"
#include "run/interrupted.h"
#include "run/run_report.h"

static cnnb_status read_step(cnnb_run *run) {
  for (int32_t i = 0; i < run->facts.replicas; i++) {
    cnnb_replica *r = &run->replicas[i];
    cnnb_batch batch; /* fp32 or uint8, as a training run would take it */
    cnnb_status st = cnnb_prefetch_take(r->input, &batch);
    if (st != CNNB_OK)
      return cnnb_plugin_failed(run->ctx, &run->facts.datasource, st, r->datasource_ctx,
                                "reading a batch");
  }
  return CNNB_OK;
}

cnnb_status cnnb_input_only_run(cnnb_run *run, FILE *out) {
  const cnnb_run_config *cfg = run->cfg;
  if (out) cnnb_run_print_header(run, out);
  if (out) fflush(out);
  cnnb_status st = CNNB_OK;
  /* The warm-up fills the queues and the datasource's caches (file pages, decoders). */
  cnnb_report_print_progress(out, run->ctx, "Running warm up");
  bool stop = false;
  for (int64_t i = 0; i < cfg->num_warmup_batches && st == CNNB_OK && !stop; i++)
    if ((st = cnnb_run_check_interrupt(run, &stop)) == CNNB_OK && !stop) st = read_step(run);
  /* Batches the threads queued meanwhile were read before timing starts: left in the
   * queues, the first timed steps would take them at no cost and flatter the pipeline. */
  for (int32_t i = 0; i < run->facts.replicas && st == CNNB_OK; i++) {
    cnnb_replica *r = &run->replicas[i];
    if ((st = cnnb_prefetch_drain(r->input)) != CNNB_OK)
      st = cnnb_plugin_failed(run->ctx, &run->facts.datasource, st, r->datasource_ctx,
                              "reading a batch");
  }
  if (st != CNNB_OK) return st;
  if (stop) {
    if ((st = cnnb_run_report_interrupted(run, 0, true, -1, false, "--input_only")) != CNNB_OK ||
        (st = cnnb_run_print_total(run, 0, 0, 0, out)) != CNNB_OK)
      return st;
    return cnnb_run_print_skipped(run, out);
  }
  cnnb_report_print_progress(out, run->ctx, "Done warm up");

  cnnb_step_stats stats;
  cnnb_step_stats_init(&stats);
  stats.ewma = run->cfg->display_perf_ewma;
  if (out) cnnb_report_print_input_step_header(out);
  int64_t num_batches = run->facts.num_batches;
  double total_seconds = 0;
  int64_t steps = 0;
  for (int64_t i = 0; i < num_batches; i++) {
    if ((st = cnnb_run_check_interrupt(run, &stop)) != CNNB_OK || stop) break;
    double start = cnnb_now_seconds();
    if ((st = read_step(run)) != CNNB_OK) break;
    double seconds = cnnb_now_seconds() - start;
    /* A batch already queued is taken in well under a clock tick: count it as one
     * nanosecond rather than refuse a zero time. */
    if (!(seconds > 0)) seconds = 1e-9;
    total_seconds += seconds;
    cnnb_step_stats_add_step(&stats, (double)run->facts.global_batch, seconds);
    steps = i + 1;
    bool last = i + 1 == num_batches;
    if (out && (cnnb_report_should_display(i + 1, cfg->display_every) || last)) {
      cnnb_report_print_input_step(out, i + 1, &stats);
      fflush(out);
    }
  }
  cnnb_step_stats_free(&stats);
  if (st != CNNB_OK) return st;
  if (stop &&
      (st = cnnb_run_report_interrupted(run, steps, false, -1, false, "--input_only")) != CNNB_OK)
    return st;
  double images = (double)run->facts.process_batch * (double)steps;
  if ((st = cnnb_run_print_total(run, images, total_seconds, steps, out)) != CNNB_OK) return st;
  return cnnb_run_print_skipped(run, out);
}
