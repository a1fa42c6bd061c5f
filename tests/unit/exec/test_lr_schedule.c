/* test_lr_schedule.c — tf_cnn_benchmarks' learning-rate rules: piecewise boundaries
 * (the rate changes on the first step of the named epoch, also with fractional batches
 * per epoch), staircase exponential decay and its floor, linear warm-up from 0, the
 * model's own schedule (never warmed up; both hooks), schedules in epochs refused when
 * the epoch's size is unknown, the flag combinations tf_cnn_benchmarks refuses (also
 * before setup), and bad schedule strings refused with a message naming the flag and
 * the bad part. */
#include <check.h>
#include <math.h>
#include <string.h>

#include "flags/flags.h"
#include "exec/lr_schedule.h"

/* A dataset kind the schedule hands through to the model's hook untouched. */
enum { TOY_DATASET = 7 };

static cnnb_ctx *ctx;

static void setup(void) { ctx = cnnb_ctx_create("test", NULL); }
static void teardown(void) { cnnb_ctx_destroy(ctx); }

/* 1000 examples, batch 100: 10 steps per epoch. */
static cnnb_lr_config base(void) {
  return (cnnb_lr_config){.examples_per_epoch = 1000, .global_batch_size = 100};
}

static cnnb_lr_schedule *make(const cnnb_lr_config *cfg) {
  cnnb_lr_schedule *s = NULL;
  cnnb_status st = cnnb_lr_schedule_create(ctx, cfg, &s);
  ck_assert_msg(st == CNNB_OK, "create: %s", cnnb_error_message(ctx));
  return s;
}

static void refused(const cnnb_lr_config *cfg, const char *needle1, const char *needle2);

static void expect(const cnnb_lr_schedule *s, int64_t step, double want) {
  float got = cnnb_lr_schedule_at(s, step);
  ck_assert_msg(fabs(got - want) <= 1e-7 * fmax(1.0, fabs(want)), "step %lld: lr %.9g, want %.9g",
                (long long)step, got, want);
}

START_TEST(piecewise_boundaries) {
  cnnb_lr_config c = base();
  c.piecewise = "0.1;2;0.01;4;0.001";
  cnnb_lr_schedule *s = make(&c);
  expect(s, 0, 0.1);
  expect(s, 19, 0.1);  /* last step of epoch 1 */
  expect(s, 20, 0.01); /* first step of epoch 2 */
  expect(s, 39, 0.01);
  expect(s, 40, 0.001);
  expect(s, 100000, 0.001);
  ck_assert_ptr_nonnull(strstr(cnnb_lr_schedule_describe(s), "piecewise"));
  cnnb_lr_schedule_destroy(s);

  /* 10.5 batches per epoch: boundary int(2 * 10.5) - 1 = 20. */
  c.examples_per_epoch = 1050;
  c.piecewise = " 0.1 ; 2 ; 0.01 ";
  s = make(&c);
  expect(s, 20, 0.1);
  expect(s, 21, 0.01);
  cnnb_lr_schedule_destroy(s);
}
END_TEST

START_TEST(unknown_epoch) {
  /* A datasource that does not know its epoch: schedules counted in epochs are refused,
   * naming the flag; a rate in steps still works. */
  cnnb_lr_config c = base();
  c.examples_per_epoch = 0;
  c.piecewise = "0.1;1;0.01";
  refused(&c, "--piecewise_learning_rate_schedule counts epochs", "how many examples");
  c = base();
  c.examples_per_epoch = 0;
  c.has_init_learning_rate = true;
  c.init_learning_rate = 0.1;
  c.num_epochs_per_decay = 1;
  c.learning_rate_decay_factor = 0.5;
  refused(&c, "--num_epochs_per_decay counts epochs", NULL);
  c.num_epochs_per_decay = c.learning_rate_decay_factor = 0;
  c.warmup_epochs = 1;
  refused(&c, "--num_learning_rate_warmup_epochs counts epochs", NULL);
  c.warmup_epochs = 0;
  cnnb_lr_schedule *s = make(&c);
  expect(s, 12345, 0.1);
  cnnb_lr_schedule_destroy(s);
}
END_TEST

START_TEST(decay_staircase_floor) {
  cnnb_lr_config c = base();
  c.has_init_learning_rate = true;
  c.init_learning_rate = 0.1;
  c.num_epochs_per_decay = 2; /* 20 steps */
  c.learning_rate_decay_factor = 0.5;
  cnnb_lr_schedule *s = make(&c);
  expect(s, 0, 0.1);
  expect(s, 19, 0.1);
  expect(s, 20, 0.05);
  expect(s, 39, 0.05);
  expect(s, 40, 0.025);
  expect(s, 60, 0.0125);
  cnnb_lr_schedule_destroy(s);

  c.minimum_learning_rate = 0.03;
  s = make(&c);
  expect(s, 20, 0.05);
  expect(s, 40, 0.03);
  expect(s, 1000, 0.03);
  cnnb_lr_schedule_destroy(s);

  /* Constant without decay flags. */
  c = base();
  c.has_init_learning_rate = true;
  c.init_learning_rate = 0.2;
  s = make(&c);
  expect(s, 0, 0.2);
  expect(s, 123456, 0.2);
  ck_assert_ptr_nonnull(strstr(cnnb_lr_schedule_describe(s), "constant"));
  cnnb_lr_schedule_destroy(s);
}
END_TEST

START_TEST(warmup) {
  cnnb_lr_config c = base();
  c.has_init_learning_rate = true;
  c.init_learning_rate = 0.1;
  c.warmup_epochs = 1; /* 10 steps: lr = 0.1 * step / 10 */
  cnnb_lr_schedule *s = make(&c);
  expect(s, 0, 0.0);
  expect(s, 5, 0.05);
  expect(s, 9, 0.09);
  expect(s, 10, 0.1);
  cnnb_lr_schedule_destroy(s);

  /* With a piecewise schedule the warm-up climbs to its first rate. */
  c = base();
  c.piecewise = "0.4;3;0.04";
  c.warmup_epochs = 0.5; /* 5 steps */
  s = make(&c);
  expect(s, 1, 0.08);
  expect(s, 5, 0.4);
  expect(s, 30, 0.04);
  cnnb_lr_schedule_destroy(s);

  /* Warm-up and decay together: warm-up wins while it lasts. */
  c = base();
  c.has_init_learning_rate = true;
  c.init_learning_rate = 1.0;
  c.num_epochs_per_decay = 1;
  c.learning_rate_decay_factor = 0.1;
  c.warmup_epochs = 2;
  s = make(&c);
  expect(s, 15, 0.75);
  expect(s, 20, 0.01);
  cnnb_lr_schedule_destroy(s);
}
END_TEST

static float model_lr(const char *name, int64_t step, int32_t batch, int64_t examples) {
  ck_assert_str_eq(name, "toy");
  return (float)(0.001 * (double)batch * (double)step / (double)examples);
}

/* Returns step + batch / examples, and checks it was handed the model's ctx. */
static float model_lr_at(cnnb_ctx *c, const char *name, uint32_t dataset, int64_t step,
                         int32_t batch, int64_t examples) {
  ck_assert_ptr_eq(c, ctx);
  ck_assert_uint_eq(dataset, TOY_DATASET);
  ck_assert_str_eq(name, "toy");
  return (float)((double)step + (double)batch / (double)examples);
}

START_TEST(model_schedule) {
  cnnb_lr_model m = {.name = "toy", .learning_rate = model_lr, .default_learning_rate = 9};
  cnnb_lr_config c = base();
  c.model = &m;
  c.warmup_epochs = 1; /* TF: never applied to the model's own schedule */
  cnnb_lr_schedule *s = make(&c);
  expect(s, 0, 0.0);
  expect(s, 5, 0.001 * 100 * 5 / 1000.0);
  ck_assert_ptr_nonnull(strstr(cnnb_lr_schedule_describe(s), "toy"));
  cnnb_lr_schedule_destroy(s);

  m.learning_rate = NULL; /* the model's default constant */
  s = make(&c);
  expect(s, 0, 9.0);
  expect(s, 77, 9.0);
  cnnb_lr_schedule_destroy(s);

  /* ABI 1.3's hook gets the model's ctx, and wins over the 1.0 hook. */
  m.learning_rate_at = model_lr_at;
  m.ctx = ctx;
  m.dataset = TOY_DATASET;
  s = make(&c);
  expect(s, 4, 4.0 + 100.0 / 1000.0);
  cnnb_lr_schedule_destroy(s);
  m.learning_rate_at = NULL;

  /* A user's rate wins over the model's. */
  c.has_init_learning_rate = true;
  c.init_learning_rate = 0.5;
  c.warmup_epochs = 0;
  m.learning_rate = model_lr;
  s = make(&c);
  expect(s, 5, 0.5);
  cnnb_lr_schedule_destroy(s);
}
END_TEST

/* Creates with cfg, expects CNNB_EINVAL and every needle in the message. */
static void refused(const cnnb_lr_config *cfg, const char *needle1, const char *needle2) {
  cnnb_clear_error(ctx);
  cnnb_lr_schedule *s = (cnnb_lr_schedule *)1;
  cnnb_status st = cnnb_lr_schedule_create(ctx, cfg, &s);
  ck_assert_int_eq(st, CNNB_EINVAL);
  ck_assert_ptr_null(s);
  const char *msg = cnnb_error_message(ctx);
  ck_assert_msg(strstr(msg, needle1), "message '%s' lacks '%s'", msg, needle1);
  if (needle2) ck_assert_msg(strstr(msg, needle2), "message '%s' lacks '%s'", msg, needle2);
}

START_TEST(bad_schedules) {
  cnnb_lr_config c = base();
  c.piecewise = "0.1;2";
  refused(&c, "--piecewise_learning_rate_schedule", "odd number");
  c.piecewise = "fast";
  refused(&c, "invalid learning rate 'fast'", NULL);
  c.piecewise = "0.1;two;0.01";
  refused(&c, "invalid epoch 'two'", "part 2");
  c.piecewise = "0.1;1.5;0.01";
  refused(&c, "invalid epoch '1.5'", "whole number");
  c.piecewise = "0.1;;0.01";
  refused(&c, "invalid epoch ''", NULL);
  c.piecewise = "0.1;4;0.01;2;0.001";
  refused(&c, "epoch 2", "increase");
  c.piecewise = "0.1;0;0.01";
  refused(&c, "epoch 0", NULL);
  c.piecewise = "-0.1;2;0.01";
  refused(&c, "invalid learning rate '-0.1'", NULL);
  c.piecewise = "0.1;2;nan";
  refused(&c, "invalid learning rate 'nan'", NULL);
  /* fuzz_values found it: a boundary past int64's steps was converted, undefined. */
  c.piecewise = "0.1;9223372036854775807;0.01";
  refused(&c, "epoch 9223372036854775807 (part 2)", "past any step");
}
END_TEST

START_TEST(bad_combinations) {
  cnnb_lr_config c = base();
  c.piecewise = "0.1;2;0.01";
  c.has_init_learning_rate = true;
  c.init_learning_rate = 0.1;
  refused(&c, "--piecewise_learning_rate_schedule excludes", "--init_learning_rate");

  c = base();
  c.has_init_learning_rate = true;
  c.init_learning_rate = 0.1;
  c.learning_rate_decay_factor = 0.5;
  refused(&c, "--num_epochs_per_decay and --learning_rate_decay_factor go together", NULL);

  c = base();
  c.num_epochs_per_decay = 2;
  c.learning_rate_decay_factor = 0.5;
  refused(&c, "no --init_learning_rate", NULL);

  c = base();
  c.has_init_learning_rate = true;
  c.init_learning_rate = 0.1;
  c.minimum_learning_rate = 0.01;
  refused(&c, "--minimum_learning_rate needs", NULL);

  c = base();
  refused(&c, "no learning rate", "--init_learning_rate");

  c = base();
  c.has_init_learning_rate = true;
  c.init_learning_rate = 0.1;
  c.num_epochs_per_decay = 0.01; /* 0.1 step */
  c.learning_rate_decay_factor = 0.5;
  refused(&c, "less than one step", NULL);
}
END_TEST

START_TEST(flag_check_before_setup) {
  /* The command line is checked before anything is built: the same refusals, with no
   * batch size or epoch known yet. */
  char err[512];
  cnnb_lr_config c = {0};
  ck_assert_int_eq(cnnb_lr_config_check(&c, err, sizeof err), CNNB_OK);
  c.piecewise = "0.1;two;0.01";
  ck_assert_int_eq(cnnb_lr_config_check(&c, err, sizeof err), CNNB_EINVAL);
  ck_assert_msg(strstr(err, "invalid epoch 'two'"), "%s", err);
  c.piecewise = "0.1;2;0.01";
  c.has_init_learning_rate = true;
  ck_assert_int_eq(cnnb_lr_config_check(&c, err, sizeof err), CNNB_EINVAL);
  ck_assert_msg(strstr(err, "--piecewise_learning_rate_schedule excludes"), "%s", err);
  c = (cnnb_lr_config){.warmup_epochs = -1};
  ck_assert_int_eq(cnnb_lr_config_check(&c, err, sizeof err), CNNB_EINVAL);
  ck_assert_msg(strstr(err, "--num_learning_rate_warmup_epochs=-1"), "%s", err);
}
END_TEST

int main(void) {
  Suite *s = suite_create("lr_schedule");
  TCase *tc = tcase_create("lr_schedule");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, piecewise_boundaries);
  tcase_add_test(tc, unknown_epoch);
  tcase_add_test(tc, decay_staircase_floor);
  tcase_add_test(tc, warmup);
  tcase_add_test(tc, model_schedule);
  tcase_add_test(tc, bad_schedules);
  tcase_add_test(tc, bad_combinations);
  tcase_add_test(tc, flag_check_before_setup);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed != 0;
}
