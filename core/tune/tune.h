/* tune.h — what the files of cnnbench-tune share. cnnbench-tune searches, per model, the
 * configurations the installed plugins offer (strategy and its knobs, layout of the
 * devices over processes, batch size, precision, threads) for the fastest, by running
 * each candidate as a child `cnnbench` (or `mpirun -np P cnnbench`) and reading its JSON
 * benchmark log. Successive halving spends the budget: short runs of every candidate,
 * longer runs for the better half, until one rung is left or the budget is spent.
 *
 *   tune_main.c     the command line, the budget, the order of the work, Ctrl-C
 *   tune_space.c    the installed plugins (cnnbench --list_plugins --list_format=json),
 *                   the --space file, the candidates
 *   tune_child.c    one child run: its command, timeout, log, first error line
 *   tune_results.c  the result file (results.jsonl) a later call continues from
 *   tune_search.c   probes (precisions, batch sizes) and successive halving
 *   tune_report.c   report.md, <model>.svg, <model>.flags
 *   tune_lock.c     one tuner per --out
 *
 * Not a core room: a program of its own beside the cnnbench CLI (core/cli/), which
 * drives cnnbench only through its command line and log, so it includes no core header
 * but base/names.h ("did you mean", one rule everywhere). */
#ifndef CNNB_TUNE_H
#define CNNB_TUNE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include <jansson.h>

enum { TUNE_EXIT_OK = 0, TUNE_EXIT_RUNTIME = 1, TUNE_EXIT_INPUT = 2, TUNE_EXIT_INTERRUPTED = 130 };

/* A growable list of owned strings. */
typedef struct tune_strings {
  char **v;
  size_t n, cap;
} tune_strings;
void tune_strings_add(tune_strings *s, const char *text);
bool tune_strings_has(const tune_strings *s, const char *text);
void tune_strings_free(tune_strings *s);
/* malloc'ed printf; aborts on out of memory (a tool that cannot allocate a line has
 * nothing useful left to do). */
char *tune_format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void *tune_alloc(size_t bytes);

/* ---- the command line ---------------------------------------------------------- */
typedef struct tune_options {
  tune_strings models;
  char *device;
  double budget_s;
  int num_devices;
  char *processes; /* "auto", or a number */
  char *space_file;
  char *out_dir;
  char *cnnbench; /* the cnnbench to run */
  char *mpirun;   /* its path, NULL when not on PATH */
  /* srun's path when cnnbench-tune runs inside a Slurm allocation (SLURM_JOB_ID set, not
   * itself a job step) and srun is on PATH: every child is then a job step, on the
   * allocation's nodes, launched with it instead of mpirun; else NULL. */
  char *srun;
  char *slurm_job; /* that allocation's SLURM_JOB_ID, when srun is set */
  int min_batch_size, max_batch_size;
  int first_steps; /* timed steps of rung 0 */
  int ceilings;    /* finalists whose `independent` ceiling is measured */
} tune_options;

/* ---- the --out lock (tune_lock.c) ----------------------------------------------- */
#define TUNE_LOCK_FILE ".cnnbench-tune.lock"
/* Locks OUT for this process until it ends, or fails at once with err naming the
 * tuner that holds it (its pid and host). The lock's descriptor, or -1. */
int tune_lock_out(const char *out_dir, char *err, size_t err_size);

/* ---- the installed plugins and the space --------------------------------------- */
typedef struct tune_flag {
  char *name, *type, *owner; /* owner: "core" or the plugin's name */
  char *default_text;
  tune_strings allowed;
} tune_flag;

typedef struct tune_listing {
  char *version;
  tune_strings models, devices, strategies;
  tune_strings strategy_plugins; /* the plugin offering strategies.v[i] */
  tune_strings unavailable;      /* "device: why" */
  tune_flag *flags;
  size_t num_flags;
} tune_listing;
/* Runs `cnnbench --list_plugins --list_format=json`; false with a message in err. */
bool tune_listing_load(const char *cnnbench, tune_listing *out, char *err, size_t err_size);
const tune_flag *tune_listing_flag(const tune_listing *l, const char *name);
void tune_listing_free(tune_listing *l);

/* One axis of the space: a flag and the values to try ("" leaves it unset). */
typedef struct tune_axis {
  char *flag;
  tune_strings values;
  char *strategy; /* only with this strategy; NULL: with every one but independent */
} tune_axis;

typedef struct tune_space {
  tune_strings strategies; /* to search; independent is kept apart as the ceiling */
  bool have_independent;
  tune_strings precisions;
  int *batches; /* explicit sizes; NULL: doubling from batch_start */
  size_t num_batches;
  int batch_start;
  int *processes; /* layouts: processes per run (replicas per process = devices / it) */
  size_t num_processes;
  int *threads; /* --num_intra_threads values; NULL: 0, and cores/processes for P > 1 */
  size_t num_threads;
  tune_axis *knobs;
  size_t num_knobs;
  tune_strings fixed; /* "--flag=value" for every run */
  tune_strings notes; /* what was left out and why, for the report */
} tune_space;
/* The space from the listing, narrowed or widened by the --space file (NULL: none);
 * false with "FILE:LINE: why" in err. */
bool tune_space_build(const tune_listing *l, const tune_options *o, tune_space *s, char *err,
                      size_t err_size);
void tune_space_free(tune_space *s);
/* The --space file's text (`name` for messages) into s, which tune_space_build filled from
 * the listing first; sets *knob_lines when a line names a strategy's knob. False with
 * "NAME:LINE: why" in err (a flag set on two lines names both). What tune_space_build
 * does with the file, apart so tests/fuzz/fuzz_tune_space.c can give it any bytes. */
bool tune_space_parse(const tune_listing *l, const tune_options *o, tune_space *s, const char *name,
                      const char *text, size_t text_size, bool *knob_lines, char *err,
                      size_t err_size);

/* One configuration. */
typedef struct tune_candidate {
  char *strategy, *precision;
  int batch, replicas, processes, threads;
  tune_strings knobs; /* "--flag=value" */
  tune_strings flags; /* every cnnbench flag of its command, knobs and fixed ones included */
  char *key;          /* every flag of its command but the run's length and log: the identity */
  char *label;        /* short, for tables and the chart */
  bool ceiling;       /* independent: measured, shown, never picked */
} tune_candidate;
/* `knobs` may be NULL. */
tune_candidate *tune_candidate_new(const char *model, const tune_options *o, const tune_space *s,
                                   const char *strategy, int processes, int threads, int batch,
                                   const char *precision, const tune_strings *knobs);
void tune_candidate_free(tune_candidate *c);
/* The child's argv (NULL-terminated, owned strings): [mpirun -np P] cnnbench flags... */
char **tune_candidate_argv(const tune_candidate *c, const char *model, const tune_options *o,
                           int steps, int warmup, const char *log_dir);
void tune_argv_free(char **argv);
char *tune_argv_join(char *const *argv);

/* ---- one child run ------------------------------------------------------------- */
typedef struct tune_result {
  char *model, *key, *label, *kind; /* kind: "probe", "search", "ceiling" */
  char *strategy;
  int steps;
  bool ok;
  bool oom;      /* refused for memory */
  double ips;    /* images/sec over the world */
  double spread; /* half the width of its ~95% interval */
  double step_mean;
  double wall_s;
  long peak_rss_kb; /* the largest process's; 0 unknown */
  char *error;      /* first error line, when !ok */
  char *command;
} tune_result;

typedef enum tune_run_end { TUNE_RUN_DONE, TUNE_RUN_TIMEOUT, TUNE_RUN_INTERRUPTED } tune_run_end;
/* Runs argv with stdout and stderr into log_dir, killing it after timeout_s. Fills r's
 * measurement (ok, ips, spread, error...) from the log. */
tune_run_end tune_child_run(char **argv, const char *log_dir, double timeout_s, tune_result *r);
/* r's measurement from the benchmark log in log_dir (ok, ips, spread, step_mean; the
 * summary's error of a failed run). */
void tune_child_read_log(const char *log_dir, tune_result *r);
/* Set by SIGINT / SIGTERM: the child is stopped, results kept, the call ends. */
extern volatile int tune_interrupted;
/* What the search calls to run a candidate and to read the clock: tune_child_run and
 * the monotonic clock, unless a test puts a simulation in their place
 * (tests/unit/tune/test_tune_search.c: a known step time, virtual seconds). */
typedef tune_run_end (*tune_runner)(char **argv, const char *log_dir, double timeout_s,
                                    tune_result *r);
extern tune_runner tune_run;
extern double (*tune_clock_hook)(void);

/* ---- results ------------------------------------------------------------------- */
typedef struct tune_results {
  tune_result *v;
  size_t n, cap;
  FILE *file; /* results.jsonl, appended */
} tune_results;
/* Reads OUT/results.jsonl if there is one and opens it for appending. */
bool tune_results_open(tune_results *rs, const char *out_dir, char *err, size_t err_size);
/* Appends a copy of r (to memory and the file, flushed). */
const tune_result *tune_results_add(tune_results *rs, const tune_result *r);
/* The measurement of (model, key) with at least `steps` steps (the fewest such), or a
 * failure of it at any length; NULL when none. */
const tune_result *tune_results_find(const tune_results *rs, const char *model, const char *key,
                                     int steps);
void tune_results_close(tune_results *rs);
void tune_result_free(tune_result *r);

/* ---- the search ---------------------------------------------------------------- */
typedef struct tune_model_outcome {
  char *model;
  const tune_result *winner;  /* NULL: nothing ran */
  tune_strings tied;          /* labels whose interval overlaps the winner's */
  const tune_result **ranked; /* the searched candidates' deepest measurements, best first */
  int *rank;                  /* the rank shown: equal for a tie with the row above's group */
  double *efficiency;         /* ranked[i] / its independent ceiling; NAN: not measured */
  size_t num_ranked;
  const tune_result **failed;
  size_t num_failed;
  const tune_result **ceilings;
  size_t num_ceilings;
  tune_candidate *winner_candidate;
  char *note;        /* why the search stopped where it did */
  bool not_measured; /* an interruption came before its search began */
} tune_model_outcome;

typedef struct tune_clock {
  double start, budget_s;
  double spent_running; /* seconds in children this call (cached results are free) */
} tune_clock;
double tune_now(void);
double tune_left(const tune_clock *c);

/* Searches one model within `model_budget_s`; TUNE_EXIT_* (INPUT: budget too small for
 * one run; INTERRUPTED). */
int tune_search_model(const char *model, const tune_options *o, const tune_space *s,
                      tune_results *rs, tune_clock *clock, double model_budget_s,
                      tune_model_outcome *out, char *err, size_t err_size);
void tune_outcome_free(tune_model_outcome *m);
bool tune_intervals_overlap(const tune_result *a, const tune_result *b);

/* ---- the report ---------------------------------------------------------------- */
/* report.md, and per model <model>.svg and <model>.flags; false with err. */
bool tune_report_write(const tune_options *o, const tune_listing *l, const tune_space *s,
                       const tune_model_outcome *m, size_t num_models, const tune_clock *clock,
                       bool interrupted, char *err, size_t err_size);

#endif
