/* log_values.h — the JSON values both file logs of --benchmark_log_dir write (the JSON
 * lines of benchmark_log.h, tf_cnn_benchmarks' files of tf_logger.h), and the machine's
 * facts they both record, so each is computed one way. Host-internal. */
#ifndef CNNB_LOG_VALUES_H
#define CNNB_LOG_VALUES_H

#include <jansson.h>

/* JSON has no NaN or infinity: a number that is not one is null ("not computed"). */
json_t *cnnb_log_number(double value);
/* A single-precision value (the learning rate, the loss scale) as the shortest decimal
 * that reads back as the same float: 0.005, not the double 0.004999999888241291. */
json_t *cnnb_log_float_number(double value);
/* jansson takes UTF-8 only; a path or argument in another encoding keeps its ASCII and
 * shows '?' for the rest rather than losing the whole value. NULL is null. */
json_t *cnnb_log_text(const char *s);

/* The first "model name" of /proc/cpuinfo as text (x86; null where the kernel names
 * none). */
json_t *cnnb_log_cpu_model(void);
/* The first "cpu MHz" of /proc/cpuinfo (the first core's clock as the kernel last saw
 * it), or null. */
json_t *cnnb_log_cpu_mhz(void);
/* /proc/meminfo's line `key` ("MemTotal", "MemAvailable") in bytes, or null. */
json_t *cnnb_log_meminfo_bytes(const char *key);

#endif
