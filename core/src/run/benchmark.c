/* benchmark.c — one run from its configuration to its report (benchmark.h): set up, run
 * the steps the mode asks for, record how it ended, take it apart. */
#include "run/benchmark.h"

#include "base/interrupt.h"
#include "base/trace.h"
#include "report/benchmark_log.h"
#include "report/op_times.h"
#include "run/input_only.h"
#include "run/run_report.h"
#include "run/setup.h"
#include "run/steps.h"

/* --trace_file's recorder for this rank, attached to the run's ctx family before any step
 * (so a bad path fails first); NULL without the flag. */
static cnnb_status open_trace(cnnb_run *run, cnnb_trace **out) {
  const cnnb_run_config *cfg = run->cfg;
  *out = NULL;
  if (!cfg->trace_file || !*cfg->trace_file) return CNNB_OK;
  int64_t steps = run->facts.num_batches;
  cnnb_trace_info info = {
      .model = run->facts.model.name,
      .device = run->facts.device.name,
      .strategy = run->facts.strategy.name,
      .steps = cfg->trace_steps < steps ? cfg->trace_steps : steps,
      .rank = run->facts.file_rank,
      .world_size = run->facts.file_ranks,
      .flag = cfg->top_ops > 0 ? "tfprof_file" : "trace_file",
  };
  cnnb_status st = cnnb_trace_open(run->ctx, cfg->trace_file, &info, out);
  if (st == CNNB_OK) cnnb_trace_attach(run->ctx, *out);
  return st;
}

/* A prepared run's steps, the tool's hook after them, and the log's summary: its last
 * line says how the run ended, a failure or a signal included ("interrupted"). SIGINT and
 * SIGTERM stop the steps cleanly from here on (base/interrupt.h); before, in the setup,
 * nothing is lost to them and they end the process at once, as they always did. */
static cnnb_status run_prepared(cnnb_run *run, FILE *out, cnnb_trace **trace,
                                const cnnb_run_hooks *hooks) {
  FILE *report = run->facts.world.rank == 0 ? out : NULL;
  bool input_only = run->cfg->mode == CNNB_MODE_INPUT_ONLY;
  /* The output files are opened before the signals become a request to stop: an open
   * that waits (a file system that hangs) is still setup, which a signal ends at once. */
  cnnb_status st = cnnb_run_write_graph_file(run);
  if (st == CNNB_OK && !input_only) st = open_trace(run, trace);
  cnnb_interrupt_arm();
  if (st != CNNB_OK) {
    /* said: the file could not be written */
  } else if (input_only) {
    st = cnnb_input_only_run(run, report);
  } else {
    st = cnnb_run_model_steps(run, report, *trace);
  }
  /* A hook reads the model's arenas, which --input_only never made. */
  if (st == CNNB_OK && hooks && hooks->after_steps && !input_only)
    st = hooks->after_steps(run, hooks->user);
  const char *status = st != CNNB_OK      ? cnnb_error_message(run->ctx)
                       : run->interrupted ? "interrupted"
                                          : NULL;
  cnnb_status logged = cnnb_benchmark_log_summary(run->log, status);
  return st == CNNB_OK ? logged : st;
}

cnnb_status cnnb_benchmark_run(const cnnb_run_config *cfg, cnnb_ctx *parent, cnnb_loader *loader,
                               FILE *out, char *err, size_t err_size, const cnnb_run_hooks *hooks) {
  cnnb_run run = {0};
  cnnb_trace *trace = NULL;
  cnnb_status st = cnnb_run_open(&run, cfg, parent, loader);
  if (st == CNNB_OK && cfg->model_info) {
    st = cnnb_run_print_model_info(&run, out);
  } else if (st == CNNB_OK) {
    if ((st = cnnb_run_prepare(&run, loader)) == CNNB_OK)
      st = run_prepared(&run, out, &trace, hooks);
    else (void)cnnb_benchmark_log_summary(run.log, cnnb_error_message(run.ctx));
  }
  if (trace) {
    cnnb_status written = cnnb_trace_finish(trace, run.ctx);
    if (st == CNNB_OK) st = written;
    cnnb_trace_attach(run.ctx, NULL);
    /* --tfprof_file: tf prints its slowest ops after the profile; rank 0's here. */
    if (st == CNNB_OK && cfg->top_ops > 0 && run.facts.world.rank == 0 &&
        cnnb_op_times_print(cnnb_trace_events(trace), cnnb_trace_steps(trace), cfg->top_ops, out) !=
            0)
      st = cnnb_error(run.ctx, CNNB_ENOMEM, "--tfprof_file: out of memory for its table");
  }
  /* Every rank of a job reports its own failure, saying whose, and at once: when one rank
   * exits, mpirun aborts the others, so a rank still taking its run apart (the strategy's
   * MPI, the devices) would never get to say why it failed. */
  if (st != CNNB_OK && run.facts.world.size > 1) {
    fflush(out);
    fprintf(stderr, "cnnbench: error: [rank %d] %s\n", (int)run.facts.world.rank,
            cnnb_error_message(run.ctx));
    fflush(stderr);
    if (err_size) err[0] = '\0'; /* said */
  } else if (st != CNNB_OK) {
    snprintf(err, err_size, "%s", run.ctx ? cnnb_error_message(run.ctx) : "out of memory");
  }
  cnnb_run_close(&run);
  cnnb_trace_free(trace); /* after the plugins' threads, which may hold its ctx family */
  return st;
}
