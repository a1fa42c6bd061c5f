/* tune_child.c — one candidate's run: a child process in a process group of its own (so
 * a timeout or Ctrl-C stops mpirun and every rank with it), its stdout and stderr in
 * files beside its benchmark log, and its measurement read from the log's JSON lines,
 * never from the console text. A run that failed keeps its first error line. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tune.h"

volatile int tune_interrupted = 0;
tune_runner tune_run = tune_child_run;
double (*tune_clock_hook)(void) = NULL;

double tune_now(void) {
  if (tune_clock_hook) return tune_clock_hook();
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void sleep_ms(long ms) {
  struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

/* The first line of stderr that says "error" (cnnbench's "cnnbench: error: ..."), or a
 * crash line, else the last non-empty line. */
static char *first_error_line(const char *path) {
  FILE *in = fopen(path, "r");
  if (!in) return NULL;
  char *line = NULL, *found = NULL, *last = NULL;
  size_t cap = 0;
  while (getline(&line, &cap, in) >= 0) {
    line[strcspn(line, "\r\n")] = '\0';
    if (!line[0]) continue;
    if (strstr(line, "error") || strstr(line, "crashed") || strstr(line, "Error")) {
      found = strdup(line);
      break;
    }
    free(last);
    last = strdup(line);
  }
  free(line);
  fclose(in);
  if (found) {
    free(last);
    return found;
  }
  return last;
}

static bool mentions_memory(const char *s) {
  return s && (strcasestr(s, "out of memory") || strcasestr(s, "cannot allocate"));
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, size_t n) {
  qsort(v, n, sizeof *v, by_value);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The measurement from rank 0's log: global batch over the median step time, and the
 * spread of the per-step rates as 1.96 x 1.4826 x their median absolute deviation over
 * sqrt(steps) (the ~95% interval of a normal's median, read robustly), at least 1% of
 * the figure. The median, not the mean: on a shared machine a step that waited for a
 * core says nothing about the configuration, and one such step would move a mean of
 * three. The summary's status says whether the run ended well. */
/* Rank 0's benchmark log in the run's own directory: benchmark_run.rank0.jsonl, or under
 * Slurm benchmark_run.<job>.rank0.jsonl (the child inherits the allocation's SLURM_JOB_ID). */
static char *rank0_log(const char *log_dir) {
  char *pattern = tune_format("%s/benchmark_run.*rank0.jsonl", log_dir);
  glob_t found = {0};
  char *path = glob(pattern, 0, NULL, &found) == 0 && found.gl_pathc > 0
                   ? tune_format("%s", found.gl_pathv[0])
                   : tune_format("%s/benchmark_run.rank0.jsonl", log_dir);
  globfree(&found);
  free(pattern);
  return path;
}

void tune_child_read_log(const char *log_dir, tune_result *r) {
  char *path = rank0_log(log_dir);
  FILE *in = fopen(path, "r");
  free(path);
  if (!in) return;
  char *line = NULL;
  size_t cap = 0, n = 0, steps_cap = 64;
  double global_batch = 0, *steps = tune_alloc(steps_cap * sizeof *steps);
  char *status = NULL;
  while (getline(&line, &cap, in) >= 0) {
    json_t *rec = json_loads(line, 0, NULL);
    if (!rec) continue; /* a torn last line of a killed run */
    const char *kind = json_string_value(json_object_get(rec, "record"));
    if (kind && strcmp(kind, "run") == 0) {
      json_t *res = json_object_get(rec, "resolved");
      global_batch = (double)json_integer_value(json_object_get(res, "global_batch_size"));
    } else if (kind && strcmp(kind, "step") == 0) {
      double s = json_number_value(json_object_get(rec, "step_seconds"));
      if (s > 0) {
        if (n == steps_cap) {
          steps_cap *= 2;
          double *grown = realloc(steps, steps_cap * sizeof *steps);
          if (!grown) exit(TUNE_EXIT_RUNTIME);
          steps = grown;
        }
        steps[n++] = s;
      }
    } else if (kind && strcmp(kind, "summary") == 0) {
      const char *st = json_string_value(json_object_get(rec, "status"));
      free(status);
      status = st ? tune_format("%s", st) : NULL;
    }
    json_decref(rec);
  }
  free(line);
  fclose(in);
  if (status && strcmp(status, "ok") == 0 && n > 0 && global_batch > 0) {
    double mid = median(steps, n);
    double *dev = tune_alloc(n * sizeof *dev);
    for (size_t i = 0; i < n; i++) dev[i] = fabs(global_batch / steps[i] - global_batch / mid);
    double mad = median(dev, n);
    free(dev);
    r->ok = true;
    r->ips = global_batch / mid;
    r->step_mean = mid;
    r->spread = fmax(1.96 * 1.4826 * mad / sqrt((double)n), 0.01 * r->ips);
  } else if (status && strcmp(status, "ok") != 0) {
    free(r->error);
    r->error = tune_format("%s", status);
  }
  free(status);
  free(steps);
}

static void stop_group(pid_t pid) {
  kill(-pid, SIGTERM);
  for (int i = 0; i < 50; i++) {
    if (waitpid(pid, NULL, WNOHANG) == pid) return;
    sleep_ms(20);
  }
  kill(-pid, SIGKILL);
  waitpid(pid, NULL, 0);
}

tune_run_end tune_child_run(char **argv, const char *log_dir, double timeout_s, tune_result *r) {
  r->ok = false;
  r->command = tune_argv_join(argv);
  char *out_path = tune_format("%s/stdout.txt", log_dir);
  char *err_path = tune_format("%s/stderr.txt", log_dir);
  double start = tune_now();
  pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    int out = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int nothing = open("/dev/null", O_RDONLY); /* mpirun forwards stdin to rank 0 */
    if (nothing >= 0) dup2(nothing, 0);
    if (out >= 0) dup2(out, 1);
    if (err >= 0) dup2(err, 2);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    execvp(argv[0], argv);
    fprintf(stderr, "cnnbench-tune: error: cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  tune_run_end end = TUNE_RUN_DONE;
  int status = 0;
  struct rusage usage;
  memset(&usage, 0, sizeof usage);
  if (pid < 0) {
    r->error = tune_format("cannot start a child process: %s", strerror(errno));
  } else {
    setpgid(pid, pid); /* both sides, whichever runs first */
    for (;;) {
      pid_t got = wait4(pid, &status, WNOHANG, &usage);
      if (got == pid) break;
      if (got < 0 && errno != EINTR) break;
      if (tune_interrupted) {
        stop_group(pid);
        end = TUNE_RUN_INTERRUPTED;
        break;
      }
      if (tune_now() - start > timeout_s) {
        stop_group(pid);
        end = TUNE_RUN_TIMEOUT;
        break;
      }
      sleep_ms(10);
    }
  }
  r->wall_s = tune_now() - start;
  r->peak_rss_kb = usage.ru_maxrss;
  if (end == TUNE_RUN_DONE && pid > 0) {
    tune_child_read_log(log_dir, r);
    if (!r->ok && !r->error && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
      /* It ended well by its own account, and its log says nothing whole: a stderr line
       * would name the wrong thing. */
      char *path = rank0_log(log_dir);
      r->error = tune_format("exit status 0, and its log %s holds no whole run (a run record, "
                             "steps and an ok summary)",
                             path);
      free(path);
    } else if (!r->ok) {
      char *line = first_error_line(err_path);
      if (!r->error || (line && WIFEXITED(status) && WEXITSTATUS(status) != 0)) {
        free(r->error);
        r->error = line ? line : NULL;
        line = NULL;
      }
      free(line);
      if (!r->error) {
        if (WIFSIGNALED(status))
          r->error = tune_format("killed by signal %d (%s)", WTERMSIG(status),
                                 strsignal(WTERMSIG(status)));
        else
          r->error = tune_format("exit status %d and no summary in its log",
                                 WIFEXITED(status) ? WEXITSTATUS(status) : -1);
      }
    } else if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
      r->ok = false;
      r->error = tune_format("exit status %d after its summary", WEXITSTATUS(status));
    }
    r->oom = !r->ok && mentions_memory(r->error);
  } else if (end == TUNE_RUN_TIMEOUT) {
    r->error = tune_format("timed out after %.0f s", timeout_s);
  }
  free(out_path);
  free(err_path);
  return end;
}
