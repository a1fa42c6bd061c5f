/* tune_main.c — the cnnbench-tune command line and the order of its work: check every
 * input before the first run (models and device against what cnnbench lists, the space
 * file, the output directory), then search each model in its share of the budget, and
 * write the report. Ctrl-C stops the running child, writes the report of what was
 * measured and ends by that signal (status 130; SIGTERM: 143), as cnnbench does; the same
 * command later continues from the result file. Exit status: 0 success, 2 bad input
 * (another tuner using --out included), 1 a failure (nothing could run). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tune.h"
#include "base/names.h"

enum { ERR_SIZE = 4096 };

static const char usage[] =
    "Usage: cnnbench-tune --models=M1,M2 [--device=cpu] [--budget=10m] [--num_devices=N]\n"
    "                     [--processes=auto|1|N] [--space=FILE] [--out=DIR]\n"
    "Finds the fastest configuration of each model on this machine: runs candidate\n"
    "configurations as child cnnbench processes (mpirun -np P cnnbench for layouts over\n"
    "several processes, when mpirun is on PATH), reads their JSON benchmark logs, and\n"
    "spends the budget by successive halving. Writes DIR/report.md (a ranked table per\n"
    "model and the best configuration per model), DIR/<model>.svg, DIR/<model>.flags\n"
    "(cnnbench --flagfile=DIR/<model>.flags reruns the winner) and DIR/results.jsonl,\n"
    "which a second call continues from.\n\n"
    "  --models=LIST        models to tune, comma-separated (required)\n"
    "  --device=NAME        device plugin (default cpu)\n"
    "  --budget=TIME        wall time for the whole call: 90s, 10m, 1h (default 10m,\n"
    "                       at most 168h)\n"
    "  --num_devices=N      devices to spread over replicas x processes (default 1)\n"
    "  --processes=P        auto (every divisor of N), or only layouts of P processes\n"
    "  --space=FILE         narrow or widen the search space (format in docs/tuning.md)\n"
    "  --out=DIR            where results go (default cnnbench-tune-out); a directory\n"
    "                       holding other files than cnnbench-tune's is refused\n"
    "  --cnnbench=PATH      the cnnbench to run (default: the one beside this program)\n"
    "  --min_batch_size=N   batch sizes double from this (default 16)...\n"
    "  --max_batch_size=N   ...up to this (default 128) or the first refused for memory\n"
    "  --first_steps=N      timed steps of each first run (default 3); later rungs double\n"
    "  --ceilings=N         finalists whose independent ceiling is measured (default 3)\n"
    "\nExit status: 0 success; 2 bad input (or another cnnbench-tune is using --out);\n"
    "1 nothing could be measured; interrupted: ends by the signal (130 SIGINT, 143 SIGTERM).\n";

static const char *const option_names[] = {
    "models",   "device",         "budget",         "num_devices", "processes", "space", "out",
    "cnnbench", "min_batch_size", "max_batch_size", "first_steps", "ceilings",  "help",  NULL};

/* The longest budget taken: a week. Longer is a typo (1e9h) or inf, and would make a
 * search that never ends and times that no longer fit the report's minutes. */
#define MAX_BUDGET_S (7 * 24 * 3600.0)

static bool parse_budget(const char *text, double *out) {
  char *end;
  double v = strtod(text, &end);
  double unit = 1;
  if (*end == 's' || *end == '\0') unit = 1;
  else if (*end == 'm') unit = 60;
  else if (*end == 'h') unit = 3600;
  else return false;
  if (*end && end[1]) return false;
  if (end == text || !(v > 0) || !isfinite(v) || !(v * unit <= MAX_BUDGET_S)) return false;
  *out = v * unit;
  return true;
}

static bool parse_count(const char *name, const char *text, int min, int *out, char *err,
                        size_t err_size) {
  char *end;
  errno = 0;
  long v = strtol(text, &end, 10);
  if (!text[0] || *end || errno || v < min || v > 1 << 20) {
    snprintf(err, err_size, "--%s=%s: expected a whole number of at least %d", name, text, min);
    return false;
  }
  *out = (int)v;
  return true;
}

static char *find_on_path(const char *name) {
  const char *path = getenv("PATH");
  if (!path) return NULL;
  char *copy = tune_format("%s", path), *save = NULL;
  for (char *dir = strtok_r(copy, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
    char *candidate = tune_format("%s/%s", dir[0] ? dir : ".", name);
    if (access(candidate, X_OK) == 0) {
      free(copy);
      return candidate;
    }
    free(candidate);
  }
  free(copy);
  return NULL;
}

/* cnnbench beside this program (the build tree and an install both put them together),
 * else the one on PATH. */
static char *default_cnnbench(void) {
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) {
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (slash) {
      *slash = '\0';
      char *beside = tune_format("%s/cnnbench", self);
      if (access(beside, X_OK) == 0) return beside;
      free(beside);
    }
  }
  char *found = find_on_path("cnnbench");
  return found ? found : tune_format("cnnbench");
}

static bool parse_args(int argc, char **argv, tune_options *o, bool *help, char *err,
                       size_t err_size) {
  o->device = tune_format("cpu");
  o->budget_s = 600;
  o->num_devices = 1;
  o->processes = tune_format("auto");
  o->out_dir = tune_format("cnnbench-tune-out");
  o->min_batch_size = 16;
  o->max_batch_size = 128;
  o->first_steps = 3;
  o->ceilings = 3;
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    if (strncmp(arg, "--", 2) != 0) {
      snprintf(err, err_size,
               "unexpected argument '%s': cnnbench-tune takes only flags, "
               "written --name=value",
               arg);
      return false;
    }
    char name[64];
    const char *eq = strchr(arg + 2, '=');
    size_t len = eq ? (size_t)(eq - arg - 2) : strlen(arg + 2);
    snprintf(name, sizeof name, "%.*s", (int)(len < sizeof name ? len : sizeof name - 1), arg + 2);
    const char *value = eq ? eq + 1 : NULL;
    if (strcmp(name, "help") == 0) {
      *help = true;
      continue;
    }
    bool known = false;
    for (const char *const *n = option_names; *n; n++) known = known || strcmp(*n, name) == 0;
    if (!known) {
      size_t count = 0;
      while (option_names[count]) count++;
      const char *near = cnnb_closest_name(name, option_names, count);
      snprintf(err, err_size, "unknown flag --%s%s%s%s (cnnbench-tune --help lists them)", name,
               near ? " (did you mean --" : "", near ? near : "", near ? "?)" : "");
      return false;
    }
    if (!value) {
      snprintf(err, err_size, "flag --%s: missing value (write --%s=VALUE)", name, name);
      return false;
    }
    if (strcmp(name, "models") == 0) {
      tune_strings_free(&o->models);
      char *copy = tune_format("%s", value), *save = NULL;
      for (char *m = strtok_r(copy, ",", &save); m; m = strtok_r(NULL, ",", &save))
        if (!tune_strings_has(&o->models, m)) tune_strings_add(&o->models, m);
      free(copy);
    } else if (strcmp(name, "device") == 0) {
      free(o->device);
      o->device = tune_format("%s", value);
    } else if (strcmp(name, "budget") == 0) {
      if (!parse_budget(value, &o->budget_s)) {
        snprintf(err, err_size,
                 "--budget=%s: expected a time such as 90s, 10m or 1h, more than 0 and at "
                 "most %gh (a week)",
                 value, MAX_BUDGET_S / 3600);
        return false;
      }
    } else if (strcmp(name, "num_devices") == 0) {
      if (!parse_count(name, value, 1, &o->num_devices, err, err_size)) return false;
    } else if (strcmp(name, "processes") == 0) {
      int p;
      if (strcmp(value, "auto") != 0 && !parse_count(name, value, 1, &p, err, err_size)) {
        snprintf(err, err_size, "--processes=%s: expected auto or a whole number", value);
        return false;
      }
      free(o->processes);
      o->processes = tune_format("%s", value);
    } else if (strcmp(name, "space") == 0) {
      free(o->space_file);
      o->space_file = tune_format("%s", value);
    } else if (strcmp(name, "out") == 0) {
      free(o->out_dir);
      o->out_dir = tune_format("%s", value[0] ? value : ".");
    } else if (strcmp(name, "cnnbench") == 0) {
      free(o->cnnbench);
      o->cnnbench = tune_format("%s", value);
    } else if (strcmp(name, "min_batch_size") == 0) {
      if (!parse_count(name, value, 1, &o->min_batch_size, err, err_size)) return false;
    } else if (strcmp(name, "max_batch_size") == 0) {
      if (!parse_count(name, value, 1, &o->max_batch_size, err, err_size)) return false;
    } else if (strcmp(name, "first_steps") == 0) {
      if (!parse_count(name, value, 2, &o->first_steps, err, err_size)) return false;
    } else if (strcmp(name, "ceilings") == 0) {
      if (!parse_count(name, value, 0, &o->ceilings, err, err_size)) return false;
    }
  }
  if (*help) return true;
  if (!o->models.n) {
    snprintf(err, err_size, "--models is required (e.g. --models=resnet20,alexnet)");
    return false;
  }
  if (o->min_batch_size > o->max_batch_size) {
    snprintf(err, err_size,
             "--min_batch_size=%d is larger than --max_batch_size=%d: no batch size is "
             "between them",
             o->min_batch_size, o->max_batch_size);
    return false;
  }
  if (strcmp(o->processes, "auto") != 0 && o->num_devices % atoi(o->processes) != 0) {
    snprintf(err, err_size, "--processes=%s does not divide --num_devices=%d", o->processes,
             o->num_devices);
    return false;
  }
  if (!o->cnnbench) o->cnnbench = default_cnnbench();
  o->mpirun = find_on_path("mpirun");
  const char *job = getenv("SLURM_JOB_ID"), *step = getenv("SLURM_STEP_ID");
  if (job && *job && !(step && *step) && (o->srun = find_on_path("srun")))
    o->slurm_job = tune_format("%s", job);
  return true;
}

static bool check_names(const tune_options *o, const tune_listing *l, char *err, size_t size) {
  for (size_t i = 0; i < o->models.n; i++) {
    if (tune_strings_has(&l->models, o->models.v[i])) continue;
    const char *near = cnnb_closest_name(o->models.v[i], (const char *const *)l->models.v,
                                         l->models.n);
    snprintf(err, size, "--models: no model '%s' is installed%s%s%s (cnnbench --list_plugins)",
             o->models.v[i], near ? " (did you mean " : "", near ? near : "", near ? "?)" : "");
    return false;
  }
  if (tune_strings_has(&l->devices, o->device)) return true;
  size_t len = strlen(o->device);
  for (size_t i = 0; i < l->unavailable.n; i++)
    if (strncmp(l->unavailable.v[i], o->device, len) == 0 && l->unavailable.v[i][len] == ':') {
      snprintf(err, size, "--device=%s cannot run on this machine: %s", o->device,
               l->unavailable.v[i] + len + 2);
      return false;
    }
  const char *near = cnnb_closest_name(o->device, (const char *const *)l->devices.v, l->devices.n);
  snprintf(err, size, "--device: no device '%s' is installed%s%s%s", o->device,
           near ? " (did you mean " : "", near ? near : "", near ? "?)" : "");
  return false;
}

/* DIR made if missing; one that holds files cnnbench-tune did not write is refused, so
 * a run never overwrites what it did not write. */
static bool prepare_out(const char *dir, char *err, size_t size) {
  char *copy = tune_format("%s", dir);
  for (char *q = copy + 1; *q; q++) {
    if (*q != '/') continue;
    *q = '\0';
    mkdir(copy, 0755);
    *q = '/';
  }
  free(copy);
  if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
    snprintf(err, size, "--out=%s: cannot make the directory: %s", dir, strerror(errno));
    return false;
  }
  char *marker = tune_format("%s/.cnnbench-tune", dir);
  bool ours = access(marker, F_OK) == 0, empty = true;
  DIR *d = opendir(dir);
  if (!d) {
    snprintf(err, size, "--out=%s: not a directory it can read: %s", dir, strerror(errno));
    free(marker);
    return false;
  }
  for (struct dirent *e; (e = readdir(d));)
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) empty = false;
  closedir(d);
  if (!ours && !empty) {
    snprintf(err, size,
             "--out=%s holds files cnnbench-tune did not write; name an empty or "
             "new directory",
             dir);
    free(marker);
    return false;
  }
  FILE *f = ours ? NULL : fopen(marker, "w");
  if (!ours && (!f ||
                fputs("cnnbench-tune writes here: results.jsonl, report.md, "
                      "<model>.svg, <model>.flags, runs/\n",
                      f) < 0 ||
                fclose(f) != 0)) {
    snprintf(err, size, "--out=%s: cannot write: %s", dir, strerror(errno));
    free(marker);
    return false;
  }
  if (ours && access(dir, W_OK) != 0) {
    snprintf(err, size, "--out=%s: cannot write: %s", dir, strerror(errno));
    free(marker);
    return false;
  }
  free(marker);
  return true;
}

static volatile sig_atomic_t stop_signal; /* the first SIGINT or SIGTERM */

static void on_signal(int sig) {
  if (!stop_signal) stop_signal = sig;
  tune_interrupted = 1;
}

/* Ends the process by the signal that stopped it, as cnnbench does: a shell or a job
 * runner then sees 130 for SIGINT and 143 for SIGTERM, and knows which. */
static int end_by_signal(int sig) {
  fflush(stdout); /* the default action flushes nothing */
  fflush(stderr);
  signal(sig, SIG_DFL);
  raise(sig);
  return 128 + sig; /* not reached: the default action ends the process */
}

static void options_free(tune_options *o) {
  tune_strings_free(&o->models);
  free(o->device);
  free(o->processes);
  free(o->space_file);
  free(o->out_dir);
  free(o->cnnbench);
  free(o->mpirun);
  free(o->srun);
  free(o->slurm_job);
}

int main(int argc, char **argv) {
  char *err = tune_alloc(ERR_SIZE);
  tune_options o = {0};
  bool help = false;
  if (!parse_args(argc, argv, &o, &help, err, ERR_SIZE)) {
    fprintf(stderr, "cnnbench-tune: error: %s\n", err);
    options_free(&o);
    free(err);
    return TUNE_EXIT_INPUT;
  }
  if (help) {
    fputs(usage, stdout);
    options_free(&o);
    free(err);
    return TUNE_EXIT_OK;
  }
  tune_listing l;
  if (!tune_listing_load(o.cnnbench, &l, err, ERR_SIZE)) {
    fprintf(stderr, "cnnbench-tune: error: %s\n", err);
    options_free(&o);
    free(err);
    return TUNE_EXIT_RUNTIME;
  }
  tune_space s = {0}; /* freed on every path, also before tune_space_build ran */
  int code = TUNE_EXIT_OK;
  if (!check_names(&o, &l, err, ERR_SIZE) || !tune_space_build(&l, &o, &s, err, ERR_SIZE) ||
      !prepare_out(o.out_dir, err, ERR_SIZE))
    code = TUNE_EXIT_INPUT;
  /* Locked before results.jsonl is read: a tuner still running there would go on
   * appending to it. Held until the process ends. */
  int lock = code == TUNE_EXIT_OK ? tune_lock_out(o.out_dir, err, ERR_SIZE) : -1;
  if (code == TUNE_EXIT_OK && lock < 0) code = TUNE_EXIT_INPUT;
  tune_results rs = {0};
  if (code == TUNE_EXIT_OK && !tune_results_open(&rs, o.out_dir, err, ERR_SIZE))
    code = TUNE_EXIT_INPUT;
  if (code != TUNE_EXIT_OK) {
    fprintf(stderr, "cnnbench-tune: error: %s\n", err);
    tune_space_free(&s);
    tune_results_close(&rs);
    if (lock >= 0) close(lock);
    tune_listing_free(&l);
    options_free(&o);
    free(err);
    return code;
  }
  for (size_t i = 0; i < s.notes.n; i++) fprintf(stderr, "cnnbench-tune: %s\n", s.notes.v[i]);

  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);

  tune_clock clock = {.start = tune_now(), .budget_s = o.budget_s};
  tune_model_outcome *outcomes = tune_alloc(o.models.n * sizeof *outcomes);
  size_t searched = 0;
  for (size_t i = 0; i < o.models.n; i++) {
    double share = tune_left(&clock) / (double)(o.models.n - i);
    code = tune_search_model(o.models.v[i], &o, &s, &rs, &clock, share, &outcomes[i], err,
                             ERR_SIZE);
    searched = i + 1;
    if (code != TUNE_EXIT_OK) break;
  }
  bool interrupted = code == TUNE_EXIT_INTERRUPTED;
  /* The models an interruption came before are in the report too, as not measured: a
   * reader of the report must see they were asked for. */
  for (; interrupted && searched < o.models.n; searched++) {
    memset(&outcomes[searched], 0, sizeof outcomes[searched]);
    outcomes[searched].model = tune_format("%s", o.models.v[searched]);
    outcomes[searched].not_measured = true;
    outcomes[searched].note = tune_format("not measured: the call was interrupted before this "
                                          "model's turn; the same command measures it");
  }
  if (code == TUNE_EXIT_OK || interrupted) {
    char werr[ERR_SIZE];
    if (!tune_report_write(&o, &l, &s, outcomes, searched, &clock, interrupted, werr,
                           sizeof werr)) {
      fprintf(stderr, "cnnbench-tune: error: %s\n", werr);
      code = TUNE_EXIT_RUNTIME;
    }
  } else {
    fprintf(stderr, "cnnbench-tune: error: %s\n", err);
  }
  size_t winners = 0;
  for (size_t i = 0; i < searched; i++) {
    const tune_model_outcome *m = &outcomes[i];
    if (m->winner) {
      winners++;
      printf("%s: %s, %.1f +- %.1f images/sec -> %s/%s.flags\n", m->model, m->winner->label,
             m->winner->ips, m->winner->spread, o.out_dir, m->model);
      for (size_t t = 0; t < m->tied.n; t++) printf("  tied with: %s\n", m->tied.v[t]);
    } else if (m->not_measured) {
      printf("%s: not measured (interrupted before its turn)\n", m->model);
    } else if (code == TUNE_EXIT_OK || interrupted) {
      printf("%s: nothing ran to the end (%s)\n", m->model, m->note ? m->note : "?");
    }
  }
  if (code == TUNE_EXIT_OK || interrupted) printf("report: %s/report.md\n", o.out_dir);
  if (interrupted)
    fprintf(stderr,
            "cnnbench-tune: interrupted: the results so far are kept in "
            "%s/results.jsonl; the same command continues from them\n",
            o.out_dir);
  if (code == TUNE_EXIT_OK && winners == 0) {
    fprintf(stderr, "cnnbench-tune: error: no configuration of any model ran to the end "
                    "(report.md lists why)\n");
    code = TUNE_EXIT_RUNTIME;
  }
  for (size_t i = 0; i < searched; i++) tune_outcome_free(&outcomes[i]);
  free(outcomes);
  tune_results_close(&rs);
  tune_space_free(&s);
  tune_listing_free(&l);
  options_free(&o);
  free(err);
  if (lock >= 0) close(lock);
  if (code == TUNE_EXIT_INTERRUPTED) return end_by_signal(stop_signal ? stop_signal : SIGINT);
  return code;
}
