/* benchmark_log.c — --benchmark_log_dir's JSON lines (benchmark_log.h), built with
 * jansson and written one compact object per line, each whole or not at all
 * (line_file.h). */
#define _GNU_SOURCE /* gethostname, gnu_get_libc_version */
#include "report/benchmark_log.h"

#include <errno.h>
#include <gnu/libc-version.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/dirs.h"
#include "base/line_file.h"
#include "base/output_file.h"
#include "report/json_line.h"
#include "report/log_values.h"
#include "report/tf_logger.h"

#define FILE_PREFIX "benchmark_run."
#define FILE_SUFFIX ".jsonl"
/* Significant digits of a number: 0.9 rather than 0.90000000000000002, and still far more
 * than any measurement here holds (10 microseconds of a Unix time). */
#define REAL_DIGITS 15

struct cnnb_benchmark_log {
  cnnb_ctx *ctx; /* the run's: write failures are reported there */
  cnnb_line_file *file;
  char *path;
  /* Set once the run record is written: from then on a line that cannot be written stops
   * the log (every file of DIR), with one warning, and not the run. */
  bool running;
  int stopped;        /* the errno that stopped the log; 0 while it is written */
  bool warned;        /* stopped while running: said as a warning, said again at the end */
  char *stopped_path; /* the file that could not be written */
  int64_t lost;       /* this file's records not written since (the failed one included) */
  int32_t rank;
  bool has_total, summarized;
  double images_per_sec, images, seconds;
  int64_t steps;
  json_t *extras;     /* the summary's added keys (an object) */
  cnnb_tf_logger *tf; /* rank 0: tf_cnn_benchmarks' own files (tf_logger.h); else NULL */
  bool eval_mode;     /* from the run record: --eval's total is tf's eval_* metric */
  int64_t start_step; /* from the run record: the checkpoint --eval evaluates */
};

/* ---- JSON values ------------------------------------------------------------------- */

static json_t *abi_text(uint32_t major, uint32_t minor) {
  char abi[32];
  snprintf(abi, sizeof abi, "%u.%u", (unsigned)major, (unsigned)minor);
  return json_string(abi);
}

/* A record's common head: kind, time, rank. */
static json_t *new_record(const cnnb_benchmark_log *log, const char *kind) {
  json_t *record = json_object();
  if (!record) return NULL;
  json_object_set_new(record, "record", json_string(kind));
  json_object_set_new(record, "time", json_real(cnnb_unix_seconds()));
  json_object_set_new(record, "rank", json_integer(log->rank));
  return record;
}

/* A line that did not go into `path` (errno `e`; 0: it did). Before the first step it is
 * the run's error, as an unwritable DIR is; after it, the log stops and the run goes on:
 * a full disk under the log should not cost the training (and its checkpoints) it is
 * only recording. Said once here, and once more with the count at the summary. */
static cnnb_status written(cnnb_benchmark_log *log, const char *path, int e, bool own_record) {
  if (e == 0) return CNNB_OK;
  log->stopped = e; /* either way, nothing more is tried: the error or warning said why */
  if (!log->running)
    return cnnb_error(log->ctx, e == ENOMEM ? CNNB_ENOMEM : CNNB_EIO,
                      "--benchmark_log_dir: cannot write %s: %s", path, strerror(e));
  log->warned = true;
  log->stopped_path = strdup(path);
  if (own_record) log->lost++;
  cnnb_log(log->ctx, CNNB_LOG_WARN,
           "--benchmark_log_dir: cannot write %s (%s): the log stops here, the run goes on", path,
           strerror(e));
  return CNNB_OK;
}

/* One line, whole or not at all: formatted in memory with its newline, then one write
 * (line_file.h). Takes the record's reference. */
static cnnb_status write_record(cnnb_benchmark_log *log, json_t *record) {
  if (log->stopped) {
    json_decref(record);
    log->lost++;
    return CNNB_OK;
  }
  int e = cnnb_json_line_write(log->file, record, JSON_COMPACT | JSON_REAL_PRECISION(REAL_DIGITS));
  return written(log, log->path, e, true);
}

/* One metric.log line (rank 0), under the same rule as the JSON lines. */
static cnnb_status write_metric(cnnb_benchmark_log *log, const char *name, double value,
                                int64_t step) {
  if (!log->tf || log->stopped) return CNNB_OK;
  int e = cnnb_tf_logger_metric(log->tf, name, value, NULL, step);
  return written(log, cnnb_tf_logger_metric_path(log->tf), e, false);
}

/* ---- opening ---------------------------------------------------------------------- */

cnnb_status cnnb_benchmark_log_open(cnnb_ctx *ctx, const char *dir, const char *job_tag,
                                    int32_t rank, cnnb_benchmark_log **out) {
  *out = NULL;
  char label[64 + PATH_MAX];
  snprintf(label, sizeof label, "--benchmark_log_dir=%s", dir);
  cnnb_status st = cnnb_make_dirs(ctx, *dir ? label : "--benchmark_log_dir", dir);
  if (st != CNNB_OK) return st;
  cnnb_benchmark_log *log = calloc(1, sizeof *log);
  bool tagged = job_tag && *job_tag;
  if (!log || asprintf(&log->path, "%s/" FILE_PREFIX "%s%srank%d" FILE_SUFFIX, dir,
                       tagged ? job_tag : "", tagged ? "." : "", (int)rank) < 0) {
    free(log);
    return cnnb_error(ctx, CNNB_ENOMEM, "out of memory");
  }
  log->ctx = ctx;
  log->rank = rank;
  log->extras = json_object();
  log->file = cnnb_line_file_open(log->path, false);
  if (log->file && log->extras && rank == 0 &&
      (st = cnnb_tf_logger_open(ctx, dir, &log->tf)) != CNNB_OK) {
    log->summarized = true;
    cnnb_benchmark_log_close(log);
    return st;
  }
  if (!log->file || !log->extras) {
    st = log->file ? cnnb_error(ctx, CNNB_ENOMEM, "out of memory")
                   : cnnb_error(ctx, CNNB_EIO, "--benchmark_log_dir=%s: cannot write %s: %s", dir,
                                log->path, cnnb_output_strerror(errno));
    log->summarized = true; /* nothing to close with */
    cnnb_benchmark_log_close(log);
    return st;
  }
  *out = log;
  return CNNB_OK;
}

void cnnb_benchmark_log_close(cnnb_benchmark_log *log) {
  if (!log) return;
  if (!log->summarized) (void)cnnb_benchmark_log_summary(log, "closed before the run ended");
  cnnb_line_file_close(log->file);
  cnnb_tf_logger_close(log->tf);
  json_decref(log->extras);
  free(log->stopped_path);
  free(log->path);
  free(log);
}

const char *cnnb_benchmark_log_path(const cnnb_benchmark_log *log) { return log ? log->path : ""; }

/* ---- the run record ---------------------------------------------------------------- */

static json_t *flag_value(const cnnb_flag_view *f) {
  switch (f->type) {
    case CNNB_FLAG_BOOL: return json_boolean(f->b);
    case CNNB_FLAG_INT: return json_integer(f->i);
    case CNNB_FLAG_FLOAT: return cnnb_log_number(f->f);
    case CNNB_FLAG_STRING: return cnnb_log_text(f->s);
  }
  return json_null();
}

/* "flags": the core's, by name; "plugin_flags": each plugin's, by plugin then name;
 * "flags_set": the names given on the command line. */
static void add_flags(json_t *record, const cnnb_flags *flags) {
  json_t *core = json_object(), *plugins = json_object(), *set = json_array();
  cnnb_flag_view f;
  for (size_t i = 0; cnnb_flags_at(flags, i, &f); i++) {
    json_t *group = core;
    if (f.plugin && !(group = json_object_get(plugins, f.group))) {
      group = json_object();
      json_object_set_new(plugins, f.group, group);
    }
    json_object_set_new(group, f.name, flag_value(&f));
    if (f.is_set) json_array_append_new(set, json_string(f.name));
  }
  json_object_set_new(record, "flags", core);
  json_object_set_new(record, "plugin_flags", plugins);
  json_object_set_new(record, "flags_set", set);
}

static json_t *command_line(const cnnb_run_config *cfg) {
  json_t *args = json_array();
  for (int i = 0; cfg->argv && i < cfg->argc; i++)
    json_array_append_new(args, cnnb_log_text(cfg->argv[i]));
  return args;
}

/* What the run uses once the plugins answered: the values the report's header shows,
 * and the ones the user left to a plugin, resolved. */
static json_t *resolved(const cnnb_run_config *cfg, const cnnb_run_facts *f) {
  int64_t global = f->global_batch;
  json_t *o = json_object();
  json_object_set_new(o, "model", cnnb_log_text(f->model.name));
  json_object_set_new(o, "dataset", cnnb_log_text(cfg->dataset->name));
  json_object_set_new(o, "data_dir", *cfg->data_dir ? cnnb_log_text(cfg->data_dir) : json_null());
  json_object_set_new(o, "datasource", cnnb_log_text(f->datasource.name));
  json_object_set_new(o, "device", cnnb_log_text(f->device.name));
  json_object_set_new(o, "strategy", cnnb_log_text(f->strategy.name));
  json_object_set_new(o, "mode", cnnb_log_text(cnnb_run_config_mode_label(cfg)));
  json_object_set_new(o, "batch_size_per_replica", json_integer(f->batch_size));
  json_object_set_new(o, "global_batch_size", json_integer(global));
  json_object_set_new(o, "replicas_per_rank", json_integer(f->replicas));
  json_object_set_new(o, "ranks", json_integer(f->world.size));
  json_object_set_new(o, "image_size", json_integer(f->image_size));
  json_object_set_new(o, "num_classes", json_integer(f->num_classes));
  json_object_set_new(o, "precision", cnnb_log_text(cnnb_precision_name(cfg->precision)));
  json_object_set_new(o, "input_dtype", cnnb_log_text(f->input_uint8 ? "uint8" : "float32"));
  json_object_set_new(o, "optimizer",
                      cfg->mode == CNNB_MODE_TRAIN
                          ? cnnb_log_text(cnnb_optimizer_rule_name(cfg->trainer.rule))
                          : json_null());
  json_object_set_new(o, "num_batches", json_integer(f->num_batches));
  json_object_set_new(o, "num_warmup_batches", json_integer(cfg->num_warmup_batches));
  json_object_set_new(o, "display_every", json_integer(cfg->display_every));
  int64_t epoch = f->examples_per_epoch; /* 0: the datasource does not know */
  json_object_set_new(o, "examples_per_epoch", epoch > 0 ? json_integer(epoch) : json_null());
  json_object_set_new(o, "num_epochs",
                      epoch > 0
                          ? cnnb_log_number((double)f->num_batches * (double)global / (double)epoch)
                          : json_null());
  return o;
}

static json_t *machine(void) {
  json_t *o = json_object();
  char host[256] = "";
  if (gethostname(host, sizeof host) != 0) host[0] = '\0';
  host[sizeof host - 1] = '\0';
  json_object_set_new(o, "hostname", *host ? cnnb_log_text(host) : json_null());
  struct utsname u;
  bool named = uname(&u) == 0;
  json_object_set_new(o, "os", named ? cnnb_log_text(u.sysname) : json_null());
  json_object_set_new(o, "os_release", named ? cnnb_log_text(u.release) : json_null());
  json_object_set_new(o, "arch", named ? cnnb_log_text(u.machine) : json_null());
  json_object_set_new(o, "cpu_model", cnnb_log_cpu_model());
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  json_object_set_new(o, "logical_cores", cores > 0 ? json_integer(cores) : json_null());
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  json_object_set_new(o, "memory_bytes",
                      pages > 0 && page > 0 ? json_integer((json_int_t)pages * page) : json_null());
  json_object_set_new(o, "pid", json_integer(getpid()));
  return o;
}

static json_t *plugin(const cnnb_bound_plugin *p) {
  json_t *o = json_object();
  json_object_set_new(o, "name", cnnb_log_text(p->name));
  json_object_set_new(o, "plugin", cnnb_log_text(p->plugin ? p->plugin->name : NULL));
  json_object_set_new(o, "version", cnnb_log_text(p->plugin ? p->plugin->version : NULL));
  json_object_set_new(o, "abi",
                      p->plugin ? abi_text(p->plugin->abi_major, p->plugin->abi_minor)
                                : json_null());
  json_object_set_new(o, "path", cnnb_log_text(p->path));
  json_object_set_new(o, "description", cnnb_log_text(p->plugin ? p->plugin->description : NULL));
  return o;
}

static json_t *plugins(const cnnb_run_facts *f) {
  json_t *o = json_object();
  json_object_set_new(o, "model", plugin(&f->model));
  json_object_set_new(o, "device", plugin(&f->device));
  json_object_set_new(o, "strategy", plugin(&f->strategy));
  json_object_set_new(o, "datasource", plugin(&f->datasource));
  return o;
}

/* Versions known without asking anything that could fail or take time. */
static json_t *libraries(void) {
  json_t *o = json_object();
  json_object_set_new(o, "jansson", json_string(JANSSON_VERSION));
  json_object_set_new(o, "jansson_runtime", cnnb_log_text(jansson_version_str()));
  json_object_set_new(o, "glibc", cnnb_log_text(gnu_get_libc_version()));
  json_object_set_new(o, "compiler", cnnb_log_text(__VERSION__));
  return o;
}

cnnb_status cnnb_benchmark_log_run(cnnb_benchmark_log *log, const cnnb_run_config *cfg,
                                   const cnnb_run_facts *facts, const cnnb_flags *flags) {
  if (!log) return CNNB_OK;
  json_t *record = new_record(log, "run");
  if (!record) return write_record(log, NULL);
  json_object_set_new(record, "cnnbench_version", json_string(CNNB_VERSION_STRING));
  json_object_set_new(record, "abi", abi_text(CNNB_ABI_MAJOR, CNNB_ABI_MINOR));
  json_object_set_new(record, "command_line", command_line(cfg));
  add_flags(record, flags);
  json_object_set_new(record, "resolved", resolved(cfg, facts));
  json_object_set_new(record, "machine", machine());
  json_object_set_new(record, "plugins", plugins(facts));
  json_object_set_new(record, "device_description", cnnb_log_text(facts->device_description));
  json_object_set_new(record, "libraries", libraries());
  cnnb_status st = write_record(log, record);
  log->eval_mode = cfg->mode == CNNB_MODE_EVAL;
  log->start_step = facts->start_step;
  if (st == CNNB_OK) st = cnnb_tf_logger_run_info(log->tf, cfg, facts);
  log->running = st == CNNB_OK;
  return st;
}

/* ---- steps, evaluations, checkpoints ---------------------------------------------- */

cnnb_status cnnb_benchmark_log_step_record(cnnb_benchmark_log *log,
                                           const cnnb_benchmark_log_step *s) {
  if (!log) return CNNB_OK;
  json_t *record = new_record(log, "step");
  if (!record) return write_record(log, NULL);
  json_object_set_new(record, "step", json_integer(s->step));
  json_object_set_new(record, "global_step", json_integer(s->global_step));
  json_object_set_new(record, "images_per_sec", cnnb_log_number(s->images_per_sec));
  json_object_set_new(record, "images_per_sec_uncertainty",
                      cnnb_log_number(s->images_per_sec_uncertainty));
  json_object_set_new(record, "jitter", cnnb_log_number(s->jitter));
  json_object_set_new(record, "loss", cnnb_log_number(s->loss));
  json_object_set_new(record, "top1", cnnb_log_number(s->top1));
  json_object_set_new(record, "top5", cnnb_log_number(s->top5));
  json_object_set_new(record, "learning_rate", cnnb_log_float_number(s->learning_rate));
  json_object_set_new(record, "loss_scale", cnnb_log_float_number(s->loss_scale));
  json_object_set_new(record, "step_seconds", cnnb_log_number(s->step_seconds));
  cnnb_status st = write_record(log, record);
  /* tf_cnn_benchmarks' benchmark_one_step: at its 1-based step, not the global step. */
  if (st == CNNB_OK) st = write_metric(log, "current_examples_per_sec", s->images_per_sec, s->step);
  if (st == CNNB_OK) st = write_metric(log, "top_1_accuracy", s->top1, s->step);
  if (st == CNNB_OK) st = write_metric(log, "top_5_accuracy", s->top5, s->step);
  return st;
}

cnnb_status cnnb_benchmark_log_eval(cnnb_benchmark_log *log, int64_t step, int64_t global_step,
                                    double top1, double top5, int64_t examples) {
  if (!log) return CNNB_OK;
  json_t *record = new_record(log, "eval");
  if (!record) return write_record(log, NULL);
  json_object_set_new(record, "step", json_integer(step));
  json_object_set_new(record, "global_step", json_integer(global_step));
  json_object_set_new(record, "top1", cnnb_log_number(top1));
  json_object_set_new(record, "top5", cnnb_log_number(top5));
  json_object_set_new(record, "examples", json_integer(examples));
  cnnb_status st = write_record(log, record);
  /* The eval_results tf_cnn_benchmarks' _eval_once means to log (its set literal makes
   * the logger drop them: here they are written as meant). */
  if (st == CNNB_OK) st = write_metric(log, "eval_top_1_accuracy", top1, global_step);
  if (st == CNNB_OK) st = write_metric(log, "eval_top_5_accuracy", top5, global_step);
  return st;
}

cnnb_status cnnb_benchmark_log_checkpoint(cnnb_benchmark_log *log, int64_t step, const char *path,
                                          double seconds) {
  if (!log) return CNNB_OK;
  json_t *record = new_record(log, "checkpoint");
  if (!record) return write_record(log, NULL);
  json_object_set_new(record, "step", json_integer(step));
  json_object_set_new(record, "path", cnnb_log_text(path));
  json_object_set_new(record, "seconds", cnnb_log_number(seconds));
  return write_record(log, record);
}

/* ---- the summary -------------------------------------------------------------------- */

void cnnb_benchmark_log_total(cnnb_benchmark_log *log, double images_per_sec, double images,
                              double seconds, int64_t steps) {
  if (!log) return;
  log->has_total = true;
  log->images_per_sec = images_per_sec;
  log->images = images;
  log->seconds = seconds;
  log->steps = steps;
}

cnnb_status cnnb_benchmark_log_summary_extras(cnnb_benchmark_log *log, json_t *extras) {
  if (!log) return CNNB_OK;
  if (!json_is_object(extras))
    return cnnb_error(log->ctx, CNNB_EINVAL, "benchmark log: summary extras must be a JSON object");
  if (json_object_update(log->extras, extras) != 0)
    return cnnb_error(log->ctx, CNNB_ENOMEM, "out of memory");
  return CNNB_OK;
}

cnnb_status cnnb_benchmark_log_summary(cnnb_benchmark_log *log, const char *error) {
  if (!log || log->summarized) return CNNB_OK;
  log->summarized = true;
  json_t *record = new_record(log, "summary");
  if (!record) return write_record(log, NULL);
  json_object_set_new(record, "status", cnnb_log_text(error ? error : "ok"));
  bool t = log->has_total;
  json_object_set_new(record, "images_per_sec",
                      t ? cnnb_log_number(log->images_per_sec) : json_null());
  json_object_set_new(record, "images",
                      t ? json_integer((json_int_t)llround(log->images)) : json_null());
  json_object_set_new(record, "seconds", t ? cnnb_log_number(log->seconds) : json_null());
  json_object_set_new(record, "steps", t ? json_integer(log->steps) : json_null());
  json_object_update_missing(record, log->extras); /* the summary's own keys win */
  cnnb_status st = write_record(log, record);
  /* The run's average: training's at its last step (tf's average_examples_per_sec),
   * --eval's at the checkpoint's step. */
  if (st == CNNB_OK && t && !error)
    st = log->eval_mode
             ? write_metric(log, "eval_average_examples_per_sec", log->images_per_sec,
                            log->start_step)
             : write_metric(log, "average_examples_per_sec", log->images_per_sec, log->steps);
  /* The log's end: the warning once more, now that its cost is known, so it is not lost
   * among the step lines printed since. */
  if (log->warned)
    cnnb_log(log->ctx, CNNB_LOG_WARN,
             "--benchmark_log_dir: the log stopped at %s (%s): %lld record%s of %s not "
             "written; %s",
             log->stopped_path ? log->stopped_path : log->path, strerror(log->stopped),
             (long long)log->lost, log->lost == 1 ? "" : "s", log->path,
             cnnb_line_file_torn(log->file) ? "its last line is torn (it could not be cut off)"
                                            : "each file ends with its last whole line");
  return st;
}
