/* test_recipe.c — a model's training recipe (cnnb_model_info, ABI 1.14) as a run's
 * defaults: every field whose flag the command line left alone takes the recipe's value,
 * every flag given keeps its own, a model without a recipe changes nothing, and a recipe
 * value out of its flag's range is refused naming the model. The CLI side is
 * tests/cli/model_info.sh. */
#define _POSIX_C_SOURCE 200809L /* fmemopen */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "config/core_flags.h"
#include "config/run_config.h"
#include "flags/flags.h"
#include "run/recipe.h"
#include "test_datasets.h"

static cnnb_flags *flags;
static cnnb_ctx *ctx;
static char err[1024], applied[512];

static void setup(void) {
  flags = cnnb_flags_create();
  ck_assert_int_eq(cnnb_flags_declare_core(flags), CNNB_OK);
  ctx = cnnb_ctx_create("cnnbench", NULL);
}
static void teardown(void) {
  cnnb_ctx_destroy(ctx);
  cnnb_flags_destroy(flags);
}

/* Parses argv (NULL-terminated, after the program name) into cfg. */
static void config(cnnb_run_config *cfg, const char *const *args) {
  char *argv[32] = {"cnnbench"};
  int argc = 1;
  for (; args[argc - 1]; argc++) argv[argc] = (char *)args[argc - 1];
  ck_assert_msg(cnnb_flags_parse(flags, argc, argv, err, sizeof err) == CNNB_OK, "%s", err);
  ck_assert_msg(cnnb_run_config_from_flags(flags, cfg, err, sizeof err) == CNNB_OK, "%s", err);
}

/* MobileNetV3's, as the zoo gives it. */
static cnnb_model_info rmsprop_recipe(void) {
  return (cnnb_model_info){.struct_size = sizeof(cnnb_model_info),
                           .optimizer = "rmsprop",
                           .momentum = 0.8f,
                           .weight_decay = 1e-5f,
                           .label_smoothing = 0.1f,
                           .epsilon = 1e-3f,
                           .recipe = "torchvision's"};
}

START_TEST(recipe_fills_what_no_flag_gave) {
  cnnb_run_config c;
  config(&c, (const char *[]){NULL});
  cnnb_model_info info = rmsprop_recipe();
  ck_assert_int_eq(cnnb_recipe_apply(ctx, "m", &info, &c, applied, sizeof applied), CNNB_OK);
  ck_assert_uint_eq(c.trainer.rule, CNNB_OPT_RMSPROP);
  ck_assert_float_eq(c.trainer.rmsprop_momentum, 0.8f);
  ck_assert_float_eq(c.trainer.rmsprop_epsilon, 1e-3f);
  ck_assert_float_eq(c.trainer.weight_decay, 1e-5f);
  ck_assert_float_eq(c.label_smoothing, 0.1f);
  ck_assert_str_eq(applied, "optimizer rmsprop, momentum 0.8, epsilon 0.001, weight decay 1e-05, "
                            "label smoothing 0.1");
}
END_TEST

START_TEST(flags_given_win) {
  cnnb_run_config c;
  config(&c, (const char *[]){"--weight_decay=0", "--label_smoothing=0.2", "--rmsprop_epsilon=2",
                              "--rmsprop_momentum=0.5", NULL});
  cnnb_model_info info = rmsprop_recipe();
  ck_assert_int_eq(cnnb_recipe_apply(ctx, "m", &info, &c, applied, sizeof applied), CNNB_OK);
  ck_assert_uint_eq(c.trainer.rule, CNNB_OPT_RMSPROP); /* not given: the recipe's */
  ck_assert_float_eq(c.trainer.weight_decay, 0.0f);
  ck_assert_float_eq(c.label_smoothing, 0.2f);
  ck_assert_float_eq(c.trainer.rmsprop_epsilon, 2.0f);
  ck_assert_float_eq(c.trainer.rmsprop_momentum, 0.5f);
  ck_assert_str_eq(applied, "optimizer rmsprop");

  /* Another optimizer given: the recipe's momentum and epsilon are its own optimizer's,
   * so they stay the flags' defaults; weight decay and smoothing still apply. */
  teardown();
  setup();
  config(&c, (const char *[]){"--optimizer=adam", NULL});
  ck_assert_int_eq(cnnb_recipe_apply(ctx, "m", &info, &c, applied, sizeof applied), CNNB_OK);
  ck_assert_uint_eq(c.trainer.rule, CNNB_OPT_ADAM);
  ck_assert_float_eq(c.trainer.adam_epsilon, 1e-8f);
  ck_assert_float_eq(c.trainer.rmsprop_epsilon, 1.0f);
  ck_assert_float_eq(c.trainer.rmsprop_momentum, 0.9f);
  ck_assert_float_eq(c.trainer.weight_decay, 1e-5f);
  ck_assert_str_eq(applied, "weight decay 1e-05, label smoothing 0.1");

  /* A momentum recipe: its momentum and its Nesterov choice (0: torch's plain SGD
   * momentum) replace tf_cnn_benchmarks' Nesterov default. */
  info = (cnnb_model_info){.struct_size = sizeof info, .optimizer = "momentum", .momentum = 0.8f};
  teardown();
  setup();
  config(&c, (const char *[]){NULL});
  ck_assert(c.trainer.nesterov); /* tf_cnn_benchmarks' default */
  ck_assert_int_eq(cnnb_recipe_apply(ctx, "m", &info, &c, applied, sizeof applied), CNNB_OK);
  ck_assert_uint_eq(c.trainer.rule, CNNB_OPT_MOMENTUM);
  ck_assert_float_eq(c.trainer.momentum, 0.8f);
  ck_assert(!c.trainer.nesterov);

  teardown();
  setup();
  config(&c, (const char *[]){"--optimizer=momentum", "--nesterov", NULL});
  ck_assert_int_eq(cnnb_recipe_apply(ctx, "m", &info, &c, applied, sizeof applied), CNNB_OK);
  ck_assert(c.trainer.nesterov);
}
END_TEST

START_TEST(no_recipe_changes_nothing) {
  cnnb_run_config c, before;
  config(&c, (const char *[]){NULL});
  before = c;
  cnnb_model_info info = {.struct_size = sizeof info}; /* a 1.13 plugin's: no optimizer */
  ck_assert_int_eq(cnnb_recipe_apply(ctx, "m", &info, &c, applied, sizeof applied), CNNB_OK);
  ck_assert_str_eq(applied, "");
  ck_assert_uint_eq(c.trainer.rule, before.trainer.rule);
  ck_assert_float_eq(c.trainer.weight_decay, before.trainer.weight_decay);
  ck_assert_float_eq(c.label_smoothing, 0.0f);
}
END_TEST

START_TEST(bad_recipe_names_the_model) {
  static const struct {
    cnnb_model_info info;
    const char *want;
  } cases[] = {
      {{.optimizer = "adamw"}, "optimizer 'adamw' is not one of sgd, momentum, rmsprop or adam"},
      {{.optimizer = "sgd", .momentum = 1.0f}, "momentum is 1, which must be in [0, 1)"},
      {{.optimizer = "sgd", .weight_decay = -1.0f}, "weight decay is -1"},
      {{.optimizer = "sgd", .label_smoothing = 1.0f}, "label smoothing is 1"},
      {{.optimizer = "sgd", .epsilon = -1.0f}, "epsilon is -1"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    cnnb_run_config c;
    teardown();
    setup();
    config(&c, (const char *[]){NULL});
    cnnb_model_info info = cases[i].info;
    info.struct_size = sizeof info;
    ck_assert_int_eq(cnnb_recipe_apply(ctx, "zoo_m", &info, &c, applied, sizeof applied),
                     CNNB_EINVAL);
    const char *msg = cnnb_error_message(ctx);
    ck_assert_msg(strstr(msg, "--model=zoo_m: its training recipe's") &&
                      strstr(msg, cases[i].want) && strstr(msg, "fix the plugin"),
                  "case %zu: %s", i, msg);
  }
}
END_TEST

START_TEST(model_info_shows_it) {
  char buf[1024] = "";
  FILE *f = fmemopen(buf, sizeof buf, "w");
  cnnb_model_info info = rmsprop_recipe();
  cnnb_recipe_print(&info, f);
  fclose(f);
  ck_assert_msg(strstr(buf, "Training recipe: torchvision's\n") &&
                    strstr(buf, "--optimizer=rmsprop --rmsprop_momentum=0.8 "
                                "--rmsprop_epsilon=0.001 --weight_decay=1e-05 "
                                "--label_smoothing=0.1"),
                "%s", buf);
}
END_TEST

int main(void) {
  cnnb_loader *datasets = test_datasets_load(); /* --data_name's table */
  Suite *s = suite_create("recipe");
  TCase *tc = tcase_create("recipe");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, recipe_fills_what_no_flag_gave);
  tcase_add_test(tc, flags_given_win);
  tcase_add_test(tc, no_recipe_changes_nothing);
  tcase_add_test(tc, bad_recipe_names_the_model);
  tcase_add_test(tc, model_info_shows_it);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  cnnb_loader_destroy(datasets);
  return failed ? 1 : 0;
}
