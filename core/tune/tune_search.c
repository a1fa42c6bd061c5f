/* tune_search.c — one model's search.
 *
 * 1. Probes, one short run each of the cheapest strategy (independent) on one process:
 *    every precision of the space (the device refuses those it cannot do), then batch
 *    sizes doubled from the space's first until the device refuses one for memory.
 * 2. Successive halving over the candidates (strategy x knobs x layout x threads x batch
 *    x precision): every candidate runs first_steps timed steps; the better half (and
 *    any that tie with the last one kept) runs twice as many; and so on until one is
 *    left or the next rung would not fit in the model's share of the budget. Figures of
 *    one rung are compared only with that rung's.
 * 3. The independent ceiling of the best finalists: the same layout, batch, precision
 *    and threads with no exchange at all, at the finalists' length.
 * Every run goes through measure(): a result of the same command in the result file is
 * reused; a run that fails is recorded with its first error line and the search goes
 * on without it. */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tune.h"

enum { WARMUP = 2, PROBE_STEPS = 1 };

typedef struct search {
  const char *model;
  const tune_options *o;
  const tune_space *s;
  tune_results *rs;
  tune_clock *clock;
  double deadline;   /* the model's share of the budget ends */
  double overhead_s; /* a run's wall time beyond its steps (start, setup), measured */
  double step_s;     /* a typical step, measured */
  int fresh_runs;    /* run by this call */
  int done, planned; /* for the progress line */
  int rung, steps;
  const tune_result *leader;
  bool budget_out, interrupted;
  char *stop_note;
  char *trim_note; /* a rung that took fewer finalists than halving keeps, for the time */
} search;

double tune_left(const tune_clock *c) { return c->budget_s - (tune_now() - c->start); }

bool tune_intervals_overlap(const tune_result *a, const tune_result *b) {
  return fabs(a->ips - b->ips) <= a->spread + b->spread;
}

static uint64_t fnv1a(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

static bool make_dirs(const char *path) {
  char *p = tune_format("%s", path);
  for (char *q = p + 1; *q; q++) {
    if (*q != '/') continue;
    *q = '\0';
    mkdir(p, 0755);
    *q = '/';
  }
  bool ok = mkdir(p, 0755) == 0 || access(p, W_OK) == 0;
  free(p);
  return ok;
}

/* A directory for one run's logs that no other run has written: made here (mkdir, never
 * an existing one), so a log read afterwards is this run's alone. A run of the same
 * candidate and length left by an earlier call (interrupted) keeps its directory, and
 * this one gets the next free suffix. NULL with errno. */
static char *new_run_dir(const char *out_dir, const char *model, const char *key, int steps) {
  char *parent = tune_format("%s/runs/%s", out_dir, model);
  bool made = make_dirs(parent);
  free(parent);
  if (!made) return NULL;
  for (int n = 1; n < 1000; n++) {
    char *dir = n == 1 ? tune_format("%s/runs/%s/%016llx-s%d", out_dir, model,
                                     (unsigned long long)fnv1a(key), steps)
                       : tune_format("%s/runs/%s/%016llx-s%d-%d", out_dir, model,
                                     (unsigned long long)fnv1a(key), steps, n);
    if (mkdir(dir, 0755) == 0) return dir;
    int e = errno;
    free(dir);
    if (e != EEXIST) {
      errno = e;
      return NULL;
    }
  }
  errno = EEXIST;
  return NULL;
}

static void format_left(double s, char *out, size_t size) {
  if (s < 0) s = 0;
  if (s >= 60) snprintf(out, size, "%dm%02ds", (int)(s / 60), (int)s % 60);
  else snprintf(out, size, "%.0fs", s);
}

static void progress(const search *x) {
  char left[32];
  format_left(tune_left(x->clock), left, sizeof left);
  if (x->leader)
    fprintf(stderr,
            "cnnbench-tune: %s rung %d (%d steps): %d/%d runs, leader %s %.1f +- %.1f "
            "images/sec, %s left\n",
            x->model, x->rung, x->steps, x->done, x->planned, x->leader->label, x->leader->ips,
            x->leader->spread, left);
  else
    fprintf(stderr, "cnnbench-tune: %s %s: %d/%d runs, no leader yet, %s left\n", x->model,
            x->rung < 0 ? "probes" : "search", x->done, x->planned, left);
}

/* The expected wall time of a run of `steps` (NAN before anything was measured). */
static double estimate(const search *x, const tune_candidate *c, int steps) {
  (void)c;
  if (x->step_s <= 0) return NAN;
  return x->overhead_s + (steps + WARMUP) * x->step_s * 1.2;
}

/* A measurement of c at `steps`: from the result file, or run now. NULL when the budget
 * or Ctrl-C stops it (x->budget_out / x->interrupted say which). */
static const tune_result *measure(search *x, const tune_candidate *c, const char *kind, int steps,
                                  int warmup, char *err, size_t err_size, int *code) {
  const tune_result *cached = tune_results_find(x->rs, x->model, c->key, steps);
  if (cached) return cached;
  if (x->interrupted || tune_interrupted) {
    x->interrupted = true;
    return NULL;
  }
  double left = tune_left(x->clock), expect = estimate(x, c, steps);
  double model_left = x->deadline - tune_now();
  if (left <= 0 ||
      (x->fresh_runs > 0 && isfinite(expect) && (expect > left || expect > model_left))) {
    x->budget_out = true;
    return NULL;
  }
  char *dir = new_run_dir(x->o->out_dir, x->model, c->key, steps);
  if (!dir) {
    snprintf(err, err_size, "--out=%s: cannot make a directory for a run in %s/runs/%s: %s",
             x->o->out_dir, x->o->out_dir, x->model, strerror(errno));
    *code = TUNE_EXIT_RUNTIME;
    return NULL;
  }
  /* The first run has only the budget to go by; later ones get five times their
   * estimate (at least a minute): a child that hangs is stopped and recorded. */
  bool first = x->fresh_runs == 0 && x->step_s <= 0;
  double timeout = first ? (left > 1 ? left : 1) : fmax(60, 5 * expect);
  char **argv = tune_candidate_argv(c, x->model, x->o, steps, warmup, dir);
  tune_result r = {0};
  tune_run_end end = tune_run(argv, dir, timeout, &r);
  tune_argv_free(argv);
  free(dir);
  x->fresh_runs++;
  if (end == TUNE_RUN_INTERRUPTED) {
    x->interrupted = true;
    tune_result_free(&r);
    return NULL;
  }
  if (first && (end == TUNE_RUN_TIMEOUT || r.wall_s > x->o->budget_s)) {
    snprintf(err, err_size,
             "--budget=%gs is too small for one run of %s: its first, a %d-step probe, %s %.1f s",
             x->o->budget_s, x->model, steps,
             end == TUNE_RUN_TIMEOUT ? "did not end within" : "took",
             end == TUNE_RUN_TIMEOUT ? timeout : r.wall_s);
    *code = TUNE_EXIT_INPUT;
    tune_result_free(&r);
    return NULL;
  }
  r.model = tune_format("%s", x->model);
  r.key = tune_format("%s", c->key);
  r.label = tune_format("%s", c->label);
  r.kind = tune_format("%s", kind);
  r.strategy = tune_format("%s", c->strategy);
  r.steps = steps;
  /* independent under mpirun is P worlds of one process (it joins no MPI job), each
   * counting only its own images as "rank 0": the ceiling of the P devices is their sum. */
  if (r.ok && c->ceiling && c->processes > 1) {
    r.ips *= c->processes;
    r.spread *= c->processes;
  }
  if (r.ok && r.step_mean > 0) {
    /* What a run costs beyond its steps, and a typical step, from what ran. */
    double over = r.wall_s - (steps + warmup) * r.step_mean;
    x->overhead_s = x->overhead_s > 0 ? fmax(x->overhead_s * 0.7 + over * 0.3, 0.05)
                                      : fmax(over, 0.05);
    x->step_s = x->step_s > 0 ? fmax(x->step_s, r.step_mean * 0.5) * 0.5 + r.step_mean * 0.5
                              : r.step_mean;
  }
  const tune_result *stored = tune_results_add(x->rs, &r);
  tune_result_free(&r);
  x->done++;
  if (!stored->ok)
    fprintf(stderr, "cnnbench-tune: %s: %s failed: %s\n", x->model, stored->label,
            stored->error ? stored->error : "?");
  return stored;
}

/* ---- the candidates -------------------------------------------------------------- */

typedef struct cand_list {
  tune_candidate **v;
  size_t n, cap;
} cand_list;

static void cand_push(cand_list *l, tune_candidate *c) {
  if (l->n == l->cap) {
    l->cap = l->cap ? 2 * l->cap : 64;
    tune_candidate **v = realloc(l->v, l->cap * sizeof *v);
    if (!v) exit(TUNE_EXIT_RUNTIME);
    l->v = v;
  }
  l->v[l->n++] = c;
}

static int cores(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int)n : 1;
}

/* The knob settings of `strategy`: the product of its axes' values. */
static void knob_product(const tune_space *s, const char *strategy, size_t axis, tune_strings *cur,
                         void (*emit)(void *, const tune_strings *), void *arg) {
  if (axis == s->num_knobs) {
    emit(arg, cur);
    return;
  }
  const tune_axis *a = &s->knobs[axis];
  if (a->strategy && strcmp(a->strategy, strategy) != 0) {
    knob_product(s, strategy, axis + 1, cur, emit, arg);
    return;
  }
  for (size_t i = 0; i < a->values.n; i++) {
    size_t before = cur->n;
    if (a->values.v[i][0]) {
      char *f = tune_format("--%s=%s", a->flag, a->values.v[i]);
      tune_strings_add(cur, f);
      free(f);
    }
    knob_product(s, strategy, axis + 1, cur, emit, arg);
    while (cur->n > before) free(cur->v[--cur->n]);
    if (cur->v) cur->v[cur->n] = NULL;
  }
}

typedef struct emit_ctx {
  search *x;
  cand_list *out;
  const char *strategy;
  const int *batches;
  size_t num_batches;
  const tune_strings *precisions;
} emit_ctx;

static void emit_candidates(void *arg, const tune_strings *knobs) {
  emit_ctx *e = arg;
  const tune_space *s = e->x->s;
  for (size_t p = 0; p < s->num_processes; p++) {
    int procs = s->processes[p];
    int defaults[2] = {0, cores() / procs > 0 ? cores() / procs : 1};
    const int *threads = s->threads ? s->threads : defaults;
    size_t nt = s->threads ? s->num_threads : procs > 1 ? 2 : 1;
    for (size_t t = 0; t < nt; t++)
      for (size_t b = 0; b < e->num_batches; b++)
        for (size_t q = 0; q < e->precisions->n; q++)
          cand_push(e->out,
                    tune_candidate_new(e->x->model, e->x->o, s, e->strategy, procs, threads[t],
                                       e->batches[b], e->precisions->v[q], knobs));
  }
}

/* ---- ranking --------------------------------------------------------------------- */

typedef struct entry {
  tune_candidate *c;
  const tune_result *r; /* the deepest measurement */
  int rung;
} entry;

static int by_rung_then_speed(const void *a, const void *b) {
  const entry *x = a, *y = b;
  if (x->rung != y->rung) return y->rung - x->rung;
  return (x->r->ips < y->r->ips) - (x->r->ips > y->r->ips);
}

static int count_ties_at(const entry *v, size_t n, size_t last) {
  int extra = 0;
  for (size_t i = last + 1; i < n; i++)
    if (tune_intervals_overlap(v[last].r, v[i].r)) extra++;
  return extra;
}

/* ---- the search ------------------------------------------------------------------ */

static void fail_list_add(tune_model_outcome *out, const tune_result *r) {
  for (size_t i = 0; i < out->num_failed; i++)
    if (out->failed[i] == r) return;
  const tune_result **v = realloc(out->failed, (out->num_failed + 1) * sizeof *v);
  if (!v) exit(TUNE_EXIT_RUNTIME);
  out->failed = v;
  out->failed[out->num_failed++] = r;
}

static tune_candidate *probe_candidate(search *x, int batch, const char *precision) {
  const char *strategy = x->s->have_independent ? "independent" : x->s->strategies.v[0];
  return tune_candidate_new(x->model, x->o, x->s, strategy, 1, 0, batch, precision, NULL);
}

/* What the probes found: the precisions that ran, and the batch sizes to search. */
typedef struct probed {
  tune_strings precisions;
  int *batches;
  size_t num_batches;
} probed;

static void probed_free(probed *p) {
  tune_strings_free(&p->precisions);
  free(p->batches);
}

/* Step 1: every precision of the space at the first batch size, then (unless the space
 * lists its sizes) batch sizes doubled from the first until one fails. The exit code so
 * far (x->interrupted says whether a signal cut it short). */
static int probe(search *x, tune_model_outcome *out, probed *p, char *err, size_t err_size) {
  const tune_space *s = x->s;
  int code = TUNE_EXIT_OK;
  int first_batch = s->batches ? s->batches[0] : s->batch_start;
  x->planned = (int)s->precisions.n + (s->batches ? 0 : 4);
  for (size_t i = 0; i < s->precisions.n && code == TUNE_EXIT_OK; i++) {
    tune_candidate *c = probe_candidate(x, first_batch, s->precisions.v[i]);
    const tune_result *r = measure(x, c, "probe", PROBE_STEPS, 1, err, err_size, &code);
    tune_candidate_free(c);
    if (!r) break;
    if (r->ok) tune_strings_add(&p->precisions, s->precisions.v[i]);
    else fail_list_add(out, r);
    progress(x);
  }
  if (code != TUNE_EXIT_OK || x->interrupted || !p->precisions.n) return code;
  if (s->batches) {
    p->batches = tune_alloc(s->num_batches * sizeof *p->batches);
    memcpy(p->batches, s->batches, s->num_batches * sizeof *p->batches);
    p->num_batches = s->num_batches;
    return code;
  }
  p->batches = tune_alloc(32 * sizeof *p->batches);
  for (int b = s->batch_start; b <= x->o->max_batch_size && p->num_batches < 32; b *= 2) {
    tune_candidate *c = probe_candidate(x, b, p->precisions.v[0]);
    const tune_result *r = measure(x, c, "probe", PROBE_STEPS, 1, err, err_size, &code);
    tune_candidate_free(c);
    if (!r) break;
    progress(x);
    if (!r->ok) {
      fail_list_add(out, r); /* the largest size tried: refused (memory) or failed */
      break;
    }
    p->batches[p->num_batches++] = b;
  }
  return code;
}

/* Every candidate of the space for the probed precisions and batch sizes, in a fixed
 * shuffled order: a budget that runs out before every candidate ran once leaves a sample
 * of the whole space measured, not its first strategies only. The same order every call,
 * so a later call continues where this one stopped. Written to OUT/<model>.candidates,
 * one command a line, for bench/tune_vs_grid.sh's grid. */
static void list_candidates(search *x, const probed *p, cand_list *all) {
  const tune_space *s = x->s;
  for (size_t i = 0; i < s->strategies.n; i++) {
    emit_ctx e = {x, all, s->strategies.v[i], p->batches, p->num_batches, &p->precisions};
    tune_strings cur = {0};
    knob_product(s, s->strategies.v[i], 0, &cur, emit_candidates, &e);
    tune_strings_free(&cur);
  }
  uint64_t state = 0x2545F4914F6CDD1Dull;
  for (size_t i = all->n; i > 1; i--) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    size_t j = (size_t)((state >> 33) % i);
    tune_candidate *t = all->v[i - 1];
    all->v[i - 1] = all->v[j];
    all->v[j] = t;
  }
  char *list_path = tune_format("%s/%s.candidates", x->o->out_dir, x->model);
  FILE *list = fopen(list_path, "w");
  for (size_t i = 0; list && i < all->n; i++) fprintf(list, "%s\n", all->v[i]->key);
  if (list) fclose(list);
  free(list_path);
}

/* How many of the num_alive survivors (best first) the next rung takes: the better half
 * and those tying with the last kept, fewer when the next rung would not fit in the time
 * left; 0 ends the search (x->stop_note says why). */
static size_t next_rung_keeps(search *x, const entry *alive, size_t num_alive) {
  size_t keep = (num_alive + 1) / 2;
  size_t cap = num_alive - 1 > (3 * num_alive + 3) / 4 ? (3 * num_alive + 3) / 4 : num_alive - 1;
  keep += (size_t)count_ties_at(alive, num_alive, keep - 1);
  /* A few finalists that all tie: noise cannot order them, and a longer rung would
   * only drop one by chance. They end here, reported as a tie. */
  if (keep >= num_alive && num_alive <= 3) {
    x->stop_note = tune_format("stopped after rung %d (%d steps): its %zu finalists tie "
                               "within the noise",
                               x->rung, x->steps, num_alive);
    return 0;
  }
  if (keep > cap) keep = cap;
  if (keep < 1) keep = 1;
  /* Would the next rung (and the ceilings after it) fit in what is left? If not, its
   * best few that do (at least two): a longer look at the leaders decides more than
   * stopping on a rung whose short runs tie. */
  double cost = 0;
  double ceiling_cost = (x->s->have_independent ? (double)x->o->ceilings : 0) *
                        estimate(x, NULL, x->steps * 2);
  double room = fmin(x->deadline - tune_now(), tune_left(x->clock));
  size_t fit = 0;
  for (size_t i = 0; i < keep; i++) {
    const tune_result *cached = tune_results_find(x->rs, x->model, alive[i].c->key, x->steps * 2);
    if (!cached) cost += estimate(x, alive[i].c, x->steps * 2);
    if (cost + ceiling_cost <= room) fit = i + 1;
  }
  if (fit < keep && fit >= 2) {
    free(x->trim_note);
    x->trim_note = tune_format("rung %d (%d steps) took the best %zu of the %zu halving keeps: "
                               "the time left fit no more",
                               x->rung + 1, x->steps * 2, fit, keep);
    return fit;
  }
  if (fit < keep) {
    x->stop_note = tune_format("stopped after rung %d (%d steps): the next rung's %zu runs "
                               "would not fit in the time left",
                               x->rung, x->steps, keep);
    return 0;
  }
  return keep;
}

/* Step 2: successive halving over every candidate. *full_rung: the deepest rung every
 * survivor ran, the ranking's. The exit code. */
static int halve(search *x, const cand_list *all, tune_model_outcome *out, int *full_rung,
                 char *err, size_t err_size) {
  int code = TUNE_EXIT_OK;
  entry *alive = tune_alloc((all->n ? all->n : 1) * sizeof *alive);
  size_t num_alive = 0;
  for (size_t i = 0; i < all->n; i++) alive[num_alive++] = (entry){all->v[i], NULL, 0};
  x->planned += (int)all->n;
  *full_rung = 0;
  for (x->rung = 0, x->steps = x->o->first_steps;; x->rung++, x->steps *= 2) {
    size_t measured = 0;
    for (size_t i = 0; i < num_alive; i++) {
      const tune_result *r = measure(x, alive[i].c, "search", x->steps, WARMUP, err, err_size,
                                     &code);
      if (!r) break;
      alive[i].r = r;
      alive[i].rung = x->rung;
      measured = i + 1;
      if (r->ok && (!x->leader || x->leader->steps < r->steps || r->ips > x->leader->ips))
        x->leader = r;
      if (!r->ok) fail_list_add(out, r);
      progress(x);
    }
    if (code != TUNE_EXIT_OK) break;
    /* Those measured at this rung that ran, best first; the rest end here. */
    size_t ok = 0;
    for (size_t i = 0; i < measured; i++)
      if (alive[i].r->ok) alive[ok++] = alive[i];
    qsort(alive, ok, sizeof *alive, by_rung_then_speed);
    if (ok) x->leader = alive[0].r;
    if (measured < num_alive) {
      const char *why = x->interrupted || tune_interrupted ? "interrupted" : "the budget ran out";
      if (x->rung == 0)
        x->stop_note = tune_format("%s after %zu of %zu candidates at rung 0 (%d steps); the "
                                   "rest were not measured",
                                   why, measured, num_alive, x->steps);
      else
        x->stop_note = tune_format("%s during rung %d (%d steps): the ranking is rung %d's", why,
                                   x->rung, x->steps, x->rung - 1);
      break;
    }
    num_alive = ok;
    *full_rung = x->rung;
    if (num_alive <= 1 || x->interrupted) break;
    size_t keep = next_rung_keeps(x, alive, num_alive);
    if (!keep) break;
    num_alive = keep;
    x->planned += (int)keep;
  }
  free(alive);
  return code;
}

/* Each candidate's deepest ok measurement up to full_rung, deeper rungs first, then
 * faster: into rank (all->n entries), how many. */
static size_t rank_measured(const search *x, const cand_list *all, int full_rung, entry *rank) {
  size_t total = 0;
  for (size_t i = 0; i < all->n; i++) {
    const tune_result *best = NULL;
    int best_rung = -1;
    for (int r = 0, steps = x->o->first_steps; r <= full_rung; r++, steps *= 2) {
      const tune_result *m = tune_results_find(x->rs, x->model, all->v[i]->key, steps);
      if (!m || !m->ok || m->steps != steps) continue;
      best = m;
      best_rung = r;
    }
    if (best) rank[total++] = (entry){all->v[i], best, best_rung};
  }
  qsort(rank, total, sizeof *rank, by_rung_then_speed);
  return total;
}

/* Step 3: the independent ceiling of the best finalists, at the winner's length. */
static int measure_ceilings(search *x, const entry *rank, size_t total, int code, char *err,
                            size_t err_size) {
  if (!x->s->have_independent) return code;
  int ceiling_steps = total ? rank[0].r->steps : x->steps;
  x->planned += (int)(total < (size_t)x->o->ceilings ? total : (size_t)x->o->ceilings);
  for (size_t i = 0; i < total && i < (size_t)x->o->ceilings; i++) {
    if (code != TUNE_EXIT_OK || x->interrupted) break;
    const tune_candidate *c = rank[i].c;
    tune_candidate *ind = tune_candidate_new(x->model, x->o, x->s, "independent", c->processes,
                                             c->threads, c->batch, c->precision, NULL);
    x->budget_out = false;
    const tune_result *r = measure(x, ind, "ceiling", ceiling_steps, WARMUP, err, err_size, &code);
    tune_candidate_free(ind);
    if (r) progress(x);
  }
  return code;
}

/* The ranked rows into out: ranks (a row shares its group's when their intervals overlap
 * at one rung), each row's efficiency against its ceiling, the winner and its ties. The
 * winner's candidate moves from all to out. */
static void fill_outcome(const search *x, cand_list *all, const entry *rank, size_t total,
                         tune_model_outcome *out) {
  const tune_results *rs = x->rs;
  out->ranked = tune_alloc((total ? total : 1) * sizeof *out->ranked);
  out->rank = tune_alloc((total ? total : 1) * sizeof *out->rank);
  out->efficiency = tune_alloc((total ? total : 1) * sizeof *out->efficiency);
  out->ceilings = tune_alloc((total ? total : 1) * sizeof *out->ceilings);
  size_t group = 0;
  for (size_t i = 0; i < total; i++) {
    out->ranked[i] = rank[i].r;
    /* A row shares the rank of its group's first row when their intervals overlap at
     * the same rung: a tie, never ordered by noise. */
    if (i > 0 && rank[i].rung == rank[group].rung &&
        tune_intervals_overlap(rank[group].r, rank[i].r)) {
      out->rank[i] = out->rank[group];
    } else {
      group = i;
      out->rank[i] = (int)i + 1;
    }
    const tune_candidate *c = rank[i].c;
    tune_candidate *ind = tune_candidate_new(x->model, x->o, x->s, "independent", c->processes,
                                             c->threads, c->batch, c->precision, NULL);
    /* The ceiling measured at the row's own length, else the longest there is (never a
     * one-step probe). */
    const tune_result *ceiling = NULL;
    for (size_t k = 0; k < rs->n; k++) {
      const tune_result *m = &rs->v[k];
      if (!m->ok || strcmp(m->kind, "probe") == 0 || strcmp(m->model, x->model) != 0 ||
          strcmp(m->key, ind->key) != 0)
        continue;
      if (!ceiling || (ceiling->steps != rank[i].r->steps &&
                       (m->steps == rank[i].r->steps || m->steps > ceiling->steps)))
        ceiling = m;
    }
    tune_candidate_free(ind);
    bool usable = ceiling != NULL;
    out->efficiency[i] = usable ? rank[i].r->ips / ceiling->ips : NAN;
    if (usable) {
      bool seen = false;
      for (size_t j = 0; j < out->num_ceilings; j++) seen = seen || out->ceilings[j] == ceiling;
      if (!seen) out->ceilings[out->num_ceilings++] = ceiling;
    }
  }
  out->num_ranked = total;
  if (!total) return;
  out->winner = rank[0].r;
  for (size_t i = 1; i < total && out->rank[i] == 1; i++)
    tune_strings_add(&out->tied, rank[i].r->label);
  for (size_t i = 0; i < all->n; i++)
    if (all->v[i] == rank[0].c) all->v[i] = NULL;
  out->winner_candidate = rank[0].c;
}

/* out->note: why the search ended where it did; takes x's notes. */
static void write_note(search *x, const entry *rank, size_t total, tune_model_outcome *out) {
  if (out->note) {
    free(x->stop_note);
  } else {
    char *note = x->stop_note
                     ? x->stop_note
                     : tune_format("searched every candidate to rung %d (%d steps)",
                                   total ? rank[0].rung : 0, total ? rank[0].r->steps : x->steps);
    out->note = x->trim_note ? tune_format("%s; %s", note, x->trim_note) : note;
    if (x->trim_note) free(note);
  }
  free(x->trim_note);
  x->stop_note = x->trim_note = NULL;
}

int tune_search_model(const char *model, const tune_options *o, const tune_space *s,
                      tune_results *rs, tune_clock *clock, double model_budget_s,
                      tune_model_outcome *out, char *err, size_t err_size) {
  memset(out, 0, sizeof *out);
  out->model = tune_format("%s", model);
  search x = {.model = model, .o = o, .s = s, .rs = rs, .clock = clock, .rung = -1};
  x.deadline = tune_now() + model_budget_s;

  probed p = {0};
  int code = probe(&x, out, &p, err, err_size);
  if (code != TUNE_EXIT_OK || x.interrupted) {
    probed_free(&p);
    return code != TUNE_EXIT_OK ? code : TUNE_EXIT_INTERRUPTED;
  }
  if (!p.precisions.n || !p.num_batches) {
    out->note = tune_format("nothing ran: %s", !p.precisions.n ? "every precision was refused"
                                                               : "the first batch size failed");
    probed_free(&p);
    return TUNE_EXIT_OK;
  }

  cand_list all = {0};
  list_candidates(&x, &p, &all);
  int full_rung;
  code = halve(&x, &all, out, &full_rung, err, err_size);
  x.interrupted = x.interrupted || tune_interrupted;
  entry *rank = tune_alloc((all.n ? all.n : 1) * sizeof *rank);
  size_t total = rank_measured(&x, &all, full_rung, rank);
  code = measure_ceilings(&x, rank, total, code, err, err_size);
  fill_outcome(&x, &all, rank, total, out);
  write_note(&x, rank, total, out);

  for (size_t i = 0; i < all.n; i++) tune_candidate_free(all.v[i]);
  free(all.v);
  free(rank);
  probed_free(&p);
  if (code != TUNE_EXIT_OK) return code;
  return x.interrupted ? TUNE_EXIT_INTERRUPTED : TUNE_EXIT_OK;
}

void tune_outcome_free(tune_model_outcome *m) {
  free(m->model);
  tune_strings_free(&m->tied);
  free(m->ranked);
  free(m->rank);
  free(m->efficiency);
  free(m->failed);
  free(m->ceilings);
  tune_candidate_free(m->winner_candidate);
  free(m->note);
  memset(m, 0, sizeof *m);
}
