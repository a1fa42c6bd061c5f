/* openmp_env.c — tf's --mkl settings as GNU OpenMP's variables, and the one restart that
 * makes libgomp read them (openmp_env.h). */
#define _GNU_SOURCE /* setenv, unsetenv, strcasecmp */
#include "cli/openmp_env.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/host_ctx.h"

/* Set across the restart only: the restarted process knows it is one. */
#define RESTARTED "CNNB_OPENMP_ENV_RESTARTED"

static cnnb_status refuse(char *err, size_t size, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, size, fmt, ap);
  va_end(ap);
  return CNNB_EINVAL;
}

static void put(cnnb_openmp_env *env, const char *name, const char *value) {
  if (env->n == CNNB_OPENMP_MAX_VARS) return; /* the table below never sets more */
  cnnb_openmp_var *v = &env->v[env->n++];
  v->name = name;
  v->unset = value == NULL;
  snprintf(v->value, sizeof v->value, "%s", value ? value : "");
}

/* Splits KMP_AFFINITY at the commas outside brackets ("proclist=[0,2],explicit"). */
static size_t next_item(const char *p, char *item, size_t size) {
  size_t len = 0;
  int depth = 0;
  for (; p[len] && (depth > 0 || p[len] != ','); len++) {
    if (p[len] == '[') depth++;
    if (p[len] == ']' && depth > 0) depth--;
  }
  snprintf(item, size, "%.*s", (int)len, p);
  return len;
}

/* proclist=[0,2,4-7] as GOMP_CPU_AFFINITY's "0 2 4-7"; sets ({0,1}) have no spelling there. */
static cnnb_status proclist(const char *list, char *out, size_t size, char *err, size_t err_size) {
  size_t len = strlen(list);
  if (len < 2 || list[0] != '[' || list[len - 1] != ']')
    return refuse(err, err_size, "--kmp_affinity: proclist=%s: expected a list such as [0,2,4-7]",
                  list);
  size_t o = 0;
  for (size_t i = 1; i + 1 < len && o + 2 < size; i++) {
    char c = list[i];
    if (c == ',') c = ' ';
    else if (!(c >= '0' && c <= '9') && c != '-')
      return refuse(err, err_size,
                    "--kmp_affinity: proclist=%s: only processor numbers and ranges (0,2,4-7) "
                    "have a GOMP_CPU_AFFINITY spelling; set GOMP_CPU_AFFINITY yourself for more",
                    list);
    out[o++] = c;
  }
  out[o] = '\0';
  if (!o) return refuse(err, err_size, "--kmp_affinity: proclist=%s is empty", list);
  return CNNB_OK;
}

cnnb_status cnnb_openmp_env_from_tf(long long blocktime_ms, const char *affinity,
                                    long long settings, long long intra_threads,
                                    double spins_per_ms, cnnb_openmp_env *env, char *err,
                                    size_t err_size) {
  env->n = 0;
  char text[256];
  if (blocktime_ms < 0)
    return refuse(err, err_size, "--kmp_blocktime=%lld: must be >= 0 (milliseconds)", blocktime_ms);
  if (blocktime_ms == 0) {
    put(env, "OMP_WAIT_POLICY", "PASSIVE");
    put(env, "GOMP_SPINCOUNT", "0");
  } else {
    double spins = (double)blocktime_ms * (spins_per_ms > 0 ? spins_per_ms : 100000.0);
    snprintf(text, sizeof text, "%.0f", spins < 1e18 ? spins : 1e18);
    put(env, "OMP_WAIT_POLICY", NULL);
    put(env, "GOMP_SPINCOUNT", text);
  }

  /* KMP_AFFINITY: [modifiers,]type[,permute[,offset]] */
  const char *type = NULL, *granularity = "fine";
  char list[256] = "", item[256], type_word[256], granularity_word[256];
  long numbers[2] = {0, 0};
  int count = 0;
  bool verbose = false;
  for (const char *p = affinity ? affinity : ""; *p;) {
    size_t len = next_item(p, item, sizeof item);
    p += len + (p[len] == ',');
    if (!*item) continue;
    char *end = NULL;
    long n = strtol(item, &end, 10);
    if (end != item && !*end) {
      if (!type || count == 2)
        return refuse(err, err_size,
                      "--kmp_affinity=%s: '%s': a number comes after the type (compact,1,0)",
                      affinity, item);
      if (n < 0) return refuse(err, err_size, "--kmp_affinity=%s: '%s' < 0", affinity, item);
      numbers[count++] = n;
    } else if (strncasecmp(item, "granularity=", 12) == 0) {
      snprintf(granularity_word, sizeof granularity_word, "%s", item + 12);
      granularity = granularity_word;
      if (strcasecmp(granularity, "fine") && strcasecmp(granularity, "thread") &&
          strcasecmp(granularity, "core"))
        return refuse(err, err_size,
                      "--kmp_affinity=%s: granularity=%s: fine, thread or core have a GNU "
                      "OpenMP spelling (OMP_PLACES threads or cores)",
                      affinity, granularity);
    } else if (strncasecmp(item, "proclist=", 9) == 0) {
      cnnb_status st = proclist(item + 9, list, sizeof list, err, err_size);
      if (st != CNNB_OK) return st;
    } else if (!strcasecmp(item, "verbose") || !strcasecmp(item, "noverbose")) {
      verbose = !strcasecmp(item, "verbose");
    } else if (!strcasecmp(item, "warnings") || !strcasecmp(item, "nowarnings") ||
               !strcasecmp(item, "respect") || !strcasecmp(item, "norespect") ||
               !strcasecmp(item, "duplicates") || !strcasecmp(item, "noduplicates")) {
      /* Intel's own diagnostics and mask handling: libgomp has no such switch. */
    } else if (!strcasecmp(item, "compact") || !strcasecmp(item, "scatter") ||
               !strcasecmp(item, "balanced") || !strcasecmp(item, "none") ||
               !strcasecmp(item, "disabled") || !strcasecmp(item, "explicit")) {
      if (type)
        return refuse(err, err_size, "--kmp_affinity=%s: two types, %s and %s", affinity, type,
                      item);
      snprintf(type_word, sizeof type_word, "%s", item);
      type = type_word;
    } else {
      return refuse(err, err_size,
                    "--kmp_affinity=%s: '%s' is not a KMP_AFFINITY word this translates "
                    "(types compact, scatter, balanced, none, disabled, explicit; "
                    "granularity=, proclist=, verbose)",
                    affinity, item);
    }
  }
  if (count == 2 && numbers[1] != 0)
    return refuse(err, err_size,
                  "--kmp_affinity=%s: an offset (%ld) has no GNU OpenMP spelling: give "
                  "proclist=[...],explicit, or set GOMP_CPU_AFFINITY",
                  affinity, numbers[1]);
  if (!type || !strcasecmp(type, "none") || !strcasecmp(type, "disabled")) {
    put(env, "OMP_PROC_BIND", "false");
    put(env, "OMP_PLACES", NULL);
    put(env, "GOMP_CPU_AFFINITY", NULL);
  } else if (!strcasecmp(type, "explicit")) {
    if (!*list)
      return refuse(err, err_size, "--kmp_affinity=%s: explicit needs proclist=[...]", affinity);
    put(env, "OMP_PROC_BIND", NULL);
    put(env, "OMP_PLACES", NULL);
    put(env, "GOMP_CPU_AFFINITY", list);
  } else {
    bool cores = !strcasecmp(granularity, "core") || numbers[0] >= 1;
    put(env, "OMP_PROC_BIND", !strcasecmp(type, "compact") ? "close" : "spread");
    put(env, "OMP_PLACES", cores ? "cores" : "threads");
    put(env, "GOMP_CPU_AFFINITY", NULL);
  }
  put(env, "OMP_DISPLAY_AFFINITY", verbose ? "TRUE" : NULL);
  put(env, "OMP_DISPLAY_ENV", settings ? "VERBOSE" : NULL);
  if (intra_threads > 0) {
    snprintf(text, sizeof text, "%lld", intra_threads);
    put(env, "OMP_NUM_THREADS", text);
  }
  return CNNB_OK;
}

/* libgomp's do_spin (config/linux/wait.h): a relaxed load and cpu_relax() a turn. */
static inline void relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ volatile("yield" ::: "memory");
#else
  __asm__ volatile("" ::: "memory");
#endif
}

double cnnb_openmp_spins_per_ms(void) {
  static int flag;
  long long turns = 0;
  double start = cnnb_now_seconds(), elapsed = 0;
  /* 4 ms of spinning: long enough for the clock, short beside any run. */
  while (elapsed < 0.004) {
    for (int i = 0; i < 10000; i++) {
      if (__atomic_load_n(&flag, __ATOMIC_RELAXED)) break;
      relax();
    }
    turns += 10000;
    elapsed = cnnb_now_seconds() - start;
  }
  return (double)turns / (elapsed * 1000.0);
}

static bool holds(const cnnb_openmp_var *v) {
  const char *now = getenv(v->name);
  return v->unset ? now == NULL : now && strcmp(now, v->value) == 0;
}

cnnb_status cnnb_openmp_env_apply(const cnnb_flags *flags, char **argv, const char *no_restart,
                                  char *err, size_t err_size) {
  if (!cnnb_flags_bool(flags, "mkl")) {
    static const char *const knobs[] = {"kmp_blocktime", "kmp_affinity", "kmp_settings"};
    for (size_t i = 0; i < sizeof knobs / sizeof knobs[0]; i++)
      if (cnnb_flags_is_set(flags, knobs[i]))
        cnnb_log_component("cnnbench", CNNB_LOG_WARN,
                           "--%s has no effect without --mkl (tf_cnn_benchmarks applies the "
                           "--kmp_* flags only with --mkl)",
                           knobs[i]);
    return CNNB_OK;
  }
  /* Restarted by the code below: the variables are what it set (a measured spin count
   * differs from one measurement to the next, so comparing again could restart forever). */
  if (getenv(RESTARTED)) {
    unsetenv(RESTARTED);
    return CNNB_OK;
  }
  cnnb_openmp_env env;
  long long blocktime = cnnb_flags_int(flags, "kmp_blocktime");
  /* The calibration only matters for a spin count; skip its 4 ms otherwise. */
  double spins = blocktime > 0 ? cnnb_openmp_spins_per_ms() : 0;
  cnnb_status st = cnnb_openmp_env_from_tf(blocktime, cnnb_flags_string(flags, "kmp_affinity"),
                                           cnnb_flags_int(flags, "kmp_settings"),
                                           cnnb_flags_int(flags, "num_intra_threads"), spins, &env,
                                           err, err_size);
  if (st != CNNB_OK) return st;
  bool all = true;
  for (size_t i = 0; i < env.n; i++) all = all && holds(&env.v[i]);
  if (all) return CNNB_OK;
  char line[1024];
  size_t len = 0;
  for (size_t i = 0; i < env.n && len < sizeof line; i++) {
    const cnnb_openmp_var *v = &env.v[i];
    const char *was = getenv(v->name);
    if (holds(v)) continue;
    len += (size_t)snprintf(line + len, sizeof line - len, " %s%s%s%s%s%s", v->unset ? "-u " : "",
                            v->name, v->unset ? "" : "=", v->value, was ? " (was " : "",
                            was ? was : "");
    if (was && len < sizeof line) len += (size_t)snprintf(line + len, sizeof line - len, ")");
  }
  if (no_restart) {
    cnnb_log_component("cnnbench", CNNB_LOG_WARN,
                       "--mkl: not restarting for tf's OpenMP settings (%s): the OpenMP "
                       "runtime keeps the settings it started with; set these in the "
                       "environment instead:%s",
                       no_restart, line);
    return CNNB_OK;
  }
  fprintf(stderr,
          "cnnbench: --mkl: tf's OpenMP settings as GNU OpenMP's (the cpu device's oneDNN "
          "runs on it):%s; restarting once so the runtime reads them\n",
          line);
  fflush(stderr);
  for (size_t i = 0; i < env.n; i++) {
    if (env.v[i].unset) unsetenv(env.v[i].name);
    else setenv(env.v[i].name, env.v[i].value, 1);
  }
  setenv(RESTARTED, "1", 1);
  fflush(stdout);
  execv("/proc/self/exe", argv);
  unsetenv(RESTARTED);
  cnnb_log_component("cnnbench", CNNB_LOG_WARN,
                     "--mkl: could not restart (/proc/self/exe: %s): the OpenMP runtime keeps "
                     "the settings it started with; set the variables above in the "
                     "environment instead",
                     strerror(errno));
  return CNNB_OK;
}
