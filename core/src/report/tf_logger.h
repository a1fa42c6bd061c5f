/* tf_logger.h — tf_cnn_benchmarks' own --benchmark_log_dir files, as its benchmark logger
 * (TensorFlow models' official/r1/utils/logs/logger.py, BenchmarkFileLogger) writes them,
 * so tools that read those keep working. Written by rank 0 (the files are not named by
 * rank), beside the JSON lines of benchmark_log.h, which drives this module. Host-internal.
 *
 *   DIR/benchmark_run.log  one JSON object and a newline, replaced at each run (as tf's
 *                          "w"): model_name, dataset {name}, machine_config {cpu_info
 *                          {num_cores, cpu_info, mhz_per_cpu}, memory_total,
 *                          memory_available}, test_id, run_date, tensorflow_version,
 *                          tensorflow_environment_variables ([{name, value}] of TF_*),
 *                          run_parameters ([{name, <type>_value}] sorted by name), and
 *                          cnnbench_version;
 *   DIR/metric.log         appended (as tf's "a"), one JSON object a line: name, value,
 *                          unit, global_step, timestamp, extras.
 * Python's json.dump spacing (", " and ": "); timestamps are UTC,
 * "%Y-%m-%dT%H:%M:%S.%fZ". Every line is written whole or not at all (line_file.h). */
#ifndef CNNB_TF_LOGGER_H
#define CNNB_TF_LOGGER_H

#include <stdint.h>
#include <cnnb/ctx.h>

#include "config/run_config.h"
#include "config/run_facts.h"

typedef struct cnnb_tf_logger cnnb_tf_logger;

/* Opens DIR/metric.log for appending (DIR exists: benchmark_log.c made it). */
cnnb_status cnnb_tf_logger_open(cnnb_ctx *ctx, const char *dir, cnnb_tf_logger **out);
void cnnb_tf_logger_close(cnnb_tf_logger *log);

/* benchmark_run.log, from the ready run; a file that cannot be written is CNNB_EIO
 * naming it. */
cnnb_status cnnb_tf_logger_run_info(cnnb_tf_logger *log, const cnnb_run_config *cfg,
                                    const cnnb_run_facts *facts);
/* One metric.log line; a value that is not finite is not written (tf's logger drops a
 * value that is not a number). unit NULL is null; extras are always []. 0, or the errno
 * that kept the line out of the file (which still ends in a whole line): the caller,
 * benchmark_log.c, decides what a lost line means, and names the file from
 * cnnb_tf_logger_metric_path. */
int cnnb_tf_logger_metric(cnnb_tf_logger *log, const char *name, double value, const char *unit,
                          int64_t global_step);
const char *cnnb_tf_logger_metric_path(const cnnb_tf_logger *log);

#endif
