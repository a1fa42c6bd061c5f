/* test_tune_search.c — cnnbench-tune's search (core/tune/) against a known optimum: the
 * runs are simulated with the fixture_tune device's step time (tests/fixtures/
 * fixture_tune_model.h: batch, precision, strategy, bucket size, seeded noise) on a
 * virtual clock, so the test is exact and takes no time. Each simulated run writes the
 * benchmark log a real child would and the tuner reads it back (tune_child_read_log).
 * The search must find the optimum within its budget, report the exact tie the fixture
 * makes (bucket sizes 2 and 8), never pick a refused (fp16) or out-of-memory (batch 128)
 * configuration, stay within its budget, stop early with a smaller one, and a second call
 * on the same directory must measure nothing again. */
#define _GNU_SOURCE
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tune.h"
#include "../../fixtures/fixture_tune_model.h"

static double vclock; /* virtual seconds */
static int sim_runs;  /* simulated runs so far */
static char dir[256]; /* --out */
static char space[300];

static double virtual_now(void) { return vclock; }

static const char *flag_value(char **argv, const char *name) {
  size_t len = strlen(name);
  for (size_t i = 0; argv[i]; i++)
    if (strncmp(argv[i], "--", 2) == 0 && strncmp(argv[i] + 2, name, len) == 0 &&
        argv[i][2 + len] == '=')
      return argv[i] + 3 + len;
  return NULL;
}

/* A child cnnbench on the fixture_tune device: refusals as the device says them, else a
 * benchmark log of the steps' known times. A run costs 0.3 s beyond its steps. */
static tune_run_end simulate(char **argv, const char *log_dir, double timeout_s, tune_result *r) {
  (void)timeout_s;
  sim_runs++;
  r->command = tune_argv_join(argv);
  const char *strategy = flag_value(argv, "variable_update");
  const char *precision = flag_value(argv, "precision");
  const char *bucket = flag_value(argv, "gradient_bucket_mb");
  long batch = atol(flag_value(argv, "batch_size"));
  int steps = atoi(flag_value(argv, "num_batches"));
  int warmup = atoi(flag_value(argv, "num_warmup_batches"));
  int replicas = atoi(flag_value(argv, "num_gpus"));
  vclock += 0.3;
  if (strcmp(precision, "fp16") == 0) {
    r->error = tune_format("cnnbench: error: --precision=fp16: device fixture_tune cannot run "
                           "it: fixture_tune: fp16 is not supported; it supports fp32, bf16");
    return TUNE_RUN_DONE;
  }
  if (batch > FIXTURE_TUNE_MAX_BATCH) {
    r->error = tune_format("cnnbench: error: fixture_tune: out of memory: batch %ld", batch);
    r->oom = true;
    return TUNE_RUN_DONE;
  }
  double ms = fixture_tune_step_ms(strategy, bucket ? atof(bucket) : 25, batch,
                                   strcmp(precision, "bf16") == 0);
  char *path = tune_format("%s/benchmark_run.rank0.jsonl", log_dir);
  FILE *log = fopen(path, "w");
  ck_assert_ptr_nonnull(log);
  fprintf(log, "{\"record\":\"run\",\"resolved\":{\"global_batch_size\":%ld}}\n", batch * replicas);
  for (int w = 1; w <= warmup; w++) vclock += ms * fixture_tune_noise(1234, (uint64_t)w) / 1000;
  for (int i = 1; i <= steps; i++) {
    double s = ms * fixture_tune_noise(1234, (uint64_t)(warmup + i)) / 1000;
    vclock += s;
    fprintf(log, "{\"record\":\"step\",\"step\":%d,\"step_seconds\":%.9f}\n", i, s);
  }
  fprintf(log, "{\"record\":\"summary\",\"status\":\"ok\",\"images_per_sec\":1}\n");
  fclose(log);
  free(path);
  tune_child_read_log(log_dir, r);
  return TUNE_RUN_DONE;
}

/* The listing cnnbench would give for the fixture: three strategies, the core's flags
 * the space file names. */
static void listing(tune_listing *l) {
  memset(l, 0, sizeof *l);
  l->version = tune_format("test");
  tune_strings_add(&l->models, "trivial");
  tune_strings_add(&l->devices, "fixture_tune");
  const char *strategies[] = {"independent", "parameter_server", "replicated"};
  for (int i = 0; i < 3; i++) {
    tune_strings_add(&l->strategies, strategies[i]);
    tune_strings_add(&l->strategy_plugins, strategies[i]);
  }
  static const struct {
    const char *name, *type, *def;
  } flags[] = {{"precision", "string", "fp32"},
               {"gradient_bucket_mb", "float", "25"},
               {"data_name", "string", "imagenet"},
               {"batch_size", "int", "0"},
               {"variable_update", "string", "independent"},
               {"num_intra_threads", "int", "0"}};
  l->num_flags = sizeof flags / sizeof flags[0];
  l->flags = tune_alloc(l->num_flags * sizeof *l->flags);
  for (size_t i = 0; i < l->num_flags; i++) {
    l->flags[i].name = tune_format("%s", flags[i].name);
    l->flags[i].type = tune_format("%s", flags[i].type);
    l->flags[i].owner = tune_format("core");
    l->flags[i].default_text = tune_format("%s", flags[i].def);
  }
  tune_strings_add(&l->flags[0].allowed, "fp32");
  tune_strings_add(&l->flags[0].allowed, "bf16");
  tune_strings_add(&l->flags[0].allowed, "fp16");
}

static void options(tune_options *o, double budget) {
  memset(o, 0, sizeof *o);
  tune_strings_add(&o->models, "trivial");
  o->device = tune_format("fixture_tune");
  o->budget_s = budget;
  o->num_devices = 1;
  o->processes = tune_format("auto");
  o->space_file = tune_format("%s", space);
  o->out_dir = tune_format("%s", dir);
  o->cnnbench = tune_format("cnnbench");
  o->min_batch_size = 32;
  o->max_batch_size = 256;
  o->first_steps = 3;
  o->ceilings = 3;
}

static void options_free(tune_options *o) {
  tune_strings_free(&o->models);
  free(o->device);
  free(o->processes);
  free(o->space_file);
  free(o->out_dir);
  free(o->cnnbench);
}

static void setup(void) {
  snprintf(dir, sizeof dir, "/tmp/test_tune_search.%d", (int)getpid());
  char *cmd = tune_format("rm -rf '%s'", dir);
  ck_assert_int_eq(system(cmd), 0);
  free(cmd);
  ck_assert_int_eq(mkdir(dir, 0755), 0);
  snprintf(space, sizeof space, "%s.space", dir);
  FILE *f = fopen(space, "w");
  ck_assert_ptr_nonnull(f);
  fputs("# the fixture's axes\n"
        "variable_update = replicated, parameter_server\n"
        "gradient_bucket_mb@replicated = 0.5, 2, 8   # 2 and 8 tie\n"
        "precision = fp32, bf16, fp16\n"
        "data_name := cifar10\n",
        f);
  fclose(f);
  tune_run = simulate;
  tune_clock_hook = virtual_now;
  vclock = 1000;
  sim_runs = 0;
}

static void teardown(void) {
  char *cmd = tune_format("rm -rf '%s' '%s'", dir, space);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
  free(cmd);
  tune_run = tune_child_run;
  tune_clock_hook = NULL;
}

typedef struct searched {
  tune_listing l;
  tune_options o;
  tune_space s;
  tune_results rs;
  tune_clock clock;
  tune_model_outcome m;
  int code;
} searched;

static void search(searched *x, double budget) {
  listing(&x->l);
  options(&x->o, budget);
  char err[1024] = "";
  ck_assert_msg(tune_space_build(&x->l, &x->o, &x->s, err, sizeof err), "%s", err);
  ck_assert_msg(tune_results_open(&x->rs, dir, err, sizeof err), "%s", err);
  x->clock = (tune_clock){.start = vclock, .budget_s = budget};
  x->code = tune_search_model("trivial", &x->o, &x->s, &x->rs, &x->clock, budget, &x->m, err,
                              sizeof err);
  ck_assert_msg(x->code == TUNE_EXIT_OK, "search: %d %s", x->code, err);
}

static void done(searched *x) {
  tune_outcome_free(&x->m);
  tune_results_close(&x->rs);
  tune_space_free(&x->s);
  tune_listing_free(&x->l);
  options_free(&x->o);
}

static bool is_optimum(const tune_result *r) {
  return strstr(r->label, "replicated 1x1 b64 bf16") == r->label &&
         (strstr(r->label, "gradient_bucket_mb=2") || strstr(r->label, "gradient_bucket_mb=8"));
}

START_TEST(finds_the_optimum_and_reports_the_tie) {
  searched x;
  search(&x, 120);
  ck_assert_ptr_nonnull(x.m.winner);
  ck_assert_msg(is_optimum(x.m.winner), "winner %s", x.m.winner->label);
  ck_assert(!x.m.winner_candidate->ceiling);
  /* 64 / 41 ms, within the noise. */
  ck_assert_msg(fabs(x.m.winner->ips - 1561) < 0.05 * 1561, "%.1f", x.m.winner->ips);
  /* The other bucket size of the optimum ties with it: rank 1 too, named as tied. */
  ck_assert_uint_eq(x.m.tied.n, 1);
  ck_assert_msg(strstr(x.m.tied.v[0], "replicated 1x1 b64 bf16") && is_optimum(x.m.ranked[1]),
                "tied: %s", x.m.tied.v[0]);
  ck_assert_int_eq(x.m.rank[1], 1);
  /* The next row is a third slower: not a tie. */
  ck_assert_uint_ge(x.m.num_ranked, 3);
  ck_assert_int_ne(x.m.rank[2], 1);
  /* The refused precision and the out-of-memory batch are recorded, never ranked. */
  bool fp16 = false, oom = false;
  for (size_t i = 0; i < x.m.num_failed; i++) {
    fp16 = fp16 || strstr(x.m.failed[i]->label, "fp16") != NULL;
    oom = oom || (x.m.failed[i]->oom && strstr(x.m.failed[i]->label, "b128"));
  }
  ck_assert(fp16 && oom);
  for (size_t i = 0; i < x.m.num_ranked; i++) {
    ck_assert(x.m.ranked[i]->ok);
    ck_assert_ptr_null(strstr(x.m.ranked[i]->label, "fp16"));
    ck_assert_ptr_null(strstr(x.m.ranked[i]->label, "b128"));
    ck_assert_ptr_null(strstr(x.m.ranked[i]->label, "b256")); /* doubling stopped at 128 */
  }
  /* The ceiling: independent at the winner's coordinates, 64 / 36 ms, never picked. */
  ck_assert_uint_ge(x.m.num_ceilings, 1);
  ck_assert_msg(isfinite(x.m.efficiency[0]) && fabs(x.m.efficiency[0] - 36.0 / 41.0) < 0.05,
                "efficiency %f", x.m.efficiency[0]);
  /* Within its budget (one run's worth of slack: the last one started inside it). */
  ck_assert_msg(vclock - x.clock.start <= 120 + 1, "spent %.1f", vclock - x.clock.start);
  int first_call = sim_runs;
  ck_assert_int_gt(first_call, 16);
  done(&x);

  /* A second call on the same directory continues: nothing is measured again. */
  searched y;
  search(&y, 120);
  ck_assert_int_eq(sim_runs, first_call);
  ck_assert(is_optimum(y.m.winner));
  done(&y);
}
END_TEST

START_TEST(a_small_budget_stops_early_and_never_picks_a_failure) {
  searched x;
  search(&x, 6);
  ck_assert_msg(vclock - x.clock.start <= 6 + 1, "spent %.1f", vclock - x.clock.start);
  ck_assert_ptr_nonnull(x.m.note);
  ck_assert_msg(strstr(x.m.note, "budget") || strstr(x.m.note, "would not fit"), "%s", x.m.note);
  if (x.m.winner) {
    ck_assert(x.m.winner->ok);
    ck_assert_ptr_null(strstr(x.m.winner->label, "fp16"));
    ck_assert_ptr_null(strstr(x.m.winner->label, "independent"));
  }
  done(&x);
  /* The same directory with a larger budget continues to the optimum. */
  int before = sim_runs;
  searched y;
  search(&y, 120);
  ck_assert_int_gt(sim_runs, before);
  ck_assert(is_optimum(y.m.winner));
  done(&y);
}
END_TEST

START_TEST(space_file_errors_name_file_and_line) {
  tune_listing l;
  listing(&l);
  tune_options o;
  options(&o, 60);
  FILE *f = fopen(space, "w");
  fputs("precision = fp32\n# fine\ngradient_bucket = 2, 8\n", f);
  fclose(f);
  tune_space s;
  char err[1024];
  ck_assert(!tune_space_build(&l, &o, &s, err, sizeof err));
  char want[512];
  snprintf(want, sizeof want,
           "%s:3: unknown flag --gradient_bucket (did you mean --gradient_bucket_mb?)", space);
  ck_assert_str_eq(err, want);
  tune_space_free(&s);
  f = fopen(space, "w");
  fputs("variable_update = replicated # a comment after a blank\n"
        "\n"
        "precision = fp32, fp64\n",
        f);
  fclose(f);
  ck_assert(!tune_space_build(&l, &o, &s, err, sizeof err));
  ck_assert_msg(strstr(err, ":3: --precision=fp64 is not allowed (one of fp32 bf16 fp16)"), "%s",
                err);
  tune_space_free(&s);
  f = fopen(space, "w");
  fputs("gradient_bucket_mb@replicated = 2#5 # a value with '#' is not a number\n", f);
  fclose(f);
  ck_assert(!tune_space_build(&l, &o, &s, err, sizeof err));
  ck_assert_msg(strstr(err, ":1: --gradient_bucket_mb=2#5: not a number"), "%s", err);
  tune_space_free(&s);
  f = fopen(space, "w");
  fputs("num_batches = 5\n", f);
  fclose(f);
  ck_assert(!tune_space_build(&l, &o, &s, err, sizeof err));
  ck_assert_msg(strstr(err, ":1: --num_batches is set by cnnbench-tune itself"), "%s", err);
  tune_space_free(&s);
  f = fopen(space, "w");
  fputs("gradient_bucket_mb@replicatd = 2\n", f);
  fclose(f);
  ck_assert(!tune_space_build(&l, &o, &s, err, sizeof err));
  ck_assert_msg(strstr(err, "no strategy 'replicatd' is installed (did you mean replicated?)"),
                "%s", err);
  tune_space_free(&s);
  tune_listing_free(&l);
  options_free(&o);
}
END_TEST

int main(void) {
  Suite *s = suite_create("tune_search");
  TCase *tc = tcase_create("tune_search");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, finds_the_optimum_and_reports_the_tie);
  tcase_add_test(tc, a_small_budget_stops_early_and_never_picks_a_failure);
  tcase_add_test(tc, space_file_errors_name_file_and_line);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed != 0;
}
