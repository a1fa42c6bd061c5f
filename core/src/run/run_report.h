/* run_report.h — the pieces of tf_cnn_benchmarks' report a run prints from its facts
 * (report/report.h formats them): the header block, the total over every rank, the
 * examples the datasources skipped, and --model_info. Rank 0 passes its `out`, the other
 * ranks NULL: the collective ones still take part. Host-internal. */
#ifndef CNNB_RUN_RUN_REPORT_H
#define CNNB_RUN_RUN_REPORT_H

#include <stdio.h>

#include "run/run.h"

/* The header block, from the configuration and the facts. */
void cnnb_run_print_header(const cnnb_run *run, FILE *out);
/* The total over every rank's images and the slowest rank's seconds of `steps` timed
 * steps (collective), also kept for the benchmark log's summary. A run stopped by a
 * signal (run->interrupted) says so after the number, where tools that read the number
 * still find it: "total images/sec: 312.40 (interrupted by SIGINT after 37 of 1000
 * steps)". */
cnnb_status cnnb_run_print_total(cnnb_run *run, double images, double seconds, int64_t steps,
                                 FILE *out);
/* The datasources' skipped examples summed over replicas and ranks, printed as "skipped
 * N unreadable examples" when N > 0 (collective). */
cnnb_status cnnb_run_print_skipped(cnnb_run *run, FILE *out);
/* fp16 steps whose gradients overflowed (inf/NaN) on this process's first replica,
 * printed as "fp16 gradients overflowed in N of M steps (...)" when N > 0: skipped under
 * --fp16_enable_auto_loss_scale, applied under a static scale. */
void cnnb_run_print_overflows(cnnb_run *run, int64_t steps, FILE *out);
/* --model_info: the model's layers, shapes, parameters and FLOPs (after cnnb_run_open). */
cnnb_status cnnb_run_print_model_info(cnnb_run *run, FILE *out);
/* --graph_file: the same report written to that file, by rank 0 (nothing when not given). */
cnnb_status cnnb_run_write_graph_file(cnnb_run *run);

#endif
