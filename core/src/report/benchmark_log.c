/* benchmark_log.c — --benchmark_log_dir's JSON lines (benchmark_log.h), built with
 * jansson and written one compact object per line. */
#define _GNU_SOURCE /* gethostname, gnu_get_libc_version */
#include "report/benchmark_log.h"

#include <errno.h>
#include <gnu/libc-version.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#define FILE_PREFIX "benchmark_run.rank"
#define FILE_SUFFIX ".jsonl"
/* Significant digits of a number: 0.9 rather than 0.90000000000000002, and still far more
 * than any measurement here holds (10 microseconds of a Unix time). */
#define REAL_DIGITS 15

struct cnnb_benchmark_log {
  cnnb_ctx *ctx; /* the run's: write failures are reported there */
  FILE *file;
  char *path;
  int32_t rank;
  bool has_total, summarized;
  double images_per_sec, images, seconds;
  int64_t steps;
  json_t *extras; /* the summary's added keys (an object) */
};

/* ---- JSON values ------------------------------------------------------------------- */

/* JSON has no NaN or infinity: a number that is not one is null ("not computed"). */
static json_t *number(double value) { return isfinite(value) ? json_real(value) : json_null(); }

/* A single-precision value (the learning rate, the loss scale) as the shortest decimal
 * that reads back as the same float: 0.005, not the double 0.004999999888241291. */
static json_t *float_number(double value) {
  if (!isfinite(value)) return json_null();
  float f = (float)value;
  char digits[32];
  for (int precision = 1; precision < 9; precision++) {
    snprintf(digits, sizeof digits, "%.*g", precision, (double)f);
    double shortest = strtod(digits, NULL);
    if ((float)shortest == f) return json_real(shortest);
  }
  return json_real((double)f);
}

/* jansson takes UTF-8 only; a path or argument in another encoding keeps its ASCII and
 * shows '?' for the rest rather than losing the whole value. NULL is null. */
static json_t *text(const char *s) {
  if (!s) return json_null();
  json_t *value = json_string(s);
  if (value) return value;
  char *copy = strdup(s);
  if (!copy) return NULL;
  for (char *p = copy; *p; p++)
    if ((unsigned char)*p >= 0x80) *p = '?';
  value = json_string(copy);
  free(copy);
  return value;
}

static json_t *abi_text(uint32_t major, uint32_t minor) {
  char abi[32];
  snprintf(abi, sizeof abi, "%u.%u", (unsigned)major, (unsigned)minor);
  return json_string(abi);
}

static double unix_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A record's common head: kind, time, rank. */
static json_t *new_record(const cnnb_benchmark_log *log, const char *kind) {
  json_t *record = json_object();
  if (!record) return NULL;
  json_object_set_new(record, "record", json_string(kind));
  json_object_set_new(record, "time", json_real(unix_seconds()));
  json_object_set_new(record, "rank", json_integer(log->rank));
  return record;
}

/* One line, whole, flushed at once. Takes the record's reference. */
static cnnb_status write_record(cnnb_benchmark_log *log, json_t *record) {
  size_t flags = JSON_COMPACT | JSON_REAL_PRECISION(REAL_DIGITS);
  char *line = record ? json_dumps(record, flags) : NULL;
  json_decref(record);
  if (!line)
    return cnnb_error(log->ctx, CNNB_ENOMEM, "--benchmark_log_dir: out of memory for a record");
  errno = 0;
  bool ok = fputs(line, log->file) >= 0 && fputc('\n', log->file) != EOF && fflush(log->file) == 0;
  free(line);
  if (!ok)
    return cnnb_error(log->ctx, CNNB_EIO, "--benchmark_log_dir: writing %s failed: %s", log->path,
                      errno ? strerror(errno) : "I/O error");
  return CNNB_OK;
}

/* ---- opening ---------------------------------------------------------------------- */

/* mkdir -p: every missing component of `dir`, in order. */
static cnnb_status make_dirs(cnnb_ctx *ctx, const char *dir) {
  if (!*dir) return cnnb_error(ctx, CNNB_EINVAL, "--benchmark_log_dir: the directory is empty");
  char *path = strdup(dir);
  if (!path) return cnnb_error(ctx, CNNB_ENOMEM, "out of memory");
  cnnb_status st = CNNB_OK;
  for (char *p = path + 1;; p++) {
    if (*p != '/' && *p != '\0') continue;
    char end = *p;
    *p = '\0';
    struct stat sb;
    if (mkdir(path, 0777) != 0 && errno != EEXIST) {
      st = cnnb_error(ctx, CNNB_EIO, "--benchmark_log_dir=%s: cannot create directory %s: %s", dir,
                      path, strerror(errno));
      break;
    }
    if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
      st = cnnb_error(ctx, CNNB_EIO, "--benchmark_log_dir=%s: %s is not a directory", dir, path);
      break;
    }
    *p = end;
    if (!end) break;
  }
  free(path);
  return st;
}

cnnb_status cnnb_benchmark_log_open(cnnb_ctx *ctx, const char *dir, int32_t rank,
                                    cnnb_benchmark_log **out) {
  *out = NULL;
  cnnb_status st = make_dirs(ctx, dir);
  if (st != CNNB_OK) return st;
  cnnb_benchmark_log *log = calloc(1, sizeof *log);
  if (!log || asprintf(&log->path, "%s/" FILE_PREFIX "%d" FILE_SUFFIX, dir, (int)rank) < 0) {
    free(log);
    return cnnb_error(ctx, CNNB_ENOMEM, "out of memory");
  }
  log->ctx = ctx;
  log->rank = rank;
  log->extras = json_object();
  log->file = fopen(log->path, "we"); /* e: not inherited by a plugin's child processes */
  if (!log->file || !log->extras) {
    st = log->file ? cnnb_error(ctx, CNNB_ENOMEM, "out of memory")
                   : cnnb_error(ctx, CNNB_EIO, "--benchmark_log_dir=%s: cannot write %s: %s", dir,
                                log->path, strerror(errno));
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
  if (log->file) fclose(log->file);
  json_decref(log->extras);
  free(log->path);
  free(log);
}

const char *cnnb_benchmark_log_path(const cnnb_benchmark_log *log) { return log ? log->path : ""; }

/* ---- the run record ---------------------------------------------------------------- */

static json_t *flag_value(const cnnb_flag_view *f) {
  switch (f->type) {
    case CNNB_FLAG_BOOL: return json_boolean(f->b);
    case CNNB_FLAG_INT: return json_integer(f->i);
    case CNNB_FLAG_FLOAT: return number(f->f);
    case CNNB_FLAG_STRING: return text(f->s);
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
  for (int i = 0; cfg->argv && i < cfg->argc; i++) json_array_append_new(args, text(cfg->argv[i]));
  return args;
}

/* What the run uses once the plugins answered: the values the report's header shows,
 * and the ones the user left to a plugin, resolved. */
static json_t *resolved(const cnnb_run_config *cfg, const cnnb_run_facts *f) {
  int64_t global = f->global_batch;
  json_t *o = json_object();
  json_object_set_new(o, "model", text(f->model->name));
  json_object_set_new(o, "dataset", text(cfg->dataset->name));
  json_object_set_new(o, "data_dir", *cfg->data_dir ? text(cfg->data_dir) : json_null());
  json_object_set_new(o, "datasource", text(f->datasource->name));
  json_object_set_new(o, "device", text(f->device->name));
  json_object_set_new(o, "strategy", text(f->strategy->name));
  json_object_set_new(o, "mode", text(cnnb_run_config_mode_label(cfg)));
  json_object_set_new(o, "batch_size_per_replica", json_integer(f->batch_size));
  json_object_set_new(o, "global_batch_size", json_integer(global));
  json_object_set_new(o, "replicas_per_rank", json_integer(f->replicas));
  json_object_set_new(o, "ranks", json_integer(f->world.size));
  json_object_set_new(o, "image_size", json_integer(f->image_size));
  json_object_set_new(o, "num_classes", json_integer(f->num_classes));
  json_object_set_new(o, "precision", text(cnnb_precision_name(cfg->precision)));
  json_object_set_new(o, "input_dtype", text(f->input_uint8 ? "uint8" : "float32"));
  json_object_set_new(o, "optimizer",
                      cfg->mode == CNNB_MODE_TRAIN
                          ? text(cnnb_optimizer_rule_name(cfg->trainer.rule))
                          : json_null());
  json_object_set_new(o, "num_batches", json_integer(f->num_batches));
  json_object_set_new(o, "num_warmup_batches", json_integer(cfg->num_warmup_batches));
  json_object_set_new(o, "display_every", json_integer(cfg->display_every));
  int64_t epoch = f->examples_per_epoch; /* 0: the datasource does not know */
  json_object_set_new(o, "examples_per_epoch", epoch > 0 ? json_integer(epoch) : json_null());
  json_object_set_new(o, "num_epochs",
                      epoch > 0 ? number((double)f->num_batches * (double)global / (double)epoch)
                                : json_null());
  return o;
}

/* The first "model name" of /proc/cpuinfo (x86; null where the kernel names none). */
static json_t *cpu_model(void) {
  FILE *f = fopen("/proc/cpuinfo", "re");
  if (!f) return json_null();
  char line[512];
  json_t *model = NULL;
  while (!model && fgets(line, sizeof line, f)) {
    if (strncmp(line, "model name", 10) != 0) continue;
    char *colon = strchr(line, ':');
    if (!colon) continue;
    char *start = colon + 1 + strspn(colon + 1, " \t");
    start[strcspn(start, "\n")] = '\0';
    model = text(start);
  }
  fclose(f);
  return model ? model : json_null();
}

static json_t *machine(void) {
  json_t *o = json_object();
  char host[256] = "";
  if (gethostname(host, sizeof host) != 0) host[0] = '\0';
  host[sizeof host - 1] = '\0';
  json_object_set_new(o, "hostname", *host ? text(host) : json_null());
  struct utsname u;
  bool named = uname(&u) == 0;
  json_object_set_new(o, "os", named ? text(u.sysname) : json_null());
  json_object_set_new(o, "os_release", named ? text(u.release) : json_null());
  json_object_set_new(o, "arch", named ? text(u.machine) : json_null());
  json_object_set_new(o, "cpu_model", cpu_model());
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
  json_object_set_new(o, "name", text(p->name));
  json_object_set_new(o, "plugin", text(p->plugin ? p->plugin->name : NULL));
  json_object_set_new(o, "version", text(p->plugin ? p->plugin->version : NULL));
  json_object_set_new(o, "abi",
                      p->plugin ? abi_text(p->plugin->abi_major, p->plugin->abi_minor)
                                : json_null());
  json_object_set_new(o, "path", text(p->path));
  json_object_set_new(o, "description", text(p->plugin ? p->plugin->description : NULL));
  return o;
}

static json_t *plugins(const cnnb_run_facts *f) {
  json_t *o = json_object();
  json_object_set_new(o, "model", plugin(f->model));
  json_object_set_new(o, "device", plugin(f->device));
  json_object_set_new(o, "strategy", plugin(f->strategy));
  json_object_set_new(o, "datasource", plugin(f->datasource));
  return o;
}

/* Versions known without asking anything that could fail or take time. */
static json_t *libraries(void) {
  json_t *o = json_object();
  json_object_set_new(o, "jansson", json_string(JANSSON_VERSION));
  json_object_set_new(o, "jansson_runtime", text(jansson_version_str()));
  json_object_set_new(o, "glibc", text(gnu_get_libc_version()));
  json_object_set_new(o, "compiler", text(__VERSION__));
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
  json_object_set_new(record, "device_description", text(facts->device_description));
  json_object_set_new(record, "libraries", libraries());
  return write_record(log, record);
}

/* ---- steps, evaluations, checkpoints ---------------------------------------------- */

cnnb_status cnnb_benchmark_log_step_record(cnnb_benchmark_log *log,
                                           const cnnb_benchmark_log_step *s) {
  if (!log) return CNNB_OK;
  json_t *record = new_record(log, "step");
  if (!record) return write_record(log, NULL);
  json_object_set_new(record, "step", json_integer(s->step));
  json_object_set_new(record, "global_step", json_integer(s->global_step));
  json_object_set_new(record, "images_per_sec", number(s->images_per_sec));
  json_object_set_new(record, "images_per_sec_uncertainty", number(s->images_per_sec_uncertainty));
  json_object_set_new(record, "jitter", number(s->jitter));
  json_object_set_new(record, "loss", number(s->loss));
  json_object_set_new(record, "top1", number(s->top1));
  json_object_set_new(record, "top5", number(s->top5));
  json_object_set_new(record, "learning_rate", float_number(s->learning_rate));
  json_object_set_new(record, "loss_scale", float_number(s->loss_scale));
  json_object_set_new(record, "step_seconds", number(s->step_seconds));
  return write_record(log, record);
}

cnnb_status cnnb_benchmark_log_eval(cnnb_benchmark_log *log, int64_t step, double top1, double top5,
                                    int64_t examples) {
  if (!log) return CNNB_OK;
  json_t *record = new_record(log, "eval");
  if (!record) return write_record(log, NULL);
  json_object_set_new(record, "step", json_integer(step));
  json_object_set_new(record, "top1", number(top1));
  json_object_set_new(record, "top5", number(top5));
  json_object_set_new(record, "examples", json_integer(examples));
  return write_record(log, record);
}

cnnb_status cnnb_benchmark_log_checkpoint(cnnb_benchmark_log *log, int64_t step, const char *path,
                                          double seconds) {
  if (!log) return CNNB_OK;
  json_t *record = new_record(log, "checkpoint");
  if (!record) return write_record(log, NULL);
  json_object_set_new(record, "step", json_integer(step));
  json_object_set_new(record, "path", text(path));
  json_object_set_new(record, "seconds", number(seconds));
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
  json_object_set_new(record, "status", text(error ? error : "ok"));
  bool t = log->has_total;
  json_object_set_new(record, "images_per_sec", t ? number(log->images_per_sec) : json_null());
  json_object_set_new(record, "images",
                      t ? json_integer((json_int_t)llround(log->images)) : json_null());
  json_object_set_new(record, "seconds", t ? number(log->seconds) : json_null());
  json_object_set_new(record, "steps", t ? json_integer(log->steps) : json_null());
  json_object_update_missing(record, log->extras); /* the summary's own keys win */
  return write_record(log, record);
}
