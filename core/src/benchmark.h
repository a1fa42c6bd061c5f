/* benchmark.h — one cnnbench run as the flags describe it: resolve the four plugins,
 * build the model's graph, set up one replica per device, train (or run forward) for the
 * warm-up and timed steps, and print tf_cnn_benchmarks' report on `out`.
 * Host-internal: the CLI calls it after parsing flags and discovering plugins. */
#ifndef CNNB_BENCHMARK_H
#define CNNB_BENCHMARK_H

#include <stdio.h>
#include "host.h"
#include "loader.h"

/* Returns CNNB_OK, or a status whose message (naming what went wrong and where) is in
 * err. Input errors (flags, names, data) come back as CNNB_EINVAL, CNNB_ENOTFOUND,
 * CNNB_EUNSUPPORTED or CNNB_EDATA; everything else is a runtime failure. */
cnnb_status cnnb_benchmark_run(const cnnb_flags *flags, cnnb_loader *loader, FILE *out,
                               char *err, size_t err_size);

#endif
