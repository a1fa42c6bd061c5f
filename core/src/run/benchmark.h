/* benchmark.h — one cnnbench run as its configuration describes it: resolve the four
 * plugins, build the model's graph, set up one replica per device (run/setup.h), run the
 * steps (run/steps.h, run/input_only.h) and print tf_cnn_benchmarks' report on `out`.
 * Host-internal: the CLI calls it after parsing flags and discovering plugins. */
#ifndef CNNB_RUN_BENCHMARK_H
#define CNNB_RUN_BENCHMARK_H

#include <stdio.h>

#include "config/run_config.h"
#include "loader/loader.h"
#include "run/run.h"

/* What a host-internal tool (a test, a bench helper) may add to a run; the cnnbench
 * command passes none. after_steps runs on every rank once the timed steps succeeded,
 * before the run is taken apart (tests/tools/train_params.c saves the parameters). */
typedef struct cnnb_run_hooks {
  cnnb_status (*after_steps)(cnnb_run *run, void *user);
  void *user;
} cnnb_run_hooks;

/* Runs the configured benchmark (or --model_info) and prints the report on `out` (rank 0
 * only). Returns CNNB_OK, or a status whose message, naming what went wrong and where,
 * is in err — except under several ranks, where it is printed on stderr at once
 * ("cnnbench: error: [rank R] ...") before the run is taken apart, and err is empty.
 * Every ctx of the run is a child of `parent`: its flag table (the plugins read their
 * own flags there) and its log settings. */
cnnb_status cnnb_benchmark_run(const cnnb_run_config *cfg, cnnb_ctx *parent, cnnb_loader *loader,
                               FILE *out, char *err, size_t err_size, const cnnb_run_hooks *hooks);

#endif
