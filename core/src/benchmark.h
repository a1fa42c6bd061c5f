/* benchmark.h — one cnnbench run as its configuration describes it: resolve the four plugins,
 * build the model's graph, set up one replica per device, train (or run forward) for the
 * warm-up and timed steps, and print tf_cnn_benchmarks' report on `out`.
 * Host-internal: the CLI calls it after parsing flags and discovering plugins. */
#ifndef CNNB_BENCHMARK_H
#define CNNB_BENCHMARK_H

#include <stdio.h>
#include "host.h"
#include "loader.h"
#include "run_config.h"

/* Runs the configured benchmark (or --model_info) and prints the report on `out` (rank 0
 * only). Returns CNNB_OK, or a status whose message, naming what went wrong and where,
 * is in err. Every ctx of the run is a child of `parent`: its flag table (the plugins
 * read their own flags there) and its log settings. */
cnnb_status cnnb_benchmark_run(const cnnb_run_config *cfg, cnnb_ctx *parent, cnnb_loader *loader,
                               FILE *out, char *err, size_t err_size);

#endif
