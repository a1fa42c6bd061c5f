/* tf_logger.c — tf_cnn_benchmarks' benchmark_run.log and metric.log (tf_logger.h). */
#define _GNU_SOURCE /* asprintf */
#include "report/tf_logger.h"

#include "report/json_line.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/line_file.h"
#include "base/output_file.h"
#include "report/log_values.h"

#define RUN_FILE "benchmark_run.log"
#define METRIC_FILE "metric.log"
/* As the JSON lines (benchmark_log.c): 0.9, not 0.90000000000000002. */
#define REAL_DIGITS 15

extern char **environ;

struct cnnb_tf_logger {
  cnnb_ctx *ctx;
  char *dir, *metric_path;
  cnnb_line_file *metrics;
};

/* datetime.utcnow().strftime("%Y-%m-%dT%H:%M:%S.%fZ"). */
static json_t *utc_timestamp(void) {
  double now = cnnb_unix_seconds();
  time_t seconds = (time_t)floor(now);
  long micros = (long)((now - (double)seconds) * 1e6);
  if (micros > 999999) micros = 999999;
  struct tm tm;
  char date[32], text[80];
  if (!gmtime_r(&seconds, &tm) || !strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm))
    return json_null();
  snprintf(text, sizeof text, "%s.%06ldZ", date, micros);
  return json_string(text);
}

/* json.dump's layout (not compact) as one whole line; takes the reference. */
static int write_json(cnnb_line_file *f, json_t *value) {
  return cnnb_json_line_write(f, value, JSON_REAL_PRECISION(REAL_DIGITS));
}

cnnb_status cnnb_tf_logger_open(cnnb_ctx *ctx, const char *dir, cnnb_tf_logger **out) {
  *out = NULL;
  cnnb_tf_logger *log = calloc(1, sizeof *log);
  if (!log || !(log->dir = strdup(dir)) ||
      asprintf(&log->metric_path, "%s/" METRIC_FILE, dir) < 0) {
    if (log) free(log->dir);
    free(log);
    return cnnb_error(ctx, CNNB_ENOMEM, "out of memory");
  }
  log->ctx = ctx;
  log->metrics = cnnb_line_file_open(log->metric_path, true); /* appended, as tf's logger */
  if (!log->metrics) {
    cnnb_status st = cnnb_error(ctx, CNNB_EIO, "--benchmark_log_dir=%s: cannot write %s: %s", dir,
                                log->metric_path, cnnb_output_strerror(errno));
    cnnb_tf_logger_close(log);
    return st;
  }
  *out = log;
  return CNNB_OK;
}

void cnnb_tf_logger_close(cnnb_tf_logger *log) {
  if (!log) return;
  cnnb_line_file_close(log->metrics);
  free(log->metric_path);
  free(log->dir);
  free(log);
}

int cnnb_tf_logger_metric(cnnb_tf_logger *log, const char *name, double value, const char *unit,
                          int64_t global_step) {
  if (!log || !isfinite(value)) return 0;
  json_t *m = json_object();
  if (m) {
    json_object_set_new(m, "name", json_string(name));
    json_object_set_new(m, "value", json_real(value));
    json_object_set_new(m, "unit", unit ? json_string(unit) : json_null());
    json_object_set_new(m, "global_step", json_integer(global_step));
    json_object_set_new(m, "timestamp", utc_timestamp());
    json_object_set_new(m, "extras", json_array());
  }
  return write_json(log->metrics, m);
}

const char *cnnb_tf_logger_metric_path(const cnnb_tf_logger *log) {
  return log ? log->metric_path : "";
}

/* ---- benchmark_run.log ---------------------------------------------------------- */

/* _collect_run_params' entries: {"name": n, "<type>_value": v}. */
static void param(json_t *list, const char *name, const char *type, json_t *value) {
  char key[32];
  snprintf(key, sizeof key, "%s_value", type);
  json_t *p = json_object();
  json_object_set_new(p, "name", json_string(name));
  json_object_set_new(p, key, value);
  json_array_append_new(list, p);
}

/* tf_cnn_benchmarks' run_param (benchmark_cnn.py, _log_benchmark_run), with this run's
 * values, sorted by name as the logger sorts them. tf's TensorFlow-only entries
 * (single_sess, rewrite_config, session_config) are left out. */
static json_t *run_parameters(const cnnb_run_config *cfg, const cnnb_run_facts *f) {
  json_t *list = json_array();
  param(list, "batch_size", "long", json_integer((json_int_t)f->process_batch));
  param(list, "batch_size_per_device", "long", json_integer(f->batch_size));
  param(list, "data_format", "string", cnnb_log_text(cfg->data_format));
  param(list, "dataset", "string", cnnb_log_text(cfg->dataset->name));
  /* str() of tf's device list: the report's "Devices:" line. */
  size_t size = 0;
  char *devices = NULL;
  FILE *s = open_memstream(&devices, &size);
  if (s) {
    fputc('[', s);
    for (int32_t i = 0; i < f->replicas; i++)
      fprintf(s, "%s'/%s:%d'", i ? ", " : "", f->device.name, (int)i);
    fputc(']', s);
    fclose(s);
  }
  param(list, "devices", "string", cnnb_log_text(devices ? devices : "[]"));
  free(devices);
  param(list, "mode", "string", cnnb_log_text(cnnb_run_mode_name(cfg->mode)));
  param(list, "model", "string", cnnb_log_text(f->model.name));
  param(list, "num_batches", "long", json_integer(f->num_batches));
  if (f->examples_per_epoch > 0)
    param(list, "num_epochs", "float",
          json_real((double)f->num_batches * (double)f->global_batch /
                    (double)f->examples_per_epoch));
  param(list, "optimizer", "string", cnnb_log_text(cnnb_optimizer_rule_name(cfg->trainer.rule)));
  return list;
}

static int by_name(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* _collect_tensorflow_environment_variables: TF_* of the environment, sorted. */
static json_t *tf_environment(void) {
  json_t *list = json_array();
  size_t n = 0;
  for (char **e = environ; e && *e; e++) n += strncmp(*e, "TF_", 3) == 0;
  const char **found = calloc(n ? n : 1, sizeof *found);
  if (!found) return list;
  n = 0;
  for (char **e = environ; e && *e; e++)
    if (strncmp(*e, "TF_", 3) == 0) found[n++] = *e;
  qsort(found, n, sizeof *found, by_name);
  for (size_t i = 0; i < n; i++) {
    const char *eq = strchr(found[i], '=');
    if (!eq) continue;
    char *name = strndup(found[i], (size_t)(eq - found[i]));
    json_t *v = json_object();
    json_object_set_new(v, "name", cnnb_log_text(name));
    json_object_set_new(v, "value", cnnb_log_text(eq + 1));
    json_array_append_new(list, v);
    free(name);
  }
  free(found);
  return list;
}

static json_t *machine_config(void) {
  json_t *cpu = json_object();
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  json_object_set_new(cpu, "num_cores", cores > 0 ? json_integer(cores) : json_null());
  json_object_set_new(cpu, "cpu_info", cnnb_log_cpu_model());
  json_object_set_new(cpu, "mhz_per_cpu", cnnb_log_cpu_mhz());
  json_t *o = json_object();
  json_object_set_new(o, "cpu_info", cpu);
  json_object_set_new(o, "memory_total", cnnb_log_meminfo_bytes("MemTotal"));
  json_object_set_new(o, "memory_available", cnnb_log_meminfo_bytes("MemAvailable"));
  return o;
}

cnnb_status cnnb_tf_logger_run_info(cnnb_tf_logger *log, const cnnb_run_config *cfg,
                                    const cnnb_run_facts *facts) {
  if (!log) return CNNB_OK;
  char *path = NULL;
  if (asprintf(&path, "%s/" RUN_FILE, log->dir) < 0)
    return cnnb_error(log->ctx, CNNB_ENOMEM, "out of memory");
  json_t *info = json_object();
  if (info) {
    json_object_set_new(info, "model_name", cnnb_log_text(facts->model.name));
    json_object_set_new(info, "dataset",
                        json_pack("{s:o}", "name", cnnb_log_text(cfg->dataset->name)));
    json_object_set_new(info, "machine_config", machine_config());
    json_object_set_new(info, "test_id",
                        *cfg->benchmark_test_id ? cnnb_log_text(cfg->benchmark_test_id)
                                                : json_null());
    json_object_set_new(info, "run_date", utc_timestamp());
    /* Not TensorFlow: the key stays for its readers, naming what ran instead. */
    json_object_set_new(info, "tensorflow_version",
                        json_pack("{s:s, s:n}", "version", "cnnbench " CNNB_VERSION_STRING,
                                  "git_hash"));
    json_object_set_new(info, "tensorflow_environment_variables", tf_environment());
    json_object_set_new(info, "run_parameters", run_parameters(cfg, facts));
    json_object_set_new(info, "cnnbench_version", json_string(CNNB_VERSION_STRING));
  }
  cnnb_line_file *f = cnnb_line_file_open(path, false); /* replaced, as tf's logger does */
  int e = f ? write_json(f, info) : errno;
  if (!f) json_decref(info);
  int closed = cnnb_line_file_close(f);
  if (!e) e = closed;
  cnnb_status st = CNNB_OK;
  if (e)
    st = cnnb_error(log->ctx, e == ENOMEM ? CNNB_ENOMEM : CNNB_EIO,
                    "--benchmark_log_dir=%s: cannot write %s: %s", log->dir, path,
                    cnnb_output_strerror(e));
  free(path);
  return st;
}
