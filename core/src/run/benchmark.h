/* benchmark.h — one cnnbench run as its configuration describes it: resolve the four plugins,
 * build the model's graph, set up one replica per device, train (or run forward) for the
 * warm-up and timed steps, and print tf_cnn_benchmarks' report on `out`.
 * Host-internal: the CLI calls it after parsing flags and discovering plugins. */
#ifndef CNNB_BENCHMARK_H
#define CNNB_BENCHMARK_H

#include <stdio.h>
#include "flags/flags.h"
#include "loader/loader.h"
#include "config/run_config.h"

typedef struct cnnb_run cnnb_run;

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
 * ("cnnbench: error: [rank R] ...") before the run is taken apart, and err is empty. Every ctx of the run is a child of `parent`: its flag table (the plugins
 * read their own flags there) and its log settings. */
cnnb_status cnnb_benchmark_run(const cnnb_run_config *cfg, cnnb_ctx *parent, cnnb_loader *loader,
                               FILE *out, char *err, size_t err_size,
                               const cnnb_run_hooks *hooks);

/* Pieces of the report the step loops share (rank 0 passes its `out`, the others NULL):
 * the header block; the total over every rank's images and the slowest rank's seconds
 * (collective); the datasources' skipped examples summed over replicas and ranks,
 * printed as "skipped N unreadable examples" when N > 0 (collective). */
void cnnb_run_print_header(const cnnb_run *run, FILE *out);
cnnb_status cnnb_run_print_total(cnnb_run *run, double images, double seconds, FILE *out);
cnnb_status cnnb_run_print_skipped(cnnb_run *run, FILE *out);

/* --input_only's loop (input_only.c): warm-up, then num_batches timed reads of a batch
 * from every replica's datasource through its prefetch, with the usual step lines and
 * total, and no model. */
cnnb_status cnnb_input_only_run(cnnb_run *run, FILE *out);

/* The cnnbench command line with hooks (cli.c); cnnb_main() is it without. */
int cnnb_cli_main(int argc, char **argv, const cnnb_run_hooks *hooks);

#endif
