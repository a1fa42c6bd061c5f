/* tf_flags.c — tf_cnn_benchmarks' flags that do nothing here, or that are refused, made
 * known to the flag table, and what a run says when they are given (tf_flags.h). The
 * rows themselves are tf_flags.tsv's, in the table the build generates. */
#define _POSIX_C_SOURCE 200809L
#include "config/tf_flags.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/host_ctx.h"

/* tf's distributed mode: its processes and how they find each other. */
static const char *const distributed[] = {
    "job_name",        "task_index",      "ps_hosts", "worker_hosts",
    "controller_host", "server_protocol", NULL};

static bool is_distributed(const char *name) {
  for (size_t i = 0; distributed[i]; i++)
    if (strcmp(distributed[i], name) == 0) return true;
  return false;
}

const cnnb_tf_flag *cnnb_tf_flag_find(const char *name) {
  for (size_t i = 0; name && i < cnnb_tf_flags_count; i++)
    if (strcmp(cnnb_tf_flags[i].name, name) == 0) return &cnnb_tf_flags[i];
  return NULL;
}

/* A row declared here: tf's booleans stay booleans (--xla, --noxla); every other value
 * is kept as text, since nothing here reads it. */
static cnnb_status declare_row(cnnb_flag_registry *r, const cnnb_tf_flag *f, const char *why) {
  bool boolean = strcmp(f->tf_type, "boolean") == 0;
  bool none = strcmp(f->tf_default, "None") == 0;
  const char *def = boolean ? (strcmp(f->tf_default, "true") == 0 ? "true" : "false")
                            : (none ? "" : f->tf_default);
  char help[768];
  snprintf(help, sizeof help, "tf_cnn_benchmarks' flag (default %s there). %s: %s.", f->tf_default,
           why, f->note);
  cnnb_status st = cnnb_flag_declare(r, f->name, boolean ? CNNB_FLAG_BOOL : CNNB_FLAG_STRING, def,
                                     help);
  /* Nothing reads them, so they cannot make ranks compute differently; and tf's own
   * distributed flags differ per process by nature (--task_index, --job_name). */
  return st == CNNB_OK ? cnnb_flag_mark_per_rank(r, f->name) : st;
}

cnnb_status cnnb_tf_flags_declare(cnnb_flags *flags) {
  cnnb_flag_registry *r = cnnb_flags_theme_registry(flags, CNNB_TF_FLAGS_THEME);
  if (!r) return CNNB_ENOMEM;
  for (size_t i = 0; i < cnnb_tf_flags_count; i++) {
    const cnnb_tf_flag *f = &cnnb_tf_flags[i];
    if (f->status == CNNB_TF_HONOURED) continue;
    cnnb_status st = declare_row(r, f, f->status == CNNB_TF_REFUSED ? "Refused" : "No effect here");
    if (st != CNNB_OK) return st;
  }
  return CNNB_OK;
}

cnnb_status cnnb_tf_flags_declare_unserved(cnnb_flags *flags) {
  cnnb_flag_registry *r = cnnb_flags_theme_registry(flags, CNNB_TF_FLAGS_THEME);
  if (!r) return CNNB_ENOMEM;
  for (size_t i = 0; i < cnnb_tf_flags_count; i++) {
    const cnnb_tf_flag *f = &cnnb_tf_flags[i];
    if (f->status != CNNB_TF_HONOURED || cnnb_flags_declared(flags, f->name)) continue;
    cnnb_status st = declare_row(r, f, "No effect here: the plugin that reads it is not installed");
    if (st != CNNB_OK) return st;
  }
  return CNNB_OK;
}

/* ---- tf's distributed mode, as one mpirun ---------------------------------------- */

/* Entries of a comma-separated host list ("h1:2222,h2:2222"). */
static int count_hosts(const char *list) {
  int n = 0;
  for (const char *p = list; p && *p;) {
    const char *comma = strchr(p, ',');
    size_t len = comma ? (size_t)(comma - p) : strlen(p);
    if (len) n++;
    p = comma ? comma + 1 : p + len;
  }
  return n;
}

/* Appends s to out as one shell word (single-quoted when it needs to be). */
static size_t append_word(char *out, size_t len, size_t size, const char *s) {
  if (len >= size) return len;
  bool plain = *s != '\0';
  for (const char *p = s; *p && plain; p++)
    plain = strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=./,:@%+", *p);
  if (plain) return len + (size_t)snprintf(out + len, size - len, " %s", s);
  len += (size_t)snprintf(out + len, size - len, " '");
  for (const char *p = s; *p && len < size; p++)
    len += (size_t)snprintf(out + len, size - len, *p == '\'' ? "'\\''" : "%c", *p);
  if (len < size) len += (size_t)snprintf(out + len, size - len, "'");
  return len;
}

/* Splits "--name=value" into its name (copied) and whether a value was attached. */
static bool flag_name(const char *arg, char *name, size_t size, bool *has_value) {
  if (!arg || arg[0] != '-' || !arg[1]) return false;
  const char *p = arg + (arg[1] == '-' ? 2 : 1);
  size_t len = strcspn(p, "=");
  if (len >= size) len = size - 1;
  memcpy(name, p, len);
  name[len] = '\0';
  *has_value = p[strcspn(p, "=")] == '=';
  return true;
}

/* tf's --variable_update in distributed mode, as a strategy here runs it across ranks. */
static const char *mpi_strategy(const char *tf) {
  if (strcmp(tf, "distributed_replicated") == 0 || strcmp(tf, "distributed_all_reduce") == 0 ||
      strcmp(tf, "collective_all_reduce") == 0)
    return "replicated";
  return tf;
}

static cnnb_status refuse_distributed(const cnnb_flags *flags, int argc, char *const *argv,
                                      char *err, size_t size) {
  int workers = count_hosts(cnnb_flags_string(flags, "worker_hosts"));
  int ps = count_hosts(cnnb_flags_string(flags, "ps_hosts"));
  const char *strategy = mpi_strategy(cnnb_flags_string(flags, "variable_update"));
  size_t len = (size_t)snprintf(
      err, size,
      "--job_name/--task_index/--ps_hosts/--worker_hosts/--controller_host/--server_protocol: "
      "tf_cnn_benchmarks' distributed mode (one process per task, found by gRPC) is not how "
      "cnnbench runs several processes. Start the whole job once, every rank a worker, on "
      "the first worker's host:\n  mpirun ");
  if (workers > 0) len += (size_t)snprintf(err + len, size - len, "-np %d", workers);
  else len += (size_t)snprintf(err + len, size - len, "-np NUM_WORKERS");
  if (workers > 0 && len < size) {
    /* mpirun's -H takes the hosts without tf's ports; a host named twice has two slots. */
    len += (size_t)snprintf(err + len, size - len, " -H ");
    const char *p = cnnb_flags_string(flags, "worker_hosts");
    bool first = true;
    while (*p && len < size) {
      size_t n = strcspn(p, ","), host = strcspn(p, ":,");
      if (n)
        len += (size_t)snprintf(err + len, size - len, "%s%.*s", first ? "" : ",", (int)host, p);
      first = first && !n;
      p += n + (p[n] == ',');
    }
  }
  len = append_word(err, len, size, argc > 0 && argv[0] ? argv[0] : "cnnbench");
  for (int i = 1; i < argc && argv[i]; i++) {
    char name[256];
    bool has_value = false;
    if (flag_name(argv[i], name, sizeof name, &has_value) &&
        (is_distributed(name) || strcmp(name, "variable_update") == 0)) {
      if (!has_value && i + 1 < argc && argv[i + 1] && argv[i + 1][0] != '-') i++;
      continue;
    }
    len = append_word(err, len, size, argv[i]);
  }
  char tail[160];
  snprintf(tail, sizeof tail, "--variable_update=%s", strategy);
  len = append_word(err, len, size, tail);
  if (strcmp(strategy, "parameter_server") == 0) {
    int ranks = ps < 1 ? 1 : ps;
    if (workers > 0 && ranks > workers) ranks = workers;
    snprintf(tail, sizeof tail, "--num_ps_ranks=%d", ranks);
    len = append_word(err, len, size, tail);
    if (len < size)
      len += (size_t)snprintf(err + len, size - len,
                              "\n(the first --num_ps_ranks ranks keep the variables' shards, as "
                              "tf's %d parameter server%s, and train too)",
                              ps < 1 ? 1 : ps, ps == 1 ? "" : "s");
  }
  return CNNB_EINVAL;
}

/* ---- the check before a run ------------------------------------------------------ */

cnnb_status cnnb_tf_flags_check(const cnnb_flags *flags, int argc, char *const *argv, char *err,
                                size_t err_size) {
  if (err && err_size) err[0] = '\0';
  char scratch[2];
  if (!err || !err_size) err = scratch, err_size = sizeof scratch;
  /* tf runs locally unless --job_name names a task; its host lists mean a cluster. */
  bool cluster = *cnnb_flags_string(flags, "job_name") || *cnnb_flags_string(flags, "ps_hosts") ||
                 *cnnb_flags_string(flags, "worker_hosts") ||
                 *cnnb_flags_string(flags, "controller_host");
  if (cluster) return refuse_distributed(flags, argc, argv, err, err_size);
  size_t len = 0;
  cnnb_status st = CNNB_OK;
  cnnb_flag_view v;
  for (size_t i = 0; cnnb_flags_at(flags, i, &v); i++) {
    if (!v.is_set || strcmp(v.group, CNNB_TF_FLAGS_THEME) != 0) continue;
    const cnnb_tf_flag *f = cnnb_tf_flag_find(v.name);
    if (!f) continue;
    /* tf's own default asks for nothing tf would not do here. */
    bool tf_default = v.type == CNNB_FLAG_STRING && strcmp(v.s, f->tf_default) == 0;
    if (f->status == CNNB_TF_REFUSED && !is_distributed(f->name) && tf_default) {
      cnnb_log_component("cnnbench", CNNB_LOG_WARN, "--%s=%s has no effect here (tf's default)",
                         f->name, v.s);
    } else if (f->status == CNNB_TF_REFUSED && !is_distributed(f->name)) {
      if (len < err_size)
        len += (size_t)snprintf(err + len, err_size - len, "%s--%s is refused here: %s",
                                len ? "\n" : "", f->name, f->note);
      st = CNNB_EINVAL;
    } else if (f->status == CNNB_TF_REFUSED) {
      cnnb_log_component("cnnbench", CNNB_LOG_WARN,
                         "--%s has no effect here: without --job_name and hosts the run is "
                         "local, as tf's",
                         f->name);
    } else {
      cnnb_log_component("cnnbench", CNNB_LOG_WARN, "--%s has no effect here: %s%s", f->name,
                         f->status == CNNB_TF_HONOURED
                             ? "the plugin that reads it is not installed; there it is "
                             : "",
                         f->note);
    }
  }
  return st;
}
