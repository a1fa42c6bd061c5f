/* test_run_config.c — the core's flags read once into a run configuration: defaults,
 * each flag landing in its typed field, the spelling a precision refusal will name, and
 * refusals that name the flag (the command-line side is tests/cli/bad_input.sh). */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flags/flags.h"
#include "config/run_config.h"
#include "config/core_flags.h"
#include "test_datasets.h"

static cnnb_flags *flags;
static char err[1024];

static void setup(void) {
  flags = cnnb_flags_create();
  ck_assert_int_eq(cnnb_flags_declare_core(flags), CNNB_OK);
}
static void teardown(void) { cnnb_flags_destroy(flags); }

/* Parses argv (NULL-terminated, after the program name) into cfg; returns the status. */
static cnnb_status config(cnnb_run_config *cfg, const char *const *args) {
  char *argv[32] = {"cnnbench"};
  int argc = 1;
  for (; args[argc - 1]; argc++) argv[argc] = (char *)args[argc - 1];
  ck_assert_msg(cnnb_flags_parse(flags, argc, argv, err, sizeof err) == CNNB_OK, "%s", err);
  return cnnb_run_config_from_flags(flags, cfg, err, sizeof err);
}

/* tf_cnn_benchmarks' rule: without --data_name, the first known name inside --data_dir
 * (imagenet before cifar10; mnist is ours; the datasources loaded describe them); none, or
 * no --data_dir, is imagenet; a given --data_name wins. --device's tf spellings land on
 * the plugins' names. */
START_TEST(tf_names_and_guesses) {
  static const struct {
    const char *arg, *dataset;
  } cases[] = {{"--data_dir=/data/cifar10", "cifar10"},
               {"--data_dir=/d/imagenet/cifar10-copy", "imagenet"},
               {"--data_dir=/datasets/mnist-digits", "mnist"},
               {"--data_dir=/data/somewhere", "imagenet"},
               {"--num_batches=1", "imagenet"}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    teardown();
    setup();
    cnnb_run_config c;
    ck_assert_int_eq(config(&c, (const char *[]){cases[i].arg, NULL}), CNNB_OK);
    ck_assert_msg(strcmp(c.dataset->name, cases[i].dataset) == 0, "%s: %s, want %s", cases[i].arg,
                  c.dataset->name, cases[i].dataset);
  }
  teardown();
  setup();
  cnnb_run_config c;
  ck_assert_int_eq(config(&c,
                          (const char *[]){"--data_dir=/data/cifar10", "--data_name=mnist", NULL}),
                   CNNB_OK);
  ck_assert_str_eq(c.dataset->name, "mnist");
  static const char *const devices[][2] = {
      {"gpu", "cuda"}, {"GPU", "cuda"}, {"CPU", "cpu"}, {"cpu", "cpu"}, {"cuda", "cuda"}};
  for (size_t i = 0; i < sizeof devices / sizeof devices[0]; i++) {
    teardown();
    setup();
    char arg[64];
    snprintf(arg, sizeof arg, "--device=%s", devices[i][0]);
    ck_assert_int_eq(config(&c, (const char *[]){arg, NULL}), CNNB_OK);
    ck_assert_str_eq(c.device, devices[i][1]);
    ck_assert_str_eq(c.device_flag, devices[i][0]);
  }
}
END_TEST

START_TEST(defaults) {
  cnnb_run_config c;
  ck_assert_int_eq(config(&c, (const char *[]){NULL}), CNNB_OK);
  ck_assert_str_eq(c.model, "trivial");
  ck_assert_str_eq(c.device, "cpu");
  ck_assert_str_eq(c.strategy, "parameter_server");
  ck_assert_str_eq(c.datasource, "");
  ck_assert_int_eq(c.mode, CNNB_MODE_TRAIN);
  ck_assert_str_eq(c.dataset->name, "imagenet");
  ck_assert_int_eq(c.num_classes, 1001);
  ck_assert_int_eq(c.batch_size, 0);
  ck_assert_int_eq(c.num_batches, 100);
  ck_assert(c.num_epochs == 0.0);
  ck_assert_int_eq(c.num_warmup_batches, 10);
  ck_assert_int_eq(c.display_every, 10);
  ck_assert(!c.print_accuracy);
  ck_assert_int_eq(c.num_replicas, 1);
  ck_assert_uint_eq(c.precision, CNNB_PRECISION_FP32);
  ck_assert_str_eq(c.precision_flag, "--precision=fp32");
  ck_assert_int_eq(c.gradient_bucket_bytes, (int64_t)25 << 20);
  ck_assert_uint_eq(c.trainer.rule, CNNB_OPT_SGD);
  ck_assert(!c.trainer.fp16);
}
END_TEST

START_TEST(flags_land_in_their_fields) {
  cnnb_run_config c;
  ck_assert_msg(config(&c,
                       (const char *[]){"--model=resnet20", "--data_name=cifar10", "--batch_size=8",
                                        "--num_epochs=2.5", "--forward_only", "--use_fp16",
                                        "--num_gpus=3", "--optimizer=momentum", "--momentum=0.5",
                                        "--init_learning_rate=0.2", "--gradient_bucket_mb=0.5",
                                        "--datasource=synthetic", NULL}) == CNNB_OK,
                "%s", err);
  ck_assert_str_eq(c.model, "resnet20");
  ck_assert_str_eq(c.dataset->name, "cifar10");
  ck_assert_int_eq(c.num_classes, 10);
  ck_assert_int_eq(c.batch_size, 8);
  ck_assert(c.num_epochs == 2.5);
  ck_assert_int_eq(c.mode, CNNB_MODE_FORWARD_ONLY);
  ck_assert(c.print_accuracy); /* every run without updates shows accuracy */
  ck_assert_uint_eq(c.precision, CNNB_PRECISION_FP16);
  ck_assert_str_eq(c.precision_flag, "--use_fp16");
  ck_assert(c.trainer.fp16);
  ck_assert_int_eq(c.num_replicas, 3);
  ck_assert_uint_eq(c.trainer.rule, CNNB_OPT_MOMENTUM);
  ck_assert_float_eq(c.trainer.momentum, 0.5f);
  ck_assert(c.trainer.lr.has_init_learning_rate && c.trainer.lr.init_learning_rate == 0.2);
  ck_assert_int_eq(c.gradient_bucket_bytes, (int64_t)1 << 19);
  ck_assert_str_eq(c.datasource, "synthetic");
}
END_TEST

START_TEST(num_classes_overrides_the_dataset) {
  cnnb_run_config c;
  ck_assert_int_eq(config(&c, (const char *[]){"--num_classes=17", NULL}), CNNB_OK);
  ck_assert_int_eq(c.num_classes, 17);
}
END_TEST

/* --ignore_unreadable_checkpoints: off by default, for training with --train_dir only. */
/* Slurm's job id (an array task's %A_%a) and restart count name the per-rank files;
 * anything but Slurm's digits is not taken. */
START_TEST(slurm_job_tag) {
  static const struct {
    const char *job, *array, *task, *restarts, *want;
  } cases[] = {{NULL, NULL, NULL, NULL, ""},
               {"123", NULL, NULL, NULL, "job123"},
               {"123", NULL, NULL, "0", "job123"},
               {"123", NULL, NULL, "2", "job123.restart2"},
               {"46", "45", "7", "1", "job45_7.restart1"},
               {"12a", NULL, NULL, NULL, ""},
               {"123", NULL, NULL, "-1", "job123"}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const char *names[] = {"SLURM_JOB_ID", "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID",
                           "SLURM_RESTART_COUNT"};
    const char *values[] = {cases[i].job, cases[i].array, cases[i].task, cases[i].restarts};
    for (int v = 0; v < 4; v++) values[v] ? setenv(names[v], values[v], 1) : unsetenv(names[v]);
    teardown();
    setup();
    cnnb_run_config c;
    ck_assert_msg(config(&c, (const char *[]){NULL}) == CNNB_OK, "%s", err);
    ck_assert_msg(strcmp(c.job_tag, cases[i].want) == 0, "case %zu: '%s', want '%s'", i, c.job_tag,
                  cases[i].want);
  }
}
END_TEST

START_TEST(ignore_unreadable_checkpoints) {
  cnnb_run_config c;
  ck_assert_int_eq(config(&c, (const char *[]){"--train_dir=/tmp/x", NULL}), CNNB_OK);
  ck_assert(!c.ignore_unreadable_checkpoints);
  teardown();
  setup();
  ck_assert_int_eq(config(&c, (const char *[]){"--train_dir=/tmp/x",
                                               "--ignore_unreadable_checkpoints", NULL}),
                   CNNB_OK);
  ck_assert(c.ignore_unreadable_checkpoints);
  teardown();
  setup();
  ck_assert_int_eq(config(&c, (const char *[]){"--ignore_unreadable_checkpoints", NULL}),
                   CNNB_EINVAL);
  ck_assert_msg(strstr(err, "--ignore_unreadable_checkpoints given without --train_dir"), "%s",
                err);
  teardown();
  setup();
  ck_assert_int_eq(config(&c, (const char *[]){"--train_dir=/tmp/x", "--eval",
                                               "--ignore_unreadable_checkpoints", NULL}),
                   CNNB_EINVAL);
  ck_assert_msg(strstr(err, "--ignore_unreadable_checkpoints given with --eval"), "%s", err);
}
END_TEST

/* Each refusal names the flag (the full list runs through the CLI in bad_input.sh). */
START_TEST(refusals_name_the_flag) {
  static const struct {
    const char *arg, *want;
  } cases[] = {
      {"--num_epochs=-2", "--num_epochs=-2: must be > 0"},
      {"--display_every=0", "--display_every=0: must be at least 1"},
      {"--num_warmup_batches=-3", "--num_warmup_batches=-3"},
      {"--gradient_bucket_mb=0", "--gradient_bucket_mb=0"},
      {"--momentum=1.5", "--momentum=1.5: must be in [0, 1)"},
      {"--rmsprop_decay=-0.1", "--rmsprop_decay=-0.1"},
      {"--adam_epsilon=0", "--adam_epsilon=0"},
      {"--weight_decay=-1", "--weight_decay=-1"},
      {"--fp16_inc_loss_scale_every_n=0", "--fp16_inc_loss_scale_every_n=0"},
      {"--num_intra_threads=1000000", "--num_intra_threads=1000000: must be in [0, "},
      {"--data_name=svhn", "--data_name=svhn: unknown dataset; known: imagenet, cifar10, mnist"},
      {"--num_classes=1", "--num_classes=1"},
      {"--model=", "--model is empty"},
      {"--piecewise_learning_rate_schedule=0.1;2", "odd number"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    teardown();
    setup();
    cnnb_run_config c;
    ck_assert_msg(config(&c, (const char *[]){cases[i].arg, NULL}) == CNNB_EINVAL,
                  "%s was accepted", cases[i].arg);
    ck_assert_msg(strstr(err, cases[i].want), "%s: message '%s' lacks '%s'", cases[i].arg, err,
                  cases[i].want);
  }
}
END_TEST

START_TEST(evaluation_flags) {
  cnnb_run_config c;
  /* tf_cnn_benchmarks: under --eval the eval counts replace the run's own. */
  /* (--eval_random_weights: --eval without --train_dir is refused, see below.) */
  ck_assert_int_eq(config(&c, (const char *[]){"--eval", "--eval_random_weights",
                                               "--num_batches=30", NULL}),
                   CNNB_OK);
  ck_assert_int_eq(c.mode, CNNB_MODE_EVAL);
  ck_assert_int_eq(c.num_batches, 30);
  ck_assert(c.print_accuracy);
  teardown(), setup();
  ck_assert_int_eq(config(&c, (const char *[]){"--eval", "--train_dir=/nonexistent",
                                               "--num_batches=30", "--num_eval_batches=7", NULL}),
                   CNNB_OK);
  ck_assert_int_eq(c.num_batches, 7);
  ck_assert(c.num_epochs == 0.0);
  teardown(), setup();
  ck_assert_int_eq(config(&c, (const char *[]){"--eval", "--eval_random_weights",
                                               "--num_eval_epochs=0.5", NULL}),
                   CNNB_OK);
  ck_assert(c.num_epochs == 0.5);
  teardown(), setup();
  /* While training they size each evaluation and leave the training's steps alone. */
  ck_assert_int_eq(config(&c, (const char *[]){"--eval_during_training_every_n_steps=25",
                                               "--num_eval_batches=4", "--num_batches=50", NULL}),
                   CNNB_OK);
  ck_assert_int_eq(c.mode, CNNB_MODE_TRAIN);
  ck_assert(c.eval_during_training);
  ck_assert_int_eq(c.eval_every_n_steps, 25);
  ck_assert_int_eq(c.num_eval_batches, 4);
  ck_assert_int_eq(c.num_batches, 50);
  ck_assert(!c.print_accuracy);
  teardown(), setup();
  ck_assert_int_eq(config(&c, (const char *[]){"--eval_during_training_every_n_epochs=0.5", NULL}),
                   CNNB_OK);
  ck_assert(c.eval_every_n_epochs == 0.5 && c.eval_every_n_steps == 0 && c.eval_during_training);
  teardown(), setup();
  ck_assert_int_eq(config(&c, (const char *[]){"--input_only", NULL}), CNNB_OK);
  ck_assert_int_eq(c.mode, CNNB_MODE_INPUT_ONLY);
  ck_assert_str_eq(cnnb_run_mode_name(c.mode), "input-only");
  ck_assert(!c.eval_during_training);
}
END_TEST

START_TEST(evaluation_refusals_name_the_flags) {
  static const struct {
    const char *args[3], *want;
  } cases[] = {
      {{"--eval", "--num_eval_batches=0"}, "--num_eval_batches=0: must be at least 1"},
      {{"--eval", "--num_eval_batches=-2"}, "--num_eval_batches=-2: must be at least 1"},
      {{"--eval", "--num_eval_epochs=0"}, "--num_eval_epochs=0: must be > 0"},
      {{"--eval", "--num_eval_epochs=-1"}, "--num_eval_epochs=-1: must be > 0"},
      {{"--num_eval_batches=3"},
       "--num_eval_batches sizes an evaluation, and this run evaluates nothing"},
      {{"--forward_only", "--num_eval_epochs=1"}, "--num_eval_epochs sizes an evaluation"},
      {{"--num_eval_batches=3", "--num_eval_epochs=1"},
       "--num_eval_batches and --num_eval_epochs both given"},
      {{"--eval_during_training_every_n_steps=5", "--eval_during_training_every_n_epochs=1"},
       "--eval_during_training_every_n_steps and --eval_during_training_every_n_epochs both given"},
      {{"--eval_during_training_every_n_steps=5", "--eval"},
       "--eval_during_training_every_n_steps and --eval both given"},
      {{"--eval_during_training_every_n_epochs=1", "--forward_only"},
       "--eval_during_training_every_n_epochs and --forward_only both given"},
      {{"--eval_during_training_every_n_steps=5", "--input_only"},
       "--eval_during_training_every_n_steps and --input_only both given"},
      {{"--eval_during_training_every_n_steps=0"},
       "--eval_during_training_every_n_steps=0: must be at least 1"},
      {{"--eval_during_training_every_n_epochs=-2"},
       "--eval_during_training_every_n_epochs=-2: must be > 0"},
      {{"--input_only", "--eval"}, "--input_only and --eval both given"},
      {{"--input_only", "--forward_only"}, "--input_only and --forward_only both given"},
      /* tf_cnn_benchmarks: "Trained model directory not specified". */
      {{"--eval"}, "--eval: no trained model to evaluate"},
      {{"--eval_random_weights"}, "--eval_random_weights given without --eval"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    teardown();
    setup();
    cnnb_run_config c;
    const char *args[] = {cases[i].args[0], cases[i].args[1], NULL};
    ck_assert_msg(config(&c, args) == CNNB_EINVAL, "%s %s was accepted", args[0],
                  args[1] ? args[1] : "");
    ck_assert_msg(strstr(err, cases[i].want), "%s %s: message '%s' lacks '%s'", args[0],
                  args[1] ? args[1] : "", err, cases[i].want);
  }
}
END_TEST

int main(void) {
  cnnb_loader *datasets = test_datasets_load(); /* --data_name's table */
  Suite *s = suite_create("run_config");
  TCase *tc = tcase_create("run_config");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, defaults);
  tcase_add_test(tc, tf_names_and_guesses);
  tcase_add_test(tc, flags_land_in_their_fields);
  tcase_add_test(tc, num_classes_overrides_the_dataset);
  tcase_add_test(tc, refusals_name_the_flag);
  tcase_add_test(tc, ignore_unreadable_checkpoints);
  tcase_add_test(tc, slurm_job_tag);
  tcase_add_test(tc, evaluation_flags);
  tcase_add_test(tc, evaluation_refusals_name_the_flags);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  cnnb_loader_destroy(datasets);
  return failed ? 1 : 0;
}
